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
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.layout import LABEL_COUNT as LABEL_COUNT
from dra_migrate.dra.layout import LABEL_MIG_STRATEGY as LABEL_MIG_STRATEGY
from dra_migrate.dra.layout import LABEL_REPLICAS as LABEL_REPLICAS
from dra_migrate.dra.layout import Layout as Layout
from dra_migrate.dra.layout import MigInstance as MigInstance
from dra_migrate.dra.layout import full_gpus_from_capacity as full_gpus_from_capacity
from dra_migrate.dra.layout import gpu_layout as gpu_layout
from dra_migrate.dra.layout import has_gpu_labels as has_gpu_labels
from dra_migrate.dra.layout import label_int as label_int
from dra_migrate.dra.layout import mig_strategy as mig_strategy
from dra_migrate.dra.layout import mixed_counts, unlabelled_gpus
from dra_migrate.dra.products import FAMILY_COMPUTE as FAMILY_COMPUTE
from dra_migrate.dra.products import LABEL_PRODUCT as LABEL_PRODUCT
from dra_migrate.dra.products import Product as Product
from dra_migrate.dra.products import (
    architecture,
    base_product,
)
from dra_migrate.dra.products import known_product as known_product
from dra_migrate.dra.products import mig_capable as mig_capable
from dra_migrate.dra.products import mig_device_name as mig_device_name
from dra_migrate.dra.products import mig_profile as mig_profile
from dra_migrate.dra.products import product_name as product_name
from dra_migrate.dra.products import resource_profile as resource_profile
from dra_migrate.inventory.draversion import PCI_BUS_ID, DriverRelease, installed_release
from dra_migrate.inventory.migparted import mig_parted_configs, node_gpu_mig
from dra_migrate.inventory.operator import node_config_replicas
from dra_migrate.inventory.resources import DEFAULT_GPU, SHARED_GPU

NVIDIA_DRIVER = "gpu.nvidia.com"


LABEL_MEMORY = "nvidia.com/gpu.memory"

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


@dataclass(frozen=True, eq=False)
class NodeDevices:
    """A node's gpu.nvidia.com devices. Not hashable (the devices are dicts); compare with ==."""

    node: str
    # "published": the node's gpu.nvidia.com ResourceSlices (highest pool generation), as they are;
    # "predicted": derived from its labels and capacity (`predict_devices`).
    source: str
    # Published devices (`devices` says them for either source).
    published: tuple[dict[str, Any], ...] = ()
    # Predicted devices: nodes with the same `shape` have the same devices but for their `uuid` and
    # `parentUUID` placeholders (`_Predictor`), so what reads neither is the same for all (`matching_devices`).
    shape: Any = None
    # Predicted devices, each as its node's `_cook` makes it: a plan reads only how many a node has, and
    # its classes match one node of each shape, so a device is made only when it is read (making them
    # all, placeholder uuids and all, was a tenth of `plan`'s own work on a sparse fleet).
    recipes: tuple[_Recipe, ...] = ()

    @cached_property
    def devices(self) -> tuple[dict[str, Any], ...]:
        """Each exactly as in a ResourceSlice's spec.devices[]: {"name", "attributes": {k: {"string"|"int"|
        "bool"|"version": v}}, "capacity": {k: {"value": "80Gi"}}}. Published ones are the state's own
        dicts, predicted ones are made once per NodeDevices: read them, do not change them."""
        if self.source == "published":
            return self.published
        return tuple(_cook(self.node, r) for r in self.recipes)

    @property
    def count(self) -> int:
        """How many devices the node has (without making them)."""
        return len(self.published) if self.source == "published" else len(self.recipes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeDevices):
            return NotImplemented
        return (self.node, self.source, self.devices) == (other.node, other.source, other.devices)

    __hash__ = None  # type: ignore[assignment]  # as a frozen dataclass of dicts: equal by value, unhashable


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
                predictor = _Predictor(mig_parted_configs(state), installed_release(state))
                shared = node_config_replicas(state)
            recipes, shape = predictor.recipes(node, shared.get(name, {}))
            out[name] = NodeDevices(name, "predicted", shape=shape, recipes=recipes)
    return out


class _Predictor:
    """`predict_devices` once per node shape: what of a node the prediction reads but its name (the labels
    under nvidia.com/, in order, and its capacity). The nodes of a pool share one; each gets its own
    placeholder uuids (derived from its name) in fresh dicts. Equal to `predict_devices` on every node
    (tests/unit/test_dra_devices_memo.py); at 10,000 nodes the per-node prediction was 0.55 s of `plan`."""

    def __init__(self, mig_configs: Mapping[str, Any], release: DriverRelease | None = None) -> None:
        self._mig_configs = mig_configs
        self._release = release
        self._recipes: dict[tuple[Any, ...], tuple[_Recipe, ...]] = {}

    def predict(
        self, node: Mapping[str, Any], shared: Mapping[str, int] | None = None
    ) -> tuple[tuple[dict[str, Any], ...], tuple[Any, ...]]:
        """The node's devices (`predict_devices`), and its shape."""
        recipes, shape = self.recipes(node, shared)
        name = str((node.get("metadata") or {}).get("name", ""))
        return tuple(_cook(name, r) for r in recipes), shape

    def recipes(
        self, node: Mapping[str, Any], shared: Mapping[str, int] | None = None
    ) -> tuple[tuple[_Recipe, ...], tuple[Any, ...]]:
        """The recipes of the node's devices (`_cook` makes each of the node), and its shape."""
        meta = node.get("metadata") or {}
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
            recipe = _recipe(labels, capacity, self._mig_configs, shared)
            self._recipes[shape] = recipe = as_released(recipe, self._release) if self._release else recipe
        return recipe, shape


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
    shared = shared or {}
    if LABEL_COUNT in labels:
        per_gpu = node_gpu_mig(labels, mig_configs, mixed_counts(labels)) if mig_configs else None
        layout = gpu_layout(labels, full_gpus=full_gpus_from_capacity(labels, capacity), per_gpu_mig=per_gpu)
        # GPUs of another product than the one GFD's labels name: only what is known of them (`unlabelled_gpus`).
        replicas = max(shared.get(DEFAULT_GPU, 1), shared.get(SHARED_GPU, 1))
        other = (None,) * unlabelled_gpus(labels, capacity, replicas)
        return _device_recipes(labels, layout) + _device_recipes({}, other, first=len(layout))
    return _device_recipes({}, (None,) * whole_gpus_from_capacity(capacity, shared))


_NEW_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-.+-(\d+)-(\d+)$")


def as_released(recipes: tuple[_Recipe, ...], release: DriverRelease) -> tuple[_Recipe, ...]:
    """The predicted devices as `release` publishes them, where it differs from v0.4.1 (inventory/draversion.py):
    before v25.12 `pcieBusID` for `resource.kubernetes.io/pciBusID` and MIG devices named
    `gpu-<minor>-mig-<giProfileId>-<start>-<size>` (NVIDIA/k8s-dra-driver-gpu v25.8.1 `cmd/gpu-kubelet-plugin/
    deviceinfo.go` `CanonicalName`); in v25.3.x also `index` and `minor` on a GPU, `index` and `parentIndex` on a
    MIG device (v25.3.2 `deviceinfo.go` `GetDevice`), numbered as the prediction numbers GPUs (0..n-1: the minor
    and NVML index of contiguous GPUs) and a GPU's MIG devices in order."""
    out: list[_Recipe] = []
    mig_seen: dict[str, int] = {}
    for device, seed, parent in recipes:
        device = {**device}
        attrs = {k: dict(v) for k, v in (device.get("attributes") or {}).items()}
        if release.before_25_12 and PCI_BUS_ID in attrs:
            attrs[release.pci_bus_id_attribute] = attrs.pop(PCI_BUS_ID)
        gpu = int(seed.split("/")[1])
        if parent:  # a MIG device
            if release.legacy_mig_names and (m := _NEW_MIG_NAME.match(str(device["name"]))):
                size = sum(1 for k in device.get("capacity") or {} if k.startswith("memorySlice"))
                device["name"] = f"gpu-{m[1]}-mig-{m[2]}-{m[3]}-{size}"
            if release.index_attributes:
                attrs["index"] = {"int": mig_seen.get(parent, 0)}
                attrs["parentIndex"] = {"int": gpu}
            mig_seen[parent] = mig_seen.get(parent, 0) + 1
        elif release.index_attributes:
            attrs["index"] = {"int": gpu}
            attrs["minor"] = {"int": gpu}
        if attrs:
            device["attributes"] = attrs
        out.append((device, seed, parent))
    return tuple(out)


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
    return tuple(_cook(name, r) for r in _recipe(labels, capacity, mig_configs or {}, shared))


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
# Devices, attributes and capacities


def devices_from_labels(
    node: str, labels: Mapping[str, str], layout: Layout | None = None, capacity: Mapping[str, Any] | None = None
) -> tuple[DeviceSpec, ...]:
    """The devices the NVIDIA DRA driver publishes for this node: full GPUs as `gpu-<i>`, a
    MIG-enabled GPU as its MIG devices only (nvidia-facts.md §4.3). Attributes the labels do not give
    (no product, family or memory label) are left out rather than guessed. With the node's `capacity`, also
    the GPUs of another product the labels do not count (`unlabelled_gpus`), as `predict_devices` has them."""
    if layout is None:
        layout = gpu_layout(labels)
    recipes = _device_recipes(labels, layout)
    if capacity is not None:
        recipes += _device_recipes({}, (None,) * unlabelled_gpus(labels, capacity), first=len(layout))
    return tuple(DeviceSpec.from_json(_cook(node, r)) for r in recipes)


def _device_recipes(labels: Mapping[str, str], layout: Layout, first: int = 0) -> tuple[_Recipe, ...]:
    """The devices of `devices_from_labels` for any node: their uuids are the node's, given by seeds. The layout's
    GPUs are numbered from `first`."""
    common = _common_attributes(labels)
    memory_mib = label_int(labels.get(LABEL_MEMORY, 0))
    out: list[_Recipe] = []
    for i, gpu in enumerate(layout, first):
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
        # NVML reports BRAND_NVIDIA ("Nvidia": go-nvlib v0.11.0 device.go GetBrandAsString) for data-centre boards,
        # Tesla-named ones included (nvidia-smi -q, Tesla T4 on drivers 530/535: "Product Brand : NVIDIA");
        # GeForce/RTX/Quadro/Titan boards have brands of their own the name does not settle: left out.
        if not _OWN_BRAND.search(base):
            attrs["brand"] = _s("Nvidia")
    if family and family != "undefined":  # GFD's family for a compute capability it does not map
        attrs["architecture"] = _s(architecture(family))
    if compute is not None:
        attrs["cudaComputeCapability"] = {"version": f"{compute[0]}.{compute[1]}.0"}
    driver, cuda = _versions(labels)
    if driver:
        attrs["driverVersion"] = {"version": semver(driver)}
    if cuda:
        attrs["cudaDriverVersion"] = {"version": semver(cuda)}
    return attrs


_OWN_BRAND = re.compile(r"GeForce|RTX|Quadro|TITAN|Titan")


def _versions(labels: Mapping[str, str]) -> tuple[str, str]:
    """The driver and CUDA versions GFD labels: `nvidia.com/cuda.{driver,runtime}-version.full`, or, from a GFD
    before k8s-device-plugin v0.15.0 (gpu-feature-discovery v0.8, GPU Operator < v24.3), only the deprecated
    `nvidia.com/cuda.driver.{major,minor,rev}` and `nvidia.com/cuda.runtime.{major,minor}` (still written as
    "Deprecated labels": k8s-device-plugin v0.18.0 internal/lm/nvml.go newVersionLabeler). The DRA driver reads
    both from NVML whatever labelled the node."""
    driver = labels.get("nvidia.com/cuda.driver-version.full") or ".".join(
        v for v in (labels.get(f"nvidia.com/cuda.driver.{k}", "") for k in ("major", "minor", "rev")) if v
    )
    cuda = labels.get("nvidia.com/cuda.runtime-version.full") or ".".join(
        v for v in (labels.get(f"nvidia.com/cuda.runtime.{k}", "") for k in ("major", "minor")) if v
    )
    return driver, cuda


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


def _s(value: str) -> dict[str, Any]:
    return {"string": value}
