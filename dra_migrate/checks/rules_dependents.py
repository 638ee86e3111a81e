"""Rules about what else depends on the GPU resource names: quotas, Kueue, other schedulers, monitoring,
GitOps ownership (docs/dependents.md, with every source)."""

from __future__ import annotations

from collections.abc import Iterator

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.cluster.kinds import kind_key
from dra_migrate.dra.census import driver_class_for
from dra_migrate.dra.deviceclasses import mig_profile_of
from dra_migrate.dra.quotas import converted_class, kueue_mappings, names_in_use, quota_dra
from dra_migrate.inventory.autoscalers import GpuScaler, gpu_scalers
from dra_migrate.inventory.dashboards import Dashboard, dashboards
from dra_migrate.inventory.dependents import (
    REQUESTS,
    KueueInstall,
    class_by_resource,
    dcgm_exporters,
    device_quota_key,
    flavor_node_labels,
    gpu_queues,
    gpu_quota_limits,
    gpu_rule_exprs,
    kueue_install,
    workloads_by_scheduler,
)
from dra_migrate.inventory.gitops import gitops_owner
from dra_migrate.inventory.limitranges import LIMIT_RANGE, gpu_limit_effects
from dra_migrate.inventory.policies import VALIDATING, gpu_policies, shown_places
from dra_migrate.inventory.volcano import QUEUE, VolcanoGpuBudget, keys_to_add, volcano_gpu_budgets

BLOCKER, WARNING, INFO = Severity.BLOCKER, Severity.WARNING, Severity.INFO


def serving_classes(ctx: CheckContext) -> dict[str, str]:
    """Extended resource -> the DeviceClass that serves it after the migration."""
    return class_by_resource(ctx.state, [(p.name, p.extended_resource_name) for p in ctx.generation.proposals])


@rule("volcano-queue-dra", WARNING, INFO, summary="a Volcano Queue budgets GPUs by device-plugin name only")
def volcano_queue_dra(ctx: CheckContext) -> Iterator[Finding]:
    budgets = volcano_gpu_budgets(ctx.state)
    adds = keys_to_add(budgets, driver_class_for)
    by_queue: dict[str, list[VolcanoGpuBudget]] = {}
    for b in budgets:
        by_queue.setdefault(b.queue, []).append(b)
    for queue, queue_budgets in sorted(by_queue.items()):
        ref = ObjectRef(QUEUE, queue)
        said = ", ".join(f"{b.field} {b.resource}: {b.value}" for b in queue_budgets)
        if queue not in adds:
            yield Finding(
                "volcano-queue-dra",
                INFO,
                f"{ref} budgets {said} and the DeviceClasses converted workloads claim from: counted only by "
                "Volcano's capacity plugin with DRA quota (volcano-sh/volcano PR #5058)",
                "run the capacity plugin of a Volcano release with DRA quota",
                (ref,),
            )
            continue
        keys = ", ".join(f'{field}: "{k}": "{v}"' for field, kv in adds[queue].items() for k, v in kv.items())
        owner = queue_budgets[0].owner
        yield Finding(
            "volcano-queue-dra",
            WARNING,
            f"{ref} budgets {said} by device-plugin name only: Volcano counts a ResourceClaim under "
            "`deviceclass/<DeviceClass>` (capacity plugin, volcano-sh/volcano PR #5058) and not at all before "
            "(volcano-sh/volcano#4400), so workloads converted to claims escape the queue",
            f"add {keys} beside the device-plugin keys (the class convert writes; another with --device-class; "
            "`dra-migrate generate dependents` writes the queue), and run the capacity plugin of a Volcano release "
            "with DRA quota; pods that keep the device-plugin request are still counted under it"
            + (f"; change it in its repository ({owner})" if owner else ""),
            (ref,),
        )


# The quota evaluator of k8s.io/kubernetes@v1.37.2 (pkg/quota/v1/evaluator/core/resource_claims.go):
# * every ResourceClaim's devices count under "<class>.deviceclass.resource.k8s.io/devices", the claims the
#   scheduler makes for extended-resource requests included (KEP-5004 "Resource Quota");
# * with DRAExtendedResource (GA and locked on in 1.37) a claim of a class whose extendedResourceName is R
#   also counts under "requests.R", less what its pod's own requests already count;
# * MatchingScopes returns nothing: a quota with scopes or a scopeSelector never counts a claim.
@rule(
    "quota-continuity",
    INFO,
    WARNING,
    summary="a ResourceQuota limits GPUs: the DRA limit the plan adds first, or why none can be expressed",
)
def quota_continuity(ctx: CheckContext) -> Iterator[Finding]:
    classes = serving_classes(ctx)
    dra = quota_dra(ctx.state, classes, names_in_use(ctx.inventory.consumers))
    escapes_said: set[tuple[str, str]] = set()
    for q in gpu_quota_limits(ctx.state):
        ref = ObjectRef("ResourceQuota", q.quota, q.namespace)
        cls = classes.get(q.resource)
        if not q.key.startswith(REQUESTS):
            yield Finding(
                "quota-continuity",
                WARNING,
                f"{ref} limits `{q.key}`, which limits nothing: extended resources are only limited as "
                f"`{REQUESTS}{q.resource}`",
                f"write the limit as `{REQUESTS}{q.resource}`",
                (ref,),
            )
        elif cls is None:
            yield Finding(
                "quota-continuity",
                WARNING,
                f"{ref} limits `{q.key}: {q.value}` but no DeviceClass serves {q.resource} after the migration "
                "(a time-slicing/MPS name has no DRA equivalent): GPUs claimed through DRA are not limited by it",
                "limit the DeviceClass the workloads will claim instead: `<class>.deviceclass.resource.k8s.io/"
                "devices` (in devices, not replicas)",
                (ref,),
            )
        elif q.scoped:
            yield Finding(
                "quota-continuity",
                WARNING,
                f"{ref} limits `{q.key}: {q.value}` with scopes: Kubernetes never counts a ResourceClaim against "
                "a scoped quota, so workloads converted to ResourceClaimTemplates escape it (pods that keep "
                f"{q.resource} requests are still counted)",
                "keep those workloads on extended-resource requests, or limit their namespace with an unscoped "
                f"quota on `{device_quota_key(converted_class(q.resource) or cls)}` (the class their claims use)",
                (ref,),
            )
        else:
            d = dra[(q.namespace, q.quota)]
            how = (
                f"the owning repository must add it ({q.owner}): apply does not patch GitOps-managed objects"
                if q.owner
                else "the plan adds it before the first wave (prepare stage)"
            )
            keys = d.keys_for[q.resource]
            said = " and ".join(f"`{k}: {d.add.get(k) or d.hard.get(k)}`" for k in keys)
            # k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/resource_claims.go: a claim counts under its
            # class's devices, and under `requests.R` only when its class's extendedResourceName is R
            # (`addExtendedResourceQuota`, less what the owning pod already counts there).
            if q.resource in d.apart:
                counts = (
                    f"{cls} serves the extended-resource request, the other is the class `convert` writes, whose "
                    f"claims count under its own limit only, not under `{q.key}`: while some of the namespace's "
                    f"workloads are converted and others are not, the two limits together admit up to twice "
                    f"{q.value}"
                )
            else:
                counts = (
                    f"{cls} serves the extended-resource request and is the class `convert` writes; "
                    f"`{q.key}` also counts converted claims of it"
                    if converted_class(q.resource) == cls
                    else f"{cls} serves the extended-resource request"
                )
            yield Finding(
                "quota-continuity",
                INFO,
                f"{ref} limits `{q.key}: {q.value}`; under DRA the same limit is {said} ({counts}); "
                f"`{q.key}` stays, as it still counts pods' requests",
                how,
                (ref,),
            )
            for dcls, names in sorted(d.escapes.items()):
                if (f"{ref}", dcls) in escapes_said:
                    continue
                escapes_said.add((f"{ref}", dcls))
                yield Finding(
                    "quota-continuity",
                    WARNING,
                    f"{ref} limits `{q.key}` but not {', '.join(names)}, which its namespace also uses: `convert` "
                    f"claims both from DeviceClass {dcls}, and a limit on `{device_quota_key(dcls)}` would refuse "
                    "the unlimited ones, so none is added and converted workloads escape this quota",
                    f"limit every name the namespace uses that {dcls} serves in this quota (the plan then adds "
                    f"`{device_quota_key(dcls)}` as their sum), or convert them with --device-class to a class of "
                    "their own and limit that",
                    (ref,),
                )


# The LimitRanger admission plugin and the API server's defaults (inventory/limitranges.py, with sources).
@rule(
    "limitrange-gpu",
    WARNING,
    summary="a LimitRange names a GPU resource: pods converted to ResourceClaims get it back, or are refused",
)
def limitrange_gpu(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a LimitRange names a GPU extended resource (in `max`, `min`, `default` or
    `defaultRequest`) so that a pod whose containers name none, as a pod converted to a ResourceClaim, is
    given it (the Container default limit, or the max where no default is set) or refused (a default request
    without a limit or unequal to it, a Pod item's min or max). Pods that keep their extended-resource
    requests (nodes migrated, manifests unchanged) are not affected. Rests on: kubernetes
    `pkg/apis/core/v1/defaults.go` (`SetDefaults_LimitRangeItem`),
    `plugin/pkg/admission/limitranger/admission.go` (`mergeContainerResources`, `minConstraint`,
    `maxConstraint`), `pkg/apis/core/validation/validation.go` (an extended resource's request equals its
    limit).
    """
    for lr in ctx.state.of(LIMIT_RANGE):
        for e in gpu_limit_effects(lr, ctx.inventory.gpu_names):
            ref = ObjectRef("LimitRange", e.name, e.namespace or None)
            yield Finding(
                "limitrange-gpu",
                WARNING,
                f"{ref} {e.says()}",
                f"take {e.resource} out of it before this namespace's workloads are converted (dra-migrate "
                "convert); a LimitRange cannot cap claims, a ResourceQuota on "
                "`<class>.deviceclass.resource.k8s.io/devices` can (quota-continuity)",
                (ref,),
            )


# Kueue (sigs.k8s.io/kueue@v0.17.0, pkg/features/kube_features.go and keps/2941-DRA): quota for
# ResourceClaimTemplates needs the DynamicResourceAllocation gate (alpha, v0.14) and
# `resources.deviceClassMappings` in its Configuration; a template whose class is not mapped makes the
# workload inadmissible (pkg/dra/claims.go). Extended-resource requests backed by DRA: DRAExtendedResources
# (alpha, v0.17). Neither works with Topology-Aware Scheduling (keps/2941-DRA "Non-Goals"/limitations).
KUEUE_DRA = (0, 14, 0)
KUEUE_DRA_EXTENDED = (0, 17, 0)


def _kueue_change(resources: list[str], classes: dict[str, str], install: KueueInstall | None) -> str:
    mappings = ", ".join(
        f"{{name: {r}, deviceClassNames: [{', '.join(cs)}]}}" for r, cs in kueue_mappings(resources, classes)
    )
    want = {"DynamicResourceAllocation": True, "DRAExtendedResources": True}
    if install is not None and install.gates_flag is not None:
        # The flag is there, so the Configuration holds no gates: extend the flag (Kueue refuses both).
        gates = {**install.feature_gates, **want}
        how = "--feature-gates=" + ",".join(f"{k}={str(v).lower()}" for k, v in gates.items())
    else:
        how = (
            "DynamicResourceAllocation and DRAExtendedResources on, in its Configuration's featureGates or as "
            "--feature-gates=DynamicResourceAllocation=true,DRAExtendedResources=true (not both: Kueue refuses to "
            "start with gates in both)"
        )
    return (
        f"Kueue >= 0.17 with {how} and, in its Configuration, resources.deviceClassMappings: [{mappings}] "
        "(the ClusterQueue's nominalQuota names stay)"
    )


@rule(
    "kueue-dra-support",
    BLOCKER,
    WARNING,
    INFO,
    summary="a Kueue ClusterQueue budgets GPUs: what Kueue needs to admit and count DRA-backed requests",
)
def kueue_dra_support(ctx: CheckContext) -> Iterator[Finding]:
    queues = gpu_queues(ctx.state)
    if not queues:
        return
    install = kueue_install(ctx.state)
    classes = serving_classes(ctx)
    flavors = flavor_node_labels(ctx.state)
    for q in queues:
        ref = ObjectRef("kueue.x-k8s.io/ClusterQueue", q.name)
        change = _kueue_change(list(q.resources), classes, install)
        if q.tas_flavors:
            # The pools the TAS flavors pin their workloads to: the blocker stops only those pools' stages
            # (plan --exclude-pools them to migrate the rest); a flavor without nodeLabels could be anywhere.
            selectors = [flavors.get(f) for f in q.tas_flavors]
            pools = sorted(
                {
                    n.pool
                    for n in ctx.inventory.nodes
                    for sel in selectors
                    if sel and all(n.labels.get(k) == v for k, v in sel.items())
                }
            )
            refs = tuple(ObjectRef("Pool", p) for p in pools) if pools and all(selectors) else (ref,)
            yield Finding(
                "kueue-dra-support",
                BLOCKER,
                f"{ref} budgets {', '.join(sorted(q.resources))} through Topology-Aware flavors "
                f"({', '.join(q.tas_flavors)}): Kueue's DRA support does not work with TAS (kueue keps/2941-DRA), "
                "and migrated nodes no longer advertise these resources for TAS to place against",
                "move the GPU budget to flavors without spec.topologyName before migrating, or keep these pools on "
                "the device plugin until Kueue supports TAS with DRA (plan --exclude-pools)",
                refs,
            )
            continue
        version = install.version if install else None
        gates = install.feature_gates if install else {}
        mig = sorted(r for r in q.resources if mig_profile_of(r))
        mig_note = (
            f"; workloads converted from {', '.join(mig)} are never admitted: their claims select the MIG profile "
            "with CEL on mig.nvidia.com, and Kueue refuses CEL selectors (kueue v0.17.0 pkg/dra/claims.go "
            "countDevicesPerClass), so keep them on extended-resource requests"
            if mig
            else ""
        )
        if version is None or version < KUEUE_DRA or not gates.get("DynamicResourceAllocation"):
            have = (
                "no Kueue controller was found"
                if install is None
                else f"Kueue {'.'.join(map(str, version)) if version else install.image} "
                + (
                    "predates DRA support (0.14)"
                    if version and version < KUEUE_DRA
                    else "runs without DynamicResourceAllocation"
                    if install.gates_flag is not None
                    else "has no --feature-gates flag, so its gates come from its Configuration's featureGates, "
                    "which is not read here: unless that enables DynamicResourceAllocation"
                )
            )
            yield Finding(
                "kueue-dra-support",
                WARNING,
                f"{ref} budgets {', '.join(sorted(q.resources))}; {have}: workloads converted to "
                "ResourceClaimTemplates are not counted against it (pods that keep extended-resource requests are)"
                + mig_note,
                f"before converting workloads: {change}",
                (ref,),
            )
        else:
            # Even with every gate on, the Configuration's deviceClassMappings (not in the cluster's objects
            # read here) must name the class converted templates claim, or Kueue refuses their workloads.
            yield Finding(
                "kueue-dra-support",
                INFO,
                f"{ref}: Kueue {'.'.join(map(str, version))} counts ResourceClaimTemplates whose DeviceClass is "
                "mapped in its Configuration (an unmapped class makes the workload inadmissible)" + mig_note,
                change,
                (ref,),
            )


# Which schedulers create the claim of an extended-resource request (KEP-5004): kube-scheduler's
# DynamicResources plugin. KAI Scheduler: kai-scheduler/KAI-Scheduler PR #1943 (merged 2026-07-20; earlier
# releases reject GPU requests on DRA-only nodes, PR #1938's design "guard removals"). Others: no source
# says they do.
_SCHEDULER_SOURCES = {
    "kai-scheduler": "KAI Scheduler handles DRA-backed extended resources only from kai-scheduler/KAI-Scheduler "
    "PR #1943 (merged 2026-07-20); earlier releases reject GPU requests on DRA-only nodes",
    "volcano": "Volcano schedules ResourceClaims (volcano-sh/volcano#3143) but no Volcano source says it creates "
    "the claim of an extended-resource request (KEP-5004)",
}


@rule("scheduler-dra-support", WARNING, summary="GPU workloads of a scheduler other than kube-scheduler")
def scheduler_dra_support(ctx: CheckContext) -> Iterator[Finding]:
    """Read from the workloads' pod templates as well as their pods: a CronJob between runs or a Deployment
    scaled to zero has no pod to show its scheduler, and its next pod still lands on a migrated node."""
    for sched, workloads in workloads_by_scheduler(ctx.inventory.consumers).items():
        source = next((s for k, s in _SCHEDULER_SOURCES.items() if k in sched), None) or (
            f"no source says {sched} creates the claim of an extended-resource request (KEP-5004)"
        )
        refs = tuple(ObjectRef(kind_key(c.api_version, c.kind), c.name, c.namespace or None) for c in workloads[:20])
        yield Finding(
            "scheduler-dra-support",
            WARNING,
            f"{len(workloads)} GPU workload(s) use schedulerName {sched} (in their pod templates or pods): on "
            f"migrated nodes only a scheduler that allocates DRA devices can place them. {source}",
            f"upgrade {sched} to a release that supports DRA-backed extended resources, or keep its pools on the "
            "device plugin (plan --exclude-pools)",
            refs,
        )


@rule("dcgm-dra-attribution", WARNING, INFO, summary="DCGM exporter and per-pod GPU metrics under DRA")
def dcgm_dra_attribution(ctx: CheckContext) -> Iterator[Finding]:
    for exp in dcgm_exporters(ctx.state):
        kind, _, name = exp.source.partition(" ")
        ns, _, short = name.rpartition("/")
        ref = ObjectRef("apps/DaemonSet" if kind == "DaemonSet" else "nvidia.com/ClusterPolicy", short, ns or None)
        if exp.dra_attribution:
            yield Finding(
                "dcgm-dra-attribution",
                INFO,
                f"{exp.source} ({exp.version or 'version unknown'}) attributes DRA-allocated GPUs to pods "
                "(KUBERNETES_ENABLE_DRA)",
                "check it may get/list/watch resource.k8s.io resourceslices and has a ServiceAccount token "
                "(NVIDIA/gpu-operator PR #2697)",
                (ref,),
            )
        else:
            yield Finding(
                "dcgm-dra-attribution",
                WARNING,
                f"{exp.source} ({exp.version or 'version unknown'}) does not attribute DRA-allocated GPUs to pods: "
                "after the migration its metrics lose their pod, namespace and container labels",
                "set KUBERNETES_ENABLE_DRA=true on the exporter (NVIDIA/dcgm-exporter PR #501; ClusterPolicy "
                "spec.dcgmExporter.env, or the chart's kubernetesDRA.enabled) and grant get/list/watch on "
                "resource.k8s.io resourceslices (NVIDIA/gpu-operator PR #2697)",
                (ref,),
            )


@rule(
    "prometheus-rule-gpu",
    WARNING,
    summary="alerting/recording rules (PrometheusRule, Managed Prometheus, VMRule) that read GPU resource metrics",
)
def prometheus_rule_gpu(ctx: CheckContext) -> Iterator[Finding]:
    for e in gpu_rule_exprs(ctx.state):
        ns, _, name = e.rule_object.partition("/")
        ref = ObjectRef(e.kind, name, ns or None)
        yield Finding(
            "prometheus-rule-gpu",
            WARNING,
            f"{ref} rule {e.rule or '(unnamed)'} `{' '.join(e.expr.split())[:200]}` reads "
            f"{_series_read(e.terms, e.per_pod_dcgm)}",
            _FROM_DCGM + (f"; change it in its repository ({e.owner})" if e.owner else ""),
            (ref,),
        )


_FROM_DCGM = (
    "count GPUs from DCGM series instead of node allocatable (e.g. count by (Hostname) (DCGM_FI_DEV_GPU_UTIL))"
    ' and allocated GPUs from attributed series (count(DCGM_FI_DEV_GPU_UTIL{pod!=""}))'
)


def _series_read(terms: tuple[str, ...] | list[str], per_pod_dcgm: bool) -> str:
    """What a query reads that the migration changes, as every monitoring rule says it (inventory/dependents.py
    `expr_reads` found it): alerting rules, dashboards and autoscalers alike."""
    what = []
    if terms:
        what.append(
            f"{', '.join(terms)}, which migrated nodes no longer advertise and converted workloads no longer request"
        )
    if per_pod_dcgm:
        what.append("DCGM metrics by pod, blank unless the exporter attributes DRA GPUs (KUBERNETES_ENABLE_DRA)")
    return "; ".join(what)


@rule(
    "grafana-dashboard-gpu",
    WARNING,
    INFO,
    summary="Grafana dashboards whose panels read GPU extended-resource metrics or per-pod DCGM metrics",
)
def grafana_dashboard_gpu(ctx: CheckContext) -> Iterator[Finding]:
    found, unread = dashboards(ctx.state)
    for d in found:
        ref = ObjectRef(d.kind, d.name, d.namespace or None)
        yield Finding(
            "grafana-dashboard-gpu",
            WARNING,
            f'{ref}{f" key {d.key}" if d.key else ""} dashboard "{d.title}": {_dashboard_reads(d)}',
            _FROM_DCGM + (f"; change it in its repository ({d.owner})" if d.owner else ""),
            (ref,),
        )
    for u in unread:
        ref = ObjectRef(u.kind, u.name, u.namespace or None)
        yield Finding(
            "grafana-dashboard-gpu",
            INFO,
            f"{ref}: dashboard not read ({u.why})",
            "check its panels by hand for nvidia.com/gpu (kube-state-metrics nvidia_com_gpu) and per-pod DCGM queries",
            (ref,),
        )


def _dashboard_reads(d: Dashboard) -> str:
    """What a dashboard's queries read, the first few by where they are."""
    what = _series_read(sorted({t for q in d.queries for t in q.terms}), any(q.per_pod_dcgm for q in d.queries))
    shown = "; ".join(f"{q.place or 'query'} `{' '.join(q.expr.split())[:120]}`" for q in d.queries[:3])
    more = f" and {len(d.queries) - 3} more" if len(d.queries) > 3 else ""
    n = len(d.queries)
    return f"{n} {'query reads' if n == 1 else 'queries read'} {what}: {shown}{more}"


@rule(
    "gpu-metric-autoscaling",
    WARNING,
    summary="KEDA triggers and HPAs that scale on GPU extended-resource or per-pod DCGM metrics",
)
def gpu_metric_autoscaling(ctx: CheckContext) -> Iterator[Finding]:
    for a in gpu_scalers(ctx.state):
        ref = ObjectRef(a.kind, a.name, a.namespace or None)
        yield Finding(
            "gpu-metric-autoscaling",
            WARNING,
            f"{ref} scales {a.target} on {a.place} `{' '.join(a.text.split())[:160]}`, which reads "
            f"{_series_read(a.terms, a.per_pod_dcgm)}: {_scaler_outcome(a)}",
            "scale on the workload's own metrics (requests, queue length) or on DCGM series by Hostname, or have "
            "the DCGM exporter attribute DRA GPUs (KUBERNETES_ENABLE_DRA) before migrating"
            + (f"; change it in its repository ({a.owner})" if a.owner else ""),
            (ref,),
        )


def _scaler_outcome(a: GpuScaler) -> str:
    if a.empty_is_zero:
        return (
            "KEDA reads an empty result as 0 (ignoreNullValues, default true), so it scales the workload down to its "
            "minimum as its nodes migrate"
        )
    return "the autoscaler cannot read the metric as its nodes migrate, and stops scaling the workload"


@rule("admission-policy-gpu", WARNING, summary="admission policies that judge or change pods by their GPU request")
def admission_policy_gpu(ctx: CheckContext) -> Iterator[Finding]:
    for p in gpu_policies(ctx.state):
        ref = ObjectRef(p.kind, p.name, p.namespace or None)
        what = "judge" if p.action == VALIDATING else "change"
        fix = (
            "extend it to pods' spec.resourceClaims and to resource.k8s.io ResourceClaims and ResourceClaimTemplates "
            "(or limit who may create claims) before the DeviceClasses exist"
            if p.action == VALIDATING
            else "write its change into the converted workloads, or have it select pods by spec.resourceClaims"
        )
        yield Finding(
            "admission-policy-gpu",
            WARNING,
            f"{ref}{f' rule {p.rule}' if p.rule else ''} ({p.action}) names {', '.join(p.terms)} at "
            f"{shown_places(p)}: a pod that gets its GPUs from a ResourceClaim (a converted workload, or any claim "
            f"on the new DeviceClasses) requests none, and where the policy selects pods by that request it does not "
            f"{what} such a pod",
            fix + (f"; change it in its repository ({p.owner})" if p.owner else ""),
            (ref,),
        )


@rule("gitops-owned", WARNING, summary="objects the migration changes that a GitOps controller would revert")
def gitops_owned(ctx: CheckContext) -> Iterator[Finding]:
    owned: dict[str, list[ObjectRef]] = {}

    def note(kind: str, obj: dict[str, object]) -> None:
        owner = gitops_owner(obj)
        if owner is not None:
            owned.setdefault(str(owner), []).append(ObjectRef.of(kind, obj))

    gpu_quotas = {(lim.namespace, lim.quota) for lim in gpu_quota_limits(ctx.state)}
    for q in ctx.state.of("ResourceQuota"):
        ref = ObjectRef.of("ResourceQuota", q)
        if (ref.namespace or "", ref.name) in gpu_quotas:
            note("ResourceQuota", q)
    gpu_nodes = {n.name for n in ctx.inventory.nodes}
    for n in ctx.state.of("Node"):
        if ObjectRef.of("Node", n).name in gpu_nodes:
            note("Node", n)
    # Each consumer's object by its identity, each kind indexed once: a scan of the kind per consumer was
    # quadratic (10,000 consumers x 10,000 Deployments; issue 29).
    by_identity: dict[str, dict[tuple[str, object], list[dict[str, object]]]] = {}
    for c in ctx.inventory.consumers:
        key = kind_key(c.api_version, c.kind)
        if key not in by_identity:
            by_identity[key] = _by_identity(ctx.state.of(key))
        for o in by_identity[key].get((c.namespace, c.name), ()):
            note(key, o)
    for owner, refs in sorted(owned.items()):
        refs = sorted(set(refs))
        yield Finding(
            "gitops-owned",
            WARNING,
            f"{owner} owns {len(refs)} object(s) the migration changes ({', '.join(map(str, refs[:5]))}"
            f"{', …' if len(refs) > 5 else ''}): it would revert a live change at its next sync",
            "make the change in the owning repository (convert/generate write the files; quota limits are in the "
            "quota-continuity findings); apply does not patch them live",
            tuple(refs[:50]),
        )


def _by_identity(objects: list[dict[str, object]]) -> dict[tuple[str, object], list[dict[str, object]]]:
    """(namespace, name) -> the objects of one kind so named, in the state's order."""
    out: dict[tuple[str, object], list[dict[str, object]]] = {}
    for o in objects:
        meta = o.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        out.setdefault((meta.get("namespace") or "", meta.get("name")), []).append(o)
    return out
