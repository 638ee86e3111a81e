"""MIG mode under the device plugin's `mig.strategy=none`: in no GFD label, so the devices the DRA driver will
publish are not predicted from GFD's counts.

Under `none` GFD writes no `nvidia.com/mig.strategy` label and no MIG label at all, and labels a MIG-enabled GPU
whole, under the same `nvidia.com/gpu.count` and product as a MIG-disabled one (k8s-device-plugin v0.18.0
internal/lm/mig-strategy.go NewResourceLabeler: `if *config.Flags.MigStrategy == spec.MigStrategyNone { return
fullGPULabeler }`, newGPULabelers counts `devicesByMigEnabled[true]` with the others; internal/lm/strategy.go
migStrategyLabeler: none writes nothing). The device plugin advertises it as one `nvidia.com/gpu` (internal/rm/
device_map.go buildGPUDeviceMap: MIG-enabled GPUs are skipped only `if migEnabled && *b.migStrategy !=
spec.MigStrategyNone`; buildDeviceMapFromConfigResources returns before any MIG device under none). The DRA
driver publishes a MIG-enabled GPU as its MIG devices only, never whole, and nothing for one without instances
(dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices L302-327). So a node the
MIG Manager gave a MIG config (`nvidia.com/mig.config`) was predicted as `gpu.count` whole GPUs: its
`wait-dra-ready` waited for 8 `gpu-<i>` and the driver published 56 MIG devices (or 0), the wave timed out and
rolled back.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.devices import predict_devices
from dra_migrate.dra.layout import unpredictable_layout
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from tests.unit.helpers import resource_slice
from tests.unit.test_gpu_operator_activity import DRA, POLICY
from tests.unit.test_plan_placement import DP, gpu_node, make, pool_stages

# A node under the device plugin's none strategy, as GFD v0.18.0 labels it: no nvidia.com/mig.strategy, no
# nvidia.com/mig-*.count, whole-GPU count and product; mig.capable from newMigCapabilityLabeler (internal/lm/nvml.go).
NONE = {"nvidia.com/mig.capable": "true", "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.memory": "81559"}
# The MIG Manager applied a config that enables MIG (a preset of the operator's default-mig-parted-config).
MIG_ON = {**NONE, "nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"}

MIG_PARTED = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
  team-whole:
    - devices: all
      mig-enabled: false
  team-half:
    - devices: [0, 1, 2, 3]
      mig-enabled: false
    - devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
"""


def config_map(text: str = MIG_PARTED) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "default-mig-parted-config", "namespace": "gpu-operator", "uid": "cm-1"},
        "data": {"config.yaml": text},
    }


def plan_of(*objects: dict[str, Any]) -> dict[str, Any]:
    return build_plan(make(*objects, DP, DRA, POLICY), PlanParams()).to_dict()


def planned(plan: dict[str, Any]) -> dict[str, int]:
    return {n["node"]: n["expectedDevices"] for s in pool_stages(plan) for w in s["waves"] for n in w["nodes"]}


def excluded(plan: dict[str, Any]) -> dict[str, str]:
    return {e["node"]: e["reason"] for e in plan["summary"]["excludedNodes"]}


def test_a_mig_config_under_the_none_strategy_leaves_the_node_out_not_expected_whole() -> None:
    mig = gpu_node("mig", **MIG_ON)
    plan = plan_of(mig, gpu_node("good", **NONE))
    assert planned(plan) == {"good": 8}
    why = excluded(plan)["mig"]
    assert why.startswith("mig-layout-unpredicted: ")
    assert "nvidia.com/mig.config=all-1g.10gb" in why
    found = [f for f in plan["findings"] if f["id"] == "mig-layout-unpredicted"]
    assert [(f["severity"], f["objects"]) for f in found] == [("blocker", ["Node mig"])]
    assert plan["applicable"] is True  # node-scoped: the rest of the fleet goes ahead
    # With the MIG Manager's config read, the same: GFD under none cannot confirm the instances exist.
    plan = plan_of(mig, gpu_node("good", **NONE), config_map())
    assert planned(plan) == {"good": 8}
    assert "mig" in excluded(plan)
    # Once the driver has published on the node, its slices give the count: no longer this finding (whole GPUs
    # published: planned with them; MIG devices: `gpu-devices-unmatched` below).
    gpu = {"type": {"string": "gpu"}}
    published = resource_slice("mig", 1, [{"name": f"gpu-{i}", "attributes": gpu} for i in range(8)])
    plan = plan_of(mig, gpu_node("good", **NONE), published)
    assert planned(plan) == {"mig": 8, "good": 8}
    assert not [f for f in plan["findings"] if f["id"] in ("mig-layout-unpredicted", "gpu-devices-unmatched")]


def test_a_config_that_keeps_mig_off_is_predicted_whole() -> None:
    # The operator's preset name for MIG off, read or not: the GPUs are whole, as GFD counts them.
    off = {**NONE, "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "success"}
    assert unpredictable_layout(off) is None
    assert planned(plan_of(gpu_node("n", **off))) == {"n": 8}
    # A config of another name whose every entry keeps MIG off, when the MIG Manager's ConfigMap is read.
    team = {**off, "nvidia.com/mig.config": "team-whole"}
    assert planned(plan_of(gpu_node("n", **team), config_map())) == {"n": 8}
    # ... and one that turns MIG on for half the GPUs is not.
    half = {**off, "nvidia.com/mig.config": "team-half"}
    assert "n" in excluded(plan_of(gpu_node("n", **half), config_map()))
    # Unread, a config name says nothing of MIG mode.
    assert "n" in excluded(plan_of(gpu_node("n", **team)))
    # GPUs that cannot run MIG are whole whatever the label says.
    assert unpredictable_layout({**MIG_ON, "nvidia.com/mig.capable": "false"}) is None
    # No MIG Manager label: nothing says MIG is on (docs/nvidia-tier.md: MIG turned on by hand is not seen).
    assert unpredictable_layout(NONE) is None


def test_a_failed_mig_change_leaves_the_mode_unknown() -> None:
    # The MIG Manager could not apply all-disabled: the GPUs keep whatever mode they had.
    failed = {**NONE, "nvidia.com/mig.config": "all-disabled", "nvidia.com/mig.config.state": "failed"}
    why = unpredictable_layout(failed)
    assert why is not None and "failed" in why


def test_gfd_strategies_that_show_mig_are_still_read_from_their_labels() -> None:
    # Under single or mixed GFD labels MIG devices (or, single with no MIG-enabled GPU, the whole product), so the
    # MIG Manager's label adds nothing: predicted as before.
    single_off = {**MIG_ON, "nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-disabled"}
    assert unpredictable_layout(single_off) is None
    mixed = {
        **MIG_ON,
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/mig-1g.10gb.count": "56",
    }
    assert unpredictable_layout(mixed) is None
    n = {"metadata": {"name": "n", "labels": mixed}, "status": {"capacity": {"nvidia.com/mig-1g.10gb": "56"}}}
    assert len(predict_devices(n)) == 56


# The class generated for `nvidia.com/gpu` selects full GPUs (`device.attributes["gpu.nvidia.com"].type == 'gpu'`,
# dra/deviceclasses.py), and a MIG-enabled GPU publishes `type: mig` devices only (dra-driver-nvidia-gpu v0.4.1
# cmd/gpu-kubelet-plugin/deviceinfo.go, nvlib.go L302-327). A node under none whose DRA plugin has already published
# its MIG devices was planned with its slices' count, and a canary asking `nvidia.com/gpu` that no device of the
# node can serve: the canary stayed Pending until its timeout and the wave rolled back.
MIG_DEVICE = {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}, "productName": {"string": "NVIDIA H100"}}


def test_a_node_whose_devices_no_class_of_its_resources_matches_is_left_out() -> None:
    mig = gpu_node("mig", **MIG_ON)
    published = resource_slice("mig", 1, [{"name": f"gpu-0-mig-19-{i}-1", "attributes": MIG_DEVICE} for i in range(7)])
    plan = plan_of(mig, gpu_node("good", **NONE), published)
    assert planned(plan) == {"good": 8}
    why = excluded(plan)["mig"]
    assert why.startswith("gpu-devices-unmatched: ")
    assert "nvidia.com/gpu" in why
    found = [f for f in plan["findings"] if f["id"] == "gpu-devices-unmatched"]
    assert [(f["severity"], f["objects"]) for f in found] == [("blocker", ["Node mig"])]
    assert plan["applicable"] is True


def test_the_canary_asks_for_a_resource_the_node_can_serve_through_dra() -> None:
    # Left at 0 by a plugin that served it once (the kubelet keeps a resource it no longer has devices for), the
    # first name in order would be a canary no device serves; the MIG profile the node serves is taken instead.
    mixed = {
        **NONE,
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.count": "56",
        "nvidia.com/mig-1g.10gb.memory": "9728",
    }
    n = gpu_node("m", **mixed)
    n["status"]["capacity"] = {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}
    n["status"]["allocatable"] = dict(n["status"]["capacity"])
    plan = plan_of(n)
    canary = {e["node"]: e["canaryResource"] for s in pool_stages(plan) for w in s["waves"] for e in w["nodes"]}
    assert canary == {"m": "nvidia.com/mig-1g.10gb"}
