"""GpuNodeSpec derivations: what the device plugin advertises and what the DRA driver publishes."""

from __future__ import annotations

import re
from typing import Any

from dra_migrate.cluster.state import SourceInfo, StateBuilder
from dra_migrate.sim.spec import (
    DeviceSpec,
    GpuNodeSpec,
    device_plugin_enabled,
    dra_plugin_enabled,
    specs_from_state,
)
from tests.unit.helpers import resource_slice

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _node(spec: GpuNodeSpec, capacity: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": dict(spec.labels)},
        "status": {"capacity": capacity if capacity is not None else {"cpu": "32", "memory": "256Gi", "pods": "110"}},
    }


def test_full_gpus_from_labels() -> None:
    spec = GpuNodeSpec.small("n1", gpus=4)
    assert spec.device_plugin_resources == {"nvidia.com/gpu": 4}
    assert [d.name for d in spec.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    gpu = spec.devices[0]
    assert gpu.attributes["type"] == {"string": "gpu"}
    assert gpu.attributes["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu.attributes["architecture"] == {"string": "Hopper"}
    assert gpu.attributes["brand"] == {"string": "Nvidia"}
    assert gpu.attributes["cudaComputeCapability"] == {"version": "9.0.0"}
    assert gpu.attributes["driverVersion"] == {"version": "570.133.20"}
    assert gpu.attributes["cudaDriverVersion"] == {"version": "12.8.0"}
    assert gpu.attributes["uuid"]["string"].startswith("GPU-")
    assert "resource.kubernetes.io/pciBusID" in gpu.attributes
    assert "resource.kubernetes.io/pcieRoot" in gpu.attributes
    assert gpu.capacity == {"memory": {"value": "81559Mi"}}
    # Deterministic and distinct per node and index.
    assert GpuNodeSpec.small("n1", gpus=4) == spec
    uuids = {d.attributes["uuid"]["string"] for d in spec.devices}
    uuids |= {d.attributes["uuid"]["string"] for d in GpuNodeSpec.small("n2", gpus=4).devices}
    assert len(uuids) == 8


def test_operator_and_gfd_labels() -> None:
    labels = GpuNodeSpec.small("n1", gpus=8, pool="a100-pool").labels
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert labels["cloud.google.com/gke-nodepool"] == "a100-pool"
    assert device_plugin_enabled(labels) and not dra_plugin_enabled(labels)
    assert dra_plugin_enabled({"nvidia.com/dra-kubelet-plugin": "true"})
    assert dra_plugin_enabled({"nvidia.com/gpu.deploy.dra-driver": "true"})
    assert not device_plugin_enabled({"nvidia.com/gpu.deploy.device-plugin": "false"})


def test_time_slicing_replicas_multiply_the_device_plugin_only() -> None:
    spec = GpuNodeSpec.small("t4", gpus=4, product="Tesla-T4", memory_mib=15360, replicas=4)
    assert spec.labels["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    assert spec.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert spec.device_plugin_resources == {"nvidia.com/gpu": 16}
    assert len(spec.devices) == 4  # DRA has no replicas: one device per GPU
    assert spec.devices[0].attributes["productName"] == {"string": "Tesla T4"}
    assert spec.devices[0].attributes["brand"] == {
        "string": "Nvidia"
    }  # NVML: BRAND_NVIDIA (test_dra_predictions_attributes)
    assert spec.devices[0].attributes["architecture"] == {"string": "Turing"}
    assert spec.devices[0].attributes["cudaComputeCapability"] == {"version": "7.5.0"}


def test_mixed_mig_devices() -> None:
    spec = GpuNodeSpec.small("m1", gpus=2, mig={"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
    assert spec.labels["nvidia.com/mig.strategy"] == "mixed"
    assert spec.labels["nvidia.com/mig-1g.10gb.count"] == "4"
    assert spec.device_plugin_resources == {
        "nvidia.com/mig-1g.10gb": 4,
        "nvidia.com/mig-2g.20gb": 2,
        "nvidia.com/mig-3g.40gb": 2,
    }
    names = [d.name for d in spec.devices]
    # MIG-enabled GPUs are published as their MIG devices only; placements as nvidia-smi shows all-balanced.
    assert names[:4] == [
        "gpu-0-mig-1g10gb-19-0",
        "gpu-0-mig-1g10gb-19-1",
        "gpu-0-mig-2g20gb-14-2",
        "gpu-0-mig-3g40gb-9-4",
    ]
    assert len(names) == 8 and "gpu-0" not in names
    assert all(DNS_LABEL.match(n) for n in names)
    mig = spec.devices[3]
    assert mig.attributes["type"] == {"string": "mig"}
    assert mig.attributes["profile"] == {"string": "3g.40gb"}
    assert mig.attributes["uuid"]["string"].startswith("MIG-")
    parents = {d.attributes["parentUUID"]["string"] for d in spec.devices}
    assert len(parents) == 2
    assert mig.capacity["memory"] == {"value": "40448Mi"}
    assert mig.capacity["multiprocessors"] == {"value": "60"}
    assert {k for k in mig.capacity if k.startswith("memorySlice")} == {f"memorySlice{i}" for i in range(4, 8)}
    # ResourceSlice limit: attributes + capacity <= 32 per device.
    assert all(len(d.attributes) + len(d.capacity) <= 32 for d in spec.devices)


def test_mig_on_a100_40gb_matches_the_sample() -> None:
    spec = GpuNodeSpec.small("a", gpus=1, product="NVIDIA-A100-PCIE-40GB", memory_mib=40960, mig={"1g.5gb": 7})
    names = [d.name for d in spec.devices]
    assert names == [f"gpu-0-mig-1g5gb-19-{i}" for i in range(7)]
    assert spec.devices[0].capacity["memory"] == {"value": "4864Mi"}  # samples/resourceslice-a100-mig.yaml
    assert spec.devices[0].attributes["productName"] == {"string": "NVIDIA A100-PCIE-40GB"}
    assert spec.device_plugin_resources == {"nvidia.com/mig-1g.5gb": 7}


def test_single_mig_strategy_from_labels() -> None:
    labels = dict(GpuNodeSpec.small("s", gpus=2).labels)
    labels.update(
        {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            "nvidia.com/gpu.count": "14",
            "nvidia.com/mig.strategy": "single",
        }
    )
    spec = GpuNodeSpec.from_node(_node(GpuNodeSpec(name="s", labels=labels)))
    assert spec.device_plugin_resources == {"nvidia.com/gpu": 14}
    assert len(spec.devices) == 14
    assert {d.name.split("-mig-")[0] for d in spec.devices} == {"gpu-0", "gpu-1"}
    assert spec.devices[0].attributes["productName"] == {"string": "NVIDIA H100 80GB HBM3"}


def test_from_node_uses_capacity_when_the_plugin_runs() -> None:
    small = GpuNodeSpec.small("n1", gpus=8, replicas=2)
    capacity = {"cpu": "96", "memory": "1Ti", "pods": "250", "nvidia.com/gpu.shared": "16", "hugepages-1Gi": "0"}
    spec = GpuNodeSpec.from_node(_node(small, capacity))
    assert spec.device_plugin_resources == {"nvidia.com/gpu.shared": 16}
    assert (spec.cpu, spec.memory, spec.pods) == ("96", "1Ti", "250")
    assert spec.extra_capacity == {"hugepages-1Gi": "0"}
    assert len(spec.devices) == 8


def test_from_node_with_the_plugin_off_derives_from_labels() -> None:
    small = GpuNodeSpec.small("n1", gpus=8, replicas=3)
    spec = GpuNodeSpec.from_node(_node(small, {"cpu": "8", "memory": "1Gi", "pods": "110", "nvidia.com/gpu": "0"}))
    assert spec.device_plugin_resources == {"nvidia.com/gpu": 24}
    mixed = GpuNodeSpec.small("m", gpus=2, mig={"3g.40gb": 2})
    spec = GpuNodeSpec.from_node(_node(mixed))
    assert spec.device_plugin_resources == {"nvidia.com/mig-3g.40gb": 4}
    assert spec.devices == mixed.devices


def test_from_node_with_mixed_full_gpus_known_from_capacity() -> None:
    labels = dict(GpuNodeSpec.small("m", gpus=4, mig={"3g.40gb": 2}).labels)
    labels["nvidia.com/mig-3g.40gb.count"] = "4"  # two GPUs partitioned, two whole
    capacity = {"nvidia.com/gpu": "2", "nvidia.com/mig-3g.40gb": "4"}
    spec = GpuNodeSpec.from_node(_node(GpuNodeSpec(name="m", labels=labels), capacity))
    names = [d.name for d in spec.devices]
    assert names == [
        "gpu-0-mig-3g40gb-9-0",
        "gpu-0-mig-3g40gb-9-4",
        "gpu-1-mig-3g40gb-9-0",
        "gpu-1-mig-3g40gb-9-4",
        "gpu-2",
        "gpu-3",
    ]


def test_from_node_prefers_the_snapshot_slices() -> None:
    small = GpuNodeSpec.small("n1", gpus=2)
    device = {"name": "gpu-7", "attributes": {"type": {"string": "gpu"}}, "capacity": {"memory": {"value": "40Gi"}}}

    slices = [
        resource_slice("n1", 1, [{"name": "old"}]),
        resource_slice("n1", 2, [device]),
        resource_slice("n2", 3, [{"name": "x"}]),
        resource_slice("n1", 9, [{"name": "y"}], driver="other.example.com"),
    ]
    spec = GpuNodeSpec.from_node(_node(small), slices)
    assert spec.devices == (DeviceSpec("gpu-7", {"type": {"string": "gpu"}}, {"memory": {"value": "40Gi"}}),)
    assert spec.devices[0].to_json() == device


def test_specs_from_state_picks_gpu_nodes() -> None:
    builder = StateBuilder(SourceInfo(kind="snapshot", location="test"))
    builder.add(_node(GpuNodeSpec.small("gpu-1", gpus=2)))
    builder.add(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "cpu-1", "labels": {}},
            "status": {"capacity": {"cpu": "4"}},
        }
    )
    builder.add(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "dp-only"},
            "status": {"capacity": {"nvidia.com/gpu": "4"}},
        }
    )
    builder.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dra-only"}, "status": {}})
    builder.add(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "dra-only",
                "pool": {"name": "dra-only", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        }
    )
    specs = {s.name: s for s in specs_from_state(builder.state)}
    assert set(specs) == {"gpu-1", "dp-only", "dra-only"}
    assert specs["dp-only"].device_plugin_resources == {"nvidia.com/gpu": 4}
    assert specs["dp-only"].devices == ()
    assert [d.name for d in specs["dra-only"].devices] == ["gpu-0"]
