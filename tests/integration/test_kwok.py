"""The twin's GPU nodes on KWOK (dra_migrate/sim/kwok.py, sim/stages.py): a few nodes on the real control plane.

What the cutover depends on, played by KWOK's Stages with the measured delays time-scaled: the device
plugin's capacity following its placement label, the DRA driver's ResourceSlice with the devices the labels
predict, published after start-up and wiped after kubelet's delay, pods starting and leaving after their
grace, and the canary (ours) reporting the device it was allocated. Windows are asserted with slack for a
loaded machine, never as exact times. Needs tools/kwok/build (make kwok).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import controlplane
import pytest
from conftest import wait_for
from nodes import CLASSES, finished, gpu_device_class, gpu_status, node, nvidia_smi_line, pod, slices_of

from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet, content_pending
from dra_migrate.sim.pods import CANARY_LABEL, NO_DEVICES
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.timing import REALISTIC, profile

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]  # the control plane is shared with other modules: keep our names apart
SCALE = 0.05  # the 5-minute capacity grace takes 15 s, the 30 s slice wipe 1.5 s, a 60 s pod grace 3 s
RT = profile("realistic", SCALE)
DP, DRA, PODS = f"kwok-{RUN}-dp", f"kwok-{RUN}-dra", f"kwok-{RUN}-pods"


@pytest.fixture(scope="module")
def fleet(
    control_plane: controlplane.ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KwokFleet]:
    specs = [GpuNodeSpec.small(n, gpus=2, pool=f"kwok-{RUN}") for n in (DP, DRA, PODS)]
    work = tmp_path_factory.mktemp("kwok")
    with KwokFleet(control_plane.kubeconfig, specs, workdir=work, timing=RT, fleet=f"t-{RUN}") as f:
        yield f
    for name in f.node_names:
        kube.delete(path_of("v1", "nodes", name))


def test_nodes_are_ready_with_their_gpus_and_a_lease(fleet: KwokFleet, kube: Kube) -> None:
    def ready(name: str) -> bool:
        conds = node(kube, name)["status"].get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    for name in fleet.node_names:
        wait_for(f"{name} Ready", lambda n=name: ready(n), timeout=15)
        assert gpu_status(kube, name) == ("2", "2")
        lease = kube.get(path_of("coordination.k8s.io/v1", "leases", name, namespace="kube-node-lease"))
        # Held and renewed by kwok (its own identity as holder), as kubelet holds its node's.
        assert lease["spec"]["renewTime"] and lease["spec"]["leaseDurationSeconds"] == fleet.lease_s
    assert not slices_of(kube, DP), "no DRA plugin where its labels do not place it"


def test_capacity_is_held_while_allocatable_is_zero_then_both_zero_after_the_grace(
    fleet: KwokFleet, kube: Kube
) -> None:
    wait_for("the device plugin's GPUs", lambda: gpu_status(kube, DP) == ("2", "2"), timeout=15)
    switched = time.monotonic()
    fleet.set_device_plugin(DP, False)
    wait_for("allocatable 0", lambda: gpu_status(kube, DP)[1] == "0", timeout=5)
    assert time.monotonic() - switched <= (REALISTIC.plugin_exit_s + REALISTIC.node_status_sync_s) * SCALE + 2
    seen: set[tuple[str | None, str | None]] = set()

    def capacity_zero() -> bool:
        now = gpu_status(kube, DP)
        seen.add(now)
        return now == ("0", "0")

    wait_for("capacity 0 after the grace", capacity_zero, timeout=RT.capacity_grace_s + 10)
    grace = RT.capacity_grace_s
    # The grace counts from the stop posted (itself up to one exit and one sync after the switch).
    assert (
        grace
        <= time.monotonic() - switched
        <= grace + 2 * (REALISTIC.plugin_exit_s + REALISTIC.node_status_sync_s) * SCALE + 8
    )
    assert seen == {("2", "0"), ("0", "0")}  # the window a real node shows, and nothing else
    assert "nvidia.com/gpu" in node(kube, DP)["status"]["capacity"]  # the key is kept at 0
    fleet.set_device_plugin(DP, True)
    wait_for("the GPUs back", lambda: gpu_status(kube, DP) == ("2", "2"), timeout=5)


def test_a_steady_node_is_ready_from_its_registration_and_its_device_plugin_still_switches(
    control_plane: controlplane.ControlPlane, kube: Kube, tmp_path: Path
) -> None:
    """A snapshot's node registers as it was (sim/kwok.py node_manifest, steady): Ready, the GPUs posted, the
    node lifecycle controller owing it nothing once it lifts the not-ready taint this API server's admission
    adds; its device plugin's Stages still play the cutover's switch as on a booted node."""
    name = f"kwok-{RUN}-steady"
    spec = GpuNodeSpec.small(name, gpus=2, pool=f"kwok-{RUN}", labels={"kubernetes.io/os": "linux"})
    with KwokFleet(control_plane.kubeconfig, [spec], workdir=tmp_path, timing=RT, fleet=f"s-{RUN}", steady=True) as f:
        try:
            conds = node(kube, name)["status"].get("conditions") or []
            assert any(c["type"] == "Ready" and c["status"] == "True" for c in conds), "Ready as registered"
            assert gpu_status(kube, name) == ("2", "2")
            wait_for("nothing left to change", lambda: content_pending(node(kube, name), f.rules) is None, timeout=15)
            assert node(kube, name)["metadata"]["labels"]["beta.kubernetes.io/os"] == "linux"
            f.set_device_plugin(name, False)
            wait_for("allocatable 0", lambda: gpu_status(kube, name) == ("2", "0"), timeout=5)
            f.set_device_plugin(name, True)
            wait_for("the GPUs back", lambda: gpu_status(kube, name) == ("2", "2"), timeout=5)
        finally:
            kube.delete(path_of("v1", "nodes", name))


def test_a_cordoned_and_a_not_ready_snapshot_node_stay_so_under_the_node_lifecycle_controller(
    control_plane: controlplane.ControlPlane, kube: Kube, tmp_path: Path
) -> None:
    """A snapshot's cordoned node keeps spec.unschedulable and its taint; one whose kubelet was down keeps Ready
    Unknown and its unreachable taints: no Stage makes it Ready, and the controller, which reads kwok's Lease
    renewals, lifts neither taint (sim/kwok.py node_manifest; before, both took the wave's evicted pods)."""
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    unreachable = [{"key": "node.kubernetes.io/unreachable", "effect": e} for e in ("NoSchedule", "NoExecute")]
    names = (f"kwok-{RUN}-cordoned", f"kwok-{RUN}-down")
    specs = [
        replace(GpuNodeSpec.small(names[0], gpus=2, pool=f"kwok-{RUN}"), unschedulable=True, taints=(cordon,)),
        replace(GpuNodeSpec.small(names[1], gpus=2, pool=f"kwok-{RUN}"), ready="Unknown", taints=tuple(unreachable)),
    ]
    with KwokFleet(control_plane.kubeconfig, specs, workdir=tmp_path, timing=RT, fleet=f"c-{RUN}", steady=True) as f:
        try:
            time.sleep(8)  # longer than the controller's monitor period (5 s) and any Stage's play
            cordoned, down = node(kube, names[0]), node(kube, names[1])
            assert cordoned["spec"].get("unschedulable") is True
            assert cordon in [{k: t[k] for k in ("key", "effect")} for t in cordoned["spec"].get("taints") or []]
            ready = next(c for c in down["status"]["conditions"] if c["type"] == "Ready")
            assert ready["status"] == "Unknown", ready
            have = [{k: t[k] for k in ("key", "effect")} for t in down["spec"].get("taints") or []]
            assert all(t in have for t in unreachable), have
            assert content_pending(cordoned, f.rules) is None and content_pending(down, f.rules) is None
        finally:
            for name in names:
                kube.delete(path_of("v1", "nodes", name))


def test_the_dra_slice_holds_the_predicted_devices_and_is_wiped_after_the_delay(fleet: KwokFleet, kube: Kube) -> None:
    fleet.set_dra_plugin(DRA, True)
    (published,) = wait_for("a ResourceSlice", lambda: slices_of(kube, DRA), timeout=5)
    spec = fleet.specs[DRA]
    assert published["spec"]["devices"] == [d.to_json() for d in spec.devices]
    assert published["spec"]["pool"]["name"] == DRA and published["metadata"]["ownerReferences"][0]["kind"] == "Node"
    stopped = time.monotonic()
    fleet.set_dra_plugin(DRA, False)
    wipe = (REALISTIC.plugin_exit_s + REALISTIC.slice_wipe_delay_s) * SCALE  # 1.6 s here
    time.sleep(wipe / 2)
    assert slices_of(kube, DRA), "kubelet wipes a gone plugin's slices only after its wiping delay"
    wait_for("the slices wiped", lambda: not slices_of(kube, DRA), timeout=wipe + 5)
    assert time.monotonic() - stopped >= wipe
    fleet.set_dra_plugin(DRA, True)
    (again,) = wait_for("published again", lambda: slices_of(kube, DRA), timeout=5)
    assert again["spec"]["pool"]["generation"] > published["spec"]["pool"]["generation"]
    fleet.set_dra_plugin(DRA, False)


def test_a_bound_pod_runs_and_an_evicted_one_stays_terminating_for_its_grace(
    fleet: KwokFleet, kube: Kube, namespace: str
) -> None:
    pods = path_of("v1", "pods", namespace=namespace)
    kube.create(pods, pod("graceful", nodeName=PODS, terminationGracePeriodSeconds=60))
    running = wait_for(
        "Running",
        lambda: (lambda o: o if o["status"].get("phase") == "Running" else None)(kube.get(f"{pods}/graceful")),
    )
    assert running["status"]["containerStatuses"][0]["ready"] is True
    evicted = time.monotonic()
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "graceful", "namespace": namespace}}
    kube.create(f"{pods}/graceful/eviction", eviction)
    grace = RT.termination_s(60)  # 3 s here
    time.sleep(grace / 2)
    p = kube.get_or_none(f"{pods}/graceful")
    assert p is not None and p["metadata"]["deletionTimestamp"], "Terminating for its grace period"
    assert p["metadata"]["deletionGracePeriodSeconds"] == 60
    wait_for("the pod gone", lambda: kube.get_or_none(f"{pods}/graceful") is None, timeout=grace + 5)
    assert time.monotonic() - evicted >= grace


def test_the_canary_reports_the_device_it_was_allocated(fleet: KwokFleet, kube: Kube, namespace: str) -> None:
    name = f"kwok-canary-{RUN}"
    gpu_device_class(kube, name)
    try:
        fleet.set_device_plugin(PODS, False)
        fleet.set_dra_plugin(PODS, True)
        wait_for("DRA only", lambda: gpu_status(kube, PODS)[1] == "0" and slices_of(kube, PODS), timeout=10)
        pods = path_of("v1", "pods", namespace=namespace)
        body = pod(
            "canary",
            nodeSelector={"kubernetes.io/hostname": PODS},
            tolerations=[{"operator": "Exists"}],
            restartPolicy="Never",
        )
        body["metadata"]["labels"] = {CANARY_LABEL: "t1"}
        body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        kube.create(pods, body)
        done = finished(kube, f"{pods}/canary", timeout=15)
        (published,) = slices_of(kube, PODS)
        terminated = done["status"]["containerStatuses"][0]["state"]["terminated"]
        assert done["status"]["phase"] == "Succeeded" and terminated["exitCode"] == 0
        assert done["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        # One line for the one allocated device, as nvidia-smi -L prints it, naming a device the node publishes
        # (the claim itself is deallocated once the pod is terminal, so the message is what is left to read).
        assert terminated["message"] in {nvidia_smi_line(d) for d in published["spec"]["devices"]}
        lost = pod("lost", nodeName=PODS, restartPolicy="Never")  # bound without the scheduler: no claim
        lost["metadata"]["labels"] = {CANARY_LABEL: "t2"}
        kube.create(pods, lost)
        failed = finished(kube, f"{pods}/lost", timeout=10)
        terminated = failed["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (failed["status"]["phase"], terminated["exitCode"], terminated["message"]) == ("Failed", 1, NO_DEVICES)
    finally:
        kube.delete(f"{CLASSES}/{name}")
