"""The devices the NVIDIA DRA driver (`gpu.nvidia.com`) publishes for a node, or would publish.

A node that already has `gpu.nvidia.com` ResourceSlices is described by them (the highest generation of
its pool). A node without them is predicted from its GPU Feature Discovery labels and capacity the way
the driver names and describes devices (nvidia-facts.md §3, §4.3): a full GPU is `gpu-<i>`, a MIG-enabled
GPU is its MIG devices only, with the attributes and capacities of the driver's `deviceinfo.go`.

DRA has no replicas: a GPU the device plugin time-slices or shares through MPS is still one device, so
predictions count physical GPUs (`nvidia.com/gpu.count`, `nvidia.com/mig-<profile>.count`) and never
`nvidia.com/gpu` capacity, which is multiplied by the replicas.

What a prediction cannot know, and so leaves out or fills with a stable placeholder (a selector on it
cannot be judged before the driver runs on the node):
  * `uuid`, `parentUUID`: NVML's, placeholders here;
  * device names: the driver names a GPU by its NVML *minor number* (`gpu-<minor>`, dra-driver-nvidia-gpu
    `deviceinfo.go`), which no GFD label carries; we number GPUs 0..count-1, which matches when minors
    are contiguous from 0 (the usual case) and is only a name otherwise (counts are unaffected);
  * `resource.kubernetes.io/pciBusID` / `pcieRoot`: placeholders (the real ones come from NVML and sysfs);
  * `resource.kubernetes.io/numaNode` (published by v0.5.0-dev+, not v0.4.1, and only when known): no
    label gives a GPU's NUMA node, so it is never predicted; published slices keep theirs;
  * `addressingMode` (coherent Grace systems only) and the FabricManager partition attributes (gated):
    never predicted;
  * MIG placements: from GFD's per-profile counts, every existing MIG device is counted (the driver
    publishes all of them), but which GPU holds which instance and at which start is our packing;
  * DynamicMIG (full GPUs plus every possible placement, with counters): not predicted; the checks refuse
    an exact count for such a node (`dynamic-mig-unpredicted`).

Pure data and pure functions; the simulator (`dra_migrate.sim.spec`) publishes the same devices.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dra_migrate.cluster.state import ClusterState

NVIDIA_DRIVER = "gpu.nvidia.com"

LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_MEMORY = "nvidia.com/gpu.memory"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"

# Placeholder UUIDs are derived from this fixed namespace, so a prediction is reproducible.
_UUID_NAMESPACE = uuid.UUID("6f1c7d3e-2b0a-4c55-9e0f-5d8a1b2c3d4e")


@dataclass(frozen=True)
class DeviceSpec:
    """One device of a ResourceSlice, in the slice's own JSON shape.

    attributes: {"type": {"string": "gpu"}, ...}; capacity: {"memory": {"value": "80Gi"}, ...}.
    """

    name: str
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    capacity: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.attributes:
            out["attributes"] = {k: dict(v) for k, v in self.attributes.items()}
        if self.capacity:
            out["capacity"] = {k: dict(v) for k, v in self.capacity.items()}
        return out

    @classmethod
    def from_json(cls, device: Mapping[str, Any]) -> DeviceSpec:
        # Gated fields (consumesCounters, taints, bindingConditions...) are dropped: the simulated
        # plugin publishes plain devices only.
        return cls(
            name=str(device.get("name", "")),
            attributes={str(k): dict(v) for k, v in (device.get("attributes") or {}).items()},
            capacity={str(k): dict(v) for k, v in (device.get("capacity") or {}).items()},
        )


# ---------------------------------------------------------------------------------------------------
# The core API: what each GPU node has, or will have, as DRA devices


@dataclass(frozen=True)
class NodeDevices:
    """A node's gpu.nvidia.com devices. Not hashable (the devices are dicts); compare with ==."""

    node: str
    # "published": the node's gpu.nvidia.com ResourceSlices (highest pool generation), as they are;
    # "predicted": derived from its labels and capacity (`predict_devices`).
    source: str
    # Each exactly as in a ResourceSlice's spec.devices[]: {"name", "attributes": {k: {"string"|"int"|
    # "bool"|"version": v}}, "capacity": {k: {"value": "80Gi"}}}. Published ones are the state's own
    # dicts: read them, do not change them.
    devices: tuple[dict[str, Any], ...]


def node_devices(state: ClusterState, driver: str = NVIDIA_DRIVER) -> dict[str, NodeDevices]:
    """Every GPU node (nvidia.com/* capacity, GPU labels, or `driver` slices) -> its devices: the
    published ones when it has slices of `driver` (`--dra-driver`), else the prediction of what the NVIDIA
    driver would publish. Computed once per state and driver."""
    return state.memo(f"dra.node_devices/{driver}", lambda: _node_devices(state, driver))


def _node_devices(state: ClusterState, driver: str) -> dict[str, NodeDevices]:
    out: dict[str, NodeDevices] = {}
    for node, slices in gpu_nodes(state, driver):
        name = str((node.get("metadata") or {}).get("name", ""))
        published = published_devices(name, slices, driver)
        if published is not None:
            out[name] = NodeDevices(name, "published", published)
        else:
            out[name] = NodeDevices(name, "predicted", predict_devices(node))
    return out


def predict_devices(node: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The devices the NVIDIA DRA driver would publish for this Node object, from its GFD labels and
    capacity: product name, memory, architecture, compute capability, driver versions, and under MIG the
    instances per profile (`nvidia.com/mig-<profile>.count` under the mixed strategy, `gpu.count` of the
    `-MIG-<profile>` product under single). Time-slicing or MPS replicas do not multiply devices.

    The `uuid`, `parentUUID` and PCI attributes are stable placeholders: the real values exist only once
    the driver runs on the node, so selectors on them cannot be predicted.

    A node with no GFD labels (no `nvidia.com/gpu.count`, e.g. a standalone device plugin without GPU
    Feature Discovery) is predicted as `nvidia.com/gpu` capacity full GPUs with only what is known of them:
    `type`, the placeholders, and no product name, memory, architecture or versions. Its shared
    (`gpu.shared`, replicas unknown) or MIG resources cannot be predicted without labels and give nothing.
    """
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    capacity = (node.get("status") or {}).get("capacity") or {}
    if LABEL_COUNT in labels:
        layout = gpu_layout(labels, full_gpus=full_gpus_from_capacity(labels, capacity))
        return tuple(d.to_json() for d in devices_from_labels(name, labels, layout))
    whole = (None,) * label_int(capacity.get("nvidia.com/gpu", 0))
    return tuple(d.to_json() for d in devices_from_labels(name, {}, whole))


def gpu_nodes(
    state: ClusterState, driver: str = NVIDIA_DRIVER
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every GPU node of a state (nvidia.com/* capacity, GPU labels, or gpu.nvidia.com slices), in the
    state's order, with its gpu.nvidia.com ResourceSlices."""
    slices_by_node: dict[str, list[dict[str, Any]]] = {}
    for s in state.of("resource.k8s.io/ResourceSlice"):
        spec = s.get("spec") or {}
        if spec.get("driver") == driver and spec.get("nodeName"):
            slices_by_node.setdefault(str(spec["nodeName"]), []).append(s)
    for node in state.of("Node"):
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels = meta.get("labels") or {}
        capacity = (node.get("status") or {}).get("capacity") or {}
        if any(str(k).startswith("nvidia.com/") for k in capacity) or has_gpu_labels(labels) or name in slices_by_node:
            yield node, slices_by_node.get(name, [])


def published_devices(
    node: str, slices: Sequence[Mapping[str, Any]], driver: str = NVIDIA_DRIVER
) -> tuple[dict[str, Any], ...] | None:
    """The node's gpu.nvidia.com devices in `slices`, as they are, or None when it has no such slice.

    Only each pool's highest generation counts (resource/v1 ResourcePool: consumers ignore older ones);
    the driver's pool is named after the node. Slices are taken in name order.
    """
    mine = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if spec.get("driver") == driver and node in (spec.get("nodeName"), pool.get("name")):
            mine.append(s)
    if not mine:
        return None
    newest: dict[str, int] = {}
    for s in mine:
        pool = (s.get("spec") or {}).get("pool") or {}
        key = str(pool.get("name", ""))
        newest[key] = max(newest.get(key, 0), label_int(pool.get("generation", 0)))
    devices: list[dict[str, Any]] = []
    for s in sorted(mine, key=lambda s: str((s.get("metadata") or {}).get("name", ""))):
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        if label_int(pool.get("generation", 0)) == newest[str(pool.get("name", ""))]:
            devices.extend(d for d in spec.get("devices") or [] if isinstance(d, dict))
    return tuple(devices)


# ---------------------------------------------------------------------------------------------------
# GPU models


@dataclass(frozen=True)
class Product:
    name: str  # as NVML reports it: the DRA driver's productName
    family: str  # GFD's gpu.family
    compute: tuple[int, int]
    mig_table: str | None = None  # key of _MIG_TABLES


# GFD writes the NVML name with spaces turned into hyphens (nvidia-facts.md §3), which loses the
# hyphens NVML had; the products we know are mapped back exactly, the rest get spaces.
_PRODUCTS: dict[str, Product] = {
    "NVIDIA-H100-80GB-HBM3": Product("NVIDIA H100 80GB HBM3", "hopper", (9, 0), "H100-80GB"),
    "NVIDIA-H100-PCIe": Product("NVIDIA H100 PCIe", "hopper", (9, 0), "H100-80GB"),
    "NVIDIA-H200": Product("NVIDIA H200", "hopper", (9, 0), "H200-141GB"),
    "NVIDIA-H200-141GB-HBM3e": Product("NVIDIA H200 141GB HBM3e", "hopper", (9, 0), "H200-141GB"),
    "NVIDIA-B200": Product("NVIDIA B200", "blackwell", (10, 0), "B200-180GB"),
    "NVIDIA-B200-180GB-HBM3e": Product("NVIDIA B200 180GB HBM3e", "blackwell", (10, 0), "B200-180GB"),
    "NVIDIA-GB200": Product("NVIDIA GB200", "blackwell", (10, 0)),
    "NVIDIA-A100-SXM4-80GB": Product("NVIDIA A100-SXM4-80GB", "ampere", (8, 0), "A100-80GB"),
    "NVIDIA-A100-80GB-PCIe": Product("NVIDIA A100 80GB PCIe", "ampere", (8, 0), "A100-80GB"),
    "NVIDIA-A100-SXM4-40GB": Product("NVIDIA A100-SXM4-40GB", "ampere", (8, 0), "A100-40GB"),
    "NVIDIA-A100-PCIE-40GB": Product("NVIDIA A100-PCIE-40GB", "ampere", (8, 0), "A100-40GB"),
    "NVIDIA-A10": Product("NVIDIA A10", "ampere", (8, 6)),
    "NVIDIA-A10G": Product("NVIDIA A10G", "ampere", (8, 6)),
    "NVIDIA-L4": Product("NVIDIA L4", "ada-lovelace", (8, 9)),
    "Tesla-T4": Product("Tesla T4", "turing", (7, 5)),
}
FAMILY_COMPUTE = {
    "pascal": (6, 0),
    "volta": (7, 0),
    "turing": (7, 5),
    "ampere": (8, 0),
    "ada-lovelace": (8, 9),
    "hopper": (9, 0),
    "blackwell": (10, 0),
}


def _base_product(gfd_product: str) -> str:
    """GFD's product label without the -SHARED and -MIG-<profile> suffixes it may append."""
    p = gfd_product.removesuffix("-SHARED")
    return p.split("-MIG-", 1)[0]


def known_product(gfd_product: str) -> Product | None:
    """What we know of a GFD product label (suffixes ignored), or None."""
    return _PRODUCTS.get(_base_product(gfd_product))


def product_name(gfd_product: str) -> str:
    """`NVIDIA-H100-80GB-HBM3` -> `NVIDIA H100 80GB HBM3` (the DRA driver's productName)."""
    base = _base_product(gfd_product)
    known = _PRODUCTS.get(base)
    return known.name if known else base.replace("-", " ")


def _architecture(family: str) -> str:
    """GFD's family (`ada-lovelace`) as the DRA driver's architecture attribute (`Ada Lovelace`)."""
    return " ".join(w.capitalize() for w in family.split("-"))


# ---------------------------------------------------------------------------------------------------
# MIG profiles


@dataclass(frozen=True)
class MigProfile:
    gi_profile_id: int  # NVML GPU-instance profile ID: the second-to-last part of a DRA MIG device name
    size: int  # memory slices (of 8) it occupies
    starts: tuple[int, ...]  # valid placement starts
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0


_ALL_1G = (0, 1, 2, 3, 4, 5, 6)
_EVEN = (0, 2, 4, 6)

# From NVIDIA's MIG User Guide, "Supported MIG Profiles" and the `nvidia-smi mig -lgip` listings in
# "Getting Started with MIG" (docs.nvidia.com/datacenter/tesla/mig-user-guide/). Memory is the listed GiB
# times 1024; placements are in memory slices of 8. Names, IDs and sizes are exact; memory, SMs and
# engines are as close as the guide's rounded figures allow, and GFD's labels, where a node has them, win.
_MIG_TABLES: dict[str, dict[str, MigProfile]] = {
    "A100-40GB": {
        "1g.5gb": MigProfile(19, 1, _ALL_1G, 4864, 14, 1, 0),
        "1g.5gb+me": MigProfile(20, 1, _ALL_1G, 4864, 14, 1, 1, 0, 1, 1),
        "1g.10gb": MigProfile(15, 2, _EVEN, 9856, 14, 1, 1),
        "2g.10gb": MigProfile(14, 2, (0, 2, 4), 9856, 28, 2, 1),
        "3g.20gb": MigProfile(9, 4, (0, 4), 19968, 42, 3, 2),
        "4g.20gb": MigProfile(5, 4, (0,), 19968, 56, 4, 2),
        "7g.40gb": MigProfile(0, 8, (0,), 40320, 98, 7, 5, 0, 1, 1),
    },
    "A100-80GB": {
        "1g.10gb": MigProfile(19, 1, _ALL_1G, 9728, 14, 1, 0),
        "1g.10gb+me": MigProfile(20, 1, _ALL_1G, 9728, 14, 1, 1, 0, 1, 1),
        "1g.20gb": MigProfile(15, 2, _EVEN, 19968, 14, 1, 1),
        "2g.20gb": MigProfile(14, 2, (0, 2, 4), 19968, 28, 2, 1),
        "3g.40gb": MigProfile(9, 4, (0, 4), 40192, 42, 3, 2),
        "4g.40gb": MigProfile(5, 4, (0,), 40192, 56, 4, 2),
        "7g.80gb": MigProfile(0, 8, (0,), 80640, 98, 7, 5, 0, 1, 1),
    },
    "H100-80GB": {
        "1g.10gb": MigProfile(19, 1, _ALL_1G, 9984, 16, 1, 1, 0, 1, 0),
        "1g.10gb+me": MigProfile(20, 1, _ALL_1G, 9984, 16, 1, 1, 0, 1, 1),
        "1g.20gb": MigProfile(15, 2, _EVEN, 20096, 26, 1, 1, 0, 1, 0),
        "2g.20gb": MigProfile(14, 2, (0, 2, 4), 20096, 32, 2, 2, 0, 2, 0),
        "3g.40gb": MigProfile(9, 4, (0, 4), 40448, 60, 3, 3, 0, 3, 0),
        "4g.40gb": MigProfile(5, 4, (0,), 40448, 64, 4, 4, 0, 4, 0),
        "7g.80gb": MigProfile(0, 8, (0,), 81152, 132, 8, 7, 0, 7, 1),
    },
}

# H200 and B200: memory (MemorySizeMB, in MiB), multiprocessors and engines of each GPU-instance profile
# from NVIDIA/go-nvml v0.13.4-1 pkg/nvml/mock/gpus/h200.go (H200_SXM5_141GB, used by mock/dgxh200) and
# b200.go (B200_SXM5_180GB, used by mock/dgxb200). The mocks list profiles by NVML enum
# (GPU_INSTANCE_PROFILE_1_SLICE, _1_SLICE_REV1 = +me, _1_SLICE_REV2 = double memory, ...) and do not give
# the profile IDs NVML returns nor memory-slice sizes that match the hardware (their 3g/7g placements have
# size 3/7); the IDs (19, 20, 15, 14, 9, 5, 0) and 8-slice geometry are Hopper's, as in the table above.
# GB200: no upstream table was found (go-nvml has no GB200 mock; NVIDIA/k8s-test-infra
# pkg/gpu/mocknvml/configs/mock-nvml-config-gb200.yaml gives `mig.max_gpu_instances: 7` only), so its
# profiles are derived from their names, with GFD's per-profile labels for memory and engines.
_MIG_TABLES["H200-141GB"] = {
    "1g.18gb": MigProfile(19, 1, _ALL_1G, 18432, 16, 1, 1, 0, 0, 0),
    "1g.18gb+me": MigProfile(20, 1, _ALL_1G, 18432, 16, 1, 1, 0, 1, 1),
    "1g.35gb": MigProfile(15, 2, _EVEN, 35840, 16, 1, 1, 0, 0, 0),
    "2g.35gb": MigProfile(14, 2, (0, 2, 4), 35840, 32, 2, 1, 0, 0, 0),
    "3g.71gb": MigProfile(9, 4, (0, 4), 72704, 48, 3, 2, 0, 0, 0),
    "4g.71gb": MigProfile(5, 4, (0,), 72704, 64, 4, 2, 0, 0, 0),
    "7g.141gb": MigProfile(0, 8, (0,), 144384, 112, 7, 5, 0, 0, 0),
}
_MIG_TABLES["B200-180GB"] = {
    "1g.23gb": MigProfile(19, 1, _ALL_1G, 23552, 18, 1, 1, 0, 0, 0),
    "1g.23gb+me": MigProfile(20, 1, _ALL_1G, 23552, 18, 1, 1, 1, 1, 1),
    "1g.45gb": MigProfile(15, 2, _EVEN, 46080, 18, 1, 1, 0, 0, 0),
    "2g.45gb": MigProfile(14, 2, (0, 2, 4), 46080, 36, 2, 2, 1, 1, 1),
    "3g.90gb": MigProfile(9, 4, (0, 4), 92160, 54, 3, 3, 2, 2, 2),
    "4g.90gb": MigProfile(5, 4, (0,), 92160, 72, 4, 4, 2, 2, 2),
    "7g.180gb": MigProfile(0, 8, (0,), 184320, 126, 7, 7, 4, 4, 4),
}

# For profiles not in a table: what the compute-slice count implies (the same on A100 and H100).
_GI_ID_BY_COMPUTE = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}
_SIZE_BY_COMPUTE = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
# Profile names as go-nvlib writes them: <c>g.<m>gb plus an attribute suffix: `+me` (one media-extension
# set), and on Blackwell `+me.all`, `-me` (no media engines) and `+gfx` (graphics)
# (NVIDIA/go-nvlib pkg/nvlib/device/mig_profile.go attribute names; MIG user guide, Blackwell profiles).
_PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb(\+me\.all|\+me|-me|\+gfx)?$")
# The device plugin and GFD write `+` as `.` in resource and label names (`1g.23gb.me.all`).
_RESOURCE_SUFFIXES = ((".me.all", "+me.all"), (".me", "+me"), (".gfx", "+gfx"))


def _mig_table(labels: Mapping[str, str]) -> dict[str, MigProfile]:
    base = _base_product(labels.get(LABEL_PRODUCT, ""))
    known = _PRODUCTS.get(base)
    if known and known.mig_table:
        return _MIG_TABLES[known.mig_table]
    if "A100" in base:
        return _MIG_TABLES["A100-80GB" if "80GB" in base else "A100-40GB"]
    if "H100" in base:
        return _MIG_TABLES["H100-80GB"]
    if "H200" in base:
        return _MIG_TABLES["H200-141GB"]
    if "B200" in base and "GB200" not in base:
        return _MIG_TABLES["B200-180GB"]
    return {}


def mig_capable(gfd_product: str) -> bool:
    """Whether we know the product's MIG profiles."""
    return bool(_mig_table({LABEL_PRODUCT: gfd_product}))


def _single_profile(gfd_product: str) -> str | None:
    """The MIG profile GFD appends to the product under the single strategy (`...-MIG-1g.10gb[-SHARED]`)."""
    p = gfd_product.removesuffix("-SHARED")
    return p.split("-MIG-", 1)[1] if "-MIG-" in p else None


def mig_profile(profile: str, labels: Mapping[str, str]) -> MigProfile:
    """The profile's geometry: from the table, else from its name; GFD's labels for the profile, where the
    node has them, give its memory, SMs and engines (`nvidia.com/mig-<p>.*` under the mixed strategy,
    `nvidia.com/gpu.*` under single)."""
    geo = _mig_table(labels).get(profile)
    if geo is None:
        m = _PROFILE_RE.match(profile)
        if not m:
            raise ValueError(f"not a MIG profile name: {profile!r}")
        compute, mem_gb, media = int(m.group(1)), int(m.group(2)), m.group(3)
        # Only `+me` has a known ID of its own (20); the Blackwell variants' IDs are not in any source we
        # read, so they take the base profile's, and their names are a prediction.
        gi = 20 if media == "+me" and compute == 1 else _GI_ID_BY_COMPUTE.get(compute, 0)
        size = _SIZE_BY_COMPUTE.get(compute, 8)
        starts = _ALL_1G if size == 1 else tuple(range(0, 8 - size + 1, size))
        geo = MigProfile(
            gi, size, starts, memory_mib=mem_gb * 1024, multiprocessors=0, copy_engines=compute, decoders=0
        )
    if _single_profile(labels.get(LABEL_PRODUCT, "")) == profile:
        prefix = "nvidia.com/gpu."
    else:
        prefix = f"nvidia.com/mig-{resource_profile(profile)}."

    def label(key: str, default: int) -> int:
        value = labels.get(prefix + key)
        return int(value) if value is not None and value.isdigit() else default

    return replace(
        geo,
        memory_mib=label("memory", geo.memory_mib),
        multiprocessors=label("multiprocessors", geo.multiprocessors),
        copy_engines=label("engines.copy", geo.copy_engines),
        decoders=label("engines.decoder", geo.decoders),
        encoders=label("engines.encoder", geo.encoders),
        jpeg_engines=label("engines.jpeg", geo.jpeg_engines),
        ofa_engines=label("engines.ofa", geo.ofa_engines),
    )


def resource_profile(profile: str) -> str:
    """The profile as the device plugin writes it in resource names and GFD in labels: `+` as `.`
    (nvidia-facts.md §2)."""
    return profile.replace("+", ".")


def _profile_from_resource(name: str) -> str:
    for written, profile_suffix in _RESOURCE_SUFFIXES:
        if name.endswith(written):
            return name[: -len(written)] + profile_suffix
    return name


def mig_device_name(parent_index: int, profile: str, gi_profile_id: int, start: int) -> str:
    """The DRA driver's canonical MIG device name: the profile without dots, lower-cased, anything
    outside [a-z0-9-] as `-` (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/mig.go, v0.4.1):
    `1g.10gb+me` -> `1g10gb-me`, `1g.23gb+me.all` -> `1g23gb-meall`, `1g.23gb-me` -> `1g23gb-me`."""
    p = re.sub(r"[^a-z0-9-]", "-", profile.replace(".", "").lower())
    return f"gpu-{parent_index}-mig-{p}-{gi_profile_id}-{start}"


# ---------------------------------------------------------------------------------------------------
# Layout: what each physical GPU of a node is (full, or a list of MIG instances)


@dataclass(frozen=True)
class MigInstance:
    profile: str
    start: int
    geometry: MigProfile


# One entry per physical GPU: None is a full GPU, a tuple is a MIG-enabled GPU's instances.
Layout = tuple[tuple[MigInstance, ...] | None, ...]


def mig_strategy(labels: Mapping[str, str]) -> str:
    """The MIG strategy in effect: `single` when GFD reports a `-MIG-<profile>` product, `mixed` when it
    reports per-profile counts, else `none`. The operator's default strategy label is `single` even where
    MIG is off: GFD then reports whole GPUs and a product without the suffix, which is `none` here."""
    if _single_profile(labels.get(LABEL_PRODUCT, "")) is not None:
        return "single"
    if labels.get(LABEL_MIG_STRATEGY) == "mixed" and _mixed_counts(labels):
        return "mixed"
    return "none"


def _mixed_counts(labels: Mapping[str, str]) -> dict[str, int]:
    """Profile -> instances on the node, from GFD's `nvidia.com/mig-<p>.count` labels."""
    out: dict[str, int] = {}
    for key, value in labels.items():
        if key.startswith("nvidia.com/mig-") and key.endswith(".count") and label_int(value) > 0:
            profile = _profile_from_resource(key[len("nvidia.com/mig-") : -len(".count")])
            if _PROFILE_RE.match(profile):
                out[profile] = label_int(value)
    return out


def has_gpu_labels(labels: Mapping[str, Any]) -> bool:
    return labels.get("nvidia.com/gpu.present") == "true" or LABEL_COUNT in labels


def full_gpus_from_capacity(labels: Mapping[str, str], capacity: Mapping[str, Any]) -> int | None:
    """Under the mixed strategy, the GPUs left whole, when the device plugin advertises them: its
    `nvidia.com/gpu` (or renamed `nvidia.com/gpu.shared`) capacity over the time-slicing replicas.
    None otherwise (unknown, or not needed)."""
    if mig_strategy(labels) != "mixed":
        return None
    advertised = label_int(capacity.get("nvidia.com/gpu", 0)) or label_int(capacity.get("nvidia.com/gpu.shared", 0))
    if advertised <= 0:
        return None
    return advertised // max(label_int(labels.get(LABEL_REPLICAS, 1)), 1)


def _place(instances: Sequence[tuple[str, MigProfile]]) -> tuple[MigInstance, ...] | None:
    """Place instances on one GPU; None when they do not fit.

    Largest first, each at the highest free valid start: this reproduces the placements nvidia-smi
    shows for the mig-parted presets (e.g. all-balanced: 1g@0, 1g@1, 2g@2, 3g@4).
    """
    used = [False] * 8
    placed: list[MigInstance] = []
    for profile, geo in sorted(instances, key=lambda pg: (-pg[1].size, pg[0])):
        for start in sorted(geo.starts, reverse=True):
            cells = range(start, start + geo.size)
            if start + geo.size <= 8 and not any(used[c] for c in cells):
                for c in cells:
                    used[c] = True
                placed.append(MigInstance(profile, start, geo))
                break
        else:
            return None
    return tuple(sorted(placed, key=lambda i: i.start))


def gpu_layout(labels: Mapping[str, str], *, full_gpus: int | None = None) -> Layout:
    """The node's GPUs as GFD's labels describe them.

    Mixed MIG: `full_gpus` GPUs (when known from capacity) stay whole; each profile's instances are
    dealt round-robin over the others, so a uniform layout (`all-3g.40gb`) comes back exactly. An
    instance that fits nowhere is left out. Single MIG: gpu.count is the number of MIG devices, all of
    the profile in gpu.product, packed onto as few GPUs as they fit.
    """
    strategy = mig_strategy(labels)
    count = label_int(labels.get(LABEL_COUNT, 0))
    profile = _single_profile(labels.get(LABEL_PRODUCT, ""))
    if strategy == "single" and profile is not None:
        try:
            geo = mig_profile(profile, labels)
        except ValueError:
            return ()  # a product suffix we cannot read: what the GPUs are is unknown
        per_gpu = len(_place_greedy(profile, geo))
        gpus = -(-count // per_gpu) if per_gpu else 0
        out: list[tuple[MigInstance, ...] | None] = []
        remaining = count
        for _ in range(gpus):
            n = min(per_gpu, remaining)
            remaining -= n
            out.append(_place([(profile, geo)] * n))
        return tuple(out)
    if strategy != "mixed":
        return (None,) * count
    mig_gpus = max(count - (full_gpus or 0), 0)
    if mig_gpus == 0:
        return (None,) * count
    wanted: list[list[tuple[str, MigProfile]]] = [[] for _ in range(mig_gpus)]
    for name, n in sorted(_mixed_counts(labels).items()):
        geo = mig_profile(name, labels)
        for j in range(n):
            wanted[j % mig_gpus].append((name, geo))
    # The driver publishes every existing MIG device (dra-driver-nvidia-gpu nvlib.go
    # GetPerGpuAllocatableDevices), so the count must be the sum of GFD's counts whatever the layout
    # across GPUs: what a GPU cannot hold goes to another that can (one GPU as 7g.40gb and one as
    # 7x1g.5gb publish 8), and what fits nowhere by our geometry is still counted (`_place_anyway`).
    placed_on: list[list[tuple[str, MigProfile]]] = [[] for _ in range(mig_gpus)]
    left: list[tuple[str, MigProfile]] = []
    for i, want in enumerate(wanted):
        for inst in sorted(want, key=lambda pg: (-pg[1].size, pg[0])):
            if _place([*placed_on[i], inst]) is not None:
                placed_on[i].append(inst)
            else:
                left.append(inst)
    for inst in sorted(left, key=lambda pg: (-pg[1].size, pg[0])):
        home = next((g for g in placed_on if _place([*g, inst]) is not None), None)
        if home is not None:
            home.append(inst)
        else:
            min(placed_on, key=len).append(inst)
    layout: list[tuple[MigInstance, ...] | None] = []
    for members in placed_on:
        placed = _place(members) or _place_anyway(members)
        layout.append(placed if placed else None)
    layout.extend([None] * (count - mig_gpus))
    return tuple(layout)


def _place_anyway(instances: Sequence[tuple[str, MigProfile]]) -> tuple[MigInstance, ...]:
    """Instances our geometry cannot fit on one GPU (labels from a layout we do not model): each at the
    first of its starts that no instance of the same profile took, so names stay unique."""
    taken: set[tuple[str, int]] = set()
    out: list[MigInstance] = []
    for profile, geo in instances:
        start = next((s for s in geo.starts if (profile, s) not in taken), None)
        if start is None:
            start = max((s for p, s in taken if p == profile), default=-1) + 1
        taken.add((profile, start))
        out.append(MigInstance(profile, start, geo))
    return tuple(sorted(out, key=lambda i: (i.start, i.profile)))


def _place_greedy(profile: str, geo: MigProfile) -> tuple[MigInstance, ...]:
    """As many instances of one profile as fit on a GPU."""
    best: tuple[MigInstance, ...] = ()
    for n in range(1, 9):
        placed = _place([(profile, geo)] * n)
        if placed is None:
            break
        best = placed
    return best


# ---------------------------------------------------------------------------------------------------
# Devices, attributes and capacities


def devices_from_labels(node: str, labels: Mapping[str, str], layout: Layout | None = None) -> tuple[DeviceSpec, ...]:
    """The devices the NVIDIA DRA driver publishes for this node: full GPUs as `gpu-<i>`, a
    MIG-enabled GPU as its MIG devices only (nvidia-facts.md §4.3). Attributes the labels do not give
    (no product, family or memory label) are left out rather than guessed."""
    if layout is None:
        layout = gpu_layout(labels)
    common = _common_attributes(labels)
    memory_mib = label_int(labels.get(LABEL_MEMORY, 0))
    out: list[DeviceSpec] = []
    for i, gpu in enumerate(layout):
        gpu_uuid = "GPU-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{node}/gpu/{i}"))
        pci = _pci_attributes(i)
        if gpu is None:
            attrs = {"type": _s("gpu"), "uuid": _s(gpu_uuid), **common, **pci}
            capacity = {"memory": {"value": f"{memory_mib}Mi"}} if memory_mib else {}
            out.append(DeviceSpec(f"gpu-{i}", attrs, capacity))
            continue
        for inst in gpu:
            out.append(_mig_device(node, i, gpu_uuid, inst, common, pci))
    return tuple(out)


def _mig_device(
    node: str,
    parent: int,
    parent_uuid: str,
    inst: MigInstance,
    common: Mapping[str, dict[str, Any]],
    pci: Mapping[str, dict[str, Any]],
) -> DeviceSpec:
    geo = inst.geometry
    name = mig_device_name(parent, inst.profile, geo.gi_profile_id, inst.start)
    mig_uuid = "MIG-" + str(uuid.uuid5(_UUID_NAMESPACE, f"{node}/gpu/{parent}/{name}"))
    attrs = {
        "type": _s("mig"),
        "uuid": _s(mig_uuid),
        "parentUUID": _s(parent_uuid),
        "profile": _s(inst.profile),
        **common,
        **pci,
    }
    capacity: dict[str, dict[str, Any]] = {"memory": {"value": f"{geo.memory_mib}Mi"}}
    engines = {
        "multiprocessors": geo.multiprocessors,
        "copyEngines": geo.copy_engines,
        "decoders": geo.decoders,
        "encoders": geo.encoders,
        "jpegEngines": geo.jpeg_engines,
        "ofaEngines": geo.ofa_engines,
    }
    # Always present, 0 included (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/mig.go).
    capacity.update({k: {"value": str(v)} for k, v in engines.items()})
    for c in range(inst.start, inst.start + geo.size):
        capacity[f"memorySlice{c}"] = {"value": "1"}
    return DeviceSpec(name, attrs, capacity)


def _common_attributes(labels: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Attributes a full GPU and its MIG devices share (MIG devices repeat the parent's)."""
    base = _base_product(labels.get(LABEL_PRODUCT, ""))
    known = _PRODUCTS.get(base)
    family = labels.get("nvidia.com/gpu.family") or (known.family if known else "")
    compute = known.compute if known else FAMILY_COMPUTE.get(family)
    major = labels.get("nvidia.com/gpu.compute.major")
    minor = labels.get("nvidia.com/gpu.compute.minor")
    if major is not None and major.isdigit() and minor is not None and minor.isdigit():
        compute = (int(major), int(minor))
    attrs: dict[str, dict[str, Any]] = {}
    if base:
        attrs["productName"] = _s(product_name(base))
        # NVML's brand for data-centre parts; Tesla-branded ones report Tesla.
        attrs["brand"] = _s("Tesla" if base.startswith("Tesla") else "Nvidia")
    if family:
        attrs["architecture"] = _s(_architecture(family))
    if compute is not None:
        attrs["cudaComputeCapability"] = {"version": f"{compute[0]}.{compute[1]}.0"}
    driver = labels.get("nvidia.com/cuda.driver-version.full")
    if driver:
        attrs["driverVersion"] = {"version": semver(driver)}
    cuda = labels.get("nvidia.com/cuda.runtime-version.full")
    if cuda:
        attrs["cudaDriverVersion"] = {"version": semver(cuda)}
    return attrs


def _pci_attributes(index: int) -> dict[str, dict[str, Any]]:
    """Synthetic but stable PCI addresses: two GPUs behind each PCIe root, as on HGX boards."""
    bus = (0x18 + 0x10 * index) % 0x100
    root = (0x10 + 0x20 * (index // 2)) % 0x100
    return {
        "resource.kubernetes.io/pciBusID": _s(f"0000:{bus:02x}:00.0"),
        "resource.kubernetes.io/pcieRoot": _s(f"pci0000:{root:02x}"),
    }


def semver(version: str) -> str:
    """`535.104.05` -> `535.104.5`, `12.8` -> `12.8.0`: the API server only accepts semver 2.0.0."""
    parts = [str(int(p)) if p.isdigit() else p for p in version.split(".")[:3]]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def label_int(value: Any) -> int:
    """A label or count as an int; 0 when it is not one."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def _s(value: str) -> dict[str, Any]:
    return {"string": value}
