"""What a simulated GPU node is: its labels, what the device plugin advertises and what the DRA
kubelet plugin publishes. Pure data and pure derivations; nothing here talks to a cluster.

A spec comes from a snapshot's Node (and its ResourceSlices, when the snapshot has them) or from
`GpuNodeSpec.small` in tests. When a snapshot has no slices, the DRA devices are derived from the
GPU Feature Discovery labels by `dra_migrate.dra.devices`, the prediction the core uses too, so a rehearsal
sees the slices the real driver would publish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.devices import (
    FAMILY_COMPUTE,
    LABEL_REPLICAS,
    Layout,
    devices_from_labels,
    full_gpus_from_capacity,
    gpu_layout,
    gpu_nodes,
    has_gpu_labels,
    known_product,
    label_int,
    mig_capable,
    mig_profile,
    mig_strategy,
    published_devices,
    resource_profile,
)
from dra_migrate.dra.devices import NVIDIA_DRIVER as DRA_DRIVER
from dra_migrate.dra.devices import DeviceSpec as DeviceSpec
from dra_migrate.inventory.platform import CAPI_OWNER_KIND, CAPI_OWNER_NAME, OPENSHIFT_MACHINE

__all__ = [
    "DRA_DRIVER",
    "LABEL_DEVICE_PLUGIN",
    "LABEL_DRA_DRIVER",
    "LABEL_DRA_KUBELET_PLUGIN",
    "POOL_LABEL",
    "DeviceSpec",
    "GpuNodeSpec",
    "device_plugin_enabled",
    "device_plugin_resources_from_labels",
    "dra_plugin_enabled",
    "gfd_labels",
    "specs_from_state",
]

# The real toggles are node labels (nvidia-facts.md §1.4): the operator's device-plugin DaemonSet selects
# `gpu.deploy.device-plugin=true`; the DRA kubelet plugin runs on `dra-kubelet-plugin=true` (standalone chart
# recipe) or `gpu.deploy.dra-driver=true` (GPUCluster).
LABEL_DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
LABEL_DRA_KUBELET_PLUGIN = "nvidia.com/dra-kubelet-plugin"
LABEL_DRA_DRIVER = "nvidia.com/gpu.deploy.dra-driver"
POOL_LABEL = "cloud.google.com/gke-nodepool"


def device_plugin_enabled(labels: Mapping[str, str]) -> bool:
    """The device plugin runs unless the operator's deploy label turns it off."""
    return labels.get(LABEL_DEVICE_PLUGIN) != "false"


def dra_plugin_enabled(labels: Mapping[str, str]) -> bool:
    return labels.get(LABEL_DRA_KUBELET_PLUGIN) == "true" or labels.get(LABEL_DRA_DRIVER) == "true"


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
    # Cordoned in the snapshot (spec.unschedulable): registered so, or the node lifecycle controller lifts the
    # unschedulable taint it keeps with that field and the twin's scheduler places displaced pods there.
    unschedulable: bool = False
    # The status of its Ready condition in the snapshot ("True" when none was read, as the planner counts it):
    # "False" or "Unknown" is a node whose kubelet was not posting Ready (plan/exclusions.py node-not-ready).
    ready: str = "True"
    # The node's spec.providerID as the snapshot recorded it ("" when none): a replayed GKE node stays GKE's.
    provider_id: str = ""
    # The annotations that name its group (Cluster API's owner kind and name, OpenShift's Machine), so that the
    # twin's pools are the snapshot's (inventory.fleet.pool_of reads them where no pool label is set).
    group_annotations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_node(cls, node: Mapping[str, Any], slices: Sequence[Mapping[str, Any]] = ()) -> GpuNodeSpec:
        """A spec from a Node object and (optionally) the cluster's ResourceSlices."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        capacity = (node.get("status") or {}).get("capacity") or {}
        taints = tuple(dict(t) for t in ((node.get("spec") or {}).get("taints") or []))
        advertised = {k: label_int(v) for k, v in capacity.items() if k.startswith("nvidia.com/")}
        advertised = {k: v for k, v in advertised.items() if v > 0}
        # With mixed MIG the full-GPU count is only known from capacity; it helps the label derivation.
        full_gpus = full_gpus_from_capacity(labels, capacity)
        layout = gpu_layout(labels, full_gpus=full_gpus) if has_gpu_labels(labels) else None
        if not advertised and layout is not None:
            # The plugin is off (capacity 0 or gone): what it would advertise comes from GFD's labels.
            advertised = device_plugin_resources_from_labels(labels, layout)
        in_slices = published_devices(name, slices)
        if in_slices is not None:
            published = tuple(DeviceSpec.from_json(d) for d in in_slices)
        else:
            published = devices_from_labels(name, labels, layout, capacity) if layout is not None else ()
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
            unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            ready=_ready(node),
            provider_id=str((node.get("spec") or {}).get("providerID") or ""),
            group_annotations={
                k: str(v)
                for k, v in (meta.get("annotations") or {}).items()
                if k in (CAPI_OWNER_KIND, CAPI_OWNER_NAME, OPENSHIFT_MACHINE)
            },
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


def _ready(node: Mapping[str, Any]) -> str:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return "True" if cond.get("status") == "True" else str(cond.get("status") or "Unknown")
    return "True"


def specs_from_state(state: ClusterState) -> list[GpuNodeSpec]:
    """Every GPU node of a state: nvidia.com/* capacity, GPU labels, or gpu.nvidia.com slices."""
    return [GpuNodeSpec.from_node(node, slices) for node, slices in gpu_nodes(state)]


# ---------------------------------------------------------------------------------------------------
# What the device plugin would advertise


def device_plugin_resources_from_labels(labels: Mapping[str, str], layout: Layout) -> dict[str, int]:
    """What the device plugin advertises for this node (nvidia-facts.md §2, MIG strategy table)."""
    replicas = max(label_int(labels.get(LABEL_REPLICAS, 1)), 1)
    strategy = mig_strategy(labels)
    if strategy == "single":
        n = sum(len(g) for g in layout if g)
        return {"nvidia.com/gpu": n * replicas} if n else {}
    out: dict[str, int] = {}
    full = sum(1 for g in layout if g is None)
    if full:
        out["nvidia.com/gpu"] = full * replicas
    for gpu in layout:
        for inst in gpu or ():
            key = f"nvidia.com/mig-{resource_profile(inst.profile)}"
            out[key] = out.get(key, 0) + 1
    for key in [k for k in out if k.startswith("nvidia.com/mig-")]:
        profile_replicas = label_int(labels.get(f"{key}.replicas", 1))
        out[key] *= max(profile_replicas, 1)
    return out


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
    known = known_product(product)
    family = known.family if known else "hopper"
    major, minor = known.compute if known else FAMILY_COMPUTE[family]
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
        "nvidia.com/mig.capable": "true" if mig_capable(product) else "false",
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
        prefix = f"nvidia.com/mig-{resource_profile(profile)}."
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
