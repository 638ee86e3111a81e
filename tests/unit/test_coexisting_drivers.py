"""The NVIDIA GPU DRA driver is not the only DRA driver, nor the only DaemonSet of its chart, on a cluster.

dra-driver-nvidia-gpu v0.4.1 runs two kubelet plugins (`gpu.nvidia.com`, `compute-domain.nvidia.com`) and its
ComputeDomain controller makes one DaemonSet per ComputeDomain, `computedomain-daemon-<uid>`, from the same image,
placed by the node label `resource.nvidia.com/computeDomain=<uid>` (cmd/compute-domain-controller/daemonset.go,
computedomain.go, templates/compute-domain-daemon.tmpl.yaml). Other drivers publish slices on the same nodes:
a NIC driver (dranet, `dra.net`) on every node, AMD's (`gpu.amd.com`) on AMD nodes.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.inventory.model import build_inventory
from dra_migrate.inventory.operator import dra_plugin_daemonsets
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from tests.unit.helpers import node, obj, resource_slice
from tests.unit.test_checks import findings
from tests.unit.test_plan_placement import DP, gpu_node, make, pool_stages

IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
NS = "dra-driver-nvidia-gpu"
CD_LABEL = "resource.nvidia.com/computeDomain"


def _container(name: str, binary: str) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "command": ["bash", "-c"], "args": [f"{binary} -v $(LOG_VERBOSITY)"]}


def kubelet_plugin(gpus: bool = True, compute_domains: bool = True) -> dict[str, Any]:
    """The v0.4.1 chart's DaemonSet (deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml): one
    container per enabled plugin (resources.gpus.enabled, resources.computeDomains.enabled)."""
    containers = [_container("compute-domains", "compute-domain-kubelet-plugin")] if compute_domains else []
    containers += [_container("gpus", "gpu-kubelet-plugin")] if gpus else []
    spec = {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}, "containers": containers}
    return obj("apps/v1", "DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin", {"template": {"spec": spec}}, NS)


def compute_domain_daemon(uid: str = "0b1c") -> dict[str, Any]:
    """What the ComputeDomain controller creates per ComputeDomain (templates/compute-domain-daemon.tmpl.yaml)."""
    spec = {
        "nodeSelector": {CD_LABEL: uid},
        "containers": [
            {"name": "compute-domain-daemon", "image": IMAGE, "command": ["compute-domain-daemon", "-v", "4", "run"]}
        ],
    }
    return obj("apps/v1", "DaemonSet", f"computedomain-daemon-{uid}", {"template": {"spec": spec}}, NS)


def _placements(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node"]: n["placement"]["draPlugin"] for s in pool_stages(plan) for w in s["waves"] for n in w["nodes"]}


def test_a_compute_domain_daemon_is_not_the_gpu_plugin_placement() -> None:
    in_domain = gpu_node("gpu-2", **{CD_LABEL: "0b1c"})
    state = make(gpu_node("gpu-1"), in_domain, DP, kubelet_plugin(), compute_domain_daemon())
    assert dra_plugin_daemonsets(state) == [f"{NS}/dra-driver-nvidia-gpu-kubelet-plugin"]
    placements = _placements(build_plan(state, PlanParams()).to_dict())
    # Never the ComputeDomain label (it would join the node to an IMEX domain and start no GPU plugin), and a
    # node of a domain still needs the GPU plugin switched on.
    for name in ("gpu-1", "gpu-2"):
        p = placements[name]
        assert (p["mode"], p["label"], p["value"]) == ("label", "nvidia.com/dra-kubelet-plugin", "true"), p
        assert p["daemonSet"] == f"{NS}/dra-driver-nvidia-gpu-kubelet-plugin"


def test_a_chart_with_the_gpu_plugin_disabled_is_no_gpu_dra_driver() -> None:
    """resources.gpus.enabled=false: the DaemonSet runs only the ComputeDomain plugin, which publishes no GPU."""
    state = make(gpu_node("gpu-1"), DP, kubelet_plugin(gpus=False), compute_domain_daemon())
    assert dra_plugin_daemonsets(state) == []
    assert [f.severity.value for f in findings(state, "dra-driver-missing")] == ["blocker"]
    assert [
        f.severity.value for f in findings(make(gpu_node("gpu-1"), DP, kubelet_plugin()), "dra-driver-missing")
    ] == []


def _nic_slice(name: str) -> dict[str, Any]:
    return resource_slice(name, 1, [{"name": f"eth{i}"} for i in range(4)], driver="dra.net")


def test_nodes_with_other_drivers_slices_only_are_not_gpu_nodes() -> None:
    amd = node("amd-1", {"cloud.google.com/gke-nodepool": "amd"}, {"amd.com/gpu": "8"})
    cpu = node("cpu-1", {"cloud.google.com/gke-nodepool": "cpu"})
    compute_domain_only = node("cd-1", {"cloud.google.com/gke-nodepool": "cd"})
    state = make(
        gpu_node("gpu-1"),
        amd,
        cpu,
        compute_domain_only,
        DP,
        kubelet_plugin(),
        *(_nic_slice(n) for n in ("gpu-1", "amd-1", "cpu-1")),
        resource_slice("amd-1", 1, [{"name": "gpu-0"}], driver="gpu.amd.com"),
        resource_slice("cd-1", 1, [{"name": "channel-0"}], driver="compute-domain.nvidia.com"),
    )
    inv = build_inventory(state)
    assert [n.name for n in inv.nodes] == ["gpu-1"]
    assert inv.nodes[0].dra_devices == {"dra.net": 4}  # reported per driver, never counted as GPUs
    plan = build_plan(state, PlanParams()).to_dict()
    assert sorted(_placements(plan)) == ["gpu-1"]
    # All the drivers' slices stay in the inventory's DRA summary.
    drivers = {(s["node"], s["driver"]) for s in inv.dra["resourceSlices"]}
    assert ("amd-1", "gpu.amd.com") in drivers and ("cd-1", "compute-domain.nvidia.com") in drivers


def test_a_gpu_node_is_one_by_the_slices_of_the_driver_asked_for() -> None:
    """`--dra-driver`: a node known only by its published slices is a GPU node by that driver's."""
    bare = node("gpu-9", {"cloud.google.com/gke-nodepool": "p"})
    state = make(bare, DP, kubelet_plugin(), resource_slice("gpu-9", 1, [{"name": "gpu-0"}], driver="gpu.example.com"))
    assert [n.name for n in build_inventory(state).nodes] == []
    assert [n.name for n in build_inventory(state, dra_driver="gpu.example.com").nodes] == ["gpu-9"]


def test_a_compute_domain_made_after_the_plan_is_no_placement_drift() -> None:
    """A ComputeDomain created between `plan` and `apply` adds its daemon's DaemonSet and labels its nodes: the GPU
    plugin's placement is the same, so the plan still holds."""
    from dra_migrate.plan.drift import drift

    before = make(gpu_node("gpu-1"), gpu_node("gpu-2"), DP, kubelet_plugin())
    plan = build_plan(before, PlanParams()).to_dict()
    after = make(
        gpu_node("gpu-1"), gpu_node("gpu-2", **{CD_LABEL: "0b1c"}), DP, kubelet_plugin(), compute_domain_daemon()
    )
    assert drift(plan, after, allow_other_cluster=True).placement_changed == []


def _class(name: str, expression: str, ern: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if ern:
        spec["extendedResourceName"] = ern
    return obj("resource.k8s.io/v1", "DeviceClass", name, spec, namespace=None)


def test_an_existing_class_mapping_the_gpu_name_to_another_drivers_devices_is_a_blocker() -> None:
    """The scheduler serves `nvidia.com/gpu` from the class that declares it (KEP-5004), whatever driver it selects:
    after the switch a migrated node has no device that class matches, and every nvidia.com/gpu pod pends."""
    amd_class = _class("gpu.amd.com", "device.driver == 'gpu.amd.com'", "amd.com/gpu")
    wrong = _class("accelerators", "device.driver == 'gpu.amd.com'", "nvidia.com/gpu")
    base = (gpu_node("gpu-1"), DP, kubelet_plugin(), amd_class)
    # Another vendor's class for its own name is no concern of ours.
    assert findings(make(*base), "existing-class-matches-no-gpu") == []
    (f,) = findings(make(*base, wrong), "existing-class-matches-no-gpu")
    assert f.severity.value == "blocker" and "accelerators" in f.message and "nvidia.com/gpu" in f.message
    assert [str(o) for o in f.objects] == ["DeviceClass accelerators"]
    right = _class("gpus", "device.driver == 'gpu.nvidia.com'", "nvidia.com/gpu")
    assert findings(make(*base, right), "existing-class-matches-no-gpu") == []


def _server_with(*objects: dict[str, Any]) -> Any:
    from dra_migrate.testing.server import FakeServer

    server = FakeServer()
    for o in objects:
        meta = o["metadata"]
        if o["kind"] == "DaemonSet":
            server.put(f"/apis/apps/v1/namespaces/{meta['namespace']}/daemonsets/{meta['name']}", o)
        elif o["kind"] == "ResourceSlice":
            server.put(f"/apis/resource.k8s.io/v1/resourceslices/{meta['name']}", o)
        else:
            server.put(f"/api/v1/nodes/{meta['name']}", o)
    return server


def test_the_confirm_step_does_not_take_the_compute_domain_plugin_for_the_gpu_driver() -> None:
    from dra_migrate.execute.ops import LiveOps

    cd_slice = resource_slice("gpu-1", 1, [{"name": "channel-0"}], driver="compute-domain.nvidia.com")
    only_cd = _server_with(kubelet_plugin(gpus=False), compute_domain_daemon(), cd_slice, _nic_slice("gpu-1"))
    assert LiveOps(only_cd.client).dra_driver_installed("gpu.nvidia.com") is False
    assert LiveOps(_server_with(kubelet_plugin()).client).dra_driver_installed("gpu.nvidia.com") is True


def test_wait_dra_ready_counts_only_the_gpu_drivers_devices_beside_other_drivers() -> None:
    from dra_migrate.execute.ops import LiveOps

    gpu = node("gpu-1", {}, {"nvidia.com/gpu": "0"})
    server = _server_with(
        gpu,
        resource_slice("gpu-1", 1, [{"name": f"gpu-{i}"} for i in range(2)]),
        resource_slice("gpu-1", 1, [{"name": "channel-0"}], driver="compute-domain.nvidia.com"),
        _nic_slice("gpu-1"),
    )
    change = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05).wait_dra_ready("gpu-1", ["nvidia.com/gpu"], 2, 2)
    assert change.after["devices"] == 2


def test_the_twin_installs_no_stand_in_gpu_driver_for_another_drivers_slices(monkeypatch: Any) -> None:
    """A snapshot with no GPU DRA driver but a NIC driver's slices: the twin must not gain a GPU DRA driver the
    cluster lacks (its rehearsal would pass a migration the cluster cannot run)."""
    from dra_migrate.rehearse import run

    asked: list[bool] = []

    class Stop(Exception):
        pass

    def install(_api: Any, *, dra_driver: bool, cluster_policy: Any) -> None:
        asked.append(dra_driver)
        raise Stop

    monkeypatch.setattr(run, "install_nvidia_stack", install)
    for slices, wanted in (([_nic_slice("gpu-1")], False), ([resource_slice("gpu-1", 1, [{"name": "gpu-0"}])], True)):
        with pytest.raises(Stop):
            run.recreate(None, make(gpu_node("gpu-1"), DP, *slices))
        assert asked.pop() is wanted
