"""GPUs the device plugin reports unhealthy, on a node still to migrate.

The device plugin marks a GPU Unhealthy on a critical XID or a lost GPU (k8s-device-plugin v0.18.0
internal/rm/health.go checkHealth; internal/plugin/server.go ListAndWatch sends `pluginapi.Unhealthy`, "there is no
way to recover from the Unhealthy state"), and the kubelet counts it in `status.capacity` but not in
`status.allocatable` (kubernetes v1.37.2 pkg/kubelet/cm/devicemanager/manager.go GetCapacity). GFD's
`nvidia.com/gpu.count` still counts it. The DRA driver publishes every GPU NVML enumerates, healthy or not: with
its alpha NVMLDeviceHealthCheck gate (default off) it taints a broken one NoSchedule, without it the GPU is
published like any other (dra-driver-nvidia-gpu v0.4.1 pkg/featuregates/featuregates.go, cmd/gpu-kubelet-plugin/
driver.go deviceHealthEvents, device_health.go healthEventToTaint); a GPU NVML can no longer query fails its
enumeration outright (nvlib.go GetPerGpuAllocatableDevices; go-nvlib v0.11.0 VisitDevices), so the node
publishes nothing.

So: `wait-dra-ready` keeps expecting every GPU (what the driver publishes), the capacity after migration counts
only the GPUs pods can use (not the broken ones), and the check names the nodes before their wave.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops import LiveOps
from dra_migrate.testing.server import FakeServer
from tests.unit.helpers import state
from tests.unit.test_mig_strategy_none import plan_of, planned
from tests.unit.test_plan_placement import gpu_node


def unhealthy(name: str, allocatable: int, pool: str = "p", **labels: str) -> dict[str, Any]:
    n = gpu_node(name, pool, **labels)
    n["status"]["allocatable"] = {**n["status"]["capacity"], "nvidia.com/gpu": str(allocatable)}
    return n


def capacity(*nodes: dict[str, Any]) -> dict[str, Any]:
    caps = assess(state(*nodes)).capacity
    [cap] = [c for c in caps if c.resource == "nvidia.com/gpu"]
    return cap.to_dict()


def test_capacity_after_leaves_out_the_gpus_the_device_plugin_reports_unhealthy() -> None:
    cap = capacity(unhealthy("a", 7), gpu_node("b"))
    assert cap["before"] == 15  # allocatable: what the scheduler can use today
    # GFD counts 16 GPUs and the driver publishes 16, but one is broken: 15 serve pods after, as before.
    assert cap["after"] == 15
    # One node has 7 usable GPUs: a pod (or gang member) asking for 8 fits only on the other.
    assert cap["largestNodeAfter"] == 8
    cap = capacity(unhealthy("a", 7))
    assert (cap["after"], cap["largestNodeAfter"]) == (7, 7)


def test_all_gpus_unhealthy_or_the_device_plugin_down_adds_nothing_after() -> None:
    cap = capacity(unhealthy("a", 0), gpu_node("b"))
    assert (cap["before"], cap["after"]) == (8, 8)


def test_time_sliced_replicas_of_a_broken_gpu_count_as_its_whole_gpu() -> None:
    # 8 GPUs shared 4 ways: 32 replicas; one GPU broken takes its 4 replicas out of allocatable.
    n = unhealthy("a", 28, **{"nvidia.com/gpu.replicas": "4"})
    n["status"]["capacity"]["nvidia.com/gpu"] = "32"
    cap = capacity(n)
    assert (cap["before"], cap["after"]) == (28, 7)


def test_wait_dra_ready_still_expects_every_gpu_the_driver_publishes() -> None:
    # Lowering the expectation to allocatable would wait for 7 while the driver publishes 8: a certain timeout.
    plan = plan_of(unhealthy("a", 7), gpu_node("b"))
    assert planned(plan) == {"a": 8, "b": 8}


def test_the_check_names_the_nodes_with_unhealthy_gpus() -> None:
    found = [f for f in assess(state(unhealthy("a", 7), unhealthy("z", 0), gpu_node("b"))).findings
             if f.id == "unhealthy-gpus"]  # fmt: skip
    assert [(f.severity.value, [str(o) for o in f.objects]) for f in found] == [
        ("warning", ["Node a"]),
        ("warning", ["Node z"]),
    ]
    assert "1 of 8" in found[0].message and "NVMLDeviceHealthCheck" in found[0].message
    assert "allocatable 0" in found[1].message


def test_a_migrated_node_is_not_named() -> None:
    # Migrated: the device plugin is off, its resource at capacity 8 / allocatable 0 until the kubelet's grace
    # period ends; nothing of that is a broken GPU.
    n = unhealthy("a", 0, **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"})
    assert not [f for f in assess(state(n)).findings if f.id == "unhealthy-gpus"]


def test_a_node_whose_driver_publishes_nothing_says_where_to_look() -> None:
    # A GPU NVML cannot query fails the driver's whole enumeration: no slice at all, the wait times out. The
    # message must lead to the DRA plugin's log and the GPUs, not only to "is the device plugin off".
    server = FakeServer()
    server.put(
        "/api/v1/nodes/gpu-1", {"metadata": {"name": "gpu-1"}, "status": {"allocatable": {"nvidia.com/gpu": "0"}}}
    )
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.02)
    with pytest.raises(StepFailed) as e:
        live.wait_dra_ready("gpu-1", ["nvidia.com/gpu"], 8, 0.05)
    assert "hold 0 device(s), expected 8" in e.value.args[0]
    assert "log" in e.value.hint and "unhealthy" in e.value.hint


def test_a_gang_after_migration_is_placed_on_the_usable_gpus_only() -> None:
    from dra_migrate.dra.gangfit import capacity_after, capacity_before

    s = state(unhealthy("a", 7), gpu_node("b"))
    r = assess(s)
    nodes = sorted(r.inventory.nodes, key=lambda n: n.name)
    assert capacity_before(nodes) == {"a": {"nvidia.com/gpu": 7}, "b": {"nvidia.com/gpu": 8}}
    assert capacity_after(s, nodes, r.classes) == {"a": {"nvidia.com/gpu": 7}, "b": {"nvidia.com/gpu": 8}}
