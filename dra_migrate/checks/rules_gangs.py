"""Rules about gangs: all-or-nothing groups of pods through the migration (docs/readiness.md "Gangs")."""

from __future__ import annotations

from collections.abc import Iterator

from dra_migrate.checks.context import GENERIC_WORKLOAD, CheckContext
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.dra.capacity import compile_classes
from dra_migrate.dra.gangfit import Moments, capacity_after, capacity_before, judge, migration_points
from dra_migrate.inventory.consumers import PodRequests
from dra_migrate.inventory.gangs import PODGROUP, WORKLOAD, Gang

SCHEDULING_API = "scheduling.k8s.io/v1beta1"
BLOCKER, WARNING = Severity.BLOCKER, Severity.WARNING


def _describe(g: Gang) -> str:
    shapes = ", ".join(
        f"{r.count}×{{{', '.join(f'{k}: {v}' for k, v in sorted(r.resources.items()))}}}" for r in g.roles
    )
    return f"{g.ref} (minCount {g.min_count} of {g.pods} pods: {shapes})"


def _own(g: Gang, pods: PodRequests) -> dict[str, dict[str, int]]:
    """What the gang's own pods hold on each node (its bound pods' requests, as the inventory read them)."""
    own: dict[str, dict[str, int]] = {}
    for ref in g.pod_names:
        node, req = pods.get(ref, (None, {}))
        if isinstance(node, str):
            per = own.setdefault(node, {})
            for r, v in req.items():
                per[r] = per.get(r, 0) + v
    return own


# Gang placement: the scheduler's gang plugin holds a PodGroup's pods until minCount can be placed
# (k8s.io/kubernetes@v1.37.2 pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go); the
# frameworks' gang schedulers (Volcano, Kueue's waitForPodsReady) do the same for their jobs.
@rule(
    "gang-capacity-after",
    BLOCKER,
    WARNING,
    summary="a running or pending gang could no longer be placed whole at some point of the migration",
)
def gang_capacity(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker if a running or pending gang could not be placed whole at some point of the migration, warning
    if only by evicting other pods. When: per-node packing of the gang's `minCount` pods at each point (see "Gangs"
    in docs/readiness.md). Rests on: the gang plugin holds a PodGroup's pods until `minCount` can be placed
    (kubernetes v1.37.2 `pkg/scheduler/framework/plugins/gangscheduling/gangscheduling.go`); Volcano and Kueue's
    all-or-nothing admission do the same for their jobs.
    """
    gangs = [g for g in ctx.inventory.gangs if g.live_pods and g.placement_set()]
    if not gangs:
        return
    proposals = [(p.name, p.extended_resource_name, p.selector) for p in ctx.generation.proposals]
    classes = compile_classes(ctx.state, proposals)
    before = capacity_before(ctx.inventory.nodes)
    after = capacity_after(ctx.state, ctx.inventory.nodes, classes)
    points = migration_points(ctx.inventory.nodes, before, after)
    pods = ctx.inventory.pod_requests
    requested = {n.name: dict(n.requested) for n in ctx.inventory.nodes}
    moments = Moments(points, requested)
    for g in gangs:
        verdict = judge(g, moments, _own(g, pods))
        if verdict.failed_whole:
            yield Finding(
                "gang-capacity-after",
                BLOCKER,
                f"{_describe(g)} could not be placed whole {verdict.failed_whole}: no set of nodes then has room "
                "for every pod it needs at once, so it would hold GPUs and make no progress",
                "migrate its pools when it is not running, add nodes of its shape first, or migrate the pool in "
                "waves that leave room for it (plan --max-unavailable)",
                (ObjectRef(g.kind, g.name, g.namespace or None),),
            )
        elif verdict.failed_beside_others:
            yield Finding(
                "gang-capacity-after",
                WARNING,
                f"{_describe(g)} fits {verdict.failed_beside_others} only if other pods are evicted to make room",
                "check the priority of the pods on those nodes, or migrate when the gang is not running",
                (ObjectRef(g.kind, g.name, g.namespace or None),),
            )


def _uses_scheduling_api(ctx: CheckContext) -> list[ObjectRef]:
    refs = [ObjectRef.of("PodGroup", o) for o in ctx.state.of(PODGROUP)]
    refs += [ObjectRef.of("Workload", o) for o in ctx.state.of(WORKLOAD)]
    refs += [ObjectRef.of("Pod", pod) for pod in ctx.state.of("Pod") if (pod.get("spec") or {}).get("schedulingGroup")]
    return sorted(refs)


# GenericWorkload is beta and off by default in 1.37, and scheduling.k8s.io/v1beta1 is among the beta
# versions disabled by default (k8s.io/kubernetes@v1.37.2 pkg/features/kube_features.go,
# pkg/controlplane/instance.go betaAPIGroupVersionsDisabledByDefault).
@rule("gang-scheduling-unavailable", WARNING, summary="Workloads or PodGroups in use where the gang API is not on")
def gang_scheduling_unavailable(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: Workloads, PodGroups or pods with `spec.schedulingGroup` exist, but
    `scheduling.k8s.io/v1beta1` is not served, or `GenericWorkload` is off (declared, or not declared on a
    snapshot). Rests on: `GenericWorkload` beta and off by default in 1.37, `scheduling.k8s.io/v1beta1` disabled by
    default (kubernetes v1.37.2 `pkg/features/kube_features.go`, `pkg/controlplane/instance.go`).
    """
    refs = _uses_scheduling_api(ctx)
    if not refs:
        return
    served = ctx.state.source.served_apis
    gate = ctx.feature_gates.get(GENERIC_WORKLOAD)
    if served is not None and SCHEDULING_API not in served:
        why = f"the cluster does not serve {SCHEDULING_API}"
    elif gate is False:
        why = f"--feature-gate says {GENERIC_WORKLOAD} is off"
    elif served is None and gate is None:
        why = f"{GENERIC_WORKLOAD} is off by default in 1.37 and the snapshot does not say it is on"
    else:
        return
    yield Finding(
        "gang-scheduling-unavailable",
        WARNING,
        f"{len(refs)} object(s) use gang scheduling ({', '.join(map(str, refs[:3]))}{', …' if len(refs) > 3 else ''}), "
        "but "
        f"{why}: their pods are scheduled one by one, not all or nothing",
        f"run kube-apiserver with --runtime-config={SCHEDULING_API}=true and kube-apiserver and kube-scheduler with "
        f"--feature-gates={GENERIC_WORKLOAD}=true, or declare it: --feature-gate {GENERIC_WORKLOAD}=true",
        tuple(refs[:20]),
    )
