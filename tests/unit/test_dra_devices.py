"""The devices the NVIDIA DRA driver publishes, or would publish, per GPU node (dra_migrate.dra.devices)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.dra.devices import (
    NVIDIA_DRIVER,
    NodeDevices,
    mig_device_name,
    node_devices,
    predict_devices,
    product_name,
    semver,
)
from dra_migrate.inventory.fleet import pool_of
from dra_migrate.inventory.resources import parse_quantity
from tests.unit.helpers import resource_slice

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "clusters"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
VALUE_TYPES = {"string", "int", "bool", "version"}

# Derived by hand from each fixture's labels and capacity (see fixtures/clusters/README.md):
# pool -> (nodes, source, devices per node, device type, productName or None).
EXPECTED: dict[str, dict[str, tuple[int, str, int, str, str | None]]] = {
    "demo.yaml": {
        "h100-pool": (4, "predicted", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        # Time-sliced x4 (nvidia.com/gpu: 32), but DRA publishes the 8 physical GPUs.
        "a100-shared-pool": (2, "predicted", 8, "gpu", "NVIDIA A100-SXM4-80GB"),
        "l4-pool": (3, "predicted", 4, "gpu", "NVIDIA L4"),
    },
    # No GFD labels: nvidia.com/gpu capacity whole GPUs, product unknown.
    "h100-homogeneous.yaml": {"p5-h100": (16, "predicted", 8, "gpu", None)},
    "mig-timeslice.yaml": {
        # all-balanced on 8 GPUs: 16 x 1g.10gb (time-sliced x2 by the plugin, not by DRA), 8 x 2g.20gb, 8 x 3g.40gb.
        "a100mig": (2, "predicted", 32, "mig", "NVIDIA A100-SXM4-80GB"),
        "h100mig": (1, "predicted", 56, "mig", "NVIDIA H100 80GB HBM3"),  # all-1g.10gb: 7 per GPU
        "t4shared": (3, "predicted", 1, "gpu", "Tesla T4"),  # nvidia.com/gpu: 4 is one T4 x4
        "a10shared": (2, "predicted", 1, "gpu", "NVIDIA A10"),  # nvidia.com/gpu.shared: 8 is one A10 x8
    },
    "half-migrated.yaml": {
        "gpu-h100": (4, "predicted", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        "gpu-h100-dra": (2, "published", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        "gpu-a100-mig-dra": (1, "published", 16, "mig", "NVIDIA A100-SXM4-80GB"),
    },
    # The DRA chart's default placement: every GPU node already publishes.
    "upstream-stack.yaml": {
        "h100old": (2, "published", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        "h100": (2, "published", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        "a100mix": (1, "published", 8, "mig", "NVIDIA A100-SXM4-40GB"),  # 7g.40gb + 7 x 1g.5gb
        "a100ts": (1, "published", 56, "mig", "NVIDIA A100-SXM4-80GB"),  # time-sliced x4: still 56
    },
    # Same fleet, no slices yet: the prediction must give the same counts.
    "upstream-ready.yaml": {
        "h100old": (2, "predicted", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        "h100": (2, "predicted", 8, "gpu", "NVIDIA H100 80GB HBM3"),
        "a100mix": (1, "predicted", 8, "mig", "NVIDIA A100-SXM4-40GB"),
        "a100ts": (1, "predicted", 56, "mig", "NVIDIA A100-SXM4-80GB"),
    },
}


def _load(name: str) -> ClusterState:
    return load_snapshot(FIXTURES / name)


def _labels(state: ClusterState) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in state.of("Node")}


def test_every_fixture_is_covered() -> None:
    assert {p.name for p in FIXTURES.glob("*.yaml")} == set(EXPECTED)


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_devices_per_node_as_derived_by_hand(fixture: str) -> None:
    state = _load(fixture)
    labels = _labels(state)
    devices = node_devices(state)
    seen: Counter[str] = Counter()
    for name, nd in devices.items():
        assert nd.node == name
        pool = pool_of(labels[name], ())
        _, source, count, dtype, product = EXPECTED[fixture][pool]
        seen[pool] += 1
        assert nd.source == source, name
        assert len(nd.devices) == count, name
        assert {d["attributes"]["type"]["string"] for d in nd.devices} == {dtype}
        assert {d["attributes"].get("productName", {}).get("string") for d in nd.devices} == {product}
    assert dict(seen) == {pool: want[0] for pool, want in EXPECTED[fixture].items()}


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_devices_are_valid_slice_devices(fixture: str) -> None:
    for nd in node_devices(_load(fixture)).values():
        names = [d["name"] for d in nd.devices]
        assert len(set(names)) == len(names)
        for d in nd.devices:
            assert set(d) <= {"name", "attributes", "capacity"}
            assert DNS_LABEL.match(d["name"]), d["name"]
            for key, value in d["attributes"].items():
                assert len(value) == 1 and set(value) <= VALUE_TYPES, (d["name"], key, value)
            for key, value in (d.get("capacity") or {}).items():
                assert set(value) == {"value"} and parse_quantity(value["value"]) is not None, (d["name"], key)
            if "memory" in (d.get("capacity") or {}):
                memory = parse_quantity(d["capacity"]["memory"]["value"])
                assert memory is not None and memory > 0
            # resource/v1: at most 32 attributes and capacities together per device.
            assert len(d["attributes"]) + len(d.get("capacity") or {}) <= 32


def test_published_devices_are_the_slices_own() -> None:
    state = _load("half-migrated.yaml")
    devices = node_devices(state)
    slices = [s for s in state.of("resource.k8s.io/ResourceSlice") if s["spec"]["driver"] == NVIDIA_DRIVER]
    assert slices
    for s in slices:
        nd = devices[s["spec"]["nodeName"]]
        assert nd.source == "published"
        assert list(nd.devices) == s["spec"]["devices"]


def test_predicted_memory_and_names() -> None:
    devices = node_devices(_load("demo.yaml"))
    h100 = next(nd for nd in devices.values() if "h100" in nd.node)
    assert [d["name"] for d in h100.devices] == [f"gpu-{i}" for i in range(8)]
    gpu = h100.devices[0]
    assert gpu["capacity"]["memory"] == {"value": "81559Mi"}
    assert gpu["attributes"]["architecture"] == {"string": "Hopper"}
    assert gpu["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert gpu["attributes"]["driverVersion"] == {"version": "580.95.5"}  # semver: no leading zero


def test_mixed_mig_devices_follow_the_labels() -> None:
    devices = node_devices(_load("mig-timeslice.yaml"))
    a100 = next(nd for nd in devices.values() if "a100mig" in nd.node)
    profiles = Counter(d["attributes"]["profile"]["string"] for d in a100.devices)
    assert profiles == {"1g.10gb": 16, "2g.20gb": 8, "3g.40gb": 8}
    assert [d["name"] for d in a100.devices[:4]] == [
        "gpu-0-mig-1g10gb-19-0",
        "gpu-0-mig-1g10gb-19-1",
        "gpu-0-mig-2g20gb-14-2",
        "gpu-0-mig-3g40gb-9-4",
    ]
    assert len({d["attributes"]["parentUUID"]["string"] for d in a100.devices}) == 8
    h100 = next(nd for nd in devices.values() if "h100mig" in nd.node)
    # GFD's per-profile labels win over the table's rounded figures.
    assert h100.devices[0]["capacity"]["memory"] == {"value": "9856Mi"}
    assert h100.devices[0]["capacity"]["jpegEngines"] == {"value": "1"}


def test_no_gfd_labels_gives_whole_gpus_with_what_is_known() -> None:
    for nd in node_devices(_load("h100-homogeneous.yaml")).values():
        for d in nd.devices:
            assert d["attributes"]["type"] == {"string": "gpu"}
            assert not {"productName", "architecture", "cudaComputeCapability", "driverVersion"} & set(d["attributes"])
            assert "memory" not in (d.get("capacity") or {})


def _node(name: str, labels: dict[str, str], capacity: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": capacity},
    }


GFD = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.family": "hopper",
}


def test_single_strategy_label_without_mig_means_whole_gpus() -> None:
    devices = predict_devices(_node("n", {**GFD, "nvidia.com/mig.strategy": "single"}, {"nvidia.com/gpu": "8"}))
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(8)]


def test_single_strategy_mig_time_sliced() -> None:
    labels = {
        **GFD,
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED",
        "nvidia.com/gpu.count": "14",
        "nvidia.com/gpu.memory": "9856",
        "nvidia.com/gpu.replicas": "2",
    }
    devices = predict_devices(_node("n", labels, {"nvidia.com/gpu": "28"}))
    assert len(devices) == 14  # MIG devices, not their replicas
    assert {d["name"].split("-mig-")[0] for d in devices} == {"gpu-0", "gpu-1"}
    assert devices[0]["attributes"]["profile"] == {"string": "1g.10gb"}
    assert devices[0]["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert devices[0]["capacity"]["memory"] == {"value": "9856Mi"}  # GFD's nvidia.com/gpu.memory under single


def test_mixed_strategy_whole_gpus_from_time_sliced_capacity() -> None:
    labels = {
        **GFD,
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.replicas": "2",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-3g.40gb.count": "4",
        "nvidia.com/mig-bogus.count": "3",  # not a profile: ignored, not an error
    }
    capacity = {"nvidia.com/gpu": "4", "nvidia.com/mig-3g.40gb": "4"}  # 2 whole GPUs x 2 replicas
    names = [d["name"] for d in predict_devices(_node("m", labels, capacity))]
    assert names == [
        "gpu-0-mig-3g40gb-9-0",
        "gpu-0-mig-3g40gb-9-4",
        "gpu-1-mig-3g40gb-9-0",
        "gpu-1-mig-3g40gb-9-4",
        "gpu-2",
        "gpu-3",
    ]


def test_gpu_present_without_count_falls_back_to_capacity() -> None:
    devices = predict_devices(_node("n", {"nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "2"}))
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert predict_devices(_node("n", {}, {"nvidia.com/gpu.shared": "8"})) == ()


def test_node_devices_picks_gpu_nodes_and_the_newest_generation() -> None:
    builder = StateBuilder(SourceInfo(kind="snapshot", location="test"))
    builder.add(_node("labelled", GFD, {"cpu": "4"}))
    builder.add(_node("cpu", {}, {"cpu": "4"}))
    builder.add(_node("dp-only", {}, {"nvidia.com/gpu": "4"}))
    builder.add(_node("dra", {}, {}))
    builder.add(_node("dra-empty", {}, {}))
    builder.add(_node("other-driver", {}, {}))
    device = {"name": "gpu-7", "attributes": {"type": {"string": "gpu"}}, "capacity": {"memory": {"value": "40Gi"}}}
    builder.add(resource_slice("dra", 1, [{"name": "old"}]))
    builder.add(resource_slice("dra", 2, [device]))
    builder.add(resource_slice("dra-empty", 1, []))
    builder.add(resource_slice("other-driver", 3, [{"name": "x"}], driver="other.example.com"))
    devices = node_devices(builder.state)
    assert set(devices) == {"labelled", "dp-only", "dra", "dra-empty"}
    assert devices["dra"] == NodeDevices("dra", "published", (device,))
    assert devices["dra-empty"] == NodeDevices("dra-empty", "published", ())
    assert devices["dp-only"].source == "predicted" and len(devices["dp-only"].devices) == 4
    assert len(devices["labelled"].devices) == 8


def test_prediction_is_reproducible() -> None:
    node = _node("n", GFD, {})
    assert predict_devices(node) == predict_devices(node)
    uuids = {d["attributes"]["uuid"]["string"] for d in predict_devices(node) + predict_devices(_node("m", GFD, {}))}
    assert len(uuids) == 16


def test_helpers() -> None:
    assert product_name("NVIDIA-H100-80GB-HBM3") == "NVIDIA H100 80GB HBM3"
    assert product_name("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb") == "NVIDIA H100 80GB HBM3"
    assert product_name("NVIDIA-A100-SXM4-80GB-SHARED") == "NVIDIA A100-SXM4-80GB"
    assert product_name("NVIDIA-RTX-PRO-6000") == "NVIDIA RTX PRO 6000"
    assert semver("535.104.05") == "535.104.5"
    assert semver("12.4") == "12.4.0"
    assert mig_device_name(0, "1g.12gb", 19, 0) == "gpu-0-mig-1g12gb-19-0"
    assert DNS_LABEL.match(mig_device_name(1, "1g.10gb+me", 20, 3))


def test_the_core_does_not_import_the_simulator() -> None:
    code = "import sys, dra_migrate.dra.devices; sys.exit(any(m.startswith('dra_migrate.sim') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def _mixed(product: str, gpus: int, counts: dict[str, int], **extra: str) -> dict[str, Any]:
    labels = {
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.product": product,
        "nvidia.com/mig.strategy": "mixed",
        **{f"nvidia.com/mig-{p}.count": str(n) for p, n in counts.items()},
        **extra,
    }
    return {"metadata": {"name": "n", "labels": labels}, "status": {"capacity": {}}}


def test_every_existing_mig_device_is_counted_whatever_the_layout() -> None:
    # One GPU as 7g.40gb and one as 7 x 1g.5gb: the driver publishes 8 (round-robin dealing gave 7).
    devices = predict_devices(_mixed("NVIDIA-A100-SXM4-40GB", 2, {"7g.40gb": 1, "1g.5gb": 7}))
    assert len(devices) == 8
    parents = Counter(d["attributes"]["parentUUID"]["string"] for d in devices)
    assert sorted(parents.values()) == [1, 7]
    # Labels our geometry cannot fit (more than a GPU holds) are still counted, with unique names.
    odd = predict_devices(_mixed("NVIDIA-A100-SXM4-40GB", 1, {"4g.20gb": 1, "3g.20gb": 1, "1g.5gb": 2}))
    assert len(odd) == 4 and len({d["name"] for d in odd}) == 4
    # A uniform layout comes back exactly as before: all-3g.40gb on 8 GPUs.
    uniform = predict_devices(_mixed("NVIDIA-A100-SXM4-80GB", 8, {"3g.40gb": 16}))
    assert Counter(d["name"].split("-mig-")[0] for d in uniform) == {f"gpu-{i}": 2 for i in range(8)}


def test_fixture_mixed_mig_prediction_agrees_with_the_published_slices() -> None:
    published = node_devices(_load("upstream-stack.yaml"))
    predicted = node_devices(_load("upstream-ready.yaml"))
    node = next(n for n in published if "a100mix" in n)
    assert published[node].source == "published" and predicted[node].source == "predicted"

    def profiles(nd: NodeDevices) -> Counter[str]:
        return Counter(d["attributes"]["profile"]["string"] for d in nd.devices)

    assert profiles(published[node]) == profiles(predicted[node]) == Counter({"1g.5gb": 7, "7g.40gb": 1})


@pytest.mark.parametrize(
    ("product", "profile", "gi", "memory"),
    [
        # go-nvml v0.13.4-1 pkg/nvml/mock/gpus/h200.go and b200.go (MemorySizeMB).
        ("NVIDIA-H200", "1g.18gb", 19, "18432Mi"),
        ("NVIDIA-H200-141GB-HBM3e", "3g.71gb", 9, "72704Mi"),
        ("NVIDIA-H200", "1g.35gb", 15, "35840Mi"),
        ("NVIDIA-B200", "1g.23gb", 19, "23552Mi"),
        ("NVIDIA-B200", "7g.180gb", 0, "184320Mi"),
        ("NVIDIA-B200", "1g.23gb+me", 20, "23552Mi"),
    ],
)
def test_h200_and_b200_profile_tables(product: str, profile: str, gi: int, memory: str) -> None:
    from dra_migrate.dra.devices import resource_profile

    devices = predict_devices(_mixed(product, 1, {resource_profile(profile): 1}))
    assert len(devices) == 1
    d = devices[0]
    assert d["attributes"]["profile"]["string"] == profile
    assert d["name"].split("-")[-2] == str(gi)
    assert d["capacity"]["memory"]["value"] == memory
    assert "multiprocessors" in d["capacity"]  # always published, 0 included


def test_blackwell_profile_names_are_kept() -> None:
    counts = {"1g.23gb.me.all": 1, "1g.23gb-me": 2, "1g.23gb.gfx": 1}
    devices = predict_devices(_mixed("NVIDIA-B200", 1, counts))
    assert sorted(d["attributes"]["profile"]["string"] for d in devices) == [
        "1g.23gb+gfx",
        "1g.23gb+me.all",
        "1g.23gb-me",
        "1g.23gb-me",
    ]
    assert all(DNS_LABEL.match(d["name"]) for d in devices)
    assert mig_device_name(0, "1g.23gb+me.all", 19, 2) == "gpu-0-mig-1g23gb-meall-19-2"
    assert mig_device_name(0, "1g.23gb-me", 19, 2) == "gpu-0-mig-1g23gb-me-19-2"


def test_blackwell_resource_names_get_distinct_classes() -> None:
    from dra_migrate.dra.deviceclasses import class_name_for, mig_profile_of

    assert mig_profile_of("nvidia.com/mig-1g.23gb.me.all") == "1g.23gb+me.all"
    assert mig_profile_of("nvidia.com/mig-1g.23gb-me") == "1g.23gb-me"
    assert mig_profile_of("nvidia.com/mig-1g.23gb.gfx") == "1g.23gb+gfx"
    names = {class_name_for(f"nvidia.com/mig-1g.23gb{s}") for s in ("", ".me", "-me", ".me.all", ".gfx")}
    assert len(names) == 5


def test_published_devices_follow_the_dra_driver_parameter() -> None:
    s = resource_slice("a", 1, [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}], driver="gpu.amd.com")
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "a", "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2"}},
        "status": {"capacity": {"nvidia.com/gpu": "2"}},
    }
    b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
    b.add_all([node, s])
    assert node_devices(b.state)["a"].source == "predicted"
    amd = node_devices(b.state, "gpu.amd.com")["a"]
    assert amd.source == "published" and [d["name"] for d in amd.devices] == ["gpu-0"]
