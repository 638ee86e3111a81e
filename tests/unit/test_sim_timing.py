"""The simulator's timing model: the profile table, the kubelet rules, the timers, and a simulated node
driven by a fake clock (no API server, no sleeps)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dra_migrate.execute.ops import CANARY_LABEL as EXECUTOR_CANARY_LABEL
from dra_migrate.sim.fleet import SimulatedFleet
from dra_migrate.sim.pods import CANARY_LABEL, NO_DEVICES, canary_status, nvidia_smi_lines
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.timing import (
    INSTANT,
    REALISTIC,
    Timers,
    device_plugin_advertised,
    next_sync,
    profile,
    sync_phase,
)
from tests.unit.helpers import resource_slice


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the profile table -----------------------------------------------------------------------------


def test_realistic_profile_holds_the_upstream_figures() -> None:
    assert REALISTIC.node_status_sync_s == 10  # nodeStatusUpdateFrequency default
    assert REALISTIC.capacity_grace_s == 300  # devicemanager endpointStopGracePeriod
    assert REALISTIC.slice_wipe_delay_s == 30  # kubelet DRA defaultWipingDelay
    assert REALISTIC.plugin_exit_s <= 30  # within the DaemonSet pod's default grace
    assert REALISTIC.termination_s(None) == 30  # default terminationGracePeriodSeconds
    assert REALISTIC.termination_s(120) == 120
    assert INSTANT.node_status_sync_s == INSTANT.capacity_grace_s == INSTANT.slice_wipe_delay_s == 0
    assert INSTANT.canary_run_s > 0  # the allocation must be readable before the claim goes
    assert INSTANT.termination_s(600) == 0


def test_time_scale_scales_every_delay_and_the_grace_periods() -> None:
    fast = profile("realistic", 0.1)
    assert fast.capacity_grace_s == pytest.approx(30)
    assert fast.slice_wipe_delay_s == pytest.approx(3)
    assert fast.node_status_sync_s == pytest.approx(1)
    assert fast.termination_s(60) == pytest.approx(6)
    assert profile("realistic") is REALISTIC
    with pytest.raises(ValueError, match="known: instant, realistic"):
        profile("fast")
    with pytest.raises(ValueError, match="> 0"):
        profile("realistic", 0)


# -- the kubelet rules -----------------------------------------------------------------------------


def test_capacity_outlives_allocatable_for_the_grace() -> None:
    assert device_plugin_advertised(8, True, None, 0, 300) == (8, 8)
    assert device_plugin_advertised(8, False, 100.0, 100.0, 300) == (8, 0)
    assert device_plugin_advertised(8, False, 100.0, 399.9, 300) == (8, 0)
    assert device_plugin_advertised(8, False, 100.0, 400.0, 300) == (0, 0)
    assert device_plugin_advertised(8, False, None, 5, 300) == (0, 0)  # never ran here


@pytest.mark.parametrize(("t", "expected"), [(3.0, 3.0), (3.5, 13.0), (12.9, 13.0), (13.0, 13.0), (0.0, 3.0)])
def test_next_sync_is_the_first_tick_at_or_after(t: float, expected: float) -> None:
    assert next_sync(t, 3.0, 10.0) == pytest.approx(expected)
    assert next_sync(t, 3.0, 0) == t


def test_sync_phases_spread_over_the_period_and_are_reproducible() -> None:
    phases = [sync_phase(f"node-{i}", 10) for i in range(200)]
    assert all(0 <= p < 10 for p in phases)
    assert min(phases) < 1 and max(phases) > 9
    assert phases == [sync_phase(f"node-{i}", 10) for i in range(200)]


# -- timers ----------------------------------------------------------------------------------------


def test_timers_run_in_due_order_and_only_when_due() -> None:
    clock = Clock()
    timers = Timers(clock)
    ran: list[str] = []
    timers.call_later(5, lambda: ran.append("b"))
    timers.call_later(1, lambda: ran.append("a"))
    cancelled = timers.call_later(2, lambda: ran.append("never"))
    timers.call_later(5, lambda: ran.append("c"))  # same due time: scheduling order
    cancelled.cancel()
    assert timers.run_due() == 0 and ran == []
    clock.now += 4.9
    timers.run_due()
    assert ran == ["a"]
    clock.now += 0.1
    timers.run_due()
    assert ran == ["a", "b", "c"] and len(timers) == 0


def test_a_failing_timer_does_not_stop_the_others() -> None:
    clock = Clock()
    errors: list[BaseException] = []
    timers = Timers(clock, on_error=errors.append)
    ran: list[int] = []

    def boom() -> None:
        raise RuntimeError("boom")

    timers.call_later(0, boom)
    timers.call_later(0, lambda: ran.append(1))
    timers.run_due()
    assert ran == [1] and [str(e) for e in errors] == ["boom"]


# -- a simulated node on a fake clock --------------------------------------------------------------


class FakeKube:
    """Records the simulator's writes; holds its slices and node status as an API server would."""

    def __init__(self) -> None:
        self.status: dict[str, dict[str, Any]] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.pod_status: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, Any]] = {}
        self._n = 0

    def strategic_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.startswith("/api/v1/nodes/"):
            self.status.setdefault(path.split("/")[4], {}).update(body["status"])
        else:
            self.pod_status[path.removesuffix("/status")] = body["status"]
        return body

    def list_all(self, path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        return list(self.slices.values()), "1"

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._n += 1
        name = f"{body['metadata']['generateName']}{self._n}"
        obj = {**body, "metadata": {**body["metadata"], "name": name}}
        self.slices[name] = obj
        return obj

    def delete(self, path: str, body: Any = None) -> None:
        name = path.rsplit("/", 1)[-1]
        self.slices.pop(name, None)
        self.deleted.append(path)

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        return self.objects.get(path)


def fleet_on(timing_name: str, scale: float = 1.0) -> tuple[SimulatedFleet, FakeKube, Clock, Timers]:
    clock = Clock()
    timers = Timers(clock, on_error=lambda e: (_ for _ in ()).throw(e))
    spec = GpuNodeSpec.small("n1", gpus=2)
    fleet = SimulatedFleet("unused", [spec], timing=profile(timing_name, scale), timers=timers)
    fake = FakeKube()
    fleet._kube = fake  # type: ignore[assignment]
    st = fleet._nodes["n1"]
    st.uid = "uid-1"
    fleet._reconcile(st, spec.labels, force=True)
    return fleet, fake, clock, timers


def advance(clock: Clock, timers: Timers, seconds: float, step: float = 0.25) -> None:
    end = clock.now + seconds
    while clock.now < end:
        clock.now = min(clock.now + step, end)
        timers.run_due()


def gpu(fake: FakeKube, which: str) -> str:
    return str(fake.status["n1"][which]["nvidia.com/gpu"])


def labels_with(fleet: SimulatedFleet, **changes: str | None) -> dict[str, str]:
    labels = dict(fleet._nodes["n1"].spec.labels)
    for k, v in changes.items():
        key = {"dp": "nvidia.com/gpu.deploy.device-plugin", "dra": "nvidia.com/dra-kubelet-plugin"}[k]
        if v is None:
            labels.pop(key, None)
        else:
            labels[key] = v
    return labels


def time_until(clock: Clock, timers: Timers, probe: Callable[[], bool], limit: float) -> float:
    start = clock.now
    while not probe():
        if clock.now - start > limit:
            raise AssertionError(f"not within {limit}s")
        advance(clock, timers, 0.25)
    return clock.now - start


def test_realistic_device_plugin_switch_off_keeps_capacity_for_five_minutes() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    st = fleet._nodes["n1"]
    assert (gpu(fake, "capacity"), gpu(fake, "allocatable")) == ("2", "2")
    fleet._reconcile(st, labels_with(fleet, dp="false"))
    assert gpu(fake, "allocatable") == "2"  # the plugin's pod is still there
    to_zero = time_until(clock, timers, lambda: gpu(fake, "allocatable") == "0", 60)
    # Plugin exit, then the next status sync: within exit + one sync period.
    assert REALISTIC.plugin_exit_s <= to_zero <= REALISTIC.plugin_exit_s + REALISTIC.node_status_sync_s + 0.25
    assert gpu(fake, "capacity") == "2"
    advance(clock, timers, 290 - to_zero)
    assert (gpu(fake, "capacity"), gpu(fake, "allocatable")) == ("2", "0")
    cap_zero = to_zero + 290 + time_until(clock, timers, lambda: gpu(fake, "capacity") == "0", 30)
    stopped = REALISTIC.plugin_exit_s
    assert stopped + 300 <= cap_zero <= stopped + 300 + REALISTIC.node_status_sync_s + 0.25
    assert "nvidia.com/gpu" in fake.status["n1"]["capacity"]  # the key is kept


def test_realistic_device_plugin_back_on_restores_both() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    st = fleet._nodes["n1"]
    fleet._reconcile(st, labels_with(fleet, dp="false"))
    advance(clock, timers, 20)
    fleet._reconcile(st, labels_with(fleet, dp="true"))
    took = time_until(clock, timers, lambda: gpu(fake, "allocatable") == "2", 30)
    assert REALISTIC.device_plugin_start_s <= took <= REALISTIC.device_plugin_start_s + 10.25
    assert gpu(fake, "capacity") == "2"
    advance(clock, timers, 400)  # no stale capacity grace fires after the plugin came back
    assert (gpu(fake, "capacity"), gpu(fake, "allocatable")) == ("2", "2")


def test_realistic_dra_plugin_publishes_after_start_up_and_slices_are_wiped_30s_after_it_goes() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    st = fleet._nodes["n1"]
    fleet._reconcile(st, labels_with(fleet, dra="true"))
    assert fake.slices == {}
    took = time_until(clock, timers, lambda: bool(fake.slices), 30)
    assert took == pytest.approx(REALISTIC.dra_plugin_start_s, abs=0.25)
    fleet._reconcile(st, labels_with(fleet, dra=None))
    gone = time_until(clock, timers, lambda: not fake.slices, 60)
    assert gone == pytest.approx(REALISTIC.plugin_exit_s + REALISTIC.slice_wipe_delay_s, abs=0.25)


def test_a_plugin_back_within_the_wiping_delay_cancels_the_wipe() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    st = fleet._nodes["n1"]
    fleet._reconcile(st, labels_with(fleet, dra="true"))
    advance(clock, timers, 10)
    first = next(iter(fake.slices.values()))["spec"]["pool"]["generation"]
    fleet._reconcile(st, labels_with(fleet, dra=None))
    advance(clock, timers, 10)
    assert fake.slices  # within the wiping delay: still there
    fleet._reconcile(st, labels_with(fleet, dra="true"))
    advance(clock, timers, 60)
    assert len(fake.slices) == 1
    assert next(iter(fake.slices.values()))["spec"]["pool"]["generation"] > first


def test_time_scale_plays_the_same_sequence_faster() -> None:
    fleet, fake, clock, timers = fleet_on("realistic", 0.1)
    st = fleet._nodes["n1"]
    fleet._reconcile(st, labels_with(fleet, dp="false"))
    to_zero = time_until(clock, timers, lambda: gpu(fake, "allocatable") == "0", 10)
    assert to_zero <= (REALISTIC.plugin_exit_s + REALISTIC.node_status_sync_s) * 0.1 + 0.25
    cap = time_until(clock, timers, lambda: gpu(fake, "capacity") == "0", 40)
    assert 29 <= to_zero + cap <= 32  # 300 s at 0.1, plus exit and a sync


def test_instant_profile_switches_inside_the_event() -> None:
    fleet, fake, _clock, timers = fleet_on("instant")
    st = fleet._nodes["n1"]
    fleet._reconcile(st, labels_with(fleet, dp="false", dra="true"))
    assert (gpu(fake, "capacity"), gpu(fake, "allocatable")) == ("0", "0")
    assert fake.slices and len(timers) == 0
    fleet._reconcile(st, labels_with(fleet, dp="true", dra=None))
    assert (gpu(fake, "capacity"), gpu(fake, "allocatable")) == ("2", "2") and not fake.slices


def _pod(uid: str, grace: int | None, labels: dict[str, str] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p-{uid}", "namespace": "ns", "uid": uid, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if grace is not None:
            meta["deletionGracePeriodSeconds"] = grace
    return {"metadata": meta, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}, "status": {}}


def test_an_evicted_pod_stays_terminating_for_its_grace_period() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    fleet._on_pod("MODIFIED", _pod("a", 45, deleting=True))
    fleet._on_pod("MODIFIED", _pod("a", 45, deleting=True))  # a repeated event: still one delete
    fleet._on_pod("MODIFIED", _pod("b", None, deleting=True))  # no grace recorded: the default 30 s
    advance(clock, timers, 29.75)
    assert fake.deleted == []
    advance(clock, timers, 0.25)
    assert fake.deleted == ["/api/v1/namespaces/ns/pods/p-b"]
    advance(clock, timers, 15)
    assert fake.deleted == ["/api/v1/namespaces/ns/pods/p-b", "/api/v1/namespaces/ns/pods/p-a"]


def test_a_pod_starts_after_the_container_start_delay() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    fleet._on_pod("ADDED", _pod("a", None))
    assert fake.pod_status == {}
    advance(clock, timers, REALISTIC.container_start_s)
    assert fake.pod_status["/api/v1/namespaces/ns/pods/p-a"]["phase"] == "Running"


# -- the canary contract ---------------------------------------------------------------------------


def _devices() -> list[dict[str, Any]]:
    return [d.to_json() for d in GpuNodeSpec.small("n1", gpus=2).devices]


def test_canary_label_is_the_executors() -> None:
    assert CANARY_LABEL == EXECUTOR_CANARY_LABEL


def test_nvidia_smi_lines_name_the_allocated_devices_from_their_slice() -> None:
    devices = _devices()
    slices = [resource_slice("n1", 1, devices), resource_slice("n1", 1, devices, driver="other.example.com")]
    results = [
        {"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"},
        {"request": "r", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
    ]
    uuid = {d["name"]: d["attributes"]["uuid"]["string"] for d in devices}
    assert nvidia_smi_lines(results, slices) == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid['gpu-1']})",
        f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {uuid['gpu-0']})",
    ]
    # A device of another pool, or not in any slice, was never prepared for the container.
    assert nvidia_smi_lines([{"driver": "gpu.nvidia.com", "pool": "n2", "device": "gpu-0"}], slices) == []


def test_canary_status_succeeds_with_the_lines_or_fails_without_devices() -> None:
    pod = _pod("c", None, {CANARY_LABEL: "t"})
    ok = canary_status(pod, ["GPU 0: X (UUID: GPU-1)"], "172.16.0.1", "10.64.0.2", "2026-01-01T00:00:00Z")
    term = ok["containerStatuses"][0]["state"]["terminated"]
    assert (ok["phase"], term["exitCode"], term["message"]) == ("Succeeded", 0, "GPU 0: X (UUID: GPU-1)")
    bad = canary_status(pod, [], "172.16.0.1", "10.64.0.2", "2026-01-01T00:00:00Z")
    term = bad["containerStatuses"][0]["state"]["terminated"]
    assert (bad["phase"], term["exitCode"], term["message"]) == ("Failed", 1, NO_DEVICES)


def test_simulated_canary_reports_its_claims_devices() -> None:
    fleet, fake, clock, timers = fleet_on("realistic")
    st = fleet._nodes["n1"]
    fleet._reconcile(st, labels_with(fleet, dra="true"))
    advance(clock, timers, 10)
    fake.objects["/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c-claim"] = {
        "status": {
            "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-1"}]}}
        }
    }
    with_claim = _pod("c", None, {CANARY_LABEL: "t"})
    with_claim["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "c-claim"}}
    without = _pod("d", None, {CANARY_LABEL: "t"})
    fleet._on_pod("ADDED", with_claim)
    fleet._on_pod("ADDED", without)
    advance(clock, timers, REALISTIC.container_start_s + REALISTIC.canary_run_s)
    done = fake.pod_status["/api/v1/namespaces/ns/pods/p-c"]
    uuid = {d["name"]: d["attributes"]["uuid"]["string"] for d in _devices()}["gpu-1"]
    assert done["phase"] == "Succeeded"
    assert (
        done["containerStatuses"][0]["state"]["terminated"]["message"] == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid})"
    )
    failed = fake.pod_status["/api/v1/namespaces/ns/pods/p-d"]
    assert failed["phase"] == "Failed"
    assert failed["containerStatuses"][0]["state"]["terminated"]["message"] == NO_DEVICES
