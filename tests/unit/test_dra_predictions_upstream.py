"""Prediction classes found by reading the sources of what labels a node and what publishes its devices: GPU
Feature Discovery (github.com/NVIDIA/k8s-device-plugin@v0.18.0 internal/lm) and the NVIDIA DRA driver
(sigs.k8s.io/dra-driver-nvidia-gpu@v0.4.1 cmd/gpu-kubelet-plugin). Each case is a node as GFD labels it and the
device plugin advertises it; the expected devices are what the driver's source publishes for it."""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.devices import predict_devices


def node(labels: dict[str, str], capacity: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": labels}, "status": {"capacity": capacity or {}}}


A100 = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.family": "ampere",
    "nvidia.com/gpu.compute.major": "8",
    "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/gpu.replicas": "1",
}


# GFD labels a node's GPUs with one labeler per product name, each writing the same `nvidia.com/gpu.*` keys with
# the count of its own product, merged later-wins in Go map order (k8s-device-plugin v0.18.0
# internal/lm/mig-strategy.go newGPULabelers: `counts[name]++`, "Multiple device types detected"; internal/lm/
# list.go Labels: "Labels later in the list overwrite earlier labels"). The device plugin advertises every GPU
# (internal/rm/device_map.go buildGPUDeviceMap) and the DRA driver publishes every GPU (dra-driver-nvidia-gpu
# v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices, L209 VisitDevices).
def test_two_products_under_no_mig_strategy_count_every_advertised_gpu() -> None:
    # A DGX Station A100: 4 A100s and the DGX Display GPU; GFD's labels name the A100s and count 4.
    devices = predict_devices(node({**A100, "nvidia.com/gpu.count": "4"}, {"nvidia.com/gpu": "5"}))
    assert len(devices) == 5
    names = [d["name"] for d in devices]
    assert len(set(names)) == 5
    # The GPU the labels do not describe gets only what is known of it: no product, memory or versions.
    products = [d["attributes"].get("productName") for d in devices]
    assert products.count({"string": "NVIDIA A100-SXM4-80GB"}) == 4
    assert products.count(None) == 1
    other = next(d for d in devices if "productName" not in d["attributes"])
    assert other["attributes"]["type"] == {"string": "gpu"}
    assert "memory" not in (other.get("capacity") or {})


def test_two_products_time_sliced_count_gpus_not_replicas() -> None:
    labels = {**A100, "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4"}
    labels["nvidia.com/gpu.product"] += "-SHARED"
    assert len(predict_devices(node(labels, {"nvidia.com/gpu": "20"}))) == 5
    # One product, time-sliced: the replicas are not GPUs.
    assert len(predict_devices(node(labels, {"nvidia.com/gpu": "16"}))) == 4


def test_capacity_a_multiple_of_the_count_without_known_replicas_is_not_guessed_as_gpus() -> None:
    # 8 advertised for 4 labelled GPUs is 4 x 2 replicas GFD was not told of, or 4 GPUs of another product:
    # the labels' count stands.
    assert len(predict_devices(node({**A100, "nvidia.com/gpu.count": "4"}, {"nvidia.com/gpu": "8"}))) == 4


# Under mixed MIG the labels of a full-GPU product and of a MIG-enabled one overwrite each other the same way, so
# `gpu.count` may count only the GPUs left whole while GFD's per-profile counts hold another product's instances
# (internal/lm/mig-strategy.go newMigStrategyMixedLabeler). The device plugin advertises the whole GPUs as
# nvidia.com/gpu (device_map.go: MIG-enabled GPUs skipped unless the strategy is none); the driver publishes them
# and every MIG device (nvlib.go L300-322).
def test_mixed_mig_instances_beyond_the_labelled_count_are_published() -> None:
    labels = {
        **A100,
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/mig-1g.10gb.count": "14",
        "nvidia.com/mig-1g.10gb.memory": "9728",
    }
    devices = predict_devices(node(labels, {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "14"}))
    kinds = [d["attributes"]["type"]["string"] for d in devices]
    assert kinds.count("gpu") == 2
    assert kinds.count("mig") == 14
    assert len({d["name"] for d in devices}) == 16


# Under mig.strategy=single GFD labels a node whose GPUs are not all MIG-enabled with instances of one profile
# `<model>-MIG-INVALID` with `gpu.count` 0 (k8s-device-plugin v0.18.0 internal/lm/mig-strategy.go L188-240
# newMigStrategySingleLabeler, L244-264 newInvalidMigStrategyLabeler: "at least one MIG device is enabled but empty",
# "devices with MIG enabled and disable detected", "more than one MIG device type present on node"). The DRA driver
# publishes each MIG-disabled GPU whole and every MIG device of the others (dra-driver-nvidia-gpu v0.4.1
# cmd/gpu-kubelet-plugin/nvlib.go L302-327): at least one device, how many no label says. Predicting 0 made the
# node's `wait-dra-ready` wait for 0 devices and time out on the real count, rolling the wave back.
def test_an_invalid_single_strategy_layout_is_left_out_of_the_plan_not_expected_empty() -> None:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams
    from tests.unit.test_gpu_operator_activity import DRA, POLICY
    from tests.unit.test_plan_placement import DP, gpu_node, make, pool_stages

    invalid = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-INVALID",
        "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.memory": "0",
    }
    bad = gpu_node("bad", **invalid)
    plan = build_plan(make(bad, gpu_node("good"), DP, DRA, POLICY), PlanParams()).to_dict()
    planned = {n["node"]: n["expectedDevices"] for s in pool_stages(plan) for w in s["waves"] for n in w["nodes"]}
    assert planned == {"good": 8}
    excluded = {e["node"]: e["reason"] for e in plan["summary"]["excludedNodes"]}
    assert excluded["bad"].startswith("mig-layout-unpredicted: ")
    assert "MIG-INVALID" in excluded["bad"]
    found = [f for f in plan["findings"] if f["id"] == "mig-layout-unpredicted"]
    assert [(f["severity"], f["objects"]) for f in found] == [("blocker", ["Node bad"])]
    assert plan["applicable"] is True  # node-scoped: the rest of the fleet goes ahead
    # Once the driver has published on the node, its slices give the count: planned with it, no finding.
    from tests.unit.helpers import resource_slice

    # (Whole GPUs, as the driver publishes them: `type: gpu`, which the nvidia.com/gpu class selects.)
    whole = {"type": {"string": "gpu"}}
    published = resource_slice("bad", 1, [{"name": f"gpu-{i}", "attributes": whole} for i in range(3)])
    plan = build_plan(make(bad, gpu_node("good"), DP, DRA, POLICY, published), PlanParams()).to_dict()
    planned = {n["node"]: n["expectedDevices"] for s in pool_stages(plan) for w in s["waves"] for n in w["nodes"]}
    assert planned == {"bad": 3, "good": 8}
    assert not [f for f in plan["findings"] if f["id"] == "mig-layout-unpredicted"]


# Under mixed MIG the device plugin advertises MIG-enabled GPUs only as their MIG devices (k8s-device-plugin v0.18.0
# internal/rm/device_map.go buildGPUDeviceMap: `if migEnabled && *b.migStrategy != spec.MigStrategyNone { return
# nil }`), so a node whose GPUs are all MIG-enabled advertises `nvidia.com/mig-*` and no `nvidia.com/gpu`, and the DRA
# driver publishes no full GPU there (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go L302-327: a
# MIG-enabled GPU is its MIG devices only). GFD counts all 8 GPUs; instances spread one a GPU pack onto 4: the 4
# left over are not whole GPUs.
def test_mixed_mig_capacity_without_whole_gpus_means_none_are_whole() -> None:
    labels = {
        **A100,
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/mig-3g.40gb.count": "8",
    }
    devices = predict_devices(node(labels, {"nvidia.com/mig-3g.40gb": "8"}))
    assert [d["attributes"]["type"]["string"] for d in devices] == ["mig"] * 8
    # A renamed whole-GPU resource (device-plugin config resources.gpus) is whole GPUs of a name we do not read:
    # nothing is concluded from the missing nvidia.com/gpu then.
    renamed = predict_devices(node(labels, {"nvidia.com/mig-3g.40gb": "8", "nvidia.com/a100": "4"}))
    assert len(renamed) == 12
    # The device plugin gone and its capacity zeroed: what the labels say, as before.
    zeroed = predict_devices(node(labels, {"nvidia.com/mig-3g.40gb": "0"}))
    assert len(zeroed) == 12


def test_a_tight_mig_layout_beside_whole_gpus_takes_no_extra_gpu() -> None:
    # all-balanced on 8 of 10 A100s (2x1g.10gb, 2g.20gb, 3g.40gb each: every memory slice used), 2 whole: first-fit
    # packing needs 9 GPUs for these instances, the GPUs hold them in 8.
    labels = {
        **A100,
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "10",
        "nvidia.com/mig-1g.10gb.count": "16",
        "nvidia.com/mig-2g.20gb.count": "8",
        "nvidia.com/mig-3g.40gb.count": "8",
    }
    capacity = {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-2g.20gb": "8"}
    devices = predict_devices(node(labels, {**capacity, "nvidia.com/mig-3g.40gb": "8"}))
    assert len(devices) == 2 + 32
    assert len({d["name"].split("-mig-")[0] for d in devices}) == 10


# mig.strategy=mixed with MIG enabled on GPUs that hold no instance: GFD writes no `mig-<p>.count` (no MIG device
# to count) but counts them in `gpu.count`; the device plugin skips MIG-enabled GPUs for nvidia.com/gpu under mixed
# (internal/rm/device_map.go buildGPUDeviceMap) and the DRA driver publishes nothing for them (nvlib.go L320-324,
# "MIG mode enabled but no configured MIG devices"): the node's devices are the GPUs advertised whole.
def test_mixed_label_with_empty_mig_gpus_counts_the_whole_gpus_advertised() -> None:
    labels = {**A100, "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "8"}
    devices = predict_devices(node(labels, {"nvidia.com/gpu": "6"}))
    assert len(devices) == 6
    assert {d["attributes"]["type"]["string"] for d in devices} == {"gpu"}
    # Time-sliced, the replicas are not GPUs.
    shared = {**labels, "nvidia.com/gpu.replicas": "2"}
    assert len(predict_devices(node(shared, {"nvidia.com/gpu": "12"}))) == 6
    # The device plugin gone (no capacity): what the labels say.
    assert len(predict_devices(node(labels, {}))) == 8


def test_the_simulator_publishes_what_is_predicted_for_a_two_product_node() -> None:
    from dra_migrate.sim.spec import GpuNodeSpec

    two = node({**A100, "nvidia.com/gpu.count": "4"}, {"nvidia.com/gpu": "5"})
    assert [d.to_json() for d in GpuNodeSpec.from_node(two).devices] == list(predict_devices(two))
