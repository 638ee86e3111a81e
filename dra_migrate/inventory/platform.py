"""Which platform runs each GPU pool, who manages its GPU stack, and what switching it to DRA takes.

Read only from what a snapshot holds: node provider IDs, labels, annotations and OS image; the
device-plugin DaemonSets and their owners; Karpenter NodePools; the GPU Operator's ClusterPolicy and the
OLM Subscription that installed it. Each platform fact is cited where it is used (docs/platforms/ has a
page per platform with the same sources).

The stack owner decides the strategy (`plan/strategies.py`): where the device plugin is a DaemonSet the
cluster runs (the GPU Operator's or a standalone one), a node label switches it on the node (*in place*);
where the platform runs it (GKE's managed plugin, EKS Auto Mode, Bottlerocket, AKS managed GPU pools),
no label the tool may set switches it, so DRA-ready capacity is brought up beside the pool and the pool
drained across (*replace pool*).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.gke import (
    GKE_ACCELERATOR,
    GKE_ACCELERATOR_COUNT,
    GKE_DRA_POOL_LABELS,
    GKE_NO_DEFAULT_PLUGIN,
    GKE_POOL,
    GKE_SHARING_LABELS,
)
from dra_migrate.inventory.images import image_tag, template_images
from dra_migrate.inventory.operator import operator_installs_driver
from dra_migrate.inventory.resources import mig_compute_sizes

Obj = dict[str, Any]

# -- the facts, with their sources ---------------------------------------------------------------------

SOURCES: dict[str, str] = {
    "gke-dra": "https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra",
    "gke-gpu-operator": "https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-operator",
    "eks-dra": "https://docs.aws.amazon.com/eks/latest/userguide/device-management-nvidia-dra-device-plugin.html",
    "eks-devices": "https://docs.aws.amazon.com/eks/latest/userguide/device-management.html",
    "aks-gpu-operator": "https://learn.microsoft.com/en-us/azure/aks/nvidia-gpu-operator",
    "aks-managed-gpu": "https://learn.microsoft.com/en-us/azure/aks/aks-managed-gpu-nodes",
    "aks-driver-mode": "https://learn.microsoft.com/en-us/javascript/api/@azure/arm-containerservice/knownnvidiadrivermode",
    "openshift-gpu-operator": "https://docs.nvidia.com/datacenter/cloud-native/openshift/latest/install-gpu-ocp.html",
    "karpenter-annotations": "https://karpenter.sh/docs/reference/annotations/",
    "karpenter-static": "https://karpenter.sh/docs/concepts/nodepools/#specreplicas",
    "karpenter-dra": "https://github.com/kubernetes-sigs/karpenter/issues/3228",
    "ca-faq": "https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md",
    "ca-dra-capi": "https://github.com/kubernetes/autoscaler/pull/7804",
    "addon-manager": "https://github.com/kubernetes/kubernetes/blob/master/cluster/addons/addon-manager/README.md",
}

EKS_NODEGROUP = "eks.amazonaws.com/nodegroup"
# EKS Auto Mode nodes carry eks.amazonaws.com/compute-type=auto (EKS user guide, "Control if a workload is
# deployed on EKS Auto Mode nodes").
EKS_COMPUTE_TYPE = "eks.amazonaws.com/compute-type"
KARPENTER_POOL = "karpenter.sh/nodepool"
AKS_POOL = "kubernetes.azure.com/agentpool"
AKS_CLUSTER = "kubernetes.azure.com/cluster"
# AKS managed GPU node pools label their nodes for the DCGM exporter AKS installs with the device plugin
# (SOURCES["aks-managed-gpu"], "Managed GPU components").
AKS_MANAGED_GPU = "kubernetes.azure.com/dcgm-exporter"
OPENSHIFT_OS = "node.openshift.io/os_id"
OPENSHIFT_MACHINE = "machine.openshift.io/machine"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# Cluster API names a node's group in annotations, not labels: "the annotation set on nodes identifying the
# owner kind" and "... the owner name" (sigs.k8s.io/cluster-api `common_types.go`, `OwnerKindAnnotation`,
# `OwnerNameAnnotation`), a MachineSet's or MachinePool's. Fleets on their own metal provisioned by it (Metal3,
# Rancher's RKE2 provisioning, OpenShift HyperShift) carry no cloud pool label and often no instance type:
# without it their GPU nodes fell into one `(unpooled)` pool.
CAPI_OWNER_KIND = "cluster.x-k8s.io/owner-kind"
CAPI_OWNER_NAME = "cluster.x-k8s.io/owner-name"
CAPI_GROUP_KINDS = ("MachineSet", "MachinePool")
ZONE = "topology.kubernetes.io/zone"
# Resources the Kubernetes addon manager owns and puts back as they were ("Reconcile"), e.g. GKE's
# nvidia-gpu-device-plugin DaemonSets in kube-system (SOURCES["addon-manager"]).
ADDON_MANAGER = "addonmanager.kubernetes.io/mode"

# What keeps each autoscaler from removing a node: Karpenter's karpenter.sh/do-not-disrupt on a Node
# "blocks consolidation and drift" (SOURCES["karpenter-annotations"]); the cluster autoscaler's
# cluster-autoscaler.kubernetes.io/scale-down-disabled: "true" keeps a node from being scaled down
# (SOURCES["ca-faq"], "How can I prevent Cluster Autoscaler from scaling down a particular node?").
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CA_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

# Taints a node gains and loses with its state, put there by Kubernetes (k8s.io/api v0.37.2 core/v1
# well_known_taints.go: node.kubernetes.io/not-ready, unschedulable, ...), the cloud controller manager
# (node.cloudprovider.kubernetes.io/uninitialized, shutdown), Karpenter (v1.8.0 pkg/apis/v1/taints.go:
# karpenter.sh/disrupted, unregistered) and the cluster autoscaler (its scale-down marks): never a pool's own.
LIFECYCLE_TAINT_DOMAINS = ("node.kubernetes.io", "node.cloudprovider.kubernetes.io", "karpenter.sh")
LIFECYCLE_TAINTS = frozenset({"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"})

PLATFORM, GPU_OPERATOR, DAEMONSET, UNKNOWN = "platform", "gpu-operator", "device-plugin-daemonset", "unknown"
IN_PLACE, REPLACE_POOL = "in-place", "replace-pool"


@dataclass(frozen=True)
class NodePlatform:
    """What one node shows of its platform and GPU stack."""

    platform: str  # gke | eks | aks | openshift | generic
    # gke-node-pool | eks-node-group | karpenter | aks-agent-pool | capi-machineset | openshift-machineset | none
    provisioner: str
    group: str | None  # the platform's name for the node's group (node pool, node group, NodePool, MachineSet)
    os_image: str
    owner: str  # platform | gpu-operator | device-plugin-daemonset | unknown
    detail: str  # which component, and how it was recognised


@dataclass
class PoolPlatform:
    """A pool's platform, who manages its GPU stack, and what switching it takes (`inventory` per pool)."""

    platform: str
    provisioner: str
    group: str | None
    owner: str
    detail: str
    autoscaler: str | None  # karpenter | cluster-autoscaler | None
    strategy: str  # in-place | replace-pool
    switching: str
    sources: tuple[str, ...]
    os_images: tuple[str, ...] = ()
    instance_type: str | None = None
    zones: tuple[str, ...] = ()
    accelerator: str | None = None
    accelerator_count: int = 0
    sharing: tuple[str, ...] = ()  # platform GPU-sharing labels its nodes carry (GKE time-sharing/MIG)
    auto_mode: bool = False
    gpu_operator: bool = False  # the cluster's GPU Operator installs the GPU driver (`operator_installs_driver`)
    nodes: int = 0
    labels: dict[str, str] = field(default_factory=dict)  # labels every node of the pool shares
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect) every node shares, lifecycle ones left out
    raw_nodepool: Obj | None = None  # the Karpenter NodePool object, when the pool is one
    mig_sizes: tuple[int, ...] = ()  # MIG compute sizes its nodes' GPUs are partitioned into (1: 1g.10gb)

    @property
    def protect_annotation(self) -> str | None:
        """The annotation that keeps the pool's autoscaler from removing its nodes, if it has one: set on each node
        from before its cordon to after its uncordon (in place), or from before its drain on (a replaced pool).
        Neither autoscaler spares a cordoned node, and a drained one is empty of GPU pods:
        - Karpenter consolidates an empty node whether or not it is cordoned (it looks at the annotation,
          nominations, deletion and initialisation only: sigs.k8s.io/karpenter v1.8.0
          `pkg/controllers/state/statenode.go` `ValidateNodeDisruptable`), after the NodePool's `consolidateAfter`;
        - the cluster autoscaler's scale-down eligibility looks at deletion, `scale-down-disabled`, the node
          group, readiness and utilisation only (kubernetes/autoscaler `cluster-autoscaler/core/scaledown/
          eligibility/eligibility.go` `unremovableReasonAndNodeUtilization`), and removes a node unneeded for
          `--scale-down-unneeded-time` (10 minutes by default, often less for costly GPU nodes). A node stays
          drained while its DRA plugin and canary come up, and an interrupted or failed apply leaves it so
          until it is resumed or rolled back.
        A node taken away mid-switch loses the journal's node, and the pool may bring a device-plugin node back."""
        if self.autoscaler == "karpenter":
            return KARPENTER_DO_NOT_DISRUPT
        if self.autoscaler == "cluster-autoscaler":
            return CA_SCALE_DOWN_DISABLED
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "provisioner": self.provisioner,
            "group": self.group,
            "stackOwner": self.owner,
            "stack": self.detail,
            "autoscaler": self.autoscaler,
            "strategy": self.strategy,
            "switching": self.switching,
            "sources": list(self.sources),
        }


def _meta(o: Mapping[str, Any]) -> Mapping[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _labels(o: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (_meta(o).get("labels") or {}).items()}


def capi_group(annotations: Any) -> str | None:
    """The Cluster API MachineSet or MachinePool a node belongs to, from its annotations; None if none."""
    if not isinstance(annotations, dict) or annotations.get(CAPI_OWNER_KIND) not in CAPI_GROUP_KINDS:
        return None
    name = annotations.get(CAPI_OWNER_NAME)
    return name if isinstance(name, str) and name else None


def openshift_machineset(annotations: Any) -> str | None:
    """The OpenShift Machine API MachineSet a node belongs to, from its `machine.openshift.io/machine` annotation
    ("openshift-machine-api/<machine>", set by the machine-api's nodelink controller); None if none. A MachineSet
    names its Machines after itself, `<machineset>-<5 random characters>` (openshift/machine-api-operator
    pkg/controller/machineset/controller.go, `GenerateName: machineSet.Name + "-"`)."""
    machine = str((annotations if isinstance(annotations, dict) else {}).get(OPENSHIFT_MACHINE) or "")
    if not machine:
        return None
    name = machine.rpartition("/")[2]
    return name.rpartition("-")[0] or name or None


def which_platform(node: Mapping[str, Any]) -> str:
    """OpenShift first (it runs on every cloud), then the cloud from the provider ID, or from its labels
    where the node records no provider ID.

    The provider ID is the cloud controller's own word (core/v1 NodeSpec.providerID, `<provider>://...`):
    every GKE, EKS and AKS node has one. A pool label alone is a convention anyone may copy (KWOK and
    simulated fleets, bare metal named after a cloud's pools), so a node whose provider ID names another
    provider is not taken for that cloud, and platform rules (which can block a plan) do not fire on it."""
    return _platform_of(node, _labels(node))


def _platform_of(node: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """`which_platform`, given the node's labels (`_labels`)."""
    provider = str((node.get("spec") or {}).get("providerID") or "")
    if OPENSHIFT_OS in labels:
        return "openshift"
    by_provider = {"gce://": "gke", "aws://": "eks", "azure://": "aks"}
    if provider:
        return next((p for prefix, p in by_provider.items() if provider.startswith(prefix)), "generic")
    if GKE_POOL in labels:
        return "gke"
    if EKS_NODEGROUP in labels or EKS_COMPUTE_TYPE in labels:
        return "eks"
    if AKS_POOL in labels:
        return "aks"
    return "generic"


def _provisioner(node: Mapping[str, Any], labels: Mapping[str, str]) -> tuple[str, str | None]:
    if KARPENTER_POOL in labels:
        return "karpenter", labels[KARPENTER_POOL]
    if GKE_POOL in labels:
        return "gke-node-pool", labels[GKE_POOL]
    if EKS_NODEGROUP in labels:
        return "eks-node-group", labels[EKS_NODEGROUP]
    if AKS_POOL in labels:
        return "aks-agent-pool", labels[AKS_POOL]
    group = capi_group(_meta(node).get("annotations"))
    if group:
        return "capi-machineset", group
    machineset = openshift_machineset(_meta(node).get("annotations"))
    if machineset:
        return "openshift-machineset", machineset
    return "none", None


def _os_image(node: Mapping[str, Any]) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get("osImage") or "")


def _owner_kinds(obj: Mapping[str, Any]) -> set[str]:
    return {str(r.get("kind")) for r in _meta(obj).get("ownerReferences") or [] if isinstance(r, Mapping)}


def _daemonset_ref(ds: Mapping[str, Any]) -> str:
    return f"{_meta(ds).get('namespace', '')}/{_meta(ds).get('name', '')}"


def olm_gpu_operator(state: ClusterState) -> str | None:
    """The OLM Subscription that installed the GPU Operator ("ns/name"), if there is one."""
    for sub in state.of("operators.coreos.com/Subscription"):
        if str((sub.get("spec") or {}).get("name") or "") == "gpu-operator-certified":
            return _daemonset_ref(sub)
    return None


def _platform_plugin(platform: str, labels: Mapping[str, str], os_image: str) -> str | None:
    """The platform's own device plugin on a node of these labels, if the node shows one; None otherwise."""
    if platform == "gke" and GKE_ACCELERATOR in labels and labels.get(GKE_NO_DEFAULT_PLUGIN) != "true":
        return f"GKE's managed NVIDIA device plugin (the node pool was created without {GKE_NO_DEFAULT_PLUGIN}=true)"
    if platform == "eks" and labels.get(EKS_COMPUTE_TYPE) == "auto":
        return "EKS Auto Mode's node runtime (AWS manages the GPU stack on Auto Mode nodes)"
    if os_image.lower().startswith("bottlerocket"):
        return f"the device plugin built into the Bottlerocket NVIDIA variant ({os_image})"
    if platform == "aks" and labels.get(AKS_MANAGED_GPU) == "enabled":
        return "AKS's managed GPU stack (a managed GPU node pool: AKS installs the device plugin)"
    return None


def _operator_operand(ds: Mapping[str, Any], has_policy: bool) -> bool:
    """The GPU Operator's device-plugin DaemonSet: owned by the ClusterPolicy, or (a snapshot that dropped the
    owner) labelled app=nvidia-device-plugin-daemonset as the operator's state-device-plugin manifest labels
    it, in a cluster that has a ClusterPolicy (gpu-operator assets/state-device-plugin/0500_daemonset.yaml)."""
    if "ClusterPolicy" in _owner_kinds(ds):
        return True
    return has_policy and _labels(ds).get("app") == "nvidia-device-plugin-daemonset"


def node_platform(
    node: Mapping[str, Any],
    labels: Mapping[str, str],
    dp_daemonset: Mapping[str, Any] | None,
    olm: str | None,
    has_policy: bool = False,
) -> NodePlatform:
    """`labels`: the node's (`_labels`, made once per node by the caller, which reads them too);
    `dp_daemonset`: the device-plugin DaemonSet that runs on the node (None: none of the cluster's)."""
    platform = _platform_of(node, labels)
    provisioner, group = _provisioner(node, labels)
    os_image = _os_image(node)
    managed = _platform_plugin(platform, labels, os_image)
    if managed is not None:
        extra = f"; DaemonSet {_daemonset_ref(dp_daemonset)} runs there too" if dp_daemonset is not None else ""
        return NodePlatform(platform, provisioner, group, os_image, PLATFORM, managed + extra)
    if dp_daemonset is None:
        return NodePlatform(platform, provisioner, group, os_image, UNKNOWN, "no device-plugin DaemonSet was read")
    ref = _daemonset_ref(dp_daemonset)
    if _operator_operand(dp_daemonset, has_policy):
        how = f" installed through OLM (Subscription {olm})" if olm else ""
        return NodePlatform(platform, provisioner, group, os_image, GPU_OPERATOR, f"GPU Operator{how}: DaemonSet {ref}")
    if _labels(dp_daemonset).get(ADDON_MANAGER):
        return NodePlatform(
            platform, provisioner, group, os_image, PLATFORM, f"DaemonSet {ref}, reconciled by the addon manager"
        )
    return NodePlatform(platform, provisioner, group, os_image, DAEMONSET, f"standalone DaemonSet {ref}")


def _autoscaler(provisioner: str, cluster_autoscaler_runs: bool) -> str | None:
    """Karpenter for its NodePools; the cluster autoscaler for cloud node groups (GKE, AKS and EKS run it
    for node pools with autoscaling on; a snapshot cannot tell which have it on, so they are assumed to,
    and protecting a node no autoscaler watches costs nothing), and wherever it runs
    (`cluster_autoscaler_runs`: `_runs_cluster_autoscaler`)."""
    if provisioner == "karpenter":
        return "karpenter"
    if provisioner in ("gke-node-pool", "aks-agent-pool", "eks-node-group"):
        return "cluster-autoscaler"
    if provisioner == "openshift-machineset" or cluster_autoscaler_runs:
        return "cluster-autoscaler"
    return None


def _runs_cluster_autoscaler(state: ClusterState) -> bool:
    """Whether a Deployment of the cluster autoscaler is in the snapshot. Asked once for all the pools:
    each pool scanned every Deployment (pools x Deployments, on a fleet of node groups no cloud names)."""
    return any("cluster-autoscaler" in _meta(d).get("name", "") for d in state.of("apps/Deployment"))


def _switching(platform: str, owner: str, detail: str, auto_mode: bool) -> tuple[str, str, tuple[str, ...]]:
    """(strategy, what switching takes, its sources)."""
    if owner == PLATFORM:
        if platform == "gke":
            return (
                REPLACE_POOL,
                (
                    f"create a node pool with gpu-driver-version=disabled and {GKE_NO_DEFAULT_PLUGIN}=true, install "
                    "a GPU driver and the DRA driver there, drain this pool across (the label alone stops GKE's plugin "
                    "on a node, but GKE's driver install is the pool's, unsupported with DRA, and GKE recreates nodes "
                    "from the pool; no MIG or time-sharing with DRA)"
                ),
                (SOURCES["gke-dra"],),
            )
        if platform == "eks" and auto_mode:
            return (
                REPLACE_POOL,
                (
                    "Auto Mode nodes run AWS's GPU stack: bring up DRA capacity (Auto Mode's NVIDIA DRA driver "
                    "needs Kubernetes 1.36, or a Karpenter/managed node group with the DRA driver) and drain across"
                ),
                (SOURCES["eks-devices"], SOURCES["eks-dra"]),
            )
        if platform == "aks":
            return (
                REPLACE_POOL,
                (
                    "an AKS managed GPU pool's driver mode (DevicePlugin or DRA) is the node pool's: add a pool "
                    "with the DRA driver and drain this one across"
                ),
                (SOURCES["aks-managed-gpu"], SOURCES["aks-driver-mode"]),
            )
        return (
            REPLACE_POOL,
            (f"{detail}: no node label switches it, so bring up DRA-ready nodes beside the pool and drain across"),
            (SOURCES["eks-dra"],),
        )
    if owner == GPU_OPERATOR:
        src = SOURCES["openshift-gpu-operator"] if platform == "openshift" else SOURCES["gke-gpu-operator"]
        return (
            IN_PLACE,
            ("set the GPU Operator's node labels node by node (device plugin off, DRA kubelet plugin on)"),
            ((src,) if platform in ("openshift", "gke") else ()),
        )
    if owner == DAEMONSET:
        return IN_PLACE, "relabel node by node so the device-plugin DaemonSet leaves and the DRA plugin starts", ()
    return IN_PLACE, "the device plugin's owner is not visible: the plan's label parameters are assumed", ()


def _own_taints(node: Mapping[str, Any]) -> set[tuple[str, str, str]]:
    out = set()
    for t in (node.get("spec") or {}).get("taints") or []:
        key = str(t.get("key") or "") if isinstance(t, Mapping) else ""
        if key and key not in LIFECYCLE_TAINTS and key.partition("/")[0] not in LIFECYCLE_TAINT_DOMAINS:
            out.add((key, str(t.get("value") or ""), str(t.get("effect") or "")))
    return out


def _shared_taints(members: list[Obj]) -> tuple[tuple[str, str, str], ...]:
    """The taints every node of the pool carries, as its node group gave them: what its replacement must carry
    too, or pods that do not tolerate them land on the new GPU nodes."""
    sets = [_own_taints(n) for n in members]
    return tuple(sorted(set.intersection(*sets))) if sets else ()


def _common(maps: Iterable[Mapping[str, str]]) -> dict[str, str]:
    items = list(maps)
    if not items:
        return {}
    out = dict(items[0])
    for m in items[1:]:
        out = {k: v for k, v in out.items() if m.get(k) == v}
    return out


def pool_platforms(
    state: ClusterState,
    pools: Mapping[str, list[str]],
    dp_daemonset_of: Mapping[str, str | None],
) -> dict[str, PoolPlatform]:
    """Per pool name (its node names): the platform, stack owner and strategy. `dp_daemonset_of` maps a
    node to the "ns/name" of the device-plugin DaemonSet that runs there (None: none does)."""
    nodes = {str(_meta(n).get("name")): n for n in state.of("Node")}
    daemonsets = {_daemonset_ref(d): d for d in state.of("apps/DaemonSet")}
    olm = olm_gpu_operator(state)
    has_policy = bool(state.of("nvidia.com/ClusterPolicy"))
    operator_driver = operator_installs_driver(state)
    # Read once for all the pools, not once a pool (each was a scan: pools x NodePools, pools x Deployments).
    cluster_autoscaler_runs = _runs_cluster_autoscaler(state)
    nodepools = karpenter_nodepools(state)
    out: dict[str, PoolPlatform] = {}
    for pool, names in pools.items():
        members = [n for n in names if n in nodes]
        # Each node's labels copied once: the node's platform and the pool's common labels, zones and
        # sharing all read them (copying them for each was a fifth of the inventory of a sparse fleet).
        labels_of = {n: _labels(nodes[n]) for n in members}
        per = [
            node_platform(nodes[n], labels_of[n], daemonsets.get(dp_daemonset_of.get(n) or ""), olm, has_policy)
            for n in members
        ]
        if not per:
            continue
        # The pool follows its platform-managed nodes if it has any: their stack cannot be switched in place.
        lead = next((p for p in per if p.owner == PLATFORM), None) or Counter(per).most_common(1)[0][0]
        labels = _common(labels_of.values())
        auto_mode = labels.get(EKS_COMPUTE_TYPE) == "auto"
        strategy, switching, sources = _switching(lead.platform, lead.owner, lead.detail, auto_mode)
        count = labels.get(GKE_ACCELERATOR_COUNT, "0")
        out[pool] = PoolPlatform(
            platform=lead.platform,
            provisioner=lead.provisioner,
            group=lead.group,
            owner=lead.owner,
            detail=lead.detail,
            autoscaler=_autoscaler(lead.provisioner, cluster_autoscaler_runs),
            strategy=strategy,
            switching=switching,
            sources=sources,
            os_images=tuple(sorted({p.os_image for p in per if p.os_image})),
            instance_type=labels.get(INSTANCE_TYPE),
            zones=tuple(sorted({node_labels.get(ZONE, "") for node_labels in labels_of.values()} - {""})),
            accelerator=labels.get(GKE_ACCELERATOR),
            accelerator_count=int(count) if count.isdecimal() else 0,
            sharing=tuple(sorted({k for ls in labels_of.values() for k in ls if k in GKE_SHARING_LABELS})),
            auto_mode=auto_mode,
            gpu_operator=operator_driver,
            nodes=len(members),
            labels=labels,
            taints=_shared_taints([nodes[n] for n in members]),
            raw_nodepool=nodepools.get(lead.group) if lead.provisioner == "karpenter" and lead.group else None,
            mig_sizes=tuple(sorted(set[int]().union(*(mig_compute_sizes(nodes[n]) for n in members)))),
        )
    return out


# The label that names a node's group, per provisioner: the new pool's nodes carry it with the new name.
GROUP_LABEL = {
    "gke-node-pool": GKE_POOL,
    "eks-node-group": EKS_NODEGROUP,
    "karpenter": KARPENTER_POOL,
    "aks-agent-pool": AKS_POOL,
}


def new_pool_name(pool: str, p: PoolPlatform) -> str:
    """The name of the pool that replaces `pool` (what the emitted command creates)."""
    if p.provisioner == "aks-agent-pool":
        # AKS Linux node pool names: lowercase letters and digits, at most 12 characters (az aks nodepool add).
        return ("".join(ch for ch in pool.lower() if ch.isalnum())[:9] + "dra")[:12]
    return f"{pool}-dra"


# Label domains Kubernetes, the platforms and the GPU stack set on nodes themselves ("kubernetes.io" covers
# node.kubernetes.io, topology.kubernetes.io, feature.node.kubernetes.io): a new pool's nodes get theirs from
# the platform and its kubelets, so a replace-pool command carries only the pool's other labels, its own.
SYSTEM_LABEL_DOMAINS = (
    "kubernetes.io", "k8s.io", "x-k8s.io", "cloud.google.com", "gke.io", "amazonaws.com", "karpenter.sh",
    "karpenter.k8s.aws", "azure.com", "openshift.io", "nvidia.com", "eksctl.io", "dra-migrate.io",
)  # fmt: skip
HOSTNAME = "kubernetes.io/hostname"
# Labels without a system domain that name the node's group, set by the platform: AKS's legacy `agentpool`
# (beside kubernetes.azure.com/agentpool) and eksctl's alpha.eksctl.io/nodegroup-name.
POOL_NAME_LABELS = ("agentpool", "alpha.eksctl.io/nodegroup-name")


def system_label(key: str) -> bool:
    domain = key.partition("/")[0] if "/" in key else ""
    return (
        key in (GKE_NO_DEFAULT_PLUGIN, *POOL_NAME_LABELS)
        or any(domain == d or domain.endswith("." + d) for d in SYSTEM_LABEL_DOMAINS)
    )  # fmt: skip


def pool_own_labels(p: PoolPlatform) -> dict[str, str]:
    """The labels the pool's nodes were given with the pool, in no system domain: what the command creating
    its replacement carries, so the workloads that select them follow. A Karpenter NodePool's are its
    template's labels and single-valued `In` requirements (the manifest copies both); another pool's, those
    on every one of its nodes."""
    if p.provisioner == "karpenter" and p.raw_nodepool is not None:
        template = ((p.raw_nodepool.get("spec") or {}).get("template")) or {}
        out = {str(k): str(v) for k, v in ((template.get("metadata") or {}).get("labels") or {}).items()}
        for r in (template.get("spec") or {}).get("requirements") or []:
            if isinstance(r, Mapping) and r.get("operator") == "In" and len(r.get("values") or []) == 1:
                out.setdefault(str(r.get("key")), str(r["values"][0]))
        return {k: v for k, v in out.items() if not system_label(k)}
    return {k: v for k, v in p.labels.items() if not system_label(k)}


def new_node_labels(pool: str, p: PoolPlatform, labels: Mapping[str, str], dra: tuple[str, str]) -> dict[str, str]:
    """An old node's labels as its replacement in the new pool has them: the labels the platform sets (zone,
    instance type, accelerator: the new pool is made like the old), the pool's own labels (the command carries
    them), the new group name, the DRA kubelet plugin's label on, the platform's device plugin off (GKE:
    gke-no-default-nvidia-gpu-device-plugin). Not the node's hostname, nor a label only some nodes were given
    by hand: no new node has those."""
    out = {k: v for k, v in labels.items() if k != HOSTNAME and system_label(k)}
    out.update(pool_own_labels(p))
    out[dra[0]] = dra[1]
    key = GROUP_LABEL.get(p.provisioner)
    for k in (key, *POOL_NAME_LABELS) if key else ():
        if k == key or k in out:
            out[k] = new_pool_name(pool, p)
    out.update(GKE_DRA_POOL_LABELS if p.platform == "gke" else {})
    return out


@dataclass(frozen=True)
class CloudCluster:
    """The cluster as its cloud's CLI names it, read from the kubeconfig context that CLI wrote."""

    name: str
    project: str | None = None  # GKE
    location: str | None = None  # GKE: the cluster's zone or region
    region: str | None = None  # EKS


def cloud_cluster(context: str | None) -> CloudCluster:
    """`gcloud container clusters get-credentials` names its context gke_<project>_<location>_<cluster> (none of
    which may hold an underscore); `aws eks update-kubeconfig` the cluster's ARN
    (arn:<partition>:eks:<region>:<account>:cluster/<name>, its --alias defaults to it); `eksctl utils
    write-kubeconfig` <user>@<cluster>.<region>.eksctl.io; `az aks get-credentials` the cluster's name. Any
    other context is taken for the name; none leaves CLUSTER to fill in."""
    if not context:
        return CloudCluster("CLUSTER")
    gke = context.split("_")
    if len(gke) == 4 and gke[0] == "gke" and all(gke[1:]):
        return CloudCluster(gke[3], project=gke[1], location=gke[2])
    arn = context.split(":", 5)
    if len(arn) == 6 and arn[0] == "arn" and arn[2] == "eks" and arn[5].startswith("cluster/"):
        return CloudCluster(arn[5][len("cluster/") :], region=arn[3] or None)
    host = context.rpartition("@")[2].split(".")
    if "@" in context and len(host) == 4 and host[2:] == ["eksctl", "io"] and all(host[:2]):
        return CloudCluster(host[0], region=host[1])
    return CloudCluster(context)


def controller_version(state: ClusterState, image_part: str) -> str | None:
    """The version in the image tag of the Deployment whose image contains `image_part` (e.g.
    "karpenter/controller:1.8.1@sha256:..." -> "1.8.1"), None when there is none or it has no tag."""
    for d in state.of("apps/Deployment"):
        for image in template_images(d):
            if image_part in image:
                tag = image_tag(image)
                return tag.lstrip("v") if tag else None
    return None


def karpenter_nodepools(state: ClusterState) -> dict[str, Obj]:
    """Karpenter's NodePools by name (the first of a name, as a scan for it would find)."""
    out: dict[str, Obj] = {}
    for p in state.of("karpenter.sh/NodePool"):
        name = _meta(p).get("name")
        if isinstance(name, str):
            out.setdefault(name, p)
    return out
