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
  operator.go `checkParallelism`).
- `sparkExecutors` (path: the SparkApplicationSpec): `executor.instances` (default 1) without dynamic
  allocation. With `dynamicAllocation.enabled` the application may grow to `maxExecutors`, and that is the
  demand a capacity plan must hold (its executors running now are pods, counted where they run). Never below
  the initial number Spark starts with, the largest of instances, initialExecutors and minExecutors
  (kubeflow/spark-operator v2.3.0 api/v1beta2/sparkapplication_types.go DynamicAllocation,
  pkg/util/sparkapplication.go GetInitialExecutorNumber). Without `maxExecutors` Spark's bound is
  Int.MaxValue (apache/spark core/src/main/scala/org/apache/spark/internal/config/package.scala
  DYN_ALLOCATION_MAX_EXECUTORS): the initial number is counted, at least one, and said so.

Counts are worked out arithmetically (a sequence of 10^9 is never expanded) and capped at MAX_PODS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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


def _pods_of(spec: dict[str, Any]) -> dict[str, Count]:
    """Each template's pods in one WorkflowSpec: O(templates + calls), each template walked once."""
    templates = [t for t in spec.get("templates") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    by_name: dict[str, dict[str, Any]] = {}
    for t in templates:
        by_name.setdefault(t["name"], t)
    # callee -> [(caller, items, why unknown)]
    callers: dict[str, list[tuple[str, int, str | None]]] = {}
    for t in by_name.values():
        limit = t.get("parallelism")
        for call in _calls(t):
            callee = by_name.get(call.get("template"))  # type: ignore[arg-type]
            if callee is None:
                continue  # a templateRef, an inline template or a typo: not in this spec
            n, why = _fan(call)
            direct = "steps" not in callee and "dag" not in callee  # its pod is the caller's own
            if direct and isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
                n = min(n, limit)
            callers.setdefault(callee["name"], []).append((t["name"], n, why))
    entry = spec.get("entrypoint")
    done: dict[str, tuple[int, str | None]] = {}
    for first in by_name:
        _walk(first, callers, entry, done)
    wide = spec.get("parallelism")
    cap = wide if isinstance(wide, int) and not isinstance(wide, bool) and wide > 0 else MAX_PODS
    out: dict[str, Count] = {}
    for name, (n, why) in done.items():
        note = why
        if n >= MAX_PODS and cap >= MAX_PODS:
            note = f"template {name} fans out to at least {MAX_PODS:,} pods: counted as at most that"
        out[name] = Count(min(n, cap), note)
    return out


def _walk(
    first: str,
    callers: dict[str, list[tuple[str, int, str | None]]],
    entry: Any,
    done: dict[str, tuple[int, str | None]],
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
        note = f"template {name} is fanned out by {unknown}: counted as one item" if unknown else above
        frame[3] = why or note


@dataclass
class FanOut:
    """The counters, each WorkflowSpec worked out once for all its templates (keyed by the spec's identity:
    the spec lives as long as the objects read, which outlive one inventory)."""

    _argo: dict[int, tuple[dict[str, Any], dict[str, Count]]] = field(default_factory=dict)

    def __call__(self, counter: str, spec: Any, item: Any) -> Count:
        if not isinstance(spec, dict):
            return Count(1)
        if counter == "sparkExecutors":
            return spark_executors(spec)
        known = self._argo.get(id(spec))
        if known is None:
            known = self._argo[id(spec)] = (spec, _pods_of(spec))
        name = item.get("name") if isinstance(item, dict) else None
        return known[1].get(name, Count(1)) if isinstance(name, str) else Count(1)


def spark_executors(spec: dict[str, Any]) -> Count:
    executor = spec.get("executor")
    instances = _int(executor.get("instances")) if isinstance(executor, dict) else None
    dyn = spec.get("dynamicAllocation")
    if not isinstance(dyn, dict) or dyn.get("enabled") is not True:
        return Count(max(0, 1 if instances is None else instances))
    initial = max([0, *(v for v in (instances, _int(dyn.get("initialExecutors")), _int(dyn.get("minExecutors"))) if v)])
    most = _int(dyn.get("maxExecutors"))
    if most is None:
        n = max(initial, 1)
        return Count(n, f"dynamic allocation without maxExecutors (Spark's bound is unlimited): {n} executors counted")
    return Count(_cap(max(most, initial)))
