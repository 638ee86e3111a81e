"""Predicted devices once per node shape (`devices._Predictor`) and placeholder uuids without UUID objects:
equal to the per-node prediction as it was written before (kept here as the oracle) on random nodes, MIG
layouts and MIG Manager configs, and on every fixture."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.dra import devices as dev
from dra_migrate.dra.devices import (
    LABEL_COUNT,
    DeviceSpec,
    full_gpus_from_capacity,
    gpu_layout,
    label_int,
    mig_device_name,
    node_devices,
)
from dra_migrate.dra.layout import unlabelled_gpus
from dra_migrate.inventory.migparted import mig_parted_configs, node_gpu_mig
from dra_migrate.inventory.operator import node_config_replicas

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "clusters").rglob("*.yaml"))


# --- the oracle: the per-node prediction as it was (uuid.uuid5 per device, everything per node) -----------


def _old_devices_from_labels(node: str, labels: Any, layout: Any, first: int = 0) -> tuple[DeviceSpec, ...]:
    common = dev._common_attributes(labels)
    memory_mib = label_int(labels.get(dev.LABEL_MEMORY, 0))
    out: list[DeviceSpec] = []
    for i, gpu in enumerate(layout, first):
        gpu_uuid = "GPU-" + str(uuid.uuid5(dev._UUID_NAMESPACE, f"{node}/gpu/{i}"))
        pci = dev._pci_attributes(i)
        if gpu is None:
            attrs = {"type": dev._s("gpu"), "uuid": dev._s(gpu_uuid), **common, **pci}
            capacity = {"memory": {"value": f"{memory_mib}Mi"}} if memory_mib else {}
            out.append(DeviceSpec(f"gpu-{i}", attrs, capacity))
            continue
        for inst in gpu:
            geo = inst.geometry
            name = mig_device_name(i, inst.profile, geo.gi_profile_id, inst.start)
            mig = dev._mig_device(i, inst, common, pci)
            mig.attributes["uuid"] = dev._s("MIG-" + str(uuid.uuid5(dev._UUID_NAMESPACE, f"{node}/gpu/{i}/{name}")))
            mig.attributes["parentUUID"] = dev._s(gpu_uuid)
            out.append(mig)
    return tuple(out)


def _old_predict(node: dict[str, Any], mig_configs: Any) -> tuple[dict[str, Any], ...]:
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    capacity = (node.get("status") or {}).get("capacity") or {}
    if LABEL_COUNT in labels:
        per_gpu = node_gpu_mig(labels, mig_configs, dev.mixed_counts(labels)) if mig_configs else None
        layout = gpu_layout(labels, full_gpus=full_gpus_from_capacity(labels, capacity), per_gpu_mig=per_gpu)
        # GPUs of a product the labels do not name (added with `unlabelled_gpus`), numbered after the layout's.
        other = (None,) * unlabelled_gpus(labels, capacity)
        devices = _old_devices_from_labels(name, labels, layout) + _old_devices_from_labels(
            name, {}, other, len(layout)
        )
        return tuple(d.to_json() for d in devices)
    whole = (None,) * label_int(capacity.get("nvidia.com/gpu", 0))
    return tuple(d.to_json() for d in _old_devices_from_labels(name, {}, whole))


# --- random nodes -------------------------------------------------------------------------------------

CONFIGS = yaml.safe_load("""
mixed-a:
  - {devices: all, mig-enabled: false}
  - {devices: [0], mig-enabled: true, mig-devices: {"7g.40gb": 1}}
  - {devices: [1], mig-enabled: true, mig-devices: {"1g.5gb": 2, "3g.20gb": 1}}
all-1g:
  - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}
""")
PRODUCTS = [
    "NVIDIA-A100-SXM4-40GB",
    "NVIDIA-H100-80GB-HBM3",
    "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
    "Tesla-T4",
    "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
    "NVIDIA-B200",
    "",
    "weird product",
]
gfd = st.fixed_dictionaries(
    {},
    optional={
        "nvidia.com/gpu.count": st.sampled_from(["0", "1", "2", "4", "8", "x"]),
        "nvidia.com/gpu.product": st.sampled_from(PRODUCTS),
        "nvidia.com/gpu.memory": st.sampled_from(["40960", "81559", "0", "n"]),
        "nvidia.com/gpu.family": st.sampled_from(["ampere", "hopper", "turing", "other"]),
        "nvidia.com/gpu.compute.major": st.sampled_from(["8", "9", "x"]),
        "nvidia.com/gpu.compute.minor": st.sampled_from(["0", "6"]),
        "nvidia.com/cuda.driver-version.full": st.sampled_from(["535.104.05", "550.54.15"]),
        "nvidia.com/cuda.runtime-version.full": st.sampled_from(["12.2", "12.8"]),
        "nvidia.com/gpu.replicas": st.sampled_from(["1", "4"]),
        "nvidia.com/mig.strategy": st.sampled_from(["single", "mixed", "none"]),
        "nvidia.com/mig-1g.5gb.count": st.sampled_from(["0", "2", "7"]),
        "nvidia.com/mig-3g.20gb.count": st.sampled_from(["1"]),
        "nvidia.com/mig-7g.40gb.count": st.sampled_from(["1"]),
        "nvidia.com/mig-1g.10gb.count": st.sampled_from(["7", "14"]),
        "nvidia.com/mig.config": st.sampled_from(["mixed-a", "all-1g", "none"]),
        "nvidia.com/mig.config.state": st.sampled_from(["success", "pending"]),
        "nvidia.com/gpu.present": st.just("true"),
    },
)
nodes = st.builds(
    lambda name, labels, other, capacity: {
        "metadata": {"name": name, "labels": {**labels, **other}},
        "status": {"capacity": capacity},
    },
    st.text(min_size=1, max_size=6),
    gfd,
    st.dictionaries(st.sampled_from(["kubernetes.io/hostname", "zone", "team"]), st.text(max_size=3), max_size=2),
    st.dictionaries(
        st.sampled_from(["nvidia.com/gpu", "nvidia.com/gpu.shared", "cpu"]),
        st.sampled_from(["0", "2", "8", "16", "x"]),
        max_size=2,
    ),
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(nodes, min_size=1, max_size=6), st.booleans())
def test_predictor_equals_the_old_per_node_prediction(fleet: list[dict[str, Any]], with_configs: bool) -> None:
    configs = CONFIGS if with_configs else {}
    predictor = dev._Predictor(configs)
    for node in fleet:
        assert predictor.predict(node)[0] == _old_predict(node, configs)
        assert dev.predict_devices(node, configs) == _old_predict(node, configs)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20), st.sampled_from(["gpu/0", "gpu/7", "gpu/3/gpu-3-mig-1g10gb-19-0", "gpu/1/x"]))
def test_placeholder_uuids_are_uuid5(node: str, seed: str) -> None:
    prefix = "MIG" if seed.count("/") > 1 else "GPU"
    assert dev._placeholder_uuid(node, seed) == f"{prefix}-{uuid.uuid5(dev._UUID_NAMESPACE, f'{node}/{seed}')}"


def test_every_fixture_predicts_as_before() -> None:
    for fixture in FIXTURES:
        state = load_snapshot(fixture)
        configs = mig_parted_configs(state)
        by_name = {n["metadata"]["name"]: n for n in state.of("Node")}
        # A node without GFD labels whose plugin shares its GPUs (GKE time-sharing: gke-managed.yaml) has its
        # advertised count over the replicas, where the old prediction counted every shared slot a GPU.
        shared = node_config_replicas(state)
        for name, nd in node_devices(state).items():
            if nd.source != "predicted":
                continue
            old = _old_predict(by_name[name], configs)
            if name in shared and LABEL_COUNT not in (by_name[name]["metadata"].get("labels") or {}):
                assert nd.count == len(old) // max(shared[name].values()) < len(old), (fixture.name, name)
            else:
                assert nd.devices == old, (fixture.name, name)


def test_a_pool_is_predicted_once() -> None:
    """Counted: nodes alike but for their name and non-GPU labels are laid out once, whatever their number."""
    calls = []
    for size in (10, 100):
        fleet = [
            {
                "metadata": {
                    "name": f"n{i}",
                    "labels": {
                        "nvidia.com/gpu.count": "8",
                        "kubernetes.io/hostname": f"n{i}",
                        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    },
                },
                "status": {"capacity": {"nvidia.com/gpu": "8"}},
            }
            for i in range(size)
        ]
        predictor = dev._Predictor({})
        with mock.patch.object(dev, "gpu_layout", wraps=dev.gpu_layout) as spy:
            out = [predictor.predict(n)[0] for n in fleet]
        calls.append(spy.call_count)
        assert len({d["attributes"]["uuid"]["string"] for devices in out for d in devices}) == 8 * size
    assert calls == [1, 1]


# --- class matching shared by the nodes of a shape ------------------------------------------------------

SELECTORS = [
    'device.attributes["gpu.nvidia.com"].type == "gpu"',
    'device.attributes["gpu.nvidia.com"].uuid.startsWith("GPU-a")',
    'device.attributes["gpu.nvidia.com"].parentUUID.endsWith("0")',
    'device.attributes["gpu.nvidia.com"].productName.contains("H100")',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) > 0',
    'device.attributes["gpu.nvidia.com"].exists(k, k == "uuid")',
    '"uuid" in device.attributes["gpu.nvidia.com"] && device.attributes["gpu.nvidia.com"].type == "mig"',
    'device.attributes["gpu.nvidia.com"].uuid > "M"',
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(nodes, min_size=1, max_size=5),
    st.lists(st.sampled_from(SELECTORS), min_size=1, max_size=2, unique=True),
)
def test_matching_shared_by_a_shape_equals_matching_each_node(fleet: list[dict[str, Any]], exprs: list[str]) -> None:
    """Nodes of one shape differ in their uuids: a class that reads one (plainly, or through a macro) is
    matched per node; one that reads neither is matched once for all, with the same answer."""
    from dra_migrate.cluster.state import SourceInfo, StateBuilder
    from dra_migrate.dra.capacity import ClassSelectors, matching_devices
    from dra_migrate.dra.cel import compile_selector, matches_all

    fleet = [*fleet, *fleet]  # pairs of the same shape
    builder = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
    for i, n in enumerate(fleet):
        labels = {**n["metadata"]["labels"], "nvidia.com/gpu.count": "2"}
        capacity = {k: v for k, v in n["status"]["capacity"].items() if v.isdigit()}  # what a snapshot may hold
        builder.add(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i}", "labels": labels},
                "spec": {},
                "status": {"capacity": capacity},
            }
        )
    state = builder.state
    cls = ClassSelectors("c", None, tuple(compile_selector(e) for e in exprs), proposed=True)
    for nd in node_devices(state).values():
        expected = tuple(str(d["name"]) for d in nd.devices if matches_all(cls.selectors, d, dev.NVIDIA_DRIVER))
        assert matching_devices(state, cls, nd) == expected
