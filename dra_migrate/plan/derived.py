"""What follows from the rest of a plan and a hand edit must not make lie: `applicable` from the findings,
each wave's `evictedPods` and the `summary` from the stages (`recompute` rewrites them, `summary_problems`
and `applicable_problems` refuse a plan whose recorded values differ). Split out of validate.py (issue 29).

Reads the typed plan (`plan/model.py`); the sections the model keeps as the file's mappings (findings,
summary) are read as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.plan.estimate import drain_scope, summary_estimate
from dra_migrate.plan.filechecks import NODE_SCOPED as NODE_SCOPED  # re-exported: build decides by it
from dra_migrate.plan.filechecks import applicable_problems as applicable_problems
from dra_migrate.plan.model import NodeEntry, Plan, PoolStage, Stage, Wave


def _evicted(entry: NodeEntry, scope: str) -> int:
    return entry.gpu_pods + (entry.other_pods if scope == "all" else 0)


def evicted_in(wave: Wave, stage: PoolStage) -> int:
    """The pods a wave's drains evict, as its nodes and the stage's drain scope say."""
    scope = drain_scope(stage)
    return sum(_evicted(n, scope) for n in wave.nodes)


def with_evicted_recomputed(stage: Stage) -> Stage:
    """A pool stage with each wave's `evictedPods` as its nodes say (a prepare stage as it is)."""
    if not isinstance(stage, PoolStage):
        return stage
    return replace(stage, waves=tuple(replace(w, evicted_pods=evicted_in(w, stage)) for w in stage.waves))


def _summary(stages: Sequence[Stage], drain_grace: Any = None, holds: Any = None) -> dict[str, Any]:
    """As `build._summary` computes it (test_plan_integrity keeps the two equal); the estimate also reads
    the drain grace periods and the budget-held drains the summary records (`estimate.summary_estimate`;
    holds naming a node the stages do not plan are dropped)."""
    pool_stages = [s for s in stages if isinstance(s, PoolStage)]
    planned = {n.node for s in pool_stages for w in s.waves for n in w.nodes}
    held = {
        k: v
        for k, v in (holds if isinstance(holds, dict) else {}).items()
        if isinstance(k, str) and isinstance(v, str) and k in planned
    }
    grace = {
        str(k): v
        for k, v in (drain_grace if isinstance(drain_grace, dict) else {}).items()
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _MAX_GRACE_S
    }
    return {
        "pools": [s.pool for s in pool_stages],
        "nodes": sum(len(w.nodes) for s in pool_stages for w in s.waves),
        "waves": sum(len(s.waves) for s in pool_stages),
        "evictedPods": sum(w.evicted_pods for s in pool_stages for w in s.waves),
        **summary_estimate(stages, grace, held),
    }


def _recorded_grace(plan: Plan) -> Any:
    return plan.summary.get("drainGraceSeconds")


def _recorded_holds(plan: Plan) -> Any:
    return plan.summary.get("drainHolds")


_MAX_GRACE_S = 2**31 - 1  # terminationGracePeriodSeconds is an int64; anything near it is an edit


def recomputed_summary(plan: Plan, stages: Sequence[Stage]) -> dict[str, Any]:
    """The summary `stages` give, with what only the state knew (gangs, excluded nodes) kept as the
    plan recorded it when it still fits."""
    return _with_recorded_gangs(_summary(stages, _recorded_grace(plan), _recorded_holds(plan)), plan)


def _with_recorded_gangs(want: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """`summary.gangs` comes from the state (build.gang_disruption), not the stages: kept as recorded
    when it is well formed (gang names, and waves the plan has); otherwise it does not follow."""
    gangs = plan.summary.get("gangs")
    waves = {f"{s.name}/{w.name}" for s in plan.pool_stages() for w in s.waves}
    if isinstance(gangs, list) and all(_gang_entry(g, waves) for g in gangs):
        want = {**want, "gangs": gangs}
    # `summary.excludedNodes` too comes from the state (nodes left out by a node-scoped blocker): kept as
    # recorded when well formed, and never naming a node the stages still plan.
    excluded = plan.summary.get("excludedNodes")
    planned = {n.node for _, _, n in plan.nodes()}
    if isinstance(excluded, list) and all(
        isinstance(e, dict)
        and set(e) == {"node", "pool", "reason"}
        and all(isinstance(v, str) for v in e.values())
        and e["node"] not in planned
        for e in excluded
    ):
        want = {**want, "excludedNodes": excluded}
    return want


def _gang_entry(g: Any, waves: set[str]) -> bool:
    return (
        isinstance(g, dict)
        and set(g) == {"gang", "waves"}
        and isinstance(g["gang"], str)
        and isinstance(g["waves"], list)
        and all(isinstance(w, str) and w in waves for w in g["waves"])
    )


def gangs_followed(original: Mapping[str, Any], edited: dict[str, Any]) -> dict[str, Any]:
    """The edited plan with `summary.gangs` as the original plan's, each gang's waves followed to where their
    nodes are now (an edit that merges, splits or deletes a wave, or moves a node, moves a gang with it). The plan
    does not record a gang's nodes, only its waves: a node that left one of a gang's waves is taken to be one of
    its nodes, so a gang may be listed in a wave too many, never one too few. A gang none of whose waves' nodes
    the plan still holds is dropped. The edited plan as it is when either cannot be read (validate says why)."""
    gangs = (original.get("summary") or {}).get("gangs")
    try:
        before, after = Plan.from_dict(dict(original)), Plan.from_dict(edited)
    except (InputError, TypeError, ValueError):
        return edited
    if not isinstance(gangs, list):
        return edited
    was = {f"{s.name}/{w.name}": [n.node for n in w.nodes] for s in before.pool_stages() for w in s.waves}
    now = {n.node: f"{s.name}/{w.name}" for s, w, n in after.nodes()}
    followed = []
    for g in gangs:
        if not isinstance(g, dict) or not isinstance(g.get("waves"), list):
            return edited
        waves = sorted({now[n] for w in g["waves"] for n in was.get(str(w), ()) if n in now})
        if waves:
            followed.append({**g, "waves": waves})
    summary = edited.get("summary")
    return {**edited, "summary": {**(summary if isinstance(summary, dict) else {}), "gangs": followed}}
