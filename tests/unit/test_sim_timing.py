"""The twin's timing model and its canary: the profile table, the timers, and the canary's contract (no API
server, no sleeps). The kubelet rules the KWOK Stages play are tests/unit/test_twin_stages.py's, played on
a real control plane in tests/integration/test_kwok.py."""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.execute.ops import CANARY_LABEL as EXECUTOR_CANARY_LABEL
from dra_migrate.sim.pods import CANARY_LABEL, NO_DEVICES, canary_status, nvidia_smi_lines
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.timing import INSTANT, REALISTIC, Timers, profile
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


# -- the canary contract ---------------------------------------------------------------------------


def _pod(uid: str, grace: int | None, labels: dict[str, str] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p-{uid}", "namespace": "ns", "uid": uid, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if grace is not None:
            meta["deletionGracePeriodSeconds"] = grace
    return {"metadata": meta, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}, "status": {}}


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
