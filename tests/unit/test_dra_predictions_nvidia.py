"""Prediction classes the nvidia tier found against the real NVIDIA DRA driver (tests/integration/test_nvidia.py):
each case here is a node setup of go-nvml's mock as the real GFD labelled it and the real driver (v0.4.1)
published it, reduced to what the prediction reads."""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.census import census, census_differences
from dra_migrate.dra.devices import predict_devices
from dra_migrate.dra.products import mig_memory_gb, product_name


def node(labels: dict[str, str], capacity: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": labels}, "status": {"capacity": capacity or {}}}


A100 = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/gpu.memory": "40960",
    "nvidia.com/gpu.family": "ampere",
    "nvidia.com/gpu.compute.major": "8",
    "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/cuda.driver-version.full": "550.54.15",
    "nvidia.com/cuda.runtime-version.full": "12.4",
    "nvidia.com/mig.capable": "true",
}


def mixed(count: int, profiles: dict[str, tuple[int, int]]) -> dict[str, str]:
    """GFD's mixed-strategy labels: profile -> (instances, memory MiB)."""
    out = {**A100, "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": str(count)}
    for p, (n, mem) in profiles.items():
        out[f"nvidia.com/mig-{p}.count"] = str(n)
        out[f"nvidia.com/mig-{p}.memory"] = str(mem)
    return out


def classes(devices: tuple[dict[str, Any], ...]) -> dict[str, int]:
    c = census(devices)
    return {k.removeprefix("class="): v for k, v in c.items() if k.startswith("class=")}


def test_a_board_name_not_in_the_table_keeps_its_hyphens() -> None:
    # The real driver published `NVIDIA A30-PCIE-24GB` (NVML's name); GFD labelled `NVIDIA-A30-PCIE-24GB`.
    assert product_name("NVIDIA-A30-PCIE-24GB") == "NVIDIA A30-PCIE-24GB"
    assert product_name("Tesla-V100-SXM2-16GB-SHARED") == "Tesla V100-SXM2-16GB"
    assert product_name("NVIDIA-RTX-PRO-6000") == "NVIDIA RTX PRO 6000"
    devices = predict_devices(node({"nvidia.com/gpu.product": "NVIDIA-A30-PCIE-24GB", "nvidia.com/gpu.count": "4"}))
    assert census(devices)["productName=NVIDIA A30-PCIE-24GB"] == 4


def test_a_mig_enabled_gpu_without_instances_is_not_predicted_as_a_full_gpu() -> None:
    # 3 GPUs: one 7g.40gb, one MIG-enabled with no instances, one whole (the device plugin advertises 1 GPU).
    # The driver publishes the MIG device and the whole GPU: 2 devices, not 3.
    labels = mixed(3, {"7g.40gb": (1, 40192)})
    devices = predict_devices(node(labels, {"nvidia.com/gpu": "1", "nvidia.com/mig-7g.40gb": "1"}))
    assert classes(devices) == {"gpu.nvidia.com": 1, "mig.nvidia.com": 1}


def test_mixed_mig_without_device_plugin_capacity_still_has_its_whole_gpus() -> None:
    # One GPU 7g.40gb, one 7 x 1g.5gb, six whole: the driver publishes 8 MIG devices and 6 GPUs. With the
    # device plugin gone (its capacity zeroed) the whole GPUs must not vanish from the prediction.
    labels = mixed(8, {"7g.40gb": (1, 40192), "1g.5gb": (7, 4864)})
    for capacity in ({}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.5gb": "0"}):
        devices = predict_devices(node(labels, capacity))
        assert classes(devices) == {"gpu.nvidia.com": 6, "mig.nvidia.com": 8}, capacity
    # With the capacity there, as before.
    devices = predict_devices(node(labels, {"nvidia.com/gpu": "6"}))
    assert classes(devices) == {"gpu.nvidia.com": 6, "mig.nvidia.com": 8}


def test_mig_profile_names_follow_go_nvlibs_derivation_from_memory() -> None:
    # go-nvlib getMigMemorySizeGB: A100-40GB and H100-80GB names, the real H200 (143771 MiB) and the mock's.
    assert [mig_memory_gb(m, 40960) for m in (4864, 9856, 19968, 40192)] == [5, 10, 20, 40]
    assert mig_memory_gb(9984, 81559) == 10
    assert [mig_memory_gb(m, 143771) for m in (16384, 32768, 65536)] == [18, 35, 71]
    assert [mig_memory_gb(m, 144384) for m in (18432, 35840, 72704, 144384)] == [35, 35, 88, 141]


def test_a_profile_name_that_means_another_instance_size_here_takes_its_geometry_from_memory() -> None:
    # go-nvml's H200 mock: the 1-slice instance (18432 MiB of 144384) is named `1g.35gb` by go-nvlib, as the
    # table's 2-slice profile is. The real driver published it on one memory slice with GI profile 19.
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H200-141GB-HBM3e",
        "nvidia.com/gpu.memory": "144384",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/mig-1g.35gb.count": "2",
        "nvidia.com/mig-1g.35gb.memory": "18432",
    }
    devices = predict_devices(node(labels, {"nvidia.com/gpu": "0"}))
    assert len(devices) == 2
    for d in devices:
        assert [k for k in d["capacity"] if k.startswith("memorySlice")] == [next(
            k for k in d["capacity"] if k.startswith("memorySlice"))]  # fmt: skip
        assert d["name"].split("-")[-2] == "19", d["name"]


def test_census_differences_name_each_count_that_differs() -> None:
    gpu = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}, "capacity": {"memory": {"value": "40Gi"}}}
    same_memory = {**gpu, "capacity": {"memory": {"value": "40960Mi"}}}
    assert census_differences([gpu], [same_memory]) == []
    assert census_differences([gpu, gpu], [gpu]) == [
        "capacity.memory=42949672960: predicted 2, published 1",
        "class=gpu.nvidia.com: predicted 2, published 1",
        "type=gpu: predicted 2, published 1",
    ]


# The a100-mixed setup of the nvidia tier: GPU0 7g.40gb, GPU1 all-balanced, GPU2 7 x 1g.5gb, GPU3 MIG on with no
# instances, GPU4-7 off. The real driver publishes 4 GPUs + 12 MIG devices. With the device plugin's capacity
# gone, GFD's labels alone predict 17 (GPU3 counted whole); the MIG Manager config the node applied says which
# GPU holds what.
A100_MIXED_CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  tier-mixed:
    - devices: all
      mig-enabled: false
    - devices: [0]
      mig-enabled: true
      mig-devices: {"7g.40gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    - devices: [2]
      mig-enabled: true
      mig-devices: {"1g.5gb": 7}
    - devices: [3]
      mig-enabled: true
      mig-devices: {}
"""
A100_MIXED = {
    **mixed(8, {"7g.40gb": (1, 40192), "1g.5gb": (9, 4864), "2g.10gb": (1, 9856), "3g.20gb": (1, 19968)}),
    "nvidia.com/mig.config": "tier-mixed",
    "nvidia.com/mig.config.state": "success",
}


def _configs(text: str = A100_MIXED_CONFIG) -> dict[str, Any]:
    from dra_migrate.inventory.migparted import parse_mig_configs

    return parse_mig_configs(text, "test")


def test_mixed_mig_without_capacity_takes_each_gpus_instances_from_the_applied_mig_manager_config() -> None:
    assert classes(predict_devices(node(A100_MIXED))) == {"gpu.nvidia.com": 5, "mig.nvidia.com": 12}  # labels only
    devices = predict_devices(node(A100_MIXED), _configs())
    assert classes(devices) == {"gpu.nvidia.com": 4, "mig.nvidia.com": 12}
    assert census(devices)["profile=1g.5gb"] == 9


def test_a_mig_manager_config_that_does_not_match_gfds_counts_is_not_trusted() -> None:
    # Pending (not applied yet), or a config edited since it was applied: GFD's counts win, the estimate stays.
    pending = {**A100_MIXED, "nvidia.com/mig.config.state": "pending"}
    assert classes(predict_devices(node(pending), _configs())) == {"gpu.nvidia.com": 5, "mig.nvidia.com": 12}
    edited = _configs(A100_MIXED_CONFIG.replace('{"1g.5gb": 7}', '{"1g.5gb": 6}'))
    assert classes(predict_devices(node(A100_MIXED), edited)) == {"gpu.nvidia.com": 5, "mig.nvidia.com": 12}


def test_node_devices_reads_the_mig_manager_configmap_the_cluster_policy_names() -> None:
    from dra_migrate.cluster.state import SourceInfo, StateBuilder
    from dra_migrate.dra.devices import node_devices

    def configmap(name: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "gpu-operator"}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"config.yaml": A100_MIXED_CONFIG}}

    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"migManager": {"enabled": True, "config": {"name": "custom-mig-parted-config"}}},
        "status": {"namespace": "gpu-operator"},
    }
    mig_manager = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-mig-manager", "namespace": "gpu-operator"},
        "spec": {"template": {"spec": {
            "containers": [{"name": "mig-manager", "image": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.12.1"}],
            "volumes": [{"name": "config", "configMap": {"name": "default-mig-parted-config"}}],
        }}},
    }  # fmt: skip
    for objects, gpus in (
        ([configmap("custom-mig-parted-config"), policy], 4),
        ([configmap("default-mig-parted-config"), policy], 5),  # not the one the policy names
        ([configmap("default-mig-parted-config"), mig_manager], 4),  # no policy: the MIG Manager mounts it
        # Nothing known to use it: not read, however much it looks like a mig-parted config (cluster/configrefs.py).
        ([configmap("default-mig-parted-config")], 5),
    ):
        b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
        b.add_all([{**node(A100_MIXED), "apiVersion": "v1", "kind": "Node"}, *objects])
        got = node_devices(b.state)["n1"]
        assert classes(got.devices) == {"gpu.nvidia.com": gpus, "mig.nvidia.com": 12}, [o["kind"] for o in objects]


def test_a_mig_manager_configmap_is_kept_in_snapshots_and_is_no_sharing_config() -> None:
    from dra_migrate.cluster.redact import SnapshotFilter
    from dra_migrate.cluster.state import SourceInfo, StateBuilder
    from dra_migrate.inventory.model import build_inventory

    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "default-mig-parted-config", "namespace": "gpu-operator"},
        "data": {"config.yaml": A100_MIXED_CONFIG},
    }
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"migManager": {"enabled": True}},
        "status": {"namespace": "gpu-operator"},
    }
    kept = list(SnapshotFilter(keep_env=False).stream([cm, policy]))
    assert [o["kind"] for o in kept] == ["ClusterPolicy", "ConfigMap"]  # the operator's default name
    b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
    b.add_all([{**node(A100_MIXED), "apiVersion": "v1", "kind": "Node"}, cm, policy])
    assert len(b.state.of("ConfigMap")) == 1
    assert build_inventory(b.state).to_dict()["operator"]["sharingConfigs"] == []
