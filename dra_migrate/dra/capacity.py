"""Capacity per pool and resource name, before and after the migration.

before  what the device plugin advertises today: allocatable of the pool's nodes, time-slicing and
        MPS replicas included (a GPU shared 4 ways counts 4)
after   the DRA devices that the class mapping the name would match on the pool's nodes: the
        ResourceSlices they publish, or the devices the NVIDIA DRA driver would publish (predicted from
        GFD labels), less the GPUs the device plugin reports unhealthy there (`unhealthy_gpus`). DRA has
        no replicas: one request takes whole devices.
demand  today's consumers: GPU requests of the pool's live pods, plus consumers with no live pods
        (a CronJob between runs, a Job not started) whose templates select only this pool
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.cel import Selector, SelectorError, compile_selector, matches_all
from dra_migrate.dra.devices import LABEL_COUNT, NVIDIA_DRIVER, PER_NODE_ATTRIBUTES, NodeDevices, node_devices
from dra_migrate.inventory.fleet import GpuNode, kubelet_skew
from dra_migrate.inventory.model import Inventory
from dra_migrate.inventory.placement import node_selects, selector_labels


@dataclass(frozen=True)
class ClassSelectors:
    """A DeviceClass (existing or proposed) as the matcher needs it."""

    name: str
    extended_resource_name: str | None
    selectors: tuple[Selector, ...]
    proposed: bool
    created: str = ""  # creationTimestamp (RFC 3339 sorts as text)


@dataclass
class PoolCapacity:
    pool: str
    resource: str
    before: int
    after: int | None  # None: no DeviceClass maps the name
    demand: int
    device_class: str | None
    replicas: int  # the largest sharing replicas on the pool's nodes (1: not shared)
    after_source: str  # "published", "predicted" or "mixed"
    largest_request: int  # the most one pod asks for
    largest_node_after: int  # the most matching devices on one node

    @property
    def fits(self) -> bool:
        if self.after is None:
            return self.demand == 0
        return self.demand <= self.after and self.largest_request <= self.largest_node_after

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "resource": self.resource,
            "before": self.before,
            "after": self.after,
            "demand": self.demand,
            "fits": self.fits,
            "deviceClass": self.device_class,
            "sharingReplicas": self.replicas,
            "afterSource": self.after_source,
            "largestRequest": self.largest_request,
            "largestNodeAfter": self.largest_node_after,
        }


def compile_classes(state: ClusterState, proposed: Iterable[tuple[str, str, str]]) -> list[ClassSelectors]:
    """Existing DeviceClasses and proposals (name, extendedResourceName, selector) ready to match.

    A class whose selector does not compile is kept with no way to match (it matches nothing, as the
    API server would have refused it)."""
    out = []
    for dc in state.of("resource.k8s.io/DeviceClass"):
        spec = dc.get("spec") or {}
        exprs = [(s.get("cel") or {}).get("expression", "") for s in spec.get("selectors") or [] if isinstance(s, dict)]
        out.append(
            ClassSelectors(
                str((dc.get("metadata") or {}).get("name")),
                spec.get("extendedResourceName"),
                _compile_all(exprs),
                proposed=False,
                created=str((dc.get("metadata") or {}).get("creationTimestamp") or ""),
            )
        )
    for name, ern, expr in proposed:
        out.append(ClassSelectors(name, ern, _compile_all([expr]), proposed=True))
    return out


def _compile_all(exprs: list[str]) -> tuple[Selector, ...]:
    try:
        return tuple(compile_selector(e) for e in exprs)
    except SelectorError:
        return (compile_selector("false"),)


def matching_devices(
    state: ClusterState, cls: ClassSelectors, devices: NodeDevices, driver: str = NVIDIA_DRIVER
) -> tuple[str, ...]:
    """The names of the node's devices (`node_devices(state, driver)`) that the class matches. Matched once
    per state, node and selectors: pool capacity and the gang check both ask it of every node, and the
    check's classes are compiled anew (matching them twice was a tenth of `plan` at 10,000 nodes)."""
    memo: dict[tuple[Any, ...], tuple[str, ...]] = state.memo(f"dra.matching/{driver}", dict)
    # Predicted nodes of one shape differ only in their placeholder uuids: a class that reads neither
    # matches the same devices on all of them (`devices._Predictor`).
    by_node = devices.shape is None or any(_may_read_per_node(s) for s in cls.selectors)
    key = (devices.node if by_node else ("shape", devices.shape), tuple(s.expression for s in cls.selectors),
           devices.source)  # fmt: skip
    found = memo.get(key)
    if found is None:
        found = memo[key] = tuple(str(d.get("name")) for d in devices.devices if matches_all(cls.selectors, d, driver))
    return found


def _may_read_per_node(selector: Selector) -> bool:
    """Whether the selector may read a per-node attribute of a predicted device (in any domain); a selector
    that reads attributes dynamically may."""
    refs = selector.refs
    return refs is None or any(kind == "attributes" and name in PER_NODE_ATTRIBUTES for kind, _, name in refs)


def class_for(resource: str, classes: list[ClassSelectors]) -> ClassSelectors | None:
    """The class that would serve a name: an existing one first, else our proposal. Among several
    existing ones the scheduler takes the newest, ties to the lexicographically first name
    (`betterDeviceClass`, kubernetes staging/src/k8s.io/dynamic-resource-allocation/deviceclass/
    extendedresourcecache); `duplicate-extended-resource-name` reports the situation."""
    existing = [c for c in classes if c.extended_resource_name == resource and not c.proposed]
    if existing:
        newest = max(c.created for c in existing)
        return min((c for c in existing if c.created == newest), key=lambda c: c.name)
    return next((c for c in classes if c.extended_resource_name == resource), None)


def dra_served(
    state: ClusterState, node: GpuNode, classes: list[ClassSelectors], driver: str = NVIDIA_DRIVER
) -> dict[str, bool]:
    """Each GPU resource the node advertises (capacity above 0) that a DeviceClass maps -> whether that class matches
    a device of the node (its slices of `driver`, else the prediction). Where none does, a pod asking any of them
    (the plan's canary first) is never scheduled there once the device plugin is off: the generated
    `nvidia.com/gpu` class selects `type == 'gpu'` and a MIG-enabled GPU publishes `type: mig` devices only
    (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices L302-327), which under
    the device plugin's none MIG strategy the node serves as `nvidia.com/gpu`."""
    devices = node_devices(state, driver).get(node.name)
    out: dict[str, bool] = {}
    for resource in sorted(node.capacity):
        cls = class_for(resource, classes) if node.capacity[resource] > 0 else None
        if cls is not None:
            out[resource] = devices is not None and bool(matching_devices(state, cls, devices, driver))
    return out


def unmatched_by_dra(served: dict[str, bool]) -> bool:
    """`dra_served` says the node serves mapped resources and no class of them matches a device of it."""
    return bool(served) and not any(served.values())


def pool_capacity(
    state: ClusterState,
    inv: Inventory,
    classes: list[ClassSelectors],
    *,
    feature_gates: dict[str, bool] | None = None,
    driver: str = NVIDIA_DRIVER,
) -> list[PoolCapacity]:
    """Capacity per pool and resource. A node whose kubelet cannot serve a DRA-backed extended resource
    (`kubelet_skew`) is not migratable: it adds nothing "after"."""
    devices = node_devices(state, driver)
    nodes_by_pool: dict[str, list[str]] = {p.name: p.nodes for p in inv.pools}
    gpu_nodes = {n.name: n for n in inv.nodes}
    reserved = _reserved_demand(state, inv)
    largest = _largest_requests(state, inv)
    skewed = {n.name for n in inv.nodes if kubelet_skew(n.kubelet_version, feature_gates or {}) is not None}
    out: list[PoolCapacity] = []
    for pool in inv.pools:
        resources = set(pool.allocatable) | set(pool.requested) | set(reserved.get(pool.name, {}))
        resources = {
            r
            for r in resources
            if pool.allocatable.get(r, 0) or pool.requested.get(r, 0) or reserved.get(pool.name, {}).get(r)
        }
        for resource in sorted(resources):
            cls = class_for(resource, classes)
            per_node: list[int] = []
            sources: set[str] = set()
            for node in nodes_by_pool[pool.name]:
                nd = devices.get(node)
                if nd is None or cls is None or node in skewed:
                    continue
                sources.add(nd.source)
                matched = len(matching_devices(state, cls, nd, driver))
                if nd.source == "predicted":
                    matched = max(0, matched - unhealthy_gpus(gpu_nodes[node], resource))
                per_node.append(matched)
            replicas = max(
                (_replicas(gpu_nodes[n].labels, resource, gpu_nodes[n].config_replicas) for n in pool.nodes),
                default=1,
            )
            out.append(
                PoolCapacity(
                    pool=pool.name,
                    resource=resource,
                    before=sum(gpu_nodes[n].allocatable.get(resource, 0) for n in pool.nodes),
                    after=sum(per_node) if cls is not None else None,
                    demand=pool.requested.get(resource, 0) + reserved.get(pool.name, {}).get(resource, 0),
                    device_class=cls.name if cls else None,
                    replicas=replicas,
                    after_source="mixed"
                    if len(sources) > 1
                    else next(iter(sources), "excluded" if skewed & set(pool.nodes) else "predicted"),
                    largest_request=largest.get((pool.name, resource), 0),
                    largest_node_after=max(per_node, default=0),
                )
            )
    return out


def unhealthy_gpus(node: GpuNode, resource: str) -> int:
    """The GPUs behind `resource` that the node's device plugin reports unhealthy: `status.capacity` less
    `status.allocatable`, in whole GPUs (a time-sliced GPU's replicas go unhealthy together). 0 on a node whose
    device plugin is switched off (its capacity then lingers at allocatable 0 until the kubelet's grace period
    ends: no GPU is broken for that).

    The device plugin marks a GPU Unhealthy on a critical XID or a lost GPU (k8s-device-plugin v0.18.0
    internal/rm/health.go checkHealth, internal/plugin/server.go ListAndWatch) and the kubelet counts it in
    capacity, not allocatable (kubernetes v1.37.2 pkg/kubelet/cm/devicemanager/manager.go GetCapacity); a device
    plugin that stopped leaves every device so until the grace period ends. GFD's `nvidia.com/gpu.count` counts it
    still, and so does the DRA driver, which publishes every GPU NVML enumerates: it taints one NoSchedule only on
    an NVML event after it starts, under its alpha NVMLDeviceHealthCheck gate (off by default), so a GPU broken
    before is published untainted and handed out, broken (dra-driver-nvidia-gpu v0.4.1 pkg/featuregates/
    featuregates.go, cmd/gpu-kubelet-plugin/driver.go deviceHealthEvents, device_health.go registerEventsForDevices,
    healthEventToTaint). Either way no pod can use it after migration, as none can before."""
    if not node.device_plugin_enabled:
        return 0
    missing = node.capacity.get(resource, 0) - node.allocatable.get(resource, 0)
    if missing <= 0:
        return 0
    replicas = _replicas(node.labels, resource, node.config_replicas)
    return -(-missing // replicas)


def _replicas(labels: dict[str, str], resource: str, configured: dict[str, int]) -> int:
    """The sharing replicas GFD reports for the resource: `nvidia.com/gpu.replicas` for full GPUs (and
    their `.shared` rename), `nvidia.com/mig-<profile>.replicas` for a MIG profile (GPU Feature Discovery
    writes one per profile under the mixed strategy: k8s-device-plugin internal/lm/resource.go). Where GFD
    does not run, the node's device-plugin config's (`GpuNode.config_replicas`)."""
    if resource.startswith("nvidia.com/mig-"):
        key = resource.removesuffix(".shared") + ".replicas"
    else:
        key = "nvidia.com/gpu.replicas"
    if key not in labels and LABEL_COUNT not in labels:
        return max(1, configured.get(resource, 1))
    try:
        return max(1, int(labels.get(key, "1") or 1))
    except ValueError:
        return 1


def _reserved_demand(state: ClusterState, inv: Inventory) -> dict[str, dict[str, int]]:
    """Consumers with no live pods, attributed to the one pool their templates select, if one."""
    out: dict[str, dict[str, int]] = {}
    pool_of_node = {n.name: n.pool for n in inv.nodes}
    nodes = [n for n in state.of("Node") if (n.get("metadata") or {}).get("name") in pool_of_node]
    labelled: list[tuple[dict[str, Any], dict[str, str]]] = []  # each node's labels, made once when first needed
    # Workloads share a handful of placements (a pool's nodeSelector): evaluate each placement once.
    pools_for: dict[bytes, frozenset[str]] = {}

    def selected_pools(pod_spec: dict[str, Any]) -> frozenset[str]:
        placement = {k: pod_spec.get(k) for k in ("nodeSelector", "affinity", "tolerations")}
        key = orjson.dumps(placement, option=orjson.OPT_SORT_KEYS)
        if key not in pools_for:
            if len(labelled) < len(nodes):
                labelled[:] = [(n, selector_labels(n)) for n in nodes]
            pools_for[key] = frozenset(
                pool_of_node[str(n["metadata"]["name"])]
                for n, labels in labelled
                if node_selects(pod_spec, n, labels=labels)
            )
        return pools_for[key]

    idle = [c for c in inv.consumers if not c.pods and any(c.totals.values())]
    wanted = {_key(c.api_version, c.kind) for c in idle}
    by_name = {
        (key, str((o.get("metadata") or {}).get("namespace") or ""), str((o.get("metadata") or {}).get("name"))): o
        for key in wanted
        for o in state.of(key)
    }
    for c in idle:
        obj = by_name.get((_key(c.api_version, c.kind), c.namespace, c.name))
        if obj is None:
            continue
        pools: set[str] = set()
        for t in state.templates.resolve(_key(c.api_version, c.kind), obj):
            pools |= selected_pools(t.pod_spec())
        if len(pools) == 1:
            per = out.setdefault(pools.pop(), {})
            for k, v in c.totals.items():
                per[k] = per.get(k, 0) + v
    return out


def _largest_requests(state: ClusterState, inv: Inventory) -> dict[tuple[str, str], int]:
    """(pool, resource) -> the largest per-pod request among the pool's live pods."""
    pools = {n.pool for n in inv.nodes}  # a set: a scan of every node's pool per template grew with fleet x consumers
    out: dict[tuple[str, str], int] = {}
    for c in inv.consumers:
        for t in c.templates:
            for pool in c.pools:
                for k, v in t.resources.items():
                    if pool in pools:
                        out[(pool, k)] = max(out.get((pool, k), 0), v)
    return out


def _key(api_version: str, kind: str) -> str:
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return f"{group}/{kind}" if group else kind
