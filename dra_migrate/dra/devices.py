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

import hashlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.products import FAMILY_COMPUTE as FAMILY_COMPUTE
from dra_migrate.dra.products import LABEL_PRODUCT as LABEL_PRODUCT
from dra_migrate.dra.products import (
    PROFILE_RE,
    MigProfile,
    architecture,
    base_product,
    profile_from_resource,
    single_profile,
)
from dra_migrate.dra.products import Product as Product
from dra_migrate.dra.products import known_product as known_product
from dra_migrate.dra.products import mig_capable as mig_capable
from dra_migrate.dra.products import mig_device_name as mig_device_name
from dra_migrate.dra.products import mig_profile as mig_profile
from dra_migrate.dra.products import product_name as product_name
from dra_migrate.dra.products import resource_profile as resource_profile
from dra_migrate.inventory.migparted import GpuMig, mig_parted_configs, node_gpu_mig
from dra_migrate.inventory.operator import node_config_replicas
from dra_migrate.inventory.resources import DEFAULT_GPU, SHARED_GPU

NVIDIA_DRIVER = "gpu.nvidia.com"


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
    # Predicted devices: nodes with the same `shape` have the same devices but for their `uuid` and
    # `parentUUID` placeholders (`_Predictor`), so what reads neither is the same for all (`matching_devices`).
    shape: Any = field(default=None, compare=False)


def node_devices(state: ClusterState, driver: str = NVIDIA_DRIVER) -> dict[str, NodeDevices]:
    """Every GPU node (nvidia.com/* capacity, GPU labels, or `driver` slices) -> its devices: the
    published ones when it has slices of `driver` (`--dra-driver`), else the prediction of what the NVIDIA
    driver would publish. Computed once per state and driver."""
    return state.memo(f"dra.node_devices/{driver}", lambda: _node_devices(state, driver))


def _node_devices(state: ClusterState, driver: str) -> dict[str, NodeDevices]:
    out: dict[str, NodeDevices] = {}
    predictor: _Predictor | None = None
    shared: dict[str, dict[str, int]] = {}
    for node, slices in gpu_nodes(state, driver):
        name = str((node.get("metadata") or {}).get("name", ""))
        published = published_devices(name, slices, driver)
        if published is not None:
            out[name] = NodeDevices(name, "published", published)
        else:
            if predictor is None:
                predictor = _Predictor(mig_parted_configs(state))
                shared = node_config_replicas(state)
            devices, shape = predictor.predict(node, shared.get(name, {}))
            out[name] = NodeDevices(name, "predicted", devices, shape)
    return out


class _Predictor:
    """`predict_devices` once per node shape: what of a node the prediction reads but its name (the labels
    under nvidia.com/, in order, and its capacity). The nodes of a pool share one; each gets its own
    placeholder uuids (derived from its name) in fresh dicts. Equal to `predict_devices` on every node
    (tests/unit/test_dra_devices_memo.py); at 10,000 nodes the per-node prediction was 0.55 s of `plan`."""

    def __init__(self, mig_configs: Mapping[str, Any]) -> None:
        self._mig_configs = mig_configs
        self._recipes: dict[tuple[Any, ...], tuple[_Recipe, ...]] = {}

    def predict(
        self, node: Mapping[str, Any], shared: Mapping[str, int] | None = None
    ) -> tuple[tuple[dict[str, Any], ...], tuple[Any, ...]]:
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        capacity = (node.get("status") or {}).get("capacity") or {}
        shared = shared or {}
        shape = (
            tuple((k, v) for k, v in labels.items() if k.startswith("nvidia.com/")),
            repr(capacity),
            tuple(sorted(shared.items())),
        )
        recipe = self._recipes.get(shape)
        if recipe is None:
            recipe = self._recipes[shape] = _recipe(labels, capacity, self._mig_configs, shared)
        return tuple(_cook(name, r) for r in recipe), shape


# The attributes of a predicted device that differ between nodes of one shape.
PER_NODE_ATTRIBUTES = frozenset({"uuid", "parentUUID"})
# A device without its node: its JSON form, and the seeds of its uuid and its parent's ("" for none).
_Recipe = tuple[dict[str, Any], str, str]


def _recipe(
    labels: Mapping[str, str],
    capacity: Mapping[str, Any],
    mig_configs: Mapping[str, Any],
    shared: Mapping[str, int] | None = None,
) -> tuple[_Recipe, ...]:
    if LABEL_COUNT in labels:
        per_gpu = node_gpu_mig(labels, mig_configs, _mixed_counts(labels)) if mig_configs else None
        layout = gpu_layout(labels, full_gpus=full_gpus_from_capacity(labels, capacity), per_gpu_mig=per_gpu)
        return _device_recipes(labels, layout)
    return _device_recipes({}, (None,) * whole_gpus_from_capacity(capacity, shared or {}))


def whole_gpus_from_capacity(capacity: Mapping[str, Any], shared: Mapping[str, int]) -> int:
    """The GPUs of a node without GFD labels: its `nvidia.com/gpu` capacity, over the replicas its device-plugin
    config shares them with (`inventory.operator.node_config_replicas`: the plugin advertises each GPU
    `replicas` times, k8s-device-plugin v0.18.0 internal/rm/device_map.go updateDeviceMapWithReplicas), plus
    `nvidia.com/gpu.shared` over its replicas when the config says them (else a renamed name gives nothing)."""
    whole = label_int(capacity.get(DEFAULT_GPU, 0)) // max(shared.get(DEFAULT_GPU, 1), 1)
    renamed = shared.get(SHARED_GPU)
    return whole + (label_int(capacity.get(SHARED_GPU, 0)) // renamed if renamed else 0)


def _cook(node: str, recipe: _Recipe) -> dict[str, Any]:
    """The device of `node`: the recipe's JSON form in fresh dicts, with the node's placeholder uuids."""
    device, seed, parent = recipe
    out: dict[str, Any] = {"name": device["name"]}
    if "attributes" in device:
        attrs = {k: dict(v) for k, v in device["attributes"].items()}
        if seed:
            attrs["uuid"]["string"] = _placeholder_uuid(node, seed)
        if parent:
            attrs["parentUUID"]["string"] = _placeholder_uuid(node, parent)
        out["attributes"] = attrs
    if "capacity" in device:
        out["capacity"] = {k: dict(v) for k, v in device["capacity"].items()}
    return out


def predict_devices(
    node: Mapping[str, Any], mig_configs: Mapping[str, Any] | None = None, shared: Mapping[str, int] | None = None
) -> tuple[dict[str, Any], ...]:
    """The devices the NVIDIA DRA driver would publish for this Node object, from its GFD labels and
    capacity: product name, memory, architecture, compute capability, driver versions, and under MIG the
    instances per profile (`nvidia.com/mig-<profile>.count` under the mixed strategy, `gpu.count` of the
    `-MIG-<profile>` product under single). Time-slicing or MPS replicas do not multiply devices.

    The `uuid`, `parentUUID` and PCI attributes are stable placeholders: the real values exist only once
    the driver runs on the node, so selectors on them cannot be predicted.

    A node with no GFD labels (no `nvidia.com/gpu.count`, e.g. a standalone device plugin without GPU
    Feature Discovery) is predicted as `nvidia.com/gpu` capacity full GPUs, divided by the time-slicing/MPS
    replicas of its device-plugin config (`shared`), with only what is known of them: `type`, the placeholders,
    and no product name, memory, architecture or versions. `gpu.shared` counts only when `shared` gives its
    replicas; MIG resources cannot be predicted without labels and give nothing.

    `mig_configs`: the MIG Manager's `mig-configs` (inventory/migparted.py); under mixed MIG the applied one
    says which GPU holds which instances, which GFD's labels do not. `shared`: the replicas of the node's
    device-plugin config (`whole_gpus_from_capacity`), for a node without GFD labels.
    """
    meta = node.get("metadata") or {}
    name = str(meta.get("name", ""))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    capacity = (node.get("status") or {}).get("capacity") or {}
    if LABEL_COUNT in labels:
        per_gpu = node_gpu_mig(labels, mig_configs, _mixed_counts(labels)) if mig_configs else None
        layout = gpu_layout(labels, full_gpus=full_gpus_from_capacity(labels, capacity), per_gpu_mig=per_gpu)
        return tuple(d.to_json() for d in devices_from_labels(name, labels, layout))
    whole = (None,) * whole_gpus_from_capacity(capacity, shared or {})
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
    if single_profile(labels.get(LABEL_PRODUCT, "")) is not None:
        return "single"
    if labels.get(LABEL_MIG_STRATEGY) == "mixed" and _mixed_counts(labels):
        return "mixed"
    return "none"


def _mixed_counts(labels: Mapping[str, str]) -> dict[str, int]:
    """Profile -> instances on the node, from GFD's `nvidia.com/mig-<p>.count` labels."""
    out: dict[str, int] = {}
    for key, value in labels.items():
        if key.startswith("nvidia.com/mig-") and key.endswith(".count") and label_int(value) > 0:
            profile = profile_from_resource(key[len("nvidia.com/mig-") : -len(".count")])
            if PROFILE_RE.match(profile):
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


def gpu_layout(labels: Mapping[str, str], *, full_gpus: int | None = None, per_gpu_mig: GpuMig | None = None) -> Layout:
    """The node's GPUs as GFD's labels describe them.

    Mixed MIG with `per_gpu_mig` (each GPU's instances per the applied MIG Manager config, checked against
    GFD's counts): exactly that, a MIG-enabled GPU without instances publishing nothing.

    Mixed MIG: `full_gpus` GPUs (when known from capacity) stay whole; each profile's instances are
    dealt round-robin over the others, so a uniform layout (`all-3g.40gb`) comes back exactly. An
    instance that fits nowhere is left out. Single MIG: gpu.count is the number of MIG devices, all of
    the profile in gpu.product, packed onto as few GPUs as they fit.
    """
    strategy = mig_strategy(labels)
    count = label_int(labels.get(LABEL_COUNT, 0))
    profile = single_profile(labels.get(LABEL_PRODUCT, ""))
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
    if per_gpu_mig is not None and len(per_gpu_mig) == count:
        return tuple(None if g is None else _instances_of(g, labels) for g in per_gpu_mig)
    # Without the device plugin's capacity (its plugin left and the kubelet zeroed it), how many GPUs are
    # whole is not in the labels: the instances are taken to be on as few GPUs as hold them.
    mig_gpus = max(count - full_gpus, 0) if full_gpus is not None else _fewest_gpus_holding(labels, count)
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
    # A MIG-enabled GPU the instances do not reach stays a MIG GPU with no devices: the driver publishes
    # nothing for it (dra-driver-nvidia-gpu v0.4.1 nvlib.go "MIG mode enabled but no configured MIG devices").
    layout: list[tuple[MigInstance, ...] | None] = [_place(m) or _place_anyway(m) for m in placed_on]
    layout.extend([None] * (count - mig_gpus))
    return tuple(layout)


def _instances_of(profiles: Mapping[str, int], labels: Mapping[str, str]) -> tuple[MigInstance, ...]:
    wanted = [(p, mig_profile(p, labels)) for p, n in sorted(profiles.items()) for _ in range(n)]
    return _place(wanted) or _place_anyway(wanted)


def _fewest_gpus_holding(labels: Mapping[str, str], count: int) -> int:
    """Under mixed MIG, the fewest of the node's `count` GPUs that hold GFD's MIG instances (first fit, largest
    first, by our geometry). Exact when every MIG-enabled GPU is needed for its instances; a MIG-enabled GPU
    with no instances, or instances spread thinner than they pack, cannot be seen in GFD's labels (they count
    instances per profile and GPUs per product, not per GPU): docs/nvidia-tier.md."""
    instances = [(p, mig_profile(p, labels)) for p, n in sorted(_mixed_counts(labels).items()) for _ in range(n)]
    gpus: list[list[tuple[str, MigProfile]]] = []
    for inst in sorted(instances, key=lambda pg: (-pg[1].size, pg[0])):
        home = next((g for g in gpus if _place([*g, inst]) is not None), None)
        if home is not None:
            home.append(inst)
        else:
            gpus.append([inst])
    return min(len(gpus), count)


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
    return tuple(DeviceSpec.from_json(_cook(node, r)) for r in _device_recipes(labels, layout))


def _device_recipes(labels: Mapping[str, str], layout: Layout) -> tuple[_Recipe, ...]:
    """The devices of `devices_from_labels` for any node: their uuids are the node's, given by seeds."""
    common = _common_attributes(labels)
    memory_mib = label_int(labels.get(LABEL_MEMORY, 0))
    out: list[_Recipe] = []
    for i, gpu in enumerate(layout):
        pci = _pci_attributes(i)
        if gpu is None:
            attrs = {"type": _s("gpu"), "uuid": _s(""), **common, **pci}
            capacity = {"memory": {"value": f"{memory_mib}Mi"}} if memory_mib else {}
            out.append((DeviceSpec(f"gpu-{i}", attrs, capacity).to_json(), f"gpu/{i}", ""))
            continue
        for inst in gpu:
            device = _mig_device(i, inst, common, pci)
            out.append((device.to_json(), f"gpu/{i}/{device.name}", f"gpu/{i}"))
    return tuple(out)


_UUID_NS = _UUID_NAMESPACE.bytes


def _placeholder_uuid(node: str, seed: str) -> str:
    """`GPU-<uuid5>` of a full GPU (seed `gpu/<i>`), `MIG-<uuid5>` of a MIG device (`gpu/<i>/<name>`): RFC 4122
    §4.3's name-based UUID as `uuid.uuid5` makes it (sha1 of namespace and name, version 5, RFC variant),
    without building UUID objects (a 10,000-node fleet has 100,000 devices)."""
    h = bytearray(hashlib.sha1(_UUID_NS + f"{node}/{seed}".encode()).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{'MIG' if seed.count('/') > 1 else 'GPU'}-{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _mig_device(
    parent: int,
    inst: MigInstance,
    common: Mapping[str, dict[str, Any]],
    pci: Mapping[str, dict[str, Any]],
) -> DeviceSpec:
    """A MIG device, its `uuid` and `parentUUID` left empty (`_cook` fills in the node's)."""
    geo = inst.geometry
    name = mig_device_name(parent, inst.profile, geo.gi_profile_id, inst.start)
    attrs = {
        "type": _s("mig"),
        "uuid": _s(""),
        "parentUUID": _s(""),
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
    base = base_product(labels.get(LABEL_PRODUCT, ""))
    known = known_product(base)
    family = labels.get("nvidia.com/gpu.family") or (known.family if known else "")
    compute = known.compute if known else FAMILY_COMPUTE.get(family)
    major = labels.get("nvidia.com/gpu.compute.major")
    minor = labels.get("nvidia.com/gpu.compute.minor")
    if major is not None and major.isdecimal() and minor is not None and minor.isdecimal():
        compute = (int(major), int(minor))
    attrs: dict[str, dict[str, Any]] = {}
    if base:
        attrs["productName"] = _s(product_name(base))
        # NVML's brand for data-centre parts; Tesla-branded ones report Tesla.
        attrs["brand"] = _s("Tesla" if base.startswith("Tesla") else "Nvidia")
    if family:
        attrs["architecture"] = _s(architecture(family))
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
    parts = [str(int(p)) if p.isdecimal() else p for p in version.split(".")[:3]]
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
