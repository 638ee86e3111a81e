"""What else names the GPU resources: ResourceQuotas, Kueue queues, alerting rules, the DCGM exporter,
workloads of other schedulers, and which of them a GitOps controller owns (docs/dependents.md).

Pure readers over the ClusterState, tolerant of any shape (these objects are not validated on the way
in: a field of the wrong type is read as absent). The rules in `checks/rules_dependents.py` judge them and
`plan/dependents.py` turns the quota continuity into plan steps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.consumers import Consumer
from dra_migrate.inventory.dra import extended_resource_classes
from dra_migrate.inventory.gitops import GitOpsOwner, gitops_owner
from dra_migrate.inventory.images import image_tag, tag_version, template_containers
from dra_migrate.inventory.resources import GPU_PREFIX

REQUESTS = "requests."
LIMITS = "limits."
# k8s.io/api@v0.37.2 core/v1/types.go: ResourceClaimsPerClass; the quota evaluator counts the devices a
# ResourceClaim requests from <class> under "<class>.deviceclass.resource.k8s.io/devices"
# (k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/resource_claims.go V1ResourceByDeviceClass).
DEVICES_PER_CLASS = ".deviceclass.resource.k8s.io/devices"

_Obj = Mapping[str, Any]


# Shared by the dependents' readers (dashboards, autoscalers, policies, volcano): these objects are not
# validated on the way in, so a field of the wrong type is read as absent.
def as_map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def ns_name(obj: _Obj) -> tuple[str, str]:
    """(namespace or "", name) of an object."""
    m = as_map(obj.get("metadata"))
    return str(m.get("namespace") or ""), str(m.get("name") or "")


def device_quota_key(device_class: str) -> str:
    return f"{device_class}{DEVICES_PER_CLASS}"


# -- ResourceQuotas -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaLimit:
    """One GPU limit of a ResourceQuota: `requests.nvidia.com/gpu: 8`."""

    namespace: str
    quota: str
    key: str  # the hard key as written
    resource: str  # the extended resource it limits (nvidia.com/gpu)
    value: str  # the quantity as written
    scoped: bool  # the quota has scopes or a scopeSelector (claims never match a scoped quota)
    owner: GitOpsOwner | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "quota": self.quota,
            "key": self.key,
            "resource": self.resource,
            "value": self.value,
            "scoped": self.scoped,
            "gitops": self.owner.to_dict() if self.owner else None,
        }


def gpu_quota_limits(state: ClusterState) -> list[QuotaLimit]:
    """Every hard limit of every ResourceQuota on an nvidia.com/ extended resource. Extended resources can
    only be limited as `requests.<name>` (k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/pods.go
    isExtendedResourceNameForQuota); a bare `nvidia.com/gpu` or a `limits.nvidia.com/gpu` key limits nothing
    and is read too, so a rule can say so."""
    out: list[QuotaLimit] = []
    for q in state.of("ResourceQuota"):
        ns, name = ns_name(q)
        spec = as_map(q.get("spec"))
        scoped = bool(as_list(spec.get("scopes")) or as_map(spec.get("scopeSelector")).get("matchExpressions"))
        owner = gitops_owner(q)
        for key, value in sorted(as_map(spec.get("hard")).items()):
            # `limits.R` is accepted and limits nothing, like a bare `R`: read so the rule can say so.
            resource = next((key[len(p) :] for p in (REQUESTS, LIMITS) if key.startswith(p)), key)
            if resource.startswith(GPU_PREFIX):
                out.append(QuotaLimit(ns, name, key, resource, str(value), scoped, owner))
    return out


def quota_hard(state: ClusterState, namespace: str, name: str) -> dict[str, str]:
    for q in state.of("ResourceQuota"):
        if ns_name(q) == (namespace, name):
            return {str(k): str(v) for k, v in as_map(as_map(q.get("spec")).get("hard")).items()}
    return {}


def add_quantities(have: str | None, value: str) -> str:
    """Two GPU names served by one class share its device limit: their sum. A quantity that is not a whole
    number is kept as written (the API server refuses it, as it would have refused the original)."""
    if have is None:
        return value
    return str(int(have) + int(value)) if have.isdecimal() and value.isdecimal() else have


def class_by_resource(state: ClusterState, proposals: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that will serve it: the cluster's classes with
    `spec.extendedResourceName`, then the proposals (class name, resource) for names none maps yet."""
    out = {ext: classes[0] for ext, classes in extended_resource_classes(state).items()}
    for cls, ext in proposals:
        out.setdefault(ext, cls)
    return out


# -- Kueue --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KueueInstall:
    deployment: str  # "namespace/name"
    version: tuple[int, int, int] | None  # from the image tag
    image: str
    feature_gates: dict[str, bool]
    # The --feature-gates value as written; None without the flag. Kueue then takes its gates from its
    # Configuration's `featureGates`, which is not read; both at once are refused (sigs.k8s.io/kueue@v0.17.0
    # cmd/kueue/main.go, pkg/config/validation.go `ValidateFeatureGates`).
    gates_flag: str | None = None


@dataclass(frozen=True)
class GpuQueue:
    """A ClusterQueue that budgets GPU resources."""

    name: str
    resources: dict[str, dict[str, str]]  # GPU resource -> flavor -> nominalQuota
    tas_flavors: tuple[str, ...]  # its flavors that use Topology-Aware Scheduling (spec.topologyName)
    local_queues: tuple[str, ...]  # "namespace/name" of the LocalQueues that point at it
    owner: GitOpsOwner | None


def _gates_flag(args: Iterable[Any]) -> str | None:
    """The value of --feature-gates, as `--feature-gates=V` or `--feature-gates V` (Go's flag package takes
    both, and `-feature-gates` too); the last one wins, as in Go's flag package. None without the flag."""
    out: str | None = None
    items = [a for a in args if isinstance(a, str)]
    for i, arg in enumerate(items):
        name, eq, value = arg.partition("=")
        if name in ("--feature-gates", "-feature-gates"):
            if eq:
                out = value
            elif i + 1 < len(items):
                out = items[i + 1]
    return out


def _gates(flag: str | None) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for item in (flag or "").split(","):
        k, _, v = item.partition("=")
        if k.strip():
            out[k.strip()] = v.strip().lower() == "true"
    return out


def kueue_install(state: ClusterState) -> KueueInstall | None:
    """Kueue's controller manager, found by its image (registry.k8s.io/kueue/kueue:vX.Y.Z)."""
    for d in state.of("apps/Deployment"):
        for c in template_containers(d):
            image = str(c.get("image") or "")
            if re.search(r"(^|/)kueue(:|@|$)", image):
                ns, name = ns_name(d)
                args = as_list(c.get("args")) + as_list(c.get("command"))
                flag = _gates_flag(args)
                return KueueInstall(f"{ns}/{name}", tag_version(image), image, _gates(flag), flag)
    return None


def flavor_node_labels(state: ClusterState) -> dict[str, dict[str, str]]:
    """ResourceFlavor name -> its spec.nodeLabels (the nodes its workloads are pinned to)."""
    out: dict[str, dict[str, str]] = {}
    for f in state.of("kueue.x-k8s.io/ResourceFlavor"):
        labels = as_map(as_map(f.get("spec")).get("nodeLabels"))
        out[ns_name(f)[1]] = {str(k): str(v) for k, v in labels.items()}
    return out


def queue_gpu_quotas(cluster_queue: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(flavor, resource, nominalQuota as written) for each nvidia.com/ resource a ClusterQueue budgets
    (kueue.x-k8s.io/v1beta1 ClusterQueue spec.resourceGroups[].flavors[].resources[])."""
    for group in as_list(as_map(cluster_queue.get("spec")).get("resourceGroups")):
        for flavor in as_list(as_map(group).get("flavors")):
            fname = str(as_map(flavor).get("name") or "")
            for r in as_list(as_map(flavor).get("resources")):
                rname = str(as_map(r).get("name") or "")
                if rname.startswith(GPU_PREFIX):
                    yield fname, rname, as_map(r).get("nominalQuota")


def gpu_queues(state: ClusterState) -> list[GpuQueue]:
    flavors = {ns_name(f)[1]: as_map(f.get("spec")) for f in state.of("kueue.x-k8s.io/ResourceFlavor")}
    local: dict[str, list[str]] = {}
    for lq in state.of("kueue.x-k8s.io/LocalQueue"):
        ns, name = ns_name(lq)
        local.setdefault(str(as_map(lq.get("spec")).get("clusterQueue") or ""), []).append(f"{ns}/{name}")
    out: list[GpuQueue] = []
    for cq in state.of("kueue.x-k8s.io/ClusterQueue"):
        name = ns_name(cq)[1]
        resources: dict[str, dict[str, str]] = {}
        tas: set[str] = set()
        for fname, rname, quota in queue_gpu_quotas(cq):
            resources.setdefault(rname, {})[fname] = str(quota)
            if flavors.get(fname, {}).get("topologyName"):
                tas.add(fname)
        if resources:
            queues = tuple(sorted(local.get(name, [])))
            out.append(GpuQueue(name, resources, tuple(sorted(tas)), queues, gitops_owner(cq)))
    return sorted(out, key=lambda q: q.name)


# -- monitoring ---------------------------------------------------------------------------------------

# kube-state-metrics writes resource names with `.` and `/` as `_` (resource="nvidia_com_gpu").
_GPU_TERM = re.compile(r"nvidia[._]com[/_](gpu|mig)[\w.\-+]*")
# PromQL string literals: "..." and '...' with escapes, `...` raw (prometheus/prometheus promql/parser/lex.go).
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
# A label named pod, namespace or container, or the `exported_` name Prometheus gives it when the target has its
# own (scrape_config `honor_labels: false`, the default: docs/configuration/configuration.md), as it does for
# dcgm-exporter scraped through a ServiceMonitor. Matched outside string literals, across lines (`expr: |`).
_POD_LABEL = re.compile(r"(?<![\w:])(?:exported_)?(?:pod|namespace|container)(?![\w:])")
# A regex matcher on kube-state-metrics' `resource` label; Prometheus anchors it (`^(?:re)$`,
# model/labels/regexp.go), so it selects the GPU series when it fully matches their name.
_RESOURCE_REGEX = re.compile(r"(?<![\w])resource\s*(=~|!~)\s*(" + _STRING.pattern + ")")
_GPU_SERIES = ("nvidia_com_gpu", "nvidia_com_mig_1g_10gb")


def _regex_terms(expr: str) -> set[str]:
    out: set[str] = set()
    for m in _RESOURCE_REGEX.finditer(expr):
        literal = m.group(2)
        body = literal[1:-1] if literal[0] == "`" else re.sub(r"\\(.)", r"\1", literal[1:-1])
        try:
            rx = re.compile(body)
        except re.error:
            continue  # not a regex Prometheus would load either
        hits = {name for name in _GPU_SERIES if bool(rx.fullmatch(name)) == (m.group(1) == "=~")}
        out |= {f"resource{m.group(1)}{literal}"} if hits else set()
    return out


# Record name -> (the GPU terms, per-pod DCGM) the series it records reads: `gpu_recorded`.
Recorded = Mapping[str, tuple[tuple[str, ...], bool]]


def expr_reads(expr: str, recorded: Recorded | None = None) -> tuple[tuple[str, ...], bool]:
    """What a query reads that a migration changes: the GPU extended-resource names it names (or a regex matcher
    on `resource` that selects them), and whether it reads DCGM metrics by pod, namespace or container (blank
    without DRA attribution). `recorded`: the series recording rules make from such reads (record name -> what
    it reads), so a query of them reads the same. Alerting rules and dashboards (inventory/dashboards.py) are
    read alike."""
    # A regex matcher's `.*` or a sentence's full stop after the name is not part of it (`nvidia_com_mig.*`).
    terms = {m.group(0).rstrip(".-+") for m in _GPU_TERM.finditer(expr)} | _regex_terms(expr)
    per_pod = "DCGM_FI_" in expr and bool(_POD_LABEL.search(_STRING.sub('""', expr)))
    for name, (t, p) in (recorded or {}).items():
        if name in expr and re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", _STRING.sub('""', expr)):
            terms |= set(t)
            per_pod = per_pod or p
    return tuple(sorted(terms)), per_pod


@dataclass(frozen=True)
class RuleExpr:
    rule_object: str  # "namespace/name" of the rules object ("/name" when cluster-scoped)
    rule: str  # alert or record name
    expr: str
    terms: tuple[str, ...]  # the GPU resource terms it names
    per_pod_dcgm: bool  # a DCGM metric read by pod/namespace/container: needs DRA attribution
    owner: GitOpsOwner | None
    kind: str = "monitoring.coreos.com/PrometheusRule"  # kind key of the rules object


# Alerting and recording rules as Prometheus writes them (`spec.groups[].rules[]` with `alert`/`record` and
# `expr`), in each operator's object: prometheus-operator's PrometheusRule; Google Cloud Managed Service for
# Prometheus' Rules, ClusterRules and GlobalRules (GoogleCloudPlatform/prometheus-engine v0.13.0
# pkg/operator/apis/monitoring/v1/rules_types.go), which GKE fleets use; VictoriaMetrics' VMRule
# (VictoriaMetrics/operator v0.55.0 config/crd, operator.victoriametrics.com/v1beta1).
RULE_KINDS = (
    "monitoring.coreos.com/PrometheusRule",
    "monitoring.googleapis.com/Rules",
    "monitoring.googleapis.com/ClusterRules",
    "monitoring.googleapis.com/GlobalRules",
    "operator.victoriametrics.com/VMRule",
)


def _rules(state: ClusterState) -> Iterator[tuple[str, str, str, GitOpsOwner | None, Mapping[str, Any]]]:
    """(kind key, "namespace/name", rule name, owner, rule) of every rule of every rules object."""
    for key in RULE_KINDS:
        for pr in state.of(key):
            ns, name = ns_name(pr)
            owner = gitops_owner(pr)
            for group in as_list(as_map(pr.get("spec")).get("groups")):
                for r in as_list(as_map(group).get("rules")):
                    rule = str(as_map(r).get("alert") or as_map(r).get("record") or "")
                    yield key, f"{ns}/{name}", rule, owner, as_map(r)


def _expr(r: Mapping[str, Any]) -> str:
    expr = r.get("expr")
    return str(expr) if isinstance(expr, str | int) else ""


def gpu_recorded(state: ClusterState) -> dict[str, tuple[tuple[str, ...], bool]]:
    """Record name -> what it reads, for every recording rule that reads what the migration changes, directly
    or through another recording rule (a chain in any order, across rules objects: Prometheus evaluates them
    all)."""
    recorded: dict[str, tuple[tuple[str, ...], bool]] = {}
    records = [(str(r.get("record")), _expr(r)) for *_, r in _rules(state) if isinstance(r.get("record"), str)]
    changed = True
    while changed:
        changed = False
        for name, expr in records:
            terms, per_pod = expr_reads(expr, recorded)
            if not (terms or per_pod):
                continue
            old_terms, old_pod = recorded.get(name, ((), False))  # a name recorded twice reads both
            merged = (tuple(sorted(set(terms) | set(old_terms))), per_pod or old_pod)
            if merged != recorded.get(name):
                recorded[name] = merged
                changed = True
    return recorded


def gpu_rule_exprs(state: ClusterState) -> list[RuleExpr]:
    recorded = gpu_recorded(state)
    out: list[RuleExpr] = []
    for key, where, rule, owner, r in _rules(state):
        expr = _expr(r)
        terms, per_pod = expr_reads(expr, recorded)
        if terms or per_pod:
            out.append(RuleExpr(where, rule, expr, terms, per_pod, owner, key))
    return out


@dataclass(frozen=True)
class DcgmExporter:
    source: str  # "DaemonSet ns/name" or "ClusterPolicy name"
    version: str | None
    dra_attribution: bool  # KUBERNETES_ENABLE_DRA=true or --kubernetes-enable-dra


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes")


def dcgm_exporters(state: ClusterState) -> list[DcgmExporter]:
    """The dcgm-exporter DaemonSets, else the ClusterPolicy's dcgmExporter (the operator renders the
    DaemonSet from it). DRA attribution: the exporter's `--kubernetes-enable-dra` / KUBERNETES_ENABLE_DRA
    (NVIDIA/dcgm-exporter PR #501), default false."""
    out: list[DcgmExporter] = []
    for ds in state.of("apps/DaemonSet"):
        for c in template_containers(ds):
            image = str(c.get("image") or "")
            if "dcgm-exporter" not in image:
                continue
            env = {str(as_map(e).get("name")): as_map(e).get("value") for e in as_list(c.get("env"))}
            args = [str(a) for a in as_list(c.get("args"))]
            on = _truthy(env.get("KUBERNETES_ENABLE_DRA")) or any(
                a == "--kubernetes-enable-dra" or a == "--kubernetes-enable-dra=true" for a in args
            )
            tag = image_tag(image)
            ns, name = ns_name(ds)
            out.append(DcgmExporter(f"DaemonSet {ns}/{name}", tag, on))
    if out:
        return out
    for cp in state.of("nvidia.com/ClusterPolicy"):
        exp = as_map(as_map(cp.get("spec")).get("dcgmExporter"))
        if exp.get("enabled") is False:
            continue
        env = {str(as_map(e).get("name")): as_map(e).get("value") for e in as_list(exp.get("env"))}
        version = exp.get("version")
        out.append(
            DcgmExporter(
                f"ClusterPolicy {ns_name(cp)[1]}",
                str(version) if version else None,
                _truthy(env.get("KUBERNETES_ENABLE_DRA")),
            )
        )
    return out


# -- other schedulers ---------------------------------------------------------------------------------


def workloads_by_scheduler(consumers: Iterable[Consumer]) -> dict[str, list[Consumer]]:
    """schedulerName -> the GPU workloads that name it (other than kube-scheduler's): from their pod
    templates as well as their pods, so a CronJob between runs, a Job not yet started or a Deployment scaled
    to zero counts before its next pod lands on a migrated node (inventory/consumers.py Consumer.schedulers)."""
    out: dict[str, list[Consumer]] = {}
    for c in consumers:
        for sched in c.schedulers:
            out.setdefault(sched, []).append(c)
    return {k: sorted(v, key=lambda c: (c.namespace, c.kind, c.name)) for k, v in sorted(out.items())}
