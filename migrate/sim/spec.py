"""What a simulated GPU node is: its labels, what the device plugin advertises and what the DRA
kubelet plugin publishes. Pure data and pure derivations; nothing here talks to a cluster.

A spec comes from a snapshot's Node (and its ResourceSlices, when the snapshot has them) or from
`GpuNodeSpec.small` in tests. When a snapshot has no slices, the DRA devices are derived from the
GPU Feature Discovery labels the way the NVIDIA DRA driver would name and describe them
(nvidia-facts.md §3, §4.3), so a rehearsal sees the slices the real driver would publish.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from migrate.cluster.state import ClusterState

DRA_DRIVER = "gpu.nvidia.com"

# The real toggles are node labels (nvidia-facts.md §1.4): the operator's device-plugin DaemonSet selects
# `gpu.deploy.device-plugin=true`; the DRA kubelet plugin runs on `dra-kubelet-plugin=true` (standalone chart
# recipe) or `gpu.deploy.dra-driver=true` (GPUCluster).
LABEL_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
LABEL_DRA_KUBELET_PLUGIN = "nvidia.com/dra-kubelet-plugin"
LABEL_DRA_DRIVER = "nvidia.com/gpu.deploy.dra-driver"
POOL_LABEL = "cloud.google.com/gke-nodepool"

_UUID_NAMESPACE = uuid.UUID("6f1c7d3e-2b0a-4c55-9e0f-5d8a1b2c3d4e")  # fixed, so UUIDs are reproducible


def device_plugin_enabled(labels: Mapping[str, str]) -> bool:
    """The device plugin runs unless the operator's deploy label turns it off."""
    return labels.get(LABEL_DEVICE_PLUGIN) != "false"


def dra_plugin_enabled(labels: Mapping[str, str]) -> bool:
    return labels.get(LABEL_DRA_KUBELET_PLUGIN) == "true" or labels.get(LABEL_DRA_DRIVER) == "true"


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


@dataclass(frozen=True)
class GpuNodeSpec:
    """A GPU node to simulate. Not hashable (it holds dicts); compare with ==."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    cpu: str = "64"
    memory: str = "512Gi"
    pods: str = "110"
    # Any other capacity the node reports (ephemeral-storage, hugepages-1Gi, rdma/...), kept as is.
    extra_capacity: dict[str, str] = field(default_factory=lambda: {"ephemeral-storage": "1Ti"})
    # What the device plugin advertises while it runs, e.g. {"nvidia.com/gpu": 8}.
    device_plugin_resources: dict[str, int] = field(default_factory=dict)
    # What the DRA kubelet plugin publishes while it runs.
    devices: tuple[DeviceSpec, ...] = ()
    taints: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_node(cls, node: Mapping[str, Any], slices: Sequence[Mapping[str, Any]] = ()) -> GpuNodeSpec:
        """A spec from a Node object and (optionally) the cluster's ResourceSlices."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        capacity = (node.get("status") or {}).get("capacity") or {}
        taints = tuple(dict(t) for t in ((node.get("spec") or {}).get("taints") or []))
        advertised = {k: _int(v) for k, v in capacity.items() if k.startswith("nvidia.com/")}
        advertised = {k: v for k, v in advertised.items() if v > 0}
        # With mixed MIG the full-GPU count is only known from capacity; it helps the label derivation.
        full_gpus = advertised.get("nvidia.com/gpu") if _mig_strategy(labels) == "mixed" else None
        layout = gpu_layout(labels, full_gpus=full_gpus) if _has_gpu_labels(labels) else None
        if not advertised and layout is not None:
            # The plugin is off (capacity 0 or gone): what it would advertise comes from GFD's labels.
            advertised = device_plugin_resources_from_labels(labels, layout)
        published = _devices_from_slices(name, slices)
        if published is None:
            published = devices_from_labels(name, labels, layout) if layout is not None else ()
        return cls(
            name=name,
            labels=labels,
            cpu=str(capacity.get("cpu", "64")),
            memory=str(capacity.get("memory", "512Gi")),
            pods=str(capacity.get("pods", "110")),
            extra_capacity={
                str(k): str(v)
                for k, v in capacity.items()
                if k not in ("cpu", "memory", "pods") and not str(k).startswith("nvidia.com/")
            },
            device_plugin_resources=advertised,
            devices=published,
            taints=taints,
        )

    @classmethod
    def small(
        cls,
        name: str,
        gpus: int = 8,
        product: str = "NVIDIA-H100-80GB-HBM3",
        memory_mib: int = 81559,
        replicas: int = 1,
        mig: Mapping[str, int] | None = None,
        pool: str = "pool-a",
        labels: Mapping[str, str] | None = None,
        *,
        driver_version: str = "570.133.20",
        cuda_version: str = "12.8",
        taints: Iterable[Mapping[str, Any]] = (),
    ) -> GpuNodeSpec:
        """A node as GFD and the GPU operator would label it, for tests.

        `mig` is the MIG layout of every GPU (profile -> instances per GPU, mixed strategy), e.g.
        {"3g.40gb": 2}; `replicas` > 1 is time-slicing. `labels` are added last and win.
        """
        all_labels = gfd_labels(
            name,
            gpus,
            product,
            memory_mib,
            replicas=replicas,
            mig=mig,
            pool=pool,
            driver_version=driver_version,
            cuda_version=cuda_version,
        )
        all_labels.update(labels or {})
        layout = gpu_layout(all_labels)
        return cls(
            name=name,
            labels=all_labels,
            device_plugin_resources=device_plugin_resources_from_labels(all_labels, layout),
            devices=devices_from_labels(name, all_labels, layout),
            taints=tuple(dict(t) for t in taints),
        )


def specs_from_state(state: ClusterState) -> list[GpuNodeSpec]:
    """Every GPU node of a state: nvidia.com/* capacity, GPU labels, or gpu.nvidia.com slices."""
    slices_by_node: dict[str, list[dict[str, Any]]] = {}
    for s in state.of("resource.k8s.io/ResourceSlice"):
        spec = s.get("spec") or {}
        if spec.get("driver") == DRA_DRIVER and spec.get("nodeName"):
            slices_by_node.setdefault(str(spec["nodeName"]), []).append(s)
    out: list[GpuNodeSpec] = []
    for node in state.of("Node"):
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels = meta.get("labels") or {}
        capacity = (node.get("status") or {}).get("capacity") or {}
        is_gpu = any(k.startswith("nvidia.com/") for k in capacity) or _has_gpu_labels(labels) or name in slices_by_node
        if is_gpu:
            out.append(GpuNodeSpec.from_node(node, slices_by_node.get(name, [])))
    return out


# ---------------------------------------------------------------------------------------------------
# GPU models


@dataclass(frozen=True)
class _Product:
    name: str  # as NVML reports it: the DRA driver's productName
    family: str  # GFD's gpu.family
    compute: tuple[int, int]
    mig_table: str | None = None  # key of _MIG_TABLES


# GFD writes the NVML name with spaces turned into hyphens (nvidia-facts.md §3), which loses the
# hyphens NVML had; the products we know are mapped back exactly, the rest get spaces.
_PRODUCTS: dict[str, _Product] = {
    "NVIDIA-H100-80GB-HBM3": _Product("NVIDIA H100 80GB HBM3", "hopper", (9, 0), "H100-80GB"),
    "NVIDIA-H100-PCIe": _Product("NVIDIA H100 PCIe", "hopper", (9, 0), "H100-80GB"),
    "NVIDIA-H200": _Product("NVIDIA H200", "hopper", (9, 0)),
    "NVIDIA-A100-SXM4-80GB": _Product("NVIDIA A100-SXM4-80GB", "ampere", (8, 0), "A100-80GB"),
    "NVIDIA-A100-80GB-PCIe": _Product("NVIDIA A100 80GB PCIe", "ampere", (8, 0), "A100-80GB"),
    "NVIDIA-A100-SXM4-40GB": _Product("NVIDIA A100-SXM4-40GB", "ampere", (8, 0), "A100-40GB"),
    "NVIDIA-A100-PCIE-40GB": _Product("NVIDIA A100-PCIE-40GB", "ampere", (8, 0), "A100-40GB"),
    "NVIDIA-A10G": _Product("NVIDIA A10G", "ampere", (8, 6)),
    "NVIDIA-L4": _Product("NVIDIA L4", "ada-lovelace", (8, 9)),
    "Tesla-T4": _Product("Tesla T4", "turing", (7, 5)),
}
_FAMILY_COMPUTE = {
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


def product_name(gfd_product: str) -> str:
    """`NVIDIA-H100-80GB-HBM3` -> `NVIDIA H100 80GB HBM3` (the DRA driver's productName)."""
    base = _base_product(gfd_product)
    known = _PRODUCTS.get(base)
    return known.name if known else base.replace("-", " ")


def _architecture(family: str) -> str:
    """GFD's family (`ada-lovelace`) as the DRA driver's architecture attribute (`Ada Lovelace`)."""
    return " ".join(w.capitalize() for w in family.split("-")) if family else "Unknown"


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
# times 1024; placements are in memory slices of 8. Rehearsals only need the names, IDs and sizes
# exact; memory and SMs are as close as the guide's rounded figures allow.
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

# For profiles not in a table: what the compute-slice count implies (the same on A100 and H100).
_GI_ID_BY_COMPUTE = {1: 19, 2: 14, 3: 9, 4: 5, 7: 0}
_SIZE_BY_COMPUTE = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
_PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb(\+me)?$")


def _mig_table(labels: Mapping[str, str]) -> dict[str, MigProfile]:
    base = _base_product(labels.get("nvidia.com/gpu.product", ""))
    known = _PRODUCTS.get(base)
    if known and known.mig_table:
        return _MIG_TABLES[known.mig_table]
    if "A100" in base:
        return _MIG_TABLES["A100-80GB" if "80GB" in base else "A100-40GB"]
    if "H100" in base:
        return _MIG_TABLES["H100-80GB"]
    return {}


def mig_profile(profile: str, labels: Mapping[str, str]) -> MigProfile:
    """The profile's geometry: from the table, else from its name and GFD's per-profile labels."""
    known = _mig_table(labels).get(profile)
    if known is not None:
        return known
    m = _PROFILE_RE.match(profile)
    if not m:
        raise ValueError(f"not a MIG profile name: {profile!r}")
    compute, mem_gb, media = int(m.group(1)), int(m.group(2)), m.group(3)
    gi = 20 if media and compute == 1 else _GI_ID_BY_COMPUTE.get(compute, 0)
    size = _SIZE_BY_COMPUTE.get(compute, 8)
    starts = _ALL_1G if size == 1 else tuple(range(0, 8 - size + 1, size))
    prefix = f"nvidia.com/mig-{_resource_profile(profile)}."
    return MigProfile(
        gi,
        size,
        starts,
        memory_mib=_int(labels.get(prefix + "memory", mem_gb * 1024)),
        multiprocessors=_int(labels.get(prefix + "multiprocessors", 0)),
        copy_engines=_int(labels.get(prefix + "engines.copy", compute)),
        decoders=_int(labels.get(prefix + "engines.decoder", 0)),
        encoders=_int(labels.get(prefix + "engines.encoder", 0)),
        jpeg_engines=_int(labels.get(prefix + "engines.jpeg", 0)),
        ofa_engines=_int(labels.get(prefix + "engines.ofa", 0)),
    )


def _resource_profile(profile: str) -> str:
    """The device plugin writes `+` as `.` in resource names (nvidia-facts.md §2)."""
    return profile.replace("+", ".")


def _profile_from_resource(name: str) -> str:
    return name[: -len(".me")] + "+me" if name.endswith(".me") else name


def mig_device_name(parent_index: int, profile: str, gi_profile_id: int, start: int) -> str:
    """The DRA driver's canonical MIG device name (mig.go ToCanonicalName, nvidia-facts.md §4.3).

    `+me` profiles would put a `+` in the name, which a DNS label cannot hold; we write it as `-`.
    """
    p = profile.replace(".", "").replace("+", "-").lower()
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


def _mig_strategy(labels: Mapping[str, str]) -> str:
    if "-MIG-" in labels.get("nvidia.com/gpu.product", ""):
        return "single"
    strategy = labels.get("nvidia.com/mig.strategy", "none")
    if strategy == "mixed" and not _mixed_counts(labels):
        return "none"
    return strategy


def _mixed_counts(labels: Mapping[str, str]) -> dict[str, int]:
    """Profile -> instances on the node, from GFD's `nvidia.com/mig-<p>.count` labels."""
    out: dict[str, int] = {}
    for key, value in labels.items():
        if key.startswith("nvidia.com/mig-") and key.endswith(".count") and _int(value) > 0:
            out[_profile_from_resource(key[len("nvidia.com/mig-") : -len(".count")])] = _int(value)
    return out


def _has_gpu_labels(labels: Mapping[str, Any]) -> bool:
    return labels.get("nvidia.com/gpu.present") == "true" or "nvidia.com/gpu.count" in labels


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
    strategy = _mig_strategy(labels)
    count = _int(labels.get("nvidia.com/gpu.count", 0))
    product = labels.get("nvidia.com/gpu.product", "")
    # The operator's default strategy is `single` even where MIG is off: GFD then reports whole GPUs
    # and the product carries no -MIG-<profile> suffix.
    if strategy == "single" and "-MIG-" in product:
        profile = product.split("-MIG-", 1)[1]
        geo = mig_profile(profile, labels)
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
    for profile, n in sorted(_mixed_counts(labels).items()):
        geo = mig_profile(profile, labels)
        for j in range(n):
            wanted[j % mig_gpus].append((profile, geo))
    layout: list[tuple[MigInstance, ...] | None] = []
    for want in wanted:
        placed = _place(want)
        while placed is None and want:
            want = want[:-1]  # drop what does not fit rather than fail on an odd label set
            placed = _place(want)
        layout.append(placed if placed else None)
    layout.extend([None] * (count - mig_gpus))
    return tuple(layout)


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
# What the plugins would advertise / publish


def device_plugin_resources_from_labels(labels: Mapping[str, str], layout: Layout) -> dict[str, int]:
    """What the device plugin advertises for this node (nvidia-facts.md §2, MIG strategy table)."""
    replicas = max(_int(labels.get("nvidia.com/gpu.replicas", 1)), 1)
    strategy = _mig_strategy(labels)
    if strategy == "single":
        n = sum(len(g) for g in layout if g)
        return {"nvidia.com/gpu": n * replicas} if n else {}
    out: dict[str, int] = {}
    full = sum(1 for g in layout if g is None)
    if full:
        out["nvidia.com/gpu"] = full * replicas
    for gpu in layout:
        for inst in gpu or ():
            key = f"nvidia.com/mig-{_resource_profile(inst.profile)}"
            out[key] = out.get(key, 0) + 1
    for key in [k for k in out if k.startswith("nvidia.com/mig-")]:
        profile_replicas = _int(labels.get(f"{key}.replicas", 1))
        out[key] *= max(profile_replicas, 1)
    return out


def devices_from_labels(node: str, labels: Mapping[str, str], layout: Layout | None = None) -> tuple[DeviceSpec, ...]:
    """The devices the NVIDIA DRA driver publishes for this node: full GPUs as `gpu-<i>`, a
    MIG-enabled GPU as its MIG devices only (nvidia-facts.md §4.3)."""
    if layout is None:
        layout = gpu_layout(labels)
    common = _common_attributes(labels)
    memory_mib = _int(labels.get("nvidia.com/gpu.memory", 0))
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
    capacity.update({k: {"value": str(v)} for k, v in engines.items() if k != "multiprocessors" or v})
    for c in range(inst.start, inst.start + geo.size):
        capacity[f"memorySlice{c}"] = {"value": "1"}
    return DeviceSpec(name, attrs, capacity)


def _common_attributes(labels: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Attributes a full GPU and its MIG devices share (MIG devices repeat the parent's)."""
    base = _base_product(labels.get("nvidia.com/gpu.product", ""))
    known = _PRODUCTS.get(base)
    family = labels.get("nvidia.com/gpu.family") or (known.family if known else "")
    compute = known.compute if known else _FAMILY_COMPUTE.get(family, (0, 0))
    major = _int(labels.get("nvidia.com/gpu.compute.major", compute[0]))
    minor = _int(labels.get("nvidia.com/gpu.compute.minor", compute[1]))
    attrs = {
        "productName": _s(product_name(base)),
        # NVML's brand for data-centre parts; Tesla-branded ones report Tesla.
        "brand": _s("Tesla" if base.startswith("Tesla") else "Nvidia"),
        "architecture": _s(_architecture(family)),
        "cudaComputeCapability": {"version": f"{major}.{minor}.0"},
    }
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


def gfd_labels(
    name: str,
    gpus: int,
    product: str,
    memory_mib: int,
    *,
    replicas: int = 1,
    mig: Mapping[str, int] | None = None,
    pool: str = "pool-a",
    driver_version: str = "570.133.20",
    cuda_version: str = "12.8",
) -> dict[str, str]:
    """Labels GFD, the device plugin and the GPU operator would put on such a node (nvidia-facts.md §1.4, §3)."""
    known = _PRODUCTS.get(product)
    family = known.family if known else "hopper"
    major, minor = known.compute if known else _FAMILY_COMPUTE[family]
    shared = replicas > 1
    drv = driver_version.split(".")
    cuda = cuda_version.split(".")
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        POOL_LABEL: pool,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product + ("-SHARED" if shared else ""),
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.compute.major": str(major),
        "nvidia.com/gpu.compute.minor": str(minor),
        "nvidia.com/gpu.replicas": str(replicas),
        "nvidia.com/gpu.sharing-strategy": "time-slicing" if shared else "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true" if _mig_table({"nvidia.com/gpu.product": product}) else "false",
        "nvidia.com/mig.strategy": "mixed" if mig else "none",
        "nvidia.com/cuda.driver-version.full": driver_version,
        "nvidia.com/cuda.driver-version.major": drv[0],
        "nvidia.com/cuda.driver-version.minor": drv[1] if len(drv) > 1 else "0",
        "nvidia.com/cuda.driver-version.revision": drv[2] if len(drv) > 2 else "0",
        "nvidia.com/cuda.runtime-version.full": cuda_version,
        "nvidia.com/cuda.runtime-version.major": cuda[0],
        "nvidia.com/cuda.runtime-version.minor": cuda[1] if len(cuda) > 1 else "0",
    }
    for operand in (
        "driver",
        "gpu-feature-discovery",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "operator-validator",
    ):
        labels[f"nvidia.com/gpu.deploy.{operand}"] = "true"
    for profile, per_gpu in (mig or {}).items():
        geo = mig_profile(profile, {"nvidia.com/gpu.product": product})
        prefix = f"nvidia.com/mig-{_resource_profile(profile)}."
        labels[prefix + "count"] = str(per_gpu * gpus)
        labels[prefix + "memory"] = str(geo.memory_mib)
        labels[prefix + "multiprocessors"] = str(geo.multiprocessors)
        labels[prefix + "slices.gi"] = profile.split("g.", 1)[0]
        labels[prefix + "slices.ci"] = profile.split("g.", 1)[0]
        labels[prefix + "product"] = f"{product}-MIG-{profile}"
        labels[prefix + "replicas"] = "1"
        labels[prefix + "sharing-strategy"] = "none"
    if mig:
        labels["nvidia.com/gpu.deploy.mig-manager"] = "true"
    return labels


def _devices_from_slices(node: str, slices: Sequence[Mapping[str, Any]]) -> tuple[DeviceSpec, ...] | None:
    """The node's gpu.nvidia.com devices from existing slices (newest pool generation), or None."""
    mine = [
        s
        for s in slices
        if (s.get("spec") or {}).get("driver") == DRA_DRIVER
        and node in ((s.get("spec") or {}).get("nodeName"), ((s.get("spec") or {}).get("pool") or {}).get("name"))
    ]
    if not mine:
        return None
    newest = max(_int(((s.get("spec") or {}).get("pool") or {}).get("generation", 0)) for s in mine)
    devices: list[DeviceSpec] = []
    for s in sorted(mine, key=lambda s: str((s.get("metadata") or {}).get("name", ""))):
        spec = s.get("spec") or {}
        if _int((spec.get("pool") or {}).get("generation", 0)) == newest:
            devices.extend(DeviceSpec.from_json(d) for d in spec.get("devices") or [])
    return tuple(devices)


def _s(value: str) -> dict[str, Any]:
    return {"string": value}


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0
