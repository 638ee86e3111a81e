"""What follows from the rest of a plan and a hand edit must not make lie: `applicable` from the findings,
each wave's `evictedPods` and the `summary` from the stages (`recompute` rewrites them, `summary_problems`
and `applicable_problems` refuse a plan whose recorded values differ). Split out of validate.py (issue 29).
"""

from __future__ import annotations

from typing import Any

from dra_migrate.plan.actions import Action
from dra_migrate.plan.estimate import summary_estimate
from dra_migrate.plan.exclusions import NODE_SCOPED
from dra_migrate.plan.problems import Problem, _Checker


def _scope(stage: dict[str, Any]) -> str:
    for step in stage.get("nodeSteps") or []:
        if isinstance(step, dict) and step.get("action") == Action.DRAIN and isinstance(step.get("params"), dict):
            return str(step["params"].get("scope"))
    return "gpu"


def _evicted(entry: dict[str, Any], scope: str) -> int:
    return int(entry["gpuPods"]) + (int(entry["otherPods"]) if scope == "all" else 0)


def _summary(stages: list[dict[str, Any]], drain_grace: Any = None, holds: Any = None) -> dict[str, Any]:
    """As `build._summary` computes it, from the file's shapes (test_plan_integrity keeps the two equal);
    the estimate also reads the drain grace periods and the budget-held drains the summary records
    (`estimate.summary_estimate`; holds naming a node the stages do not plan are dropped)."""
    pool_stages = [s for s in stages if "pool" in s]
    planned = {str(n.get("node")) for s in pool_stages for w in s["waves"] for n in w["nodes"] if isinstance(n, dict)}
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
        "pools": [s["pool"] for s in pool_stages],
        "nodes": sum(len(w["nodes"]) for s in pool_stages for w in s["waves"]),
        "waves": sum(len(s["waves"]) for s in pool_stages),
        "evictedPods": sum(int(w["evictedPods"]) for s in pool_stages for w in s["waves"]),
        **summary_estimate(stages, grace, held),
    }


def _recorded_grace(plan: dict[str, Any]) -> Any:
    summary = plan.get("summary")
    return summary.get("drainGraceSeconds") if isinstance(summary, dict) else None


def _recorded_holds(plan: dict[str, Any]) -> Any:
    summary = plan.get("summary")
    return summary.get("drainHolds") if isinstance(summary, dict) else None


_MAX_GRACE_S = 2**31 - 1  # terminationGracePeriodSeconds is an int64; anything near it is an edit


def _with_recorded_gangs(want: dict[str, Any], plan: dict[str, Any]) -> dict[str, Any]:
    """`summary.gangs` comes from the state (build.gang_disruption), not the stages: kept as recorded
    when it is well formed (gang names, and waves the plan has); otherwise it does not follow."""
    summary = plan.get("summary")
    gangs = summary.get("gangs") if isinstance(summary, dict) else None
    waves = {f"{s.get('name')}/{w.get('name')}" for s in _pool_stages_of(plan) for w in s.get("waves") or []}
    if isinstance(gangs, list) and all(_gang_entry(g, waves) for g in gangs):
        want = {**want, "gangs": gangs}
    # `summary.excludedNodes` too comes from the state (nodes left out by a node-scoped blocker): kept as
    # recorded when well formed, and never naming a node the stages still plan.
    excluded = summary.get("excludedNodes") if isinstance(summary, dict) else None
    planned = {n.get("node") for s in _pool_stages_of(plan) for w in s.get("waves") or [] for n in w.get("nodes") or []
               if isinstance(n, dict)}  # fmt: skip
    if isinstance(excluded, list) and all(
        isinstance(e, dict)
        and set(e) == {"node", "pool", "reason"}
        and all(isinstance(v, str) for v in e.values())
        and e["node"] not in planned
        for e in excluded
    ):
        want = {**want, "excludedNodes": excluded}
    return want


def _pool_stages_of(plan: dict[str, Any]) -> list[dict[str, Any]]:
    stages = plan.get("stages")
    return [s for s in stages if isinstance(s, dict)] if isinstance(stages, list) else []


def _gang_entry(g: Any, waves: set[str]) -> bool:
    return (
        isinstance(g, dict)
        and set(g) == {"gang", "waves"}
        and isinstance(g["gang"], str)
        and isinstance(g["waves"], list)
        and all(isinstance(w, str) and w in waves for w in g["waves"])
    )


def _applicable(plan: dict[str, Any]) -> bool:
    """As `build` decides it: no blocker but those that only leave their own nodes out (`NODE_SCOPED`)."""
    return not any(
        isinstance(f, dict) and f.get("severity") == "blocker" and f.get("id") not in NODE_SCOPED
        for f in plan.get("findings") or []
    )


def _derived(c: _Checker, plan: dict[str, Any]) -> None:
    """`applicable` must follow from the findings (apply trusts it); with `summary=True` also the counts
    and the estimate (rebase rewrites them; a time-scaled rehearsal plan keeps the reviewed estimate)."""
    if plan.get("applicable") != _applicable(plan):
        c.add(("applicable",), "does not follow from the findings (any blocker: false)", "dra-migrate plan --rebase")


def applicable_problems(plan: dict[str, Any]) -> list[Problem]:
    """Only whether `applicable` follows from the findings: what every load checks (apply trusts it)."""
    c = _Checker()
    _derived(c, plan)
    return c.problems
