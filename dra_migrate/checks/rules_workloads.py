"""Rules about what workloads ask for (rather than what nodes offer).

Facts each rule rests on are cited beside it (primary sources); docs/rules.md is generated from the docstrings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext, pods_the_drain_evicts, still_to_migrate
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.cluster.podmeta import do_not_interrupt_mark, lost_if_evicted
from dra_migrate.cluster.state import uses_devices
from dra_migrate.cluster.templates import ResolvedTemplate
from dra_migrate.inventory.resources import FRACTIONAL_GPU_RESOURCES
from dra_migrate.inventory.topology import PCIE_ROOT, MultiGpuConsumer

WARNING = Severity.WARNING


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _ref(kind: str, o: dict[str, Any]) -> ObjectRef:
    return ObjectRef.of(kind, o)


def _fractional_names(containers: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for c in containers:
        res = c.get("resources")
        if not isinstance(res, dict):
            continue
        for part in ("limits", "requests"):
            m = res.get(part)
            if isinstance(m, dict):
                found.update(k for k in m if k in FRACTIONAL_GPU_RESOURCES)
    return found


def _template_names(templates: list[ResolvedTemplate]) -> set[str]:
    names: set[str] = set()
    for t in templates:
        names |= _fractional_names(t.containers() + t.init_containers())
    return names


def _has_owner(o: dict[str, Any]) -> bool:
    return bool(_meta(o).get("ownerReferences"))


def fractional_users(ctx: CheckContext) -> dict[ObjectRef, set[str]]:
    """Top-level workloads (and bare pods) whose containers ask for a fraction of a GPU: object -> names.

    Owned objects (a Deployment's ReplicaSets, a workload's pods) are their owner's demand, said once."""
    state = ctx.state
    out: dict[ObjectRef, set[str]] = {}
    for key in state.templates.kind_keys():
        if state.templates.is_blueprint(key):
            continue
        for o in state.of(key):
            if _has_owner(o):
                continue
            names = _template_names(state.templates.resolve(key, o))
            if names:
                out[_ref(str(o.get("kind", key)), o)] = names
    return out


# HAMi and similar schemes hand a container part of a GPU (nvidia.com/gpucores: a percentage of its cores,
# nvidia.com/gpumem: MiB of its memory; Project-HAMi/HAMi README "Resource"). DRA's extended-resource path
# allocates whole devices (KEP-5004: one extended-resource unit is one device of the class), and the NVIDIA
# DRA driver shares a GPU only through explicit claims with a sharing config, so these pods would take
# whole GPUs after the migration, or not schedule.
@rule(
    "fractional-gpu-request",
    WARNING,
    summary="workloads ask for a fraction of a GPU (HAMi gpucores/gpumem and similar), which DRA cannot serve",
)
def fractional_gpu_request(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a workload (or bare pod) asks for part of a GPU: HAMi's `nvidia.com/gpucores` /
    `nvidia.com/gpumem` / `gpumem-percentage` beside `nvidia.com/gpu`, Alibaba's `aliyun.com/gpu-mem`, Tencent's
    `tencent.com/vcuda-*`. Rests on: DRA allocates whole devices: one extended-resource unit is one device
    (KEP-5004); HAMi's names: Project-HAMi/HAMi README "Resource"; `convert` refuses these pods.
    """
    users = fractional_users(ctx)
    if not users:
        return
    names = sorted(set().union(*users.values()))
    yield Finding(
        "fractional-gpu-request",
        WARNING,
        f"{len(users)} workload(s) ask for a fraction of a GPU ({', '.join(names)}): DRA's extended-resource "
        "path and ResourceClaims allocate whole devices, so after the migration each would take whole GPUs "
        "or not schedule",
        "keep their pool on the fractional-GPU scheduler (leave it out of the plan), or move them to whole "
        "GPUs, MIG devices, or explicit claims with the DRA driver's sharing config; dra-migrate convert "
        "refuses them",
        tuple(sorted(users)),
    )


def _topology_text(t: MultiGpuConsumer) -> str:
    ref = f"{t.kind} {t.namespace}/{t.name}" if t.namespace else f"{t.kind} {t.name}"
    nodes = "/".join(str(n) for n in t.node_gpus)
    return f"{ref} ({t.per_container} of {nodes} {t.resource} per container)"


# The NVIDIA device plugin answers the kubelet's GetPreferredAllocation for full GPUs with a connected set
# (k8s-device-plugin v0.18.0 internal/plugin/server.go `GetPreferredAllocation` -> internal/rm/nvml_manager.go
# `alignedAlloc`, go-gpuallocator's best-effort policy over NVLink/PCIe links). DRA's allocator takes any N
# devices that match unless a `DeviceConstraint` with `matchAttribute` ties them (KEP-4381; k8s.io/api resource/v1
# `DeviceConstraint.MatchAttribute`: "A device which does not have that attribute will not be chosen").
@rule(
    "topology-preferred-allocation",
    WARNING,
    summary="consumers of several but not all of a node's GPUs lose the device plugin's connected allocation",
)
def topology_preferred_allocation(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a container asks for 2 or more whole GPUs (`nvidia.com/gpu` or a renamed full-GPU
    name, not MIG, not time-sliced) and the nodes it can land on have more than that. Rests on: the NVIDIA device
    plugin's GetPreferredAllocation picks a connected set for full GPUs (k8s-device-plugin v0.18.0
    internal/rm/nvml_manager.go `alignedAlloc`); under DRA the scheduler takes any N matching devices unless the
    claim has a `matchAttribute` constraint (KEP-4381, k8s.io/api resource/v1 `DeviceConstraint`), and a pod that
    keeps `nvidia.com/gpu` through a DeviceClass's extendedResourceName gets none (KEP-5004). The NVIDIA DRA driver
    publishes `resource.kubernetes.io/pcieRoot` only where sysfs resolves the GPU (dra-driver-nvidia-gpu v0.4.1
    cmd/gpu-kubelet-plugin/nvlib.go); where live slices show fewer GPUs per root than asked, or none, the
    constraint cannot be met and the finding says so.
    """
    found = ctx.inventory.topology
    if not found:
        return
    shown = ", ".join(_topology_text(t) for t in found[:5]) + (f", and {len(found) - 5} more" if len(found) > 5 else "")
    message = (
        f"{len(found)} workload(s) ask for several but not all of a node's GPUs: {shown}. The NVIDIA device plugin "
        "gave each container a connected set (NVLink peers, one PCIe switch or root); under DRA the scheduler takes "
        "any free devices unless the claim constrains them, and nvidia.com/gpu served through a DeviceClass gets no "
        "constraint"
    )
    too_big = [t for t in found if t.largest_root is not None and t.per_container > t.largest_root]
    no_root = [t for t in found if t.nodes_without_root]
    if too_big:
        message += (
            f"; on the live slices no PCIe root holds as many GPUs as {', '.join(_topology_text(t) for t in too_big)}"
            " asks for, so a pcieRoot constraint would leave it pending"
        )
    if no_root:
        message += (
            f"; {sum(t.nodes_without_root for t in no_root)} node(s) publish GPUs without {PCIE_ROOT} (no sysfs "
            "path for their PCI address), which a matchAttribute constraint never chooses"
        )
    yield Finding(
        "topology-preferred-allocation",
        WARNING,
        message,
        "convert their manifests with `dra-migrate convert --topology` (a matchAttribute constraint on "
        f"{PCIE_ROOT} per request of 2+ GPUs) where one PCIe root holds that many GPUs; otherwise accept any "
        "placement, or keep these pools on the device plugin",
        tuple(sorted(ObjectRef(t.kind, t.name, t.namespace or None) for t in found)),
    )


def unmanaged_gpu_pods(ctx: CheckContext) -> list[tuple[ObjectRef, str]]:
    """GPU pods on nodes still to migrate that the drain would evict for good: no controller recreates them,
    they have not finished, and they are not mirror pods. Each with its node's pool."""
    pool_of = {n.name: n.pool for n in ctx.inventory.nodes if still_to_migrate(n)}
    found = []
    for pod in ctx.state.of("Pod"):
        node = (pod.get("spec") or {}).get("nodeName")
        if node in pool_of and uses_devices(pod) and lost_if_evicted(pod):
            found.append((_ref("Pod", pod), pool_of[node]))
    return sorted(found)


# kubectl drain refuses to evict a pod no controller owns unless --force, since nothing recreates it
# (kubernetes/kubectl pkg/drain/filters.go `unreplicatedFilter`; a finished pod is deleted without it); the
# cluster autoscaler will not scale such a node down either (kubernetes/autoscaler cluster-autoscaler FAQ,
# "What types of pods can prevent CA from removing a node?"). The plan's drain evicts them so that the
# migration is not held by a forgotten pod: this finding is where the operator sees what that deletes. The
# plan's fingerprint records them (plan/fingerprint.py), and the drain deletes no other (execute/ops_drain.py):
# one made after the plan stops it, as kubectl does.
@rule(
    "unmanaged-gpu-pod",
    WARNING,
    summary="GPU pods no controller owns: the drain deletes them for good, nothing recreates them",
)
def unmanaged_gpu_pod(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a running or pending pod that uses GPUs, on a GPU node still to migrate, has no
    owner reference marked `controller` (a hand-made debug shell, a notebook, a one-off run): the drain evicts
    it and nothing recreates it, so its work and the files inside its containers are lost. Finished pods and
    mirror pods are not counted. Rests on: kubectl drain refuses such pods without `--force`
    (kubernetes/kubectl `pkg/drain/filters.go` `unreplicatedFilter`), as the cluster autoscaler will not
    remove their node (kubernetes/autoscaler cluster-autoscaler FAQ).
    """
    found = unmanaged_gpu_pods(ctx)
    if not found:
        return
    shown = ", ".join(f"{ref.namespace}/{ref.name} (pool {pool})" for ref, pool in found[:3])
    more = f", and {len(found) - 3} more" if len(found) > 3 else ""
    yield Finding(
        "unmanaged-gpu-pod",
        WARNING,
        f"{len(found)} GPU pod(s) have no controller: {shown}{more}. The drain evicts them with their node's "
        "wave and nothing recreates them: their work, and files written inside their containers, are lost "
        "(kubectl drain refuses such pods without --force)",
        "ask their owners to finish or save them before their pool's wave (plan --order migrates a pool "
        "later, --exclude-pools leaves it out), or run such work under a Job so it comes back; accept the loss in "
        ".dra-migrate-ignore.yaml to record that it was seen",
        tuple(ref for ref, _ in found),
        pools=tuple(pool for _, pool in found),
    )


# The drain skips DaemonSet pods, as kubectl's `daemonSetFilter` does (kubernetes/kubectl pkg/drain/filters.go:
# their controller ignores unschedulable and would recreate them at once). A DaemonSet pod that holds a GPU
# through the device plugin keeps it through the switch, while the DRA driver publishes every GPU of the node,
# that one included: DRA may then allocate it to another pod (the canary among them). The DaemonSet controller
# removes a pod from a node its selector or required affinity no longer matches
# (k8s.io/kubernetes@v1.37.2 pkg/controller/daemon/daemon_controller.go `podsShouldBeOnNode`), so a
# DaemonSet that requires the device plugin's label leaves each node as the plan switches it off.
@rule(
    "gpu-daemonset",
    WARNING,
    summary="DaemonSets whose pods hold GPUs: the drain skips them, they keep a device-plugin GPU through the switch",
)
def gpu_daemonset(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a DaemonSet's pod template requests a GPU (device-plugin name) and it runs in
    pools still to migrate: the drain skips DaemonSet pods, so each keeps the GPU the device plugin gave it
    through the switch, while the DRA driver publishes that GPU too and DRA may allocate it to another pod.
    Rests on: kubectl drain skips DaemonSet pods (kubernetes/kubectl `pkg/drain/filters.go`
    `daemonSetFilter`); the DaemonSet controller removes a pod from a node its selector or affinity no longer
    matches (kubernetes `pkg/controller/daemon/daemon_controller.go`).
    """
    to_migrate = {n.pool for n in ctx.inventory.nodes if still_to_migrate(n)}
    found = [
        c
        for c in ctx.inventory.consumers
        if c.kind == "DaemonSet" and c.api_version.startswith("apps/") and c.totals and c.pools & to_migrate
    ]
    if not found:
        return
    refs = tuple(sorted(ObjectRef("apps/DaemonSet", c.name, c.namespace or None) for c in found))
    names = ", ".join(f"{r.namespace}/{r.name}" for r in refs[:3]) + (
        f", and {len(refs) - 3} more" if len(refs) > 3 else ""
    )
    yield Finding(
        "gpu-daemonset",
        WARNING,
        f"{len(refs)} DaemonSet(s) run pods that hold GPUs through the device plugin: {names}. The drain skips "
        "DaemonSet pods, so on each node such a pod keeps its GPU through the switch, while the DRA driver "
        "publishes that GPU too: DRA may give it to another pod (the plan's canary among them) while it is in use",
        "make each DaemonSet require the device plugin's label (node affinity {key: "
        'nvidia.com/gpu.deploy.device-plugin, operator: NotIn, values: ["false"]}, or the plan\'s '
        "--device-plugin-label): its controller then removes its pod from each node as the plan switches the "
        "device plugin off; run a DRA version of it (a ResourceClaimTemplate) for migrated nodes",
        refs,
        pools=tuple(sorted({p for c in found for p in c.pools & to_migrate})),
    )


def pods_marked_do_not_disrupt(ctx: CheckContext) -> dict[str, list[tuple[ObjectRef, str]]]:
    """Per pool still to migrate, the pods the drain will evict there that ask not to be interrupted, each with
    its mark (cluster/podmeta.py `do_not_interrupt_mark`). One pass over the pods."""
    found: dict[str, list[tuple[ObjectRef, str]]] = {}
    for pool, pod in pods_the_drain_evicts(ctx):
        mark = do_not_interrupt_mark(pod)
        if mark is not None:
            found.setdefault(pool, []).append((_ref("Pod", pod), mark))
    return found


# The drain evicts through the eviction API, which reads PodDisruptionBudgets and nothing of these marks, as
# kubectl drain does (kubernetes/kubectl pkg/drain/filters.go reads none of them). Karpenter does not disrupt a
# node running an active pod marked `karpenter.sh/do-not-disrupt: "true"` (kubernetes-sigs/karpenter v1.6.2
# pkg/utils/pod/scheduling.go `IsDisruptable`, pkg/controllers/state/statenode.go `ValidatePodsDisruptable`), and
# the cluster autoscaler does not remove a node running a pod marked `cluster-autoscaler.kubernetes.io/
# safe-to-evict: "false"` or, from 1.36, waits for one marked "on-completion" (kubernetes/autoscaler
# cluster-autoscaler-1.36.1 simulator/drainability/rules/notsafetoevict and oncompletion): their owners asked that
# they not be interrupted, and the plan's drain would interrupt them without a word. Only pods the snapshot keeps
# are read: those that use GPUs (cluster/state.py); DaemonSet and mirror pods, which the drain skips, and pods
# finished or already being deleted are not counted.
@rule(
    "pods-marked-do-not-disrupt",
    WARNING,
    summary="pods marked not to be interrupted (Karpenter do-not-disrupt, autoscaler safe-to-evict): evicted anyway",
)
def pods_marked_do_not_disrupt_rule(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning, one per pool. When: a GPU pod the drain will evict from a node still to migrate (not
    finished or being deleted; not a DaemonSet's or mirror pod) carries `karpenter.sh/do-not-disrupt: "true"` or
    `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` (or "on-completion"): its owners asked that it
    not be interrupted, and the drain evicts it anyway. The finding names every such pod: apply's drain evicts
    those with a warning each, and stops, evicting nothing on the node, at a marked pod it did not name (marked or
    started since the plan; execute/ops_drain.py). Rests on: Karpenter does not disrupt such a pod's node
    (kubernetes-sigs/karpenter v1.6.2 `pkg/utils/pod/scheduling.go` `IsDisruptable`, `HasDoNotDisrupt`); the
    cluster autoscaler does not remove it (kubernetes/autoscaler cluster-autoscaler-1.36.1
    `simulator/drainability/rules/notsafetoevict`, `oncompletion`; FAQ); an eviction reads neither mark
    (kubernetes/kubectl `pkg/drain/filters.go`).
    """
    for pool, pods in sorted(pods_marked_do_not_disrupt(ctx).items()):
        pods.sort()
        shown = ", ".join(f"{ref.namespace}/{ref.name} ({mark})" for ref, mark in pods[:3])
        more = f", and {len(pods) - 3} more" if len(pods) > 3 else ""
        yield Finding(
            "pods-marked-do-not-disrupt",
            WARNING,
            f"pool {pool}: {len(pods)} pod(s) are marked not to be interrupted: {shown}{more}. Karpenter and the "
            "cluster autoscaler leave their nodes alone, but the drain evicts them anyway with their node's wave",
            "schedule the pool's waves for when these pods may be interrupted (ask their owners), or leave the pool "
            "out of the plan (--exclude-pools) or migrate it later (plan --order); where the work allows, remove "
            "the annotation; accept it in .dra-migrate-ignore.yaml to record that it was seen",
            tuple(ref for ref, _ in pods),
            pools=(pool,),
        )
