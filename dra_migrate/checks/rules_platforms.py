"""Rules about what a pool's platform cannot do under DRA, and whether its autoscaler can bring up a DRA node
(inventory/platform.py finds the platform; plan/strategies.py chooses how the pool is cut over). Each fact
is cited from the platform's documentation; docs/platforms/ has a page per platform."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext, still_to_migrate, switched_in_place
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.inventory.fleet import DRA_PLUGIN_LABELS, parse_version
from dra_migrate.inventory.gke import GKE_NO_DEFAULT_PLUGIN
from dra_migrate.inventory.placement import node_selects
from dra_migrate.inventory.platform import (
    GROUP_LABEL,
    KARPENTER_DO_NOT_DISRUPT,
    PLATFORM,
    REPLACE_POOL,
    SOURCES,
    PoolPlatform,
    controller_version,
    new_node_labels,
    new_pool_name,
    which_platform,
)

BLOCKER, WARNING, INFO = Severity.BLOCKER, Severity.WARNING, Severity.INFO


def _pools(ctx: CheckContext) -> Iterator[tuple[str, PoolPlatform]]:
    for p in ctx.inventory.pools:
        if p.platform is not None:
            yield p.name, p.platform


# "You can't use the following GPU sharing features: Time-sharing GPUs, Multi-instance GPUs, Multi-process
# Service (MPS)" (GKE, Prepare GKE infrastructure for DRA workloads, Limitations).
@rule(
    "platform-sharing-unsupported", BLOCKER, summary="a GKE pool shares its GPUs in a way GKE does not offer with DRA"
)
def platform_sharing_unsupported(ctx: CheckContext) -> Iterator[Finding]:
    # The pools themselves, not their names: looking each name up among the pools again was pools x pools
    # (2,000 pools of five nodes: 0.4 s of `plan`).
    for pool in ctx.inventory.pools:
        p, name = pool.platform, pool.name
        if p is None:
            continue
        mig = sorted(r for r in pool.allocatable if r.startswith("nvidia.com/mig-"))
        if p.platform != "gke" or not (p.sharing or mig):
            continue
        how = ", ".join([*p.sharing, *mig])
        yield Finding(
            "platform-sharing-unsupported",
            BLOCKER,
            f"pool {name} on GKE shares its GPUs ({how}); GKE offers no time-sharing, MIG or MPS with DRA",
            f"serve these workloads from whole GPUs (or keep this pool on the device plugin: --exclude-pools {name}); "
            f"see {SOURCES['gke-dra']}",
            (ObjectRef("Pool", name),),
        )


@rule("platform-replace-pool", INFO, summary="the platform runs the pool's GPU stack: the plan replaces the pool")
def platform_replace_pool(ctx: CheckContext) -> Iterator[Finding]:
    for name, p in _pools(ctx):
        if p.strategy != REPLACE_POOL:
            continue
        yield Finding(
            "platform-replace-pool",
            INFO,
            f"pool {name}: {p.detail}; no node label switches it, so the plan brings up a DRA-ready pool beside it "
            f"and drains across ({p.switching})",
            "run the command the plan's provision stage names; the old pool needs quota and headroom for both "
            f"pools at once ({', '.join(p.sources)})",
            (ObjectRef("Pool", name),),
        )


@rule(
    "autoscaler-dra-from-zero",
    WARNING,
    summary="the autoscaler of a pool to replace may not provision a DRA node from zero",
)
def autoscaler_dra_from_zero(ctx: CheckContext) -> Iterator[Finding]:
    for name, p in _pools(ctx):
        if p.strategy != REPLACE_POOL or p.autoscaler is None:
            continue
        if p.auto_mode:
            # AWS runs Auto Mode's provisioner (no Karpenter version or feature gate is the user's), which keeps the
            # plan's NodePool's spec.replicas natively: static-capacity node pools, EKS user guide
            # auto-static-capacity. The Auto Mode DRA version is eks-auto-mode-dra-version's.
            continue
        if p.autoscaler == "karpenter":
            version = controller_version(ctx.state, "karpenter/controller")
            parsed = parse_version(version)
            if parsed is not None and parsed >= (1, 15, 0):
                seen = f"Karpenter {version} can, with its DRA feature gates on (a snapshot cannot show them): "
            elif parsed is not None:
                seen = f"Karpenter {version} cannot (before 1.15): "
            else:
                seen = ""
            why = seen + (
                "Karpenter provisions for pending DRA claims only from v1.15 with its DRA feature gates "
                f"({SOURCES['eks-devices']}; {SOURCES['karpenter-dra']}), so a pool scaled from zero by pending "
                "GPU pods may never start"
            )
            fix = (
                "the plan's NodePool asks for its nodes by count (spec.replicas: Karpenter's StaticCapacity feature "
                f"gate, {SOURCES['karpenter-static']}); or run Karpenter >= 1.15 with its DRA feature gates on"
            )
        else:
            why = (
                "the cluster autoscaler simulates DRA only with --enable-dynamic-resource-allocation=true, and scales "
                "a DRA node group from zero only where its cloud provider's node template declares the devices "
                f"(clusterapi: the capacity.cluster-autoscaler.kubernetes.io/dra-driver annotation, "
                f"{SOURCES['ca-dra-capi']}; externalgrpc cannot, kubernetes/autoscaler#10277)"
            )
            if p.platform == "gke":
                why += f"; GKE's node auto-provisioning does not create DRA node pools ({SOURCES['gke-dra']})"
            fix = (
                "create the new pool with its full node count (the plan's command does), not at zero; keep its "
                "minimum at that count until the migration is done"
            )
        yield Finding(
            "autoscaler-dra-from-zero",
            WARNING,
            f"pool {name} ({p.autoscaler}): {why}",
            fix + "; the plan marks the old nodes so the autoscaler keeps them until the new pool is proven",
            (ObjectRef("Pool", name),),
        )


# Karpenter picks disruption candidates without looking at spec.unschedulable: StateNode.ValidateNodeDisruptable
# (sigs.k8s.io/karpenter pkg/controllers/state/statenode.go) skips a node only for karpenter.sh/do-not-disrupt,
# a nomination, a deletion or an uninitialised node; consolidation (WhenEmpty and WhenEmptyOrUnderutilized)
# removes an empty node once consolidateAfter has passed, "Never" turning it off (NodePool spec.disruption).
@rule(
    "karpenter-consolidates-drained-node",
    INFO,
    summary="an in-place pool's NodePool consolidates empty nodes: the plan keeps do-not-disrupt on its drained nodes",
)
def karpenter_consolidates_drained(ctx: CheckContext) -> Iterator[Finding]:
    for name, p in _pools(ctx):
        if p.strategy == REPLACE_POOL or p.autoscaler != "karpenter" or p.raw_nodepool is None:
            continue
        disruption = (p.raw_nodepool.get("spec") or {}).get("disruption") or {}
        after = str(disruption.get("consolidateAfter") or "0s")
        if after == "Never":
            continue
        policy = disruption.get("consolidationPolicy") or "WhenEmptyOrUnderutilized"
        yield Finding(
            "karpenter-consolidates-drained-node",
            INFO,
            f"pool {name} is switched in place, and its NodePool {p.group} consolidates ({policy}, consolidateAfter "
            f"{after}): each node is empty once drained, and Karpenter does not spare a cordoned node, so the plan "
            f"sets {KARPENTER_DO_NOT_DISRUPT}=true on each node before its cordon and gives the annotation back its "
            "value after its uncordon (steps protect, unprotect)",
            "nothing for consolidation; Karpenter's expiry (expireAfter) ignores the annotation: lengthen it for "
            f"the migration if it could fall inside it ({SOURCES['karpenter-annotations']})",
            (ObjectRef("Pool", name),),
        )


@rule(
    "platform-plugin-conflict",
    WARNING,
    summary="a GKE GPU pool runs both GKE's managed device plugin and a device-plugin DaemonSet",
)
def platform_plugin_conflict(ctx: CheckContext) -> Iterator[Finding]:
    for name, p in _pools(ctx):
        if p.platform == "gke" and p.owner == PLATFORM and "runs there too" in p.detail:
            yield Finding(
                "platform-plugin-conflict",
                WARNING,
                f"pool {name}: {p.detail}: two plugins advertise its GPUs",
                f"GKE pools for the GPU Operator are created with {GKE_NO_DEFAULT_PLUGIN}=true "
                f"({SOURCES['gke-gpu-operator']}); the plan replaces this pool",
                (ObjectRef("Pool", name),),
            )


@rule(
    "replace-pool-pinned-workloads",
    BLOCKER,
    summary="pods of a pool to replace select its nodes by the pool's own name: they cannot follow to the new pool",
)
def replace_pool_pinned(ctx: CheckContext) -> Iterator[Finding]:
    """A pod placed by `nodeSelector`/required affinity on the old pool's name (or anything else the new
    pool's nodes will not have) would stay Pending once drained: the health gate would roll the wave back."""
    nodes = {str((n.get("metadata") or {}).get("name")): n for n in ctx.state.of("Node")}
    pods_on: dict[str, list[dict[str, Any]]] | None = None  # node -> its pods: read once, not once per pool
    for pool in ctx.inventory.pools:
        p, name = pool.platform, pool.name
        if p is None or p.strategy != REPLACE_POOL:
            continue
        if pods_on is None:
            pods_on = {}
            for pod in ctx.state.of("Pod"):
                pods_on.setdefault(str((pod.get("spec") or {}).get("nodeName")), []).append(pod)
        members = set(pool.nodes)  # the pool's own list: finding them among the fleet's nodes was pools x nodes
        stuck: set[str] = set()
        for pod in (pod for member in sorted(members) for pod in pods_on.get(member, [])):
            spec = pod.get("spec") or {}
            node = nodes.get(str(spec.get("nodeName")))
            if node is None or spec.get("nodeName") not in members:
                continue
            meta = node.get("metadata") or {}
            labels = new_node_labels(name, p, meta.get("labels") or {}, (DRA_PLUGIN_LABELS[0], "true"))
            if not node_selects(spec, {**node, "metadata": {**meta, "labels": labels}}):
                stuck.add(_owner_of(pod))
        if stuck:
            shown = ", ".join(sorted(stuck)[:5]) + (f" and {len(stuck) - 5} more" if len(stuck) > 5 else "")
            yield Finding(
                "replace-pool-pinned-workloads",
                BLOCKER,
                f"pool {name} is replaced by {new_pool_name(name, p)}, but {len(stuck)} workload(s) select its nodes "
                f"by what the new nodes will not carry (e.g. {GROUP_LABEL.get(p.provisioner, 'the pool label')}="
                f"{name}): {shown}",
                "select the GPU nodes by what both pools share (the accelerator or instance type, a label of your "
                f"own on both), or leave the pool out (--exclude-pools {name})",
                (ObjectRef("Pool", name),),
            )


def _owner_of(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    what = f"{owner.get('kind')} {owner.get('name')}" if owner else f"Pod {meta.get('name')}"
    return f"{meta.get('namespace', '')}/{what}"


# "EKS Auto Mode includes the NVIDIA DRA driver in the node runtime on Kubernetes version 1.36 and later"
# (EKS user guide, Use the NVIDIA DRA driver or device plugin on Amazon EKS).
@rule("eks-auto-mode-dra-version", BLOCKER, summary="EKS Auto Mode nodes serve DRA only from Kubernetes 1.36")
def eks_auto_mode_version(ctx: CheckContext) -> Iterator[Finding]:
    version = ctx.version
    for name, p in _pools(ctx):
        if p.auto_mode and version is not None and version < (1, 36, 0):
            yield Finding(
                "eks-auto-mode-dra-version",
                BLOCKER,
                f"pool {name} runs on EKS Auto Mode, whose node runtime includes the NVIDIA DRA driver from "
                f"Kubernetes 1.36; this cluster is {ctx.state.source.kubernetes_version}",
                "upgrade the cluster to 1.36, or move the pool to Karpenter or a managed node group "
                f"({SOURCES['eks-dra']})",
                (ObjectRef("Pool", name),),
            )


__all__ = ["parse_version"]


# The nodes a node group makes carry its template's labels, not those set on each node since (GKE: node pool
# labels, cloud.google.com/kubernetes-engine/docs/how-to/update-existing-nodepools; EKS managed node groups:
# UpdateNodegroupConfig `labels`, docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html;
# AKS: `az aks nodepool update --labels`, learn.microsoft.com/azure/aks/use-labels; a MachineSet's
# spec.template.spec.metadata.labels). Karpenter's NodePool template: a change to it drifts every node the pool
# made, which Karpenter then replaces (karpenter.sh/docs/concepts/disruption/#drift).
TEMPLATE_OF = {
    "gke-node-pool": "GKE node pool",
    "eks-node-group": "EKS node group",
    "aks-agent-pool": "AKS node pool",
    "karpenter": "Karpenter NodePool",
    "openshift-machineset": "MachineSet",
    "capi-machineset": "Cluster API MachineSet",
}


def _switches(nodes: list[Any]) -> list[str]:
    """The `label=value` switches the plan sets on the pool's nodes (the plan's label options where no
    DaemonSet was read)."""
    out: set[str] = set()
    for n in nodes:
        for placement, option in ((n.dp_placement, "--device-plugin-label"), (n.dra_placement, "--dra-label")):
            if placement is not None and placement.mode == "label" and placement.label:
                out.add(f"{placement.label}={placement.value}")
            elif placement is not None and placement.mode == "assumed":
                out.add(f"the plan's {option}")
    return sorted(out)


@rule(
    "in-place-pool-template",
    WARNING,
    summary="an in-place pool's node group makes its new nodes without the plan's switch labels: they come up "
    "on the device plugin",
)
def in_place_pool_template(ctx: CheckContext) -> Iterator[Finding]:
    # One finding per kind of node group and switches, naming its pools: a fleet of 400 node pools read 400
    # findings alike (and its plan file carried them: issue 29 holds it to 300 bytes a node).
    groups: dict[tuple[str, tuple[str, ...]], list[tuple[str, PoolPlatform]]] = {}
    nodes_of: dict[str, list[Any]] = {}  # once, not a scan of every node per pool (pools x nodes)
    for n in ctx.inventory.nodes:
        nodes_of.setdefault(n.pool, []).append(n)
    for name, p in _pools(ctx):
        if p.strategy == REPLACE_POOL or p.provisioner not in TEMPLATE_OF:
            continue
        found = _switches([n for n in nodes_of.get(name, []) if switched_in_place(ctx, n)])
        if found:
            groups.setdefault((p.provisioner, tuple(found)), []).append((name, p))
    for provisioner, switches in sorted(groups):
        pools, what = groups[(provisioner, switches)], TEMPLATE_OF[provisioner]
        named = [f"{name} ({what} {p.group})" if p.group and p.group != name else name for name, p in pools]
        listed = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
        drift = (
            "; a change to a NodePool's template drifts every node it made, and Karpenter replaces them: make it "
            "once the pool is migrated, as a planned disruption"
            if provisioner == "karpenter"
            # "Updating labels will overwrite the old labels" (learn.microsoft.com/azure/aks/use-labels,
            # "Updating labels on existing node pools"): the switches alone would drop the pool's own labels.
            else (
                " (`az aks nodepool update --labels` will overwrite the pool's labels: pass its current ones, "
                "`az aks nodepool show --query nodeLabels`, with the switches)"
                if provisioner == "aks-agent-pool"
                else ""
            )
        )
        yield Finding(
            "in-place-pool-template",
            WARNING,
            f"pool(s) {listed} are switched in place, node by node ({', '.join(switches)}); the nodes each "
            f"{what} makes later (a scale-up, an auto-repair, a node upgrade that recreates its nodes) carry the "
            "group's own labels and come up on the device plugin, so an upgrade after the migration undoes it",
            f"once a pool's stage is done, add the same labels to its {what}'s node labels{drift}",
            tuple(ObjectRef("Pool", name) for name, _ in pools),
        )


# The Machine Config Operator's per-node annotations (openshift/machine-config-operator
# pkg/daemon/constants/constants.go): the daemon's state (Working while it applies an update; Done; Degraded,
# Unreconcilable) and the rendered config the node runs and the one it is to run. Updating a node, the daemon has
# it cordoned and drained, reboots it, and has it uncordoned (`desiredDrain` `drain-<config>`, then
# `uncordon-<config>`, which the MCO's drain controller carries out).
MCO_STATE = "machineconfiguration.openshift.io/state"
MCO_CURRENT = "machineconfiguration.openshift.io/currentConfig"
MCO_DESIRED = "machineconfiguration.openshift.io/desiredConfig"


def mco_updating(annotations: dict[str, Any]) -> str | None:
    """Why the Machine Config Operator is at work on a node of these annotations; None when it is not."""
    state = str(annotations.get(MCO_STATE) or "")
    current, desired = str(annotations.get(MCO_CURRENT) or ""), str(annotations.get(MCO_DESIRED) or "")
    if state and state != "Done":
        return f"machine config daemon state {state}"
    if current and desired and current != desired:
        return f"to update from {current} to {desired}"
    return None


@rule(
    "openshift-machine-config-update",
    WARNING,
    summary="the Machine Config Operator is updating an OpenShift GPU node still to migrate: it uncordons the node "
    "itself when it is done",
)
def openshift_machine_config_update(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: an OpenShift GPU node still to migrate has its machine config daemon state other
    than Done, or a desiredConfig that is not its currentConfig. Rests on: the daemon cordons, drains, reboots and
    uncordons the node it updates (MCO `desiredDrain` `uncordon-<config>`), so a node of the migration's wave is
    put back into service before its canary; the MachineConfigPool's `spec.paused` holds further updates."""
    nodes = {str((n.get("metadata") or {}).get("name")): n for n in ctx.state.of("Node")}
    busy: dict[str, list[str]] = {}
    for n in ctx.inventory.nodes:
        node = nodes.get(n.name)
        if node is None or not still_to_migrate(n) or which_platform(node) != "openshift":
            continue
        why = mco_updating((node.get("metadata") or {}).get("annotations") or {})
        if why is not None:
            busy.setdefault(why, []).append(n.name)
    if busy:
        names = sorted(name for group in busy.values() for name in group)
        reasons = "; ".join(
            f"{', '.join(sorted(v)[:3])}{' and more' if len(v) > 3 else ''}: {k}" for k, v in sorted(busy.items())
        )
        yield Finding(
            "openshift-machine-config-update",
            WARNING,
            f"the Machine Config Operator is updating {len(names)} GPU node(s) still to migrate ({reasons}); it "
            "drains, reboots and uncordons each itself, and would put a node back into service in the middle of "
            "its migration",
            "let the MachineConfigPool finish its update, then pause it for the migration (oc patch "
            'machineconfigpool POOL --type merge -p \'{"spec":{"paused":true}}\'; paused: false after)',
            tuple(ObjectRef("Node", name) for name in names),
        )
