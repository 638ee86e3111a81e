"""Partial-node multi-GPU consumers: the topology the NVIDIA device plugin gave them for free.

For full GPUs the device plugin answers the kubelet's GetPreferredAllocation with a connected set: NVLink peers,
else GPUs behind one PCIe switch or root (k8s-device-plugin v0.18.0 internal/rm/nvml_manager.go
`getPreferredAllocation` -> `alignedAlloc`: go-gpuallocator's best-effort policy over NVML's P2P links), per
container request. It does so only when every device it serves is a full GPU without replicas
(`AlignedAllocationSupported`): MIG devices and time-sliced or MPS replicas get `distributedAlloc` instead.
Under DRA the scheduler takes any N matching devices unless the claim constrains them (KEP-4381; k8s.io/api
resource/v1 types.go `DeviceConstraint.MatchAttribute`), and a pod that keeps `nvidia.com/gpu` through a
DeviceClass's extendedResourceName gets a claim without constraints (KEP-5004).

A consumer matters here when one of its containers asks for 2 or more whole GPUs and the nodes it can land on
have more than that: it takes part of a node, and which part used to be chosen for it. A container that takes
every GPU of its node has nothing to lose.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.consumers import Consumer
from dra_migrate.inventory.dra import NVIDIA_DRA_DRIVER
from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.inventory.resources import DEFAULT_GPU, FRACTIONAL_GPU_RESOURCES, SHARED_GPU, is_default_gpu_name

# The standard attribute for a device's PCIe root complex (k8s.io/dynamic-resource-allocation
# deviceattribute/attribute.go `StandardDeviceAttributePCIeRoot`); dra-driver-nvidia-gpu v0.4.1 publishes it
# when sysfs resolves the GPU's PCI address (cmd/gpu-kubelet-plugin/nvlib.go `getGpuInfo`:
# `deviceattribute.GetPCIeRootAttributeByPCIBusID`, which reads the /sys/bus/pci/devices/<address> symlink).
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# Labels GPU Feature Discovery writes when the device plugin shares GPUs (k8s-device-plugin
# docs/gpu-feature-discovery/README.md): replicas > 1 means time-slicing or MPS, so no aligned allocation.
_REPLICAS = "replicas"


def is_whole_gpu_name(name: str) -> bool:
    """A device-plugin name whose units are full GPUs: `nvidia.com/gpu` or a renamed one; not MIG, not shared."""
    if name in FRACTIONAL_GPU_RESOURCES or name == SHARED_GPU or name.endswith(".shared"):
        return False
    return name == DEFAULT_GPU or not is_default_gpu_name(name)


@dataclass(frozen=True)
class NodeTopology:
    """What the DRA driver's slices say about one node's PCIe roots (None: no slices, nothing known)."""

    gpus: int  # GPUs in the slices
    per_root: dict[str, int]  # pcieRoot -> GPUs; GPUs without the attribute are not counted

    @property
    def without_root(self) -> int:
        return self.gpus - sum(self.per_root.values())


def slice_topology(state: ClusterState, driver: str = NVIDIA_DRA_DRIVER) -> dict[str, NodeTopology]:
    """node -> the PCIe roots of the full GPUs its `driver` slices publish."""
    gpus: dict[str, int] = {}
    roots: dict[str, dict[str, int]] = {}
    for s in state.of("resource.k8s.io/ResourceSlice"):
        raw = s.get("spec")
        spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
        node = spec.get("nodeName")
        if spec.get("driver") != driver or not isinstance(node, str):
            continue
        for d in spec.get("devices") or []:
            found = d.get("attributes") if isinstance(d, dict) else None
            attrs: dict[str, Any] = found if isinstance(found, dict) else {}
            if _string(attrs.get("type")) != "gpu":
                continue
            gpus[node] = gpus.get(node, 0) + 1
            root = _string(attrs.get(PCIE_ROOT))
            if root:
                per = roots.setdefault(node, {})
                per[root] = per.get(root, 0) + 1
    return {n: NodeTopology(c, roots.get(n, {})) for n, c in gpus.items()}


def _string(attr: Any) -> str | None:
    v = attr.get("string") if isinstance(attr, dict) else None
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class MultiGpuConsumer:
    kind: str
    namespace: str
    name: str
    resource: str
    per_container: int  # the most whole GPUs one of its containers asks for
    node_gpus: tuple[int, ...]  # distinct GPU counts of the nodes it may land on
    largest_root: int | None  # most GPUs one PCIe root holds on those nodes (live slices); None: unknown
    nodes_without_root: int  # of those nodes, how many publish GPUs without pcieRoot

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "resource": self.resource,
            "perContainer": self.per_container,
            "nodeGpus": list(self.node_gpus),
            "largestPcieRoot": self.largest_root,
            "nodesWithoutPcieRoot": self.nodes_without_root,
        }


def _node_whole_gpus(node: GpuNode, resource: str) -> int:
    """Whole GPUs `node` has under `resource`: the device plugin's capacity, else GFD's count (its plugin
    is off), 0 when it shares them (replicas: no aligned allocation) or has none."""
    replicas = node.gfd.get(_REPLICAS, "")
    if (replicas.isdecimal() and int(replicas) > 1) or node.config_replicas.get(resource, 1) > 1:
        return 0
    if node.capacity.get(resource):
        return node.capacity[resource]  # 0 once the kubelet zeroed a departed plugin's capacity: GFD's count then
    count = node.gfd.get("count", "")
    return int(count) if resource == DEFAULT_GPU and count.isdecimal() else 0


@dataclass
class _Reach:
    """What a consumer's candidate nodes say, for one resource: their whole-GPU counts, the most GPUs one
    PCIe root holds (None: no slices read) and how many of them publish GPUs without a root."""

    counts: set[int]
    largest_root: int | None = None
    without_root: int = 0

    def add(self, other: _Reach) -> None:
        self.counts |= other.counts
        if other.largest_root is not None:
            self.largest_root = max(self.largest_root or 0, other.largest_root)
        self.without_root += other.without_root


def _reach_by_pool(nodes: list[GpuNode], topology: dict[str, NodeTopology], resource: str) -> dict[str, _Reach]:
    """Per pool, what its nodes offer a container asking for whole GPUs of `resource`. Made once per
    resource, so the consumers are looked up by pool: a scan of every node per consumer grew with
    consumers x nodes (issue 29: quadratic in the fleet)."""
    out: dict[str, _Reach] = {}
    for g in nodes:
        whole = _node_whole_gpus(g, resource)
        if not whole:
            continue
        reach = out.setdefault(g.pool, _Reach(set()))
        reach.counts.add(whole)
        t = topology.get(g.name)
        if t is None:
            continue
        if t.per_root:
            reach.largest_root = max(reach.largest_root or 0, max(t.per_root.values()))
        reach.without_root += 1 if t.without_root else 0
    return out


def partial_node_consumers(
    consumers: Iterable[Consumer], nodes: list[GpuNode], topology: dict[str, NodeTopology]
) -> list[MultiGpuConsumer]:
    """Consumers with a container asking for 2+ whole GPUs, on nodes with more GPUs than that."""
    out: list[MultiGpuConsumer] = []
    by_resource: dict[str, dict[str, _Reach]] = {}
    for c in consumers:
        largest: dict[str, int] = {}
        for t in c.templates:
            for name, n in t.largest_container.items():
                if is_whole_gpu_name(name):
                    largest[name] = max(largest.get(name, 0), n)
        for resource, n in sorted(largest.items()):
            if n < 2:
                continue
            if resource not in by_resource:
                by_resource[resource] = _reach_by_pool(nodes, topology, resource)
            pools = by_resource[resource]
            reach = _Reach(set())
            for pool in c.pools or pools:
                if pool in pools:
                    reach.add(pools[pool])
            if not reach.counts or max(reach.counts) <= n:
                continue  # no node known, or it takes whole nodes: nothing was chosen for it
            out.append(
                MultiGpuConsumer(
                    c.kind, c.namespace, c.name, resource, n, tuple(sorted(reach.counts)), reach.largest_root,
                    reach.without_root,
                )
            )  # fmt: skip
    return out
