"""GPU nodes, their GPU Feature Discovery labels, and pools.

A node is a GPU node when it advertises an nvidia.com/* resource, carries GPU labels, or has
ResourceSlices from the NVIDIA DRA driver. Its pool is the first label present from the user's
`--pool-label` keys, then the managed node-pool labels of GKE, EKS, Karpenter and AKS, then the
instance type; else "(unpooled)".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.inventory.operator import Placements, PluginPlacement, dynamic_mig_enabled
from dra_migrate.inventory.platform import INSTANCE_TYPE, PoolPlatform, capi_group, openshift_machineset
from dra_migrate.inventory.resources import FRACTIONAL_GPU_RESOURCES, GPU_PREFIX, GpuNames, quantity_int

UNPOOLED = "(unpooled)"
DEFAULT_POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/instance-type",  # last: the weakest grouping (`pool_of` asks Cluster API before it)
)
GPU_LABELS = ("nvidia.com/gpu.present", "nvidia.com/gpu.product", "nvidia.com/gpu.count")

# GFD labels reported per node (k8s-device-plugin docs/gpu-feature-discovery/README.md), JSON name -> label.
GFD_LABELS = {
    "product": "nvidia.com/gpu.product",
    "count": "nvidia.com/gpu.count",
    "memoryMiB": "nvidia.com/gpu.memory",
    "family": "nvidia.com/gpu.family",
    "migCapable": "nvidia.com/mig.capable",
    "migStrategy": "nvidia.com/mig.strategy",
    "migConfig": "nvidia.com/mig.config",
    "migConfigState": "nvidia.com/mig.config.state",
    "sharingStrategy": "nvidia.com/gpu.sharing-strategy",
    "replicas": "nvidia.com/gpu.replicas",
    "driverVersion": "nvidia.com/cuda.driver-version.full",
    "devicePluginConfig": "nvidia.com/device-plugin.config",
}
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
# Labels that switch the NVIDIA DRA kubelet plugin on for a node: the standalone chart's documented
# selector and the GPU Operator's (GPU Operator manifests/state-dra-driver/0500_daemonset.yaml).
DRA_PLUGIN_LABELS = ("nvidia.com/dra-kubelet-plugin", "nvidia.com/gpu.deploy.dra-driver")

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
EXTENDED_RESOURCE_GATE = "DRAExtendedResource"


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """v1.34.2, 1.34.2-gke.1000, v1.35.0+k3s1 -> (1, 34, 2); None when unparseable."""
    m = _VERSION_RE.match(text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def kubelet_skew(kubelet_version: str | None, gates: dict[str, bool]) -> str | None:
    """Why this kubelet cannot run a pod whose `nvidia.com/gpu` the scheduler backed with DRA, or None.

    KEP-5004 lists the kubelet among the components of DRAExtendedResource (kubernetes/enhancements
    keps/sig-scheduling/5004-dra-extended-resource/kep.yaml): only a kubelet with the gate on drops the
    DRA-backed requests named in status.extendedResourceClaimStatus from admission; with it off the
    request is checked against the device plugin's leftover allocatable 0 and the pod fails admission
    (kubernetes pkg/kubelet/lifecycle/predicate.go, v1.37.2). The gate is alpha (off) in 1.34-1.35, beta
    (on) in 1.36, GA and locked on in 1.37 (pkg/features/kube_features.go). `--feature-gate` declares
    what the kubelets run with; an unknown version is not judged.
    """
    v = parse_version(kubelet_version)
    if v is None:
        return None
    declared = gates.get(EXTENDED_RESOURCE_GATE)
    if v < (1, 34, 0):
        return f"kubelet {kubelet_version} predates DRA's resource.k8s.io/v1 and {EXTENDED_RESOURCE_GATE} (1.34)"
    if v[1] >= 37 and v[0] == 1:
        return None
    if v[1] == 36 and declared is not False:
        return None
    if v[1] < 36 and declared is True:
        return None
    why = "declared off (--feature-gate)" if declared is False else "alpha and off by default before 1.36"
    return f"kubelet {kubelet_version}: {EXTENDED_RESOURCE_GATE} is {why}"


@dataclass
class GpuNode:
    name: str
    pool: str
    labels: dict[str, str]
    capacity: dict[str, int]  # GPU resources only
    allocatable: dict[str, int]
    gfd: dict[str, str]
    deploy: dict[str, str]  # operand -> "true"/"false" from nvidia.com/gpu.deploy.<operand>
    dra_devices: dict[str, int] = field(default_factory=dict)  # driver -> devices in its slices
    unschedulable: bool = False
    ready: bool | None = None
    deleting: bool = False  # metadata.deletionTimestamp set: the node is going away
    requested: dict[str, int] = field(default_factory=dict)  # by non-terminated pods bound here
    kubelet_version: str | None = None  # status.nodeInfo.kubeletVersion
    runtime_version: str | None = None  # status.nodeInfo.containerRuntimeVersion (inventory/runtime.py)
    dra_placement: PluginPlacement | None = None  # from the DRA kubelet-plugin DaemonSets as installed
    dp_placement: PluginPlacement | None = None  # from the device-plugin DaemonSets as installed
    # DynamicMIG: the DRA plugin that serves this node has the gate on, or its slices carry counters.
    dynamic_mig: bool = False
    # Time-slicing/MPS replicas (> 1) per advertised name, from the device-plugin config the node runs: what
    # says a GPU is shared where GFD's `nvidia.com/gpu.replicas` is missing (inventory/operator.py).
    config_replicas: dict[str, int] = field(default_factory=dict)

    @property
    def device_plugin_enabled(self) -> bool:
        if self.dp_placement is not None and self.dp_placement.mode != "assumed":
            return self.dp_placement.mode != "off"
        return self.labels.get("nvidia.com/gpu.deploy.device-plugin") != "false"

    @property
    def dra_plugin_enabled(self) -> bool:
        if self.dra_placement is not None and self.dra_placement.mode != "assumed":
            return self.dra_placement.mode == "runs"
        return any(self.labels.get(k) == "true" for k in DRA_PLUGIN_LABELS)

    @property
    def migrated(self) -> bool:
        """The migration is done here: the DRA kubelet plugin runs, the device plugin no longer does."""
        return self.dra_plugin_enabled and not self.device_plugin_enabled

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pool": self.pool,
            "ready": self.ready,
            "unschedulable": self.unschedulable,
            "capacity": dict(sorted(self.capacity.items())),
            "allocatable": dict(sorted(self.allocatable.items())),
            "requested": dict(sorted(self.requested.items())),
            "gfd": self.gfd,
            "deploy": self.deploy,
            "devicePluginEnabled": self.device_plugin_enabled,
            "draPluginEnabled": self.dra_plugin_enabled,
            "draDevices": dict(sorted(self.dra_devices.items())),
            "kubeletVersion": self.kubelet_version,
            "draPlugin": self.dra_placement.to_dict() if self.dra_placement else None,
            "devicePlugin": self.dp_placement.to_dict() if self.dp_placement else None,
            "dynamicMig": self.dynamic_mig,
        }


@dataclass
class Pool:
    name: str
    nodes: list[str]
    capacity: dict[str, int]
    allocatable: dict[str, int]
    requested: dict[str, int]
    dra_devices: dict[str, int]
    physical_gpus: int
    platform: PoolPlatform | None = None  # inventory/platform.py: platform, stack owner, strategy

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodes": self.nodes,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "requested": self.requested,
            "physicalGpus": self.physical_gpus,
            "draDevices": self.dra_devices,
            "platform": self.platform.to_dict() if self.platform else None,
        }


def gpu_resources(resources: Any, names: GpuNames) -> dict[str, int]:
    if not isinstance(resources, dict):
        return {}
    return {k: quantity_int(v) for k, v in resources.items() if k in names}


def other_nvidia_resources(nodes: Iterable[dict[str, Any]], names: GpuNames) -> dict[str, list[str]]:
    """nvidia.com/* extended resources nodes advertise that are not the NVIDIA GPU device plugin's (see
    `GpuNames`): name -> the nodes that advertise it. A fractional-GPU plugin's names are left to
    `fractional-gpu-request`."""
    out: dict[str, list[str]] = {}
    for n in nodes:
        status = n.get("status") or {}
        seen: set[str] = set()
        for key in ("capacity", "allocatable"):
            res = status.get(key)
            if isinstance(res, dict):
                seen.update(k for k in res if isinstance(k, str) and k.startswith(GPU_PREFIX))
        for name in sorted(seen - FRACTIONAL_GPU_RESOURCES):
            if name not in names:
                out.setdefault(name, []).append(str((n.get("metadata") or {}).get("name", "")))
    return out


# The GPU Operator's sandbox workloads (NVIDIA/gpu-operator controllers/state_manager.go): a node's GPUs go to
# containers, or to virtual machines (`vm-passthrough`: bound to vfio-pci, `vm-vgpu`: vGPU host), which neither
# the device plugin (the operator removes its deploy label there, `gpuStateLabels`) nor the DRA driver serves.
WORKLOAD_LABEL = "nvidia.com/gpu.workload.config"
_VM_WORKLOADS = ("vm-passthrough", "vm-vgpu")


def vm_workload_nodes(nodes: Iterable[dict[str, Any]], policy: dict[str, Any] | None) -> frozenset[str]:
    """Nodes whose GPUs the GPU Operator gives to virtual machines: with `spec.sandboxWorkloads.enabled`, the
    node's `nvidia.com/gpu.workload.config` when it is a valid config, else `sandboxWorkloads.defaultWorkload`
    (else `container`); with sandbox workloads off, none (`getWorkloadConfig`, `init`)."""
    sandbox = ((policy or {}).get("spec") or {}).get("sandboxWorkloads")
    if not isinstance(sandbox, dict) or sandbox.get("enabled") is not True:
        return frozenset()
    valid = ("container", *_VM_WORKLOADS)
    default = sandbox.get("defaultWorkload") if sandbox.get("defaultWorkload") in valid else "container"
    out = set()
    for n in nodes:
        meta = n.get("metadata") or {}
        label = (meta.get("labels") or {}).get(WORKLOAD_LABEL)
        if (label if label in valid else default) in _VM_WORKLOADS:
            out.add(str(meta.get("name")))
    return frozenset(out)


def pool_of(labels: dict[str, str], pool_labels: tuple[str, ...], annotations: Any = None) -> str:
    """The node's pool: the first of `--pool-label` keys and the platforms' pool labels it carries, else its
    Cluster API MachineSet or MachinePool, else its OpenShift Machine API MachineSet (the installer makes one per
    zone, all of one instance type: each is a template of its own), else its instance type, else `(unpooled)`."""
    for key in (*pool_labels, *DEFAULT_POOL_LABELS[:-1]):
        value = labels.get(key)
        if value:
            return value
    return capi_group(annotations) or openshift_machineset(annotations) or labels.get(INSTANCE_TYPE) or UNPOOLED


def node_pool(node: dict[str, Any], pool_labels: tuple[str, ...]) -> str:
    """`pool_of` a Node object (its labels and annotations)."""
    meta = node.get("metadata") or {}
    labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()}
    return pool_of(labels, pool_labels, meta.get("annotations"))


def _ready(node: dict[str, Any]) -> bool | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return None


def build_gpu_nodes(
    nodes: Iterable[dict[str, Any]],
    names: GpuNames,
    pool_labels: tuple[str, ...],
    dra_devices: dict[str, dict[str, int]],
    dra_daemonsets: list[dict[str, Any]] | None = None,
    dp_daemonsets: list[dict[str, Any]] | None = None,
    counter_nodes: frozenset[str] = frozenset(),
    swept_labels: frozenset[str] = frozenset(),
    dra_driver: str = "gpu.nvidia.com",
) -> list[GpuNode]:
    """`swept_labels`: node label keys another controller deletes, never a plugin's switch (`Placements`). A node is
    a GPU node by its NVIDIA resources, its GFD labels or devices in the slices of `dra_driver`: another DRA driver's
    slices (dranet's `dra.net` on every node, AMD's `gpu.amd.com`, `compute-domain.nvidia.com`) make none."""
    out: list[GpuNode] = []
    placements = Placements(dra_daemonsets or [], dp_daemonsets or [], swept_labels)
    for n in nodes:
        meta = n.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str):
            continue
        labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()}
        status = n.get("status") or {}
        capacity = gpu_resources(status.get("capacity"), names)
        allocatable = gpu_resources(status.get("allocatable"), names)
        slices = dra_devices.get(name, {})
        if not (capacity or allocatable or slices.get(dra_driver) or any(k in labels for k in GPU_LABELS)):
            continue
        dra_placement, dp_placement = placements.of(n)
        serving = [d for d in dra_daemonsets or [] if _ref(d) == dra_placement.daemonset]
        out.append(
            GpuNode(
                name=name,
                pool=pool_of(labels, pool_labels, meta.get("annotations")),
                labels=labels,
                capacity=capacity,
                allocatable=allocatable,
                gfd={k: labels[v] for k, v in GFD_LABELS.items() if v in labels},
                deploy={
                    k[len(DEPLOY_LABEL_PREFIX) :]: v
                    for k, v in sorted(labels.items())
                    if k.startswith(DEPLOY_LABEL_PREFIX)
                },
                dra_devices=dict(slices),
                unschedulable=bool((n.get("spec") or {}).get("unschedulable")),
                ready=_ready(n),
                deleting=bool(meta.get("deletionTimestamp")),
                kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion") or None,
                runtime_version=(status.get("nodeInfo") or {}).get("containerRuntimeVersion") or None,
                dra_placement=dra_placement,
                dp_placement=dp_placement,
                dynamic_mig=name in counter_nodes or any(dynamic_mig_enabled(d) for d in serving),
            )
        )
    return sorted(out, key=lambda g: g.name)


def _ref(ds: dict[str, Any]) -> str:
    meta = ds.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def build_pools(nodes: list[GpuNode]) -> list[Pool]:
    by_pool: dict[str, list[GpuNode]] = {}
    for n in nodes:
        by_pool.setdefault(n.pool, []).append(n)
    pools = []
    for name in sorted(by_pool):
        members = by_pool[name]
        pools.append(
            Pool(
                name=name,
                nodes=[m.name for m in members],
                capacity=_sum_maps(m.capacity for m in members),
                allocatable=_sum_maps(m.allocatable for m in members),
                requested=_sum_maps(m.requested for m in members),
                dra_devices=_sum_maps(m.dra_devices for m in members),
                physical_gpus=sum(quantity_int(m.gfd.get("count", 0)) for m in members),
            )
        )
    return pools


def _sum_maps(maps: Iterable[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))
