"""Pods a workload runs beyond its templates' replica fields: the template table's `counter` factors.

- `argoSteps` (path: the WorkflowSpec): an Argo template runs once per item of each step or DAG task that calls
  it with `withItems`, `withParam` or `withSequence` (argoproj/argo-workflows v3.7.18
  workflow/controller/steps.go `expandStep`, dag.go `expandTask`: withItems when non-empty, else withParam, else
  withSequence; an empty withItems is no fan-out, one pod). `withSequence` is `count` items, or `start`..`end`
  inclusive, ascending or descending, `end` winning over `count`, start 0 by default, count 0 none
  (workflow/controller/operator.go `expandSequence`; each an IntOrString read with strconv.Atoi). `withParam`
  is a JSON list known only when the workflow runs: counted as one item and said so. Nested fan-outs multiply
  (a steps template run per item runs its own steps per item); a template several steps call counts its
  largest fan-out, as an unfanned template counts one pod however many steps call it. `parallelism` caps
  the pods at once: the workflow's over all its pods, a steps/dag template's over the pods it runs itself
  (pkg/apis/workflow/v1alpha1/workflow_types.go WorkflowSpec.Parallelism, Template.Parallelism;
  operator.go `checkParallelism`). A step or task runs its `inline` template, else the one `templateRef` names,
  else its `template` by name (workflow/templateresolution/context.go `GetTemplate`); a referenced template is
  the named WorkflowTemplate's in the workflow's namespace, or ClusterWorkflowTemplate's with `clusterScope`, and
  its own calls by name are that WorkflowTemplate's (`WithTemplateHolder`). Its pods are the workflow's
  (`FanOut.beyond`). One not read is not counted, and every count of the spec says so. Each template, and each
  (Cluster)WorkflowTemplate, is taken once, breadth first: a chain or a cycle of references ends.
- `sparkExecutors` (path: the SparkApplicationSpec): `executor.instances` (default 1) without dynamic
  allocation. Each of these settings set only in `sparkConf` (`spark.executor.instances`,
  `spark.dynamicAllocation.enabled` / `initialExecutors` / `minExecutors` / `maxExecutors`) is read; the typed
  field wins where both are set (cluster/redact.py SPARK_COUNT_CONF, which cites the operator). With
  `dynamicAllocation.enabled` the application may grow to `maxExecutors`, and that is the demand a capacity
  plan must hold (its executors running now are pods, counted where they run). Never below
  the initial number Spark starts with, the largest of instances, initialExecutors and minExecutors
  (kubeflow/spark-operator v2.3.0 api/v1beta2/sparkapplication_types.go DynamicAllocation,
  pkg/util/sparkapplication.go GetInitialExecutorNumber). Without `maxExecutors` Spark's bound is
  Int.MaxValue (apache/spark core/src/main/scala/org/apache/spark/internal/config/package.scala
  DYN_ALLOCATION_MAX_EXECUTORS): the initial number is counted, at least one, and said so.

Counts are worked out arithmetically (a sequence of 10^9 is never expanded) and capped at MAX_PODS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.redact import SPARK_COUNT_CONF, spark_conf_value
from dra_migrate.cluster.state import ClusterState
from dra_migrate.cluster.templates import ResolvedTemplate, get_path

MAX_PODS = 10**9  # above any fleet; a hostile spec's product of fan-outs stops here rather than growing digits
_ATOI = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi reads


@dataclass(frozen=True)
class Count:
    pods: int
    note: str | None = None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and _ATOI.fullmatch(v) and len(v) <= 20:  # Atoi's int64; longer is an error there
        return int(v)
    return None


def _cap(n: int) -> int:
    return min(n, MAX_PODS)


def _sequence(seq: Any) -> tuple[int, str | None]:
    """(items, why unknown) of a withSequence, by arithmetic."""
    if not isinstance(seq, dict):
        return 1, "is not a map"
    start = 0 if seq.get("start") is None else _int(seq.get("start"))
    if seq.get("end") is not None:
        end = _int(seq.get("end"))
    elif seq.get("count") is not None:
        count = _int(seq.get("count"))
        if count == 0:
            return 0, None
        end = None if count is None or start is None else start + count - 1
    else:
        return 1, "has neither end nor count"
    if start is None or end is None:
        return 1, "is set when the workflow runs"
    return abs(end - start) + 1, None


def _fan(call: dict[str, Any]) -> tuple[int, str | None]:
    """(items, the unknown field and why) of one step or DAG task, as expandStep / expandTask choose."""
    items = call.get("withItems")
    if isinstance(items, list) and items:
        return len(items), None
    param = call.get("withParam")
    if isinstance(param, str) and param:
        return 1, "withParam (its items are known only when the workflow runs)"
    if call.get("withSequence") is not None:
        n, why = _sequence(call.get("withSequence"))
        return n, None if why is None else f"withSequence (it {why})"
    return 1, None


def _calls(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps (a list of parallel groups) and DAG tasks of one template."""
    out: list[dict[str, Any]] = []
    for group in template.get("steps") or []:
        if isinstance(group, list):
            out.extend(s for s in group if isinstance(s, dict))
    dag = template.get("dag")
    if isinstance(dag, dict) and isinstance(dag.get("tasks"), list):
        out.extend(t for t in dag["tasks"] if isinstance(t, dict))
    return out


def _by_name(spec: Any) -> dict[str, dict[str, Any]]:
    by_name: dict[str, dict[str, Any]] = {}
    for t in (spec.get("templates") or []) if isinstance(spec, dict) else ():
        if isinstance(t, dict) and isinstance(t.get("name"), str):
            by_name.setdefault(t["name"], t)
    return by_name


# A template node: ((), name) one of the spec's own templates, (scope, name) one of a (Cluster)WorkflowTemplate's
# (scope: its kind key, namespace, name), ("inline", id(step)) the template a step or task carries inline.
Node = tuple[Any, ...]
Scope = tuple[str, ...]
_WT, _CWT = "argoproj.io/WorkflowTemplate", "argoproj.io/ClusterWorkflowTemplate"
# (kind key, namespace ("" for a cluster-scoped kind), name) -> that object's spec, None where it was not read
Lookup = Callable[[str, str, str], Any]


def _nothing(kind: str, namespace: str, name: str) -> Any:
    return None


@dataclass
class _Graph:
    """The templates one WorkflowSpec may run, its own and those its steps reach, and who calls each."""

    spec: dict[str, Any]
    namespace: str
    lookup: Lookup
    templates: dict[Node, tuple[dict[str, Any], Scope, str]] = field(default_factory=dict)  # (template, scope, label)
    callers: dict[Node, list[tuple[Node, int, str | None]]] = field(default_factory=dict)
    scopes: dict[Scope, tuple[str, dict[str, dict[str, Any]]] | None] = field(default_factory=dict)
    own: set[Node] = field(default_factory=set)  # what the template table finds in the object itself
    missing: list[str] = field(default_factory=list)

    def build(self) -> _Graph:
        """Breadth first from every template of the spec: each node and each (Cluster)WorkflowTemplate taken
        once, so a chain or a cycle of references across thousands of them ends, without recursion."""
        self.scopes[()] = ("", _by_name(self.spec))
        queue = [self._add(((), name), t, (), name, True) for name, t in _by_name(self.spec).items()]
        queued = set(queue)
        i = 0
        while i < len(queue):
            caller = queue[i]
            i += 1
            t, scope, label = self.templates[caller]
            limit = t.get("parallelism")
            for call in _calls(t):
                callee = self._callee(call, scope, label, caller[0] == ())
                if callee is None:
                    continue
                if callee not in queued:
                    queued.add(callee)
                    queue.append(callee)
                n, why = _fan(call)
                tmpl = self.templates[callee][0]
                direct = "steps" not in tmpl and "dag" not in tmpl  # its pod is the caller's own
                if direct and isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
                    n = min(n, limit)
                self.callers.setdefault(callee, []).append((caller, n, why))
        return self

    def _add(self, node: Node, template: dict[str, Any], scope: Scope, label: str, own: bool) -> Node:
        if node not in self.templates:
            self.templates[node] = (template, scope, label)
            if own:
                self.own.add(node)
        return node

    def _callee(self, call: dict[str, Any], scope: Scope, label: str, from_own: bool) -> Node | None:
        """The template a step or task runs, as argo-workflows v3.7.18 workflow/templateresolution/context.go
        `GetTemplate` picks it: `inline` first, else `templateRef`, else `template` by name in the current
        scope, which a templateRef moves to the WorkflowTemplate it names (`WithTemplateHolder`). A namespaced
        one is the workflow's namespace's, a `clusterScope: true` one a ClusterWorkflowTemplate
        (`GetTemplateFromRef`; pkg/apis/workflow/v1alpha1/workflow_types.go TemplateRef)."""
        step = call.get("name") if isinstance(call.get("name"), str) else "?"
        inline = call.get("inline")
        if isinstance(inline, dict):
            # the table reads the inline templates of the object's own templates (templates.yaml), no deeper
            return self._add(("inline", id(call)), inline, scope, f"{label}/{step} (inline)", from_own)
        ref = call.get("templateRef")
        if isinstance(ref, dict):
            name, template, cluster = ref.get("name"), ref.get("template"), ref.get("clusterScope") is True
            target: Scope = (_CWT, "", str(name)) if cluster else (_WT, self.namespace, str(name))
            where = f"ClusterWorkflowTemplate {name}" if cluster else f"WorkflowTemplate {self.namespace}/{name}"
            if target not in self.scopes:
                found = self.lookup(*target) if isinstance(name, str) else None
                self.scopes[target] = (where, _by_name(found)) if isinstance(found, dict) else None
            known = self.scopes[target]
            if known is None or not isinstance(template, str) or template not in known[1]:
                what = "is not in the state" if known is None else f"has no template {template}"
                self.missing.append(f"{where}, which {label}/{step} calls by templateRef, {what}")
                return None
            return self._add((target, template), known[1][template], target, f"{where}/{template}", False)
        name = call.get("template")
        here = self.scopes.get(scope)
        if here is None or not isinstance(name, str) or name not in here[1]:
            return None  # a typo: Argo fails the workflow
        return self._add((scope, name), here[1][name], scope, f"{here[0]}/{name}" if scope else name, False)


@dataclass(frozen=True)
class _Counted:
    counts: dict[Node, Count]
    beyond: list[tuple[str, dict[str, Any], Count]]  # (where, template, pods) of the templates not the object's


def _pods_of(spec: dict[str, Any], namespace: str = "", lookup: Lookup = _nothing) -> _Counted:
    """Each template's pods in one WorkflowSpec: O(templates + calls), each template walked once."""
    g = _Graph(spec, namespace, lookup).build()
    entry = ((), spec.get("entrypoint")) if isinstance(spec.get("entrypoint"), str) else None
    labels = {node: label for node, (_, _, label) in g.templates.items()}
    done: dict[Node, tuple[int, str | None]] = {}
    for first in g.templates:
        _walk(first, g.callers, entry, done, labels)
    wide = spec.get("parallelism")
    cap = wide if isinstance(wide, int) and not isinstance(wide, bool) and wide > 0 else MAX_PODS
    unread = None
    if g.missing:
        more = f" (and {len(g.missing) - 1} more)" if len(g.missing) > 1 else ""
        unread = f"{g.missing[0]}{more}: the pods it would run are not counted"
    counts: dict[Node, Count] = {}
    beyond = []
    for node, (n, why) in done.items():
        note = why
        if n >= MAX_PODS and cap >= MAX_PODS:
            note = f"template {labels[node]} fans out to at least {MAX_PODS:,} pods: counted as at most that"
        if unread:
            note = f"{note}; {unread}" if note else unread
        counts[node] = Count(min(n, cap), note)
        if node not in g.own:
            beyond.append((labels[node], g.templates[node][0], counts[node]))
    return _Counted(counts, beyond)


def _walk(
    first: Node,
    callers: dict[Node, list[tuple[Node, int, str | None]]],
    entry: Node | None,
    done: dict[Node, tuple[int, str | None]],
    labels: dict[Node, str],
) -> None:
    """Each template's pods: the largest over its callers of the caller's pods times the call's items (1 for
    the entrypoint and a template nobody calls). Iterative, so a chain of thousands of templates needs no
    recursion; a caller still being walked (a recursive workflow) counts as one."""
    if first in done:
        return
    on_path = {first}
    stack: list[list[Any]] = [[first, 0, 1 if first == entry or first not in callers else 0, None]]
    while stack:
        frame = stack[-1]
        name, i, best, why = frame
        refs = callers.get(name, [])
        if i >= len(refs):
            done[name] = (best, why)
            on_path.discard(name)
            stack.pop()
            continue
        caller, n, unknown = refs[i]
        if caller not in done and caller not in on_path:
            on_path.add(caller)
            stack.append([caller, 0, 1 if caller == entry or caller not in callers else 0, None])
            continue
        pods, above = done.get(caller, (1, None))
        frame[1], frame[2] = i + 1, max(best, _cap(pods * n))
        note = f"template {labels[name]} is fanned out by {unknown}: counted as one item" if unknown else above
        frame[3] = why or note


class FanOut:
    """The counters, each WorkflowSpec worked out once for all its templates (keyed by the spec's identity:
    the spec lives as long as the objects read, which outlive one inventory). `lookup` finds the
    (Cluster)WorkflowTemplates a step's `templateRef` names (`state_lookup`); without it none is found."""

    def __init__(self, lookup: Lookup = _nothing) -> None:
        self._lookup = lookup
        self._argo: dict[int, tuple[dict[str, Any], _Counted]] = {}

    def _argo_of(self, spec: dict[str, Any], root: Any) -> _Counted:
        known = self._argo.get(id(spec))
        if known is None:
            meta = root.get("metadata") if isinstance(root, dict) else None
            ns = meta.get("namespace") if isinstance(meta, dict) else None
            known = self._argo[id(spec)] = (spec, _pods_of(spec, ns if isinstance(ns, str) else "", self._lookup))
        return known[1]

    def __call__(self, counter: str, spec: Any, item: Any, root: Any = None) -> Count:
        if not isinstance(spec, dict):
            return Count(1)
        if counter == "sparkExecutors":
            return spark_executors(spec)
        counts = self._argo_of(spec, root).counts
        if isinstance(item, dict) and ("inline", id(item)) in counts:  # a step whose inline template the table read
            return counts[("inline", id(item))]
        name = item.get("name") if isinstance(item, dict) else None
        return counts.get(((), name), Count(1)) if isinstance(name, str) else Count(1)

    def beyond(self, resolved: Sequence[ResolvedTemplate]) -> list[tuple[ResolvedTemplate, Count]]:
        """The templates an Argo object's steps run that are not its own (one a `templateRef` names, and what it
        calls; an inline template within another), as its own: their pods are the workflow's."""
        for t in resolved:
            for f in t.role.replicas:
                if f.counter == "argoSteps" and f.path:
                    spec = get_path(t.root, f.path[2:]) if f.path.startswith("$.") else get_path(t.item, f.path)
                    if not isinstance(spec, dict):
                        return []
                    found = self._argo_of(spec, t.root).beyond
                    return [(ResolvedTemplate(where, t.role, tmpl, tmpl, t.root), n) for where, tmpl, n in found]
        return []


def state_lookup(state: ClusterState) -> Lookup:
    """A Lookup over the (Cluster)WorkflowTemplates read, indexed once per state (`ClusterState.memo`: every
    object's templates are resolved with a lookup, and a fleet of workflows would index them once each)."""

    def index() -> dict[tuple[str, str, str], Any]:
        out: dict[tuple[str, str, str], Any] = {}
        for key in (_WT, _CWT):
            for o in state.of(key):
                meta = o.get("metadata")
                meta = meta if isinstance(meta, dict) else {}
                ns = meta.get("namespace") if key == _WT else ""
                out.setdefault((key, str(ns or ""), str(meta.get("name"))), o.get("spec"))
        return out

    def lookup(kind: str, namespace: str, name: str) -> Any:
        return state.memo("argo-workflow-templates", index).get((kind, namespace, name))

    return lookup


def _spark_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """instances, enabled, initialExecutors, minExecutors, maxExecutors: the typed field, else sparkConf's."""
    conf = spec.get("sparkConf")
    conf = conf if isinstance(conf, dict) else {}
    out = {field_: spark_conf_value(key, conf.get(key)) for key, field_ in SPARK_COUNT_CONF.items()}
    executor = spec.get("executor")
    if isinstance(executor, dict) and _int(executor.get("instances")) is not None:
        out["instances"] = _int(executor.get("instances"))
    dyn = spec.get("dynamicAllocation")
    if isinstance(dyn, dict) and dyn.get("enabled") is True:  # the operator passes them only when enabled
        out["enabled"] = True
        for name in ("initialExecutors", "minExecutors", "maxExecutors"):
            if _int(dyn.get(name)) is not None:
                out[name] = _int(dyn.get(name))
    elif isinstance(dyn, dict) and dyn.get("enabled") is False:
        out["enabled"] = False  # IsDynamicAllocationEnabled: a typed block decides
    return out


def spark_executors(spec: dict[str, Any]) -> Count:
    s = _spark_settings(spec)
    instances = s["instances"]
    if s["enabled"] is not True:
        return Count(max(0, 1 if instances is None else instances))
    initial = max([0, *(v for v in (instances, s["initialExecutors"], s["minExecutors"]) if v)])
    most = s["maxExecutors"]
    if most is None:
        n = max(initial, 1)
        return Count(n, f"dynamic allocation without maxExecutors (Spark's bound is unlimited): {n} executors counted")
    return Count(_cap(max(most, initial)))
