"""Cutover strategies, a registry like the rules' and the actions': how one pool goes from the device
plugin to DRA, chosen per pool from what `inventory/platform.py` found, and explained in the plan.

* **in-place** — the node's stack can be switched on the node (the GPU Operator's or a standalone
  device-plugin DaemonSet): cordon, drain, device plugin off, DRA plugin on, wait, canary, uncordon
  (`build.node_steps`).
* **replace-pool** — the platform owns the node's stack (GKE's managed plugin, EKS Auto Mode, Bottlerocket,
  AKS managed GPU pools): a stage `provision-<pool>` emits the platform's own command or manifest (the
  tool never calls a cloud API), waits for the new pool's nodes to appear and serve DRA, proves one with
  a canary and checks the new pool holds the old pool's whole demand before the first drain; then the
  old pool's nodes are protected from their autoscaler, cordoned and drained wave by wave. Rollback
  uncordons them and lifts the protection; the new pool stays (the plan says how to delete it).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.inventory.gke import GKE_DRA_POOL_LABELS
from dra_migrate.inventory.platform import (
    AKS_CLUSTER,
    AKS_MANAGED_GPU,
    GROUP_LABEL,
    REPLACE_POOL,
    SOURCES,
    PoolPlatform,
    cloud_cluster,
    new_pool_name,
    pool_own_labels,
)
from dra_migrate.plan.actions import PROVISION_ACTIONS, Action, InverseAction
from dra_migrate.plan.model import Inverse, PoolStage, PrepareStage, Stage, Step
from dra_migrate.plan.params import PlanParams, checked_duration
from dra_migrate.plan.steps import cordon_step, drain_step, protect_step

IN_PLACE = "in-place"
EKS_AUTO_STATIC = "https://docs.aws.amazon.com/eks/latest/userguide/auto-static-capacity.html"


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    applies: Callable[[PoolPlatform | None], bool]


STRATEGIES: dict[str, Strategy] = {}


def strategy(name: str, summary: str) -> Callable[[Callable[[PoolPlatform | None], bool]], Any]:
    def register(fn: Callable[[PoolPlatform | None], bool]) -> Any:
        if name in STRATEGIES:
            raise RuntimeError(f"strategy {name} registered twice")
        STRATEGIES[name] = Strategy(name, summary, fn)
        return fn

    return register


@strategy(REPLACE_POOL, "bring up a DRA-ready pool beside this one and drain across")
def _replace_applies(p: PoolPlatform | None) -> bool:
    return p is not None and p.strategy == REPLACE_POOL


@strategy(IN_PLACE, "switch each node's plugins with node labels, node by node")
def _in_place_applies(p: PoolPlatform | None) -> bool:
    return True


def choose(p: PoolPlatform | None) -> Strategy:
    """The first registered strategy that applies (replace-pool before the in-place fallback)."""
    return next(s for s in STRATEGIES.values() if s.applies(p))


def explain(pool: str, p: PoolPlatform | None) -> dict[str, Any]:
    """Why the pool gets its strategy: recorded in the plan's review section."""
    s = choose(p)
    return {
        "pool": pool,
        "strategy": s.name,
        "platform": p.platform if p else None,
        "stackOwner": p.owner if p else None,
        "why": (p.detail if p else "no node of the pool was read") + f": {s.summary}",
        "sources": list(p.sources) if p else [],
    }


# --- replace-pool: the new pool ---------------------------------------------------------------------


def new_pool_selector(pool: str, p: PoolPlatform, params: PlanParams) -> dict[str, str]:
    """The label the new pool's nodes carry, as the emitted command makes them."""
    key = GROUP_LABEL.get(p.provisioner)
    return {key: new_pool_name(pool, p)} if key else {"dra-migrate.io/replaces": pool, params.dra_label: params.dra_on}


def _labels_arg(labels: dict[str, str], sep: str = ",") -> str:
    return sep.join(f"{k}={v}" for k, v in labels.items())


# GKE taints the GPU nodes of a cluster that has other node pools with nvidia.com/gpu=present:NoSchedule itself
# (cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GKE automatically adds ... taint"): not repeated.
GKE_OWN_TAINTS = frozenset({"nvidia.com/gpu"})
# Labels GKE sets from the node pool's settings, which a replacement pool has only if its command asks (and which
# `new_node_labels` keeps): Spot and preemptible VMs (kubernetes-engine/docs/concepts/spot-vms,
# how-to/preemptible-vms: workloads select them by nodeSelector) and the node image
# (`cloud.google.com/gke-os-distribution` cos or ubuntu; gcloud --image-type, COS_CONTAINERD by default).
GKE_SPOT = "cloud.google.com/gke-spot"
GKE_PREEMPTIBLE = "cloud.google.com/gke-preemptible"
GKE_OS = "cloud.google.com/gke-os-distribution"
GKE_IMAGE_TYPES = {"ubuntu": "UBUNTU_CONTAINERD"}


def _taints_arg(taints: tuple[tuple[str, str, str], ...], leave: frozenset[str] = frozenset()) -> str:
    """`key=value:Effect,...` as gcloud's and az's `--node-taints` take them (`key:Effect` without a value)."""
    return ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints if k not in leave)


def platform_command(pool: str, p: PoolPlatform, params: PlanParams, context: str) -> tuple[str, dict[str, Any] | None]:
    """(the command to run, or the manifest to apply) that creates the DRA-ready pool beside `pool`.

    The new nodes carry the DRA kubelet plugin's label (`--dra-label`) and not the device plugin's, so the
    DRA driver as installed runs on them, and the old pool's own labels, so its workloads follow; the cluster
    is named as the cloud's CLI names it (`cloud_cluster`, read from the kubeconfig `context`); every flag
    comes from the platform's documentation (docs/platforms/).
    """
    new = new_pool_name(pool, p)
    dra = {params.dra_label: params.dra_on}
    own = pool_own_labels(p)
    nodes = max(p.nodes, 1)
    machine = p.instance_type or "MACHINE_TYPE"
    cluster = cloud_cluster(context)
    if p.provisioner == "gke-node-pool":
        # GKE set-up-dra: gpu-driver-version=disabled, the node label that keeps GKE's device plugin off, and the
        # labels the DRA chart's kubelet plugin and GKE's autoscaler select (GKE_DRA_POOL_LABELS).
        # --location is the cluster's zone or region, --node-locations the pool's zones, and --num-nodes counts
        # the nodes "in each of the node pool's zones" (gcloud container node-pools create).
        accel = f"type={p.accelerator or 'ACCELERATOR'},count={p.accelerator_count or 1},gpu-driver-version=disabled"
        labels = {**own, **GKE_DRA_POOL_LABELS, **dra}
        # Made like the old pool: Spot or preemptible, and on its node image (new_node_labels keeps these labels).
        image = GKE_IMAGE_TYPES.get(p.labels.get(GKE_OS, ""))
        like = [*(["--spot"] if p.labels.get(GKE_SPOT) == "true" else []),
                *(["--preemptible"] if p.labels.get(GKE_PREEMPTIBLE) == "true" else []),
                *([f"--image-type={image}"] if image else [])]  # fmt: skip
        zones = p.zones or ()
        cmd = [
            "gcloud", "container", "node-pools", "create", new,
            *([f"--project={cluster.project}"] if cluster.project else []), f"--cluster={cluster.name}",
            f"--location={cluster.location or 'LOCATION'}",
            *([f"--node-locations={','.join(zones)}"] if zones else []),
            f"--machine-type={machine}", f"--accelerator={accel}", f"--num-nodes={-(-nodes // max(len(zones), 1))}",
            *like, f"--node-labels={_labels_arg(labels)}",
        ]  # fmt: skip
        # The old pool's own taints, or the new GPU nodes take the pods they kept off (`--node-taints`).
        taints = _taints_arg(p.taints, leave=GKE_OWN_TAINTS)
        cmd += [f"--node-taints={taints}"] if taints else []
        return shlex.join(cmd), None
    if p.provisioner == "karpenter":
        return f"kubectl apply -f - <<'EOF'  # NodePool {new}, below", _karpenter_manifest(pool, p, dra, nodes)
    if p.provisioner == "eks-node-group":
        labels = {**own, **dra, params.device_plugin_label: params.device_plugin_off}
        region = cluster.region or next(filter(None, (_aws_region(z) for z in p.zones)), None)
        # eksctl installs NVIDIA's device plugin DaemonSet with a GPU node group unless told not to (eksctl user
        # guide, GPU support: --install-nvidia-plugin=false): it would advertise the GPUs beside the DRA driver.
        # A Bottlerocket pool is replaced by an AL2023 one, named rather than left to eksctl's default AMI family
        # (AmazonLinux2 in older eksctl): the AL2023 NVIDIA AMI carries the driver but no device plugin ("you must
        # install the NVIDIA Kubernetes device plugin", EKS user guide ml-eks-k8s-device-plugin), where Bottlerocket
        # runs its own (`operator_checks` says how to stay on Bottlerocket instead).
        family = ["--node-ami-family=AmazonLinux2023"] if _bottlerocket(p) else []
        cmd = [
            "eksctl", "create", "nodegroup", f"--cluster={cluster.name}", *([f"--region={region}"] if region else []),
            f"--name={new}", f"--node-type={machine}", *family, f"--nodes={nodes}",
            f"--node-labels={_labels_arg(labels)}", "--install-nvidia-plugin=false",
        ]  # fmt: skip
        return shlex.join(cmd), None
    if p.provisioner == "aks-agent-pool":
        return shlex.join(_aks_command(new, p, {**own, **dra, params.device_plugin_label: params.device_plugin_off},
                                       cluster.name, machine, nodes)), None  # fmt: skip
    if p.provisioner == "openshift-machineset":
        # A MachineSet selects its Machines by machine.openshift.io/cluster-api-machineset=<its name>, in
        # spec.selector.matchLabels and spec.template.metadata.labels (OpenShift docs, machine management,
        # "Creating a compute machine set"): a copy keeping the old name there counts the old pool's machines.
        labels = {**dra, params.device_plugin_label: params.device_plugin_off}
        return (
            f"oc get machineset {p.group} -n openshift-machine-api -o yaml | rename it {new} (metadata.name, and "
            f"machine.openshift.io/cluster-api-machineset in spec.selector.matchLabels and "
            f"spec.template.metadata.labels), drop its status, uid and resourceVersion, add the labels "
            f"{_labels_arg(labels)} to spec.template.spec.metadata.labels, set spec.replicas={nodes} | oc apply -f -"
        ), None
    tainted = f", tainted {_taints_arg(p.taints)}" if p.taints else ""
    labelled = _labels_arg({**own, **dra})
    return f"provision {nodes} node(s) like pool {pool} ({machine}) labelled {labelled}{tainted}", None


# AKS's own node labels (learn.microsoft.com/azure/aks/use-labels, "Reserved system labels"): the OS SKU the pool
# was created with ("os-sku-requested ... exactly matches requested sku from API", else os-sku), its VM priority
# (a Spot pool: scalesetpriority=spot, or priority=spot); AKS_MANAGED_GPU is the managed GPU stack's label.
AKS_OS_SKU_LABELS = ("kubernetes.azure.com/os-sku-requested", "kubernetes.azure.com/os-sku")
AKS_SPOT_LABELS = ("kubernetes.azure.com/scalesetpriority", "kubernetes.azure.com/priority")
# "The following prefixes are AKS reserved prefixes and can't be used for any node: kubernetes.azure.com/"
# (use-labels): AKS puts its taints there itself (a Spot pool's kubernetes.azure.com/scalesetpriority=spot:NoSchedule,
# learn.microsoft.com/azure/aks/spot-node-pool), so --node-taints does not repeat them.
AKS_OWN_TAINT_DOMAIN = "kubernetes.azure.com"


def _aks_command(
    new: str, p: PoolPlatform, labels: dict[str, str], cluster: str, machine: str, nodes: int
) -> list[str]:
    """`az aks nodepool add` for the pool replacing `p`, made like it: its zones, OS SKU, priority and own taints.

    - Zones: AKS labels a zonal node topology.kubernetes.io/zone=<region>-<zone> and a regional one "0" (use-labels);
      `--zones 1 2 3` (learn.microsoft.com/azure/aks/reliability-availability-zones-configure). A zonal pool
      replaced by a regional one strands the pods of its zonal disks.
    - OS SKU: the GPU Operator "isn't compatible with multiple OS versions on the same AKS cluster"
      (learn.microsoft.com/azure/aks/nvidia-gpu-operator), and the pool's workloads were proven on its OS.
    - GPU stack (learn.microsoft.com/azure/aks/aks-managed-gpu-nodes, "Install profiles"): without flags AKS
      installs the driver only (no device plugin), which the DRA driver needs; the same page also gives the full
      managed stack (AKS's device plugin) as "--enable-managed-gpu=true (or neither flag)", so a managed pool's
      replacement (its operator has the aks-preview CLI) says `--enable-managed-gpu=false`: AKS's device plugin
      would advertise the GPUs beside the DRA driver. `--gpu-driver none` only where the GPU Operator installs the
      driver (nvidia-gpu-operator; `--skip-gpu-driver-install` is retired since 2025-08-14); "--gpu-driver None
      is ignored when --enable-managed-gpu=true".
    - MIG: AKS partitions the pool's GPUs at creation by one `--gpu-instance-profile` (MIG1g ... MIG7g,
      learn.microsoft.com/azure/aks/gpu-multi-instance), and the DRA driver publishes the MIG devices a GPU has, or
      the whole GPU (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go, static MIG): a replacement
      without the flag serves no claim for a MIG device.
    """
    zones = [z.rpartition("-")[2] for z in p.zones if re.fullmatch(r"[a-z0-9]+-[1-9]", z)]
    os_sku = next((p.labels[k] for k in AKS_OS_SKU_LABELS if p.labels.get(k)), None)
    spot = any(p.labels.get(k, "").lower() == "spot" for k in AKS_SPOT_LABELS)
    taints = tuple(t for t in p.taints if t[0].partition("/")[0] != AKS_OWN_TAINT_DOMAIN)
    cmd = [
        "az", "aks", "nodepool", "add", "--resource-group", _aks_resource_group(p.labels.get(AKS_CLUSTER, "")),
        "--cluster-name", cluster, "--name", new, "--node-vm-size", machine, "--node-count", str(nodes),
        *(["--zones", *zones] if zones else []), *(["--os-sku", os_sku] if os_sku else []),
        *(["--priority", "Spot"] if spot else []),
        *(["--gpu-instance-profile", f"MIG{p.mig_sizes[0]}g"] if len(p.mig_sizes) == 1 else []),
        *(["--enable-managed-gpu=false"] if p.labels.get(AKS_MANAGED_GPU) == "enabled" else []),
        *(["--gpu-driver", "none"] if p.gpu_operator else []),
        "--labels", *(f"{k}={v}" for k, v in labels.items()),
    ]  # fmt: skip
    return cmd + (["--node-taints", _taints_arg(taints)] if taints else [])


def retire_command(pool: str, p: PoolPlatform, context: str) -> str:
    """The platform command that deletes the old pool once the migration is proven. Its nodes end cordoned and
    shielded from their autoscaler (the protect step), so no autoscaler removes them: they stay up, and billed,
    until the operator runs this (each CLI's delete of what its create made)."""
    cluster = cloud_cluster(context)
    group = p.group or pool
    if p.provisioner == "gke-node-pool":
        project = [f"--project={cluster.project}"] if cluster.project else []
        cmd = ["gcloud", "container", "node-pools", "delete", group, *project, f"--cluster={cluster.name}",
               f"--location={cluster.location or 'LOCATION'}"]  # fmt: skip
    elif p.provisioner == "eks-node-group":
        region = cluster.region or next(filter(None, (_aws_region(z) for z in p.zones)), None)
        cmd = ["eksctl", "delete", "nodegroup", f"--cluster={cluster.name}",
               *([f"--region={region}"] if region else []), f"--name={group}"]  # fmt: skip
    elif p.provisioner == "aks-agent-pool":
        rg = _aks_resource_group(p.labels.get(AKS_CLUSTER, ""))
        cmd = ["az", "aks", "nodepool", "delete", "--resource-group", rg, "--cluster-name", cluster.name,
               "--name", group]  # fmt: skip
    elif p.provisioner == "karpenter":
        cmd = ["kubectl", "delete", "nodepool", group]
    elif p.provisioner == "openshift-machineset":
        cmd = ["oc", "delete", "machineset", group, "-n", "openshift-machine-api"]
    else:
        return f"remove pool {pool}'s nodes from the platform"
    return shlex.join(cmd)


def _aws_region(zone: str) -> str | None:
    """The region of an AWS availability, Local or Wavelength Zone name ("us-east-2a", "us-west-2-lax-1a")."""
    m = re.match(r"^([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d+)(?:[a-z]$|-)", zone)
    return m.group(1) if m else None


def _aks_resource_group(cluster_label: str) -> str:
    """kubernetes.azure.com/cluster is the node resource group, MC_<group>_<cluster>_<region>; the group is
    its second part when no name has an underscore (else RESOURCE_GROUP, to fill in)."""
    parts = cluster_label.split("_")
    return parts[1] if len(parts) == 4 and parts[0] == "MC" else "RESOURCE_GROUP"


def _karpenter_manifest(pool: str, p: PoolPlatform, dra: dict[str, str], nodes: int) -> dict[str, Any]:
    """The old NodePool's spec under a new name, its nodes labelled for the DRA plugin, with static capacity
    (`spec.replicas`, Karpenter's StaticCapacity feature gate): Karpenter provisions for DRA claims only from
    v1.15 with its DRA feature gates (EKS user guide, device management), so the new nodes are asked for by
    count rather than by pending pods."""
    old = p.raw_nodepool or {}
    spec = dict(old.get("spec") or {})
    template = dict(spec.get("template") or {})
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {**dict(meta.get("labels") or {}), **dra}
    template["metadata"] = meta
    ref = (template.get("spec") or {}).get("nodeClassRef")
    if _bottlerocket(p) and isinstance(ref, dict) and ref.get("name"):
        # The old EC2NodeClass boots Bottlerocket with its device plugin on: the same nodes again. The new NodePool
        # names a new one (`operator_checks` says what it must be); until it exists Karpenter launches nothing.
        template["spec"] = {**template["spec"], "nodeClassRef": {**ref, "name": f"{ref['name']}-dra"}}
    spec["template"] = template
    spec["replicas"] = nodes
    # The NodePool CRD refuses beside replicas any limit but limits.nodes and a weight ("only 'limits.nodes' is
    # supported on static NodePools", "'weight' is not supported on static NodePools": karpenter.sh_nodepools.yaml).
    spec.pop("limits", None)
    spec.pop("weight", None)
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": new_pool_name(pool, p), "labels": {"dra-migrate.io/replaces": pool}},
        "spec": spec,
    }


def operator_checks(p: PoolPlatform) -> list[str]:
    """What the emitted command cannot settle and the operator must check before running it."""
    out = []
    if _bottlerocket(p):
        out.append(_bottlerocket_check(p))
    if p.provisioner == "karpenter" and p.auto_mode:
        # AWS runs Auto Mode's provisioner: static-capacity node pools are Auto Mode's own ("set the replicas field in
        # your NodePool specification"; "Once you set replicas on a node pool, you cannot remove it"), and Auto Mode
        # runs NVIDIA's DRA driver itself from Kubernetes 1.36 (SOURCES["eks-dra"]).
        out.append(
            f"EKS Auto Mode keeps spec.replicas itself ({EKS_AUTO_STATIC}): once set, replicas cannot be removed from "
            "the NodePool (delete it when the migration is done); Auto Mode runs NVIDIA's DRA driver on its nodes from "
            f"Kubernetes 1.36 ({SOURCES['eks-dra']}): keep the DRA driver's Helm kubelet plugin off them"
        )
    elif p.provisioner == "karpenter" and p.platform == "aks":
        # AKS node auto-provisioning runs Karpenter itself and takes `replicas` as a static node pool
        # (learn.microsoft.com/azure/aks/node-auto-provisioning-node-pools, "Static node pools").
        out.append(
            "spec.replicas makes the new NodePool a static node pool on AKS node auto-provisioning "
            "(https://learn.microsoft.com/azure/aks/node-auto-provisioning-node-pools#static-node-pools)"
        )
    elif p.provisioner == "karpenter":
        out.append(
            "spec.replicas needs Karpenter's StaticCapacity feature gate (https://karpenter.sh/docs/reference/settings/"
            "#feature-gates); without it, remove replicas and run Karpenter >= 1.15 with its DRA feature gates"
        )
    ref = ((((p.raw_nodepool or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef")
    if p.platform == "aks" and p.provisioner == "karpenter" and isinstance(ref, dict):
        # AKS node auto-provisioning turns the managed GPU stack on by the AKSNodeClass tag
        # EnableManagedGPUExperience (learn.microsoft.com/azure/aks/aks-managed-gpu-nodes, "Node Auto Provisioning
        # node pool"); the new NodePool keeps the old one's nodeClassRef.
        out.append(
            f"the new NodePool keeps the old one's {ref.get('kind', 'node class')} {ref.get('name', '')}: if its tags "
            "hold EnableManagedGPUExperience, AKS installs its device plugin on the new nodes beside the DRA driver; "
            "point it at an AKSNodeClass without that tag (https://learn.microsoft.com/azure/aks/aks-managed-gpu-nodes)"
        )
    if p.provisioner == "aks-agent-pool" and len(p.mig_sizes) > 1:
        sizes = ", ".join(f"{n}g" for n in p.mig_sizes)
        out.append(
            f"the old nodes' GPUs are MIG-partitioned into several sizes ({sizes}); AKS makes a pool with one "
            "--gpu-instance-profile (https://learn.microsoft.com/azure/aks/gpu-multi-instance): add one pool per "
            "profile, or partition the new GPUs yourself (the GPU Operator's MIG manager), before the capacity check"
        )
    if p.provisioner == "eks-node-group" and p.taints:
        # eksctl takes a node group's taints from a config file only (eksctl user guide, "Taints":
        # https://docs.aws.amazon.com/eks/latest/eksctl/nodegroup-taints.html); the command has no flag for them.
        out.append(
            f"the old nodes carry the taints {_taints_arg(p.taints)}: give the new node group the same ones (eksctl "
            "reads taints from a config file: https://docs.aws.amazon.com/eks/latest/eksctl/nodegroup-taints.html, "
            "or `aws eks update-nodegroup-config --taints` after it is created), or pods that do not tolerate them "
            "land on the new GPU nodes"
        )
    return out


def replace_pool_provision(
    pool: str,
    p: PoolPlatform,
    params: PlanParams,
    context: str,
    *,
    devices_per_node: int,
    demand: int,
    canary_resource: str,
) -> PrepareStage:
    """The stage before the old pool's drains: the new pool up, proven, and big enough."""
    command, manifest = platform_command(pool, p, params, context)
    checks = operator_checks(p)
    selector = new_pool_selector(pool, p, params)
    new = new_pool_name(pool, p)
    where = f"Pool {new}"
    steps = (
        Step(f"provision-{pool}/await-pool", Action.AWAIT_POOL, where,
             {"platform": p.platform, "provisioner": p.provisioner, "command": command,
              **({"manifest": manifest} if manifest else {}), **({"check": checks} if checks else {}),
              "retire": retire_command(pool, p, context),
              "selector": dict(selector), "nodes": max(p.nodes, 1),
              "devicesPerNode": devices_per_node, "driver": params.dra_driver, "sources": list(p.sources)},
             "the operator ran the command above (the tool calls no cloud API)", "30m",
             Inverse(InverseAction.NONE,
                     {"why": f"the new pool is the platform's: delete pool {new} there to abandon"})),
        Step(f"provision-{pool}/canary-pool", Action.CANARY_POOL, where,
             {"selector": dict(selector), "resource": canary_resource, "count": 1, "image": params.canary_image,
              "driver": params.dra_driver, "command": ["sh", "-c", params.canary_command],
              **params.canary_placement()},
             "the new pool's nodes serve their GPUs through DRA", params.canary_timeout,
             Inverse(InverseAction.DELETE_POD, {"why": "the canary pod is deleted after its check"})),
        Step(f"provision-{pool}/check-pool-capacity", Action.CHECK_POOL_CAPACITY, where,
             {"selector": dict(selector), "driver": params.dra_driver, "devices": demand, "from": f"Pool {pool}"},
             "before the first drain: the new pool holds the old pool's whole demand", "1m",
             Inverse(InverseAction.NONE, {"why": "a check changes nothing"})),
    )  # fmt: skip
    return PrepareStage(f"provision-{pool}", steps)


def replace_pool_node_steps(params: PlanParams, protect: str | None) -> tuple[Step, ...]:
    """What each old node goes through: protected from its autoscaler (so old capacity stays until the
    migration is proven and rollback has somewhere to go back to), cordoned, drained. Not uncordoned."""
    steps = [protect_step(protect, "the node exists and its uid matches the plan")] if protect is not None else []
    steps += [cordon_step("the new pool passed its canary and capacity check"), drain_step(params)]
    return tuple(steps)


def verifying_steps(stage: PoolStage, node: str, actions: tuple[str, ...]) -> tuple[str, ...]:
    """The step ids whose success verifies a node (report): its own `actions` (wait-dra-ready, canary); for a
    replaced pool's node, whose workloads move to the new pool, the new pool's await-pool and canary-pool."""
    if stage.strategy == REPLACE_POOL:
        return f"provision-{stage.pool}/{Action.AWAIT_POOL}", f"provision-{stage.pool}/{Action.CANARY_POOL}"
    return tuple(f"{stage.name}/{node}/{a}" for a in actions)


# --- what a plan file must hold for these stages (plan/validate.py asks) -------------------------------

Problem = tuple[tuple[str | int, ...], str, str]  # (path below the stage, message, hint)


def provision_problems(stage: PrepareStage, following: Stage | None) -> list[Problem]:
    """`provision-<pool>`: await-pool, canary-pool, check-pool-capacity in that order, each with the new pool's
    selector, right before the replace-pool stage `pool-<pool>` (the new pool is proven before any drain).
    The shape of each step is the model's (`Step.from_dict`)."""
    out: list[Problem] = []
    pool = stage.name[len("provision-") :]
    if not (isinstance(following, PoolStage) and following.name == f"pool-{pool}"
            and following.strategy == REPLACE_POOL):  # fmt: skip
        out.append((("name",), f"stage provision-{pool} must come right before the replace-pool stage pool-{pool}",
                    "the new pool is proven before the old one is drained: regenerate the plan"))  # fmt: skip
    if [s.action for s in stage.steps] != list(PROVISION_ACTIONS):
        out.append((("steps",), f"a provision stage's steps are {', '.join(PROVISION_ACTIONS)}, in this order",
                    "the capacity check must pass before the first drain: regenerate the plan"))  # fmt: skip
    for j, step in enumerate(stage.steps):
        try:
            checked_duration(f"stages.{stage.name}.steps[{j}].timeout", step.timeout)
        except InputError as e:
            out.append((("steps", j, "timeout"), e.message, e.hint))
        sel = step.params.get("selector")
        if not isinstance(sel, dict) or not sel or not all(isinstance(v, str) for v in sel.values()):
            out.append((("steps", j, "params", "selector"), "expected the new pool's node labels (key: value)", ""))
    return out


def replace_stage_problems(stage: PoolStage, params: PlanParams) -> list[Problem]:
    """A replace-pool stage: its node steps (`replace_steps_problem`), and its nodes recording the original value
    of exactly the annotation the protect step sets (dropping the autoscaler's protection is refused). The
    strategy's name is the model's to check (`PoolStage.from_dict`)."""
    problem = replace_steps_problem(stage.node_steps, params)
    out: list[Problem] = [(("nodeSteps",), problem, "regenerate the plan")] if problem else []
    return out + recorded_annotation_problems(stage)


def recorded_annotation_problems(stage: PoolStage) -> list[Problem]:
    """Each node records the original value of exactly the annotation the stage's protect step sets (in place
    or replace-pool): what its rollback restores."""
    out: list[Problem] = []
    keys = {str(s.params.get("key")) for s in stage.node_steps if s.id == "protect"}
    for k, wave in enumerate(stage.waves):
        for m, n in enumerate(wave.nodes):
            recorded = set(n.original.get("annotations") or {})
            if recorded != keys:
                out.append((("waves", k, "nodes", m, "original", "annotations"),
                            f"must record exactly the annotations the steps set ({', '.join(sorted(keys)) or 'none'})",
                            "the protect step keeps the autoscaler off: regenerate the plan"))  # fmt: skip
    return out


def replace_steps_problem(steps: tuple[Step, ...], params: PlanParams) -> str | None:
    """A replace-pool stage's node steps are `replace_pool_node_steps`' (protect, cordon, drain), but for their
    timeouts and free-text preconditions."""
    protect = next((s.params.get("key") for s in steps if s.id == "protect"), None)
    found = [_but_timing(s) for s in steps]
    wanted = [_but_timing(s) for s in replace_pool_node_steps(params, protect)]
    if found != wanted:
        return (
            "a replace-pool stage's per-node steps are protect (when the pool has an autoscaler), cordon, drain, "
            "as dra_migrate.plan.strategies.replace_pool_node_steps makes them"
        )
    return None


def _but_timing(step: Step) -> Step:
    """A step without what a pool may change freely (its timeout, its free-text precondition)."""
    return replace(step, timeout="", precondition="")


__all__ = ["SOURCES", "STRATEGIES", "choose", "explain", "replace_pool_node_steps", "replace_pool_provision"]


# Bottlerocket's NVIDIA variants run NVIDIA's device plugin as a host systemd service, nvidia-k8s-device-plugin
# (bottlerocket-core-kit packages/nvidia-k8s-device-plugin/nvidia-k8s-device-plugin.service), configured by the node's
# settings.kubelet-device-plugins.nvidia.* (https://bottlerocket.dev/en/os/latest/api/settings/kubelet-device-plugins/),
# not a DaemonSet: no node label stops it, and the cluster shows no device-plugin DaemonSet for it. Settings are the
# node's user data, so a new pool has to boot with them: `settings.kubelet-device-plugins.nvidia.enabled = false` turns
# the plugin off (bottlerocket-core-kit#914), and from Bottlerocket 1.66.0 the Kubernetes 1.34-1.37 NVIDIA variants
# carry NVIDIA's DRA driver as a host service, opt-in with `settings.kubelet-dra-drivers.nvidia.enabled = true`, which
# runs only while the device plugin is off (bottlerocket v1.66.0 release notes; bottlerocket-core-kit#1035).
BOTTLEROCKET_DRA = (1, 66, 0)
BOTTLEROCKET_DRA_KUBERNETES = (1, 34)
_BOTTLEROCKET_IMAGE = re.compile(
    r"^Bottlerocket OS (\d+)\.(\d+)\.(\d+) \(([a-z0-9-]*)-k8s-(\d+)\.(\d+)(-[a-z0-9-]*)?\)"
)
_SOURCES_BOTTLEROCKET = (
    "https://bottlerocket.dev/en/os/latest/api/settings/kubelet-device-plugins/, "
    "https://github.com/bottlerocket-os/bottlerocket/releases/tag/v1.66.0"
)


def _bottlerocket(p: PoolPlatform) -> bool:
    """The pool's nodes run Bottlerocket, whose image the replacement must not copy. Not Auto Mode's: AWS builds those
    nodes and chooses DRA or the device plugin on them (EKS user guide, device management), no user data to set."""
    return not p.auto_mode and any(i.lower().startswith("bottlerocket") for i in p.os_images)


def bottlerocket_dra(os_images: tuple[str, ...]) -> bool | None:
    """Whether every node's Bottlerocket (`status.nodeInfo.osImage`, "Bottlerocket OS 1.66.0 (aws-k8s-1.36-nvidia)")
    carries NVIDIA's DRA driver: 1.66.0 or later, an NVIDIA variant for Kubernetes 1.34 or later. None when no image
    reads so (not Bottlerocket, or a form this does not know)."""
    seen = [m for m in (_BOTTLEROCKET_IMAGE.match(i) for i in os_images) if m]
    if not seen:
        return None
    return all(
        tuple(int(m.group(k)) for k in (1, 2, 3)) >= BOTTLEROCKET_DRA
        and (int(m.group(5)), int(m.group(6))) >= BOTTLEROCKET_DRA_KUBERNETES
        and "nvidia" in (m.group(7) or "")
        for m in seen
    )


def _bottlerocket_check(p: PoolPlatform) -> str:
    """What the new pool's nodes must boot with, the old pool being Bottlerocket."""
    images = ", ".join(p.os_images)
    al2023 = "whose NVIDIA AMI has no device plugin, and install the NVIDIA DRA driver's kubelet plugin on its nodes"
    if p.provisioner == "karpenter":
        where = (
            f"the new NodePool names EC2NodeClass {_nodeclass(p)}-dra, which does not exist yet: create it as a copy "
            f"of {_nodeclass(p)} with amiSelectorTerms [{{alias: al2023@latest}}] and without its Bottlerocket (TOML) "
            f"userData, {al2023}"
        )
    elif p.provisioner == "eks-node-group":
        where = f"the command makes the new node group AL2023 (--node-ami-family=AmazonLinux2023), {al2023}"
    else:
        where = "boot the new nodes on an OS that does not run it, with the NVIDIA DRA driver's kubelet plugin"
    stay = (
        "; or stay on Bottlerocket with the settings (user data) settings.kubelet-device-plugins.nvidia.enabled = "
        "false and settings.kubelet-dra-drivers.nvidia.enabled = true, its own DRA driver (keep the DRA driver's "
        "Helm kubelet plugin off those nodes)"
        + (" from an eksctl config file (bottlerocket.settings)" if p.provisioner == "eks-node-group" else "")
        if bottlerocket_dra(p.os_images)
        else f"; {images} has no DRA driver (Bottlerocket 1.66.0, NVIDIA variants for Kubernetes 1.34+, has one)"
    )
    wait = (
        f"until {_nodeclass(p)}-dra exists Karpenter launches no node for the NodePool, and "
        if p.provisioner == "karpenter"
        else ""
    )
    return (
        f"the old nodes run {images}, whose OS runs NVIDIA's device plugin as the host service "
        f"nvidia-k8s-device-plugin (no node label stops it): {where}{stay} ({_SOURCES_BOTTLEROCKET}); "
        f"{wait}await-pool fails while the new nodes advertise no DRA devices"
    )


def _nodeclass(p: PoolPlatform) -> str:
    spec = (((p.raw_nodepool or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    ref = spec.get("nodeClassRef") if isinstance(spec, dict) else None
    return str(ref.get("name")) if isinstance(ref, dict) and ref.get("name") else "NODECLASS"
