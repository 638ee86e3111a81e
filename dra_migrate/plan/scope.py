"""Which blockers stop which stage: the rule partial migrations rest on (README "Partial migrations").

Each finding of a plan carries `scope` (`cluster`, or `pool` with its `pools`), set by `build` from the
objects it names. A cluster-wide blocker stops every stage; a pool's blocker stops only that pool's
stage. Nothing else is recorded: applicability per stage is derived here from the findings, which the
plan's digest covers, so there is no flag to edit into a lie.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


def stage_blockers(findings: Iterable[Mapping[str, Any]], pool: str | None) -> list[str]:
    """The blockers that stop a stage (`pool` None: `prepare`): every cluster-wide blocker, and those of
    its own pool. Empty: `apply --stage` may run it even while another pool's stage is blocked.

    Derived from the findings, which the plan's digest covers, so there is no flag to edit into a lie.
    A finding without a `scope` (a plan made before scopes) counts as cluster-wide."""
    return sorted(
        {
            str(f.get("id"))
            for f in findings
            if f.get("severity") == "blocker"
            and (f.get("scope", "cluster") != "pool" or (pool is not None and pool in (f.get("pools") or [])))
        }
    )


def blockers_by_stage(findings: Iterable[Mapping[str, Any]]) -> Callable[[str | None], list[str]]:
    """`stage_blockers` for many stages: the findings read once, then each stage's blockers looked up (the
    report of a plan of 2,000 pools asked `stage_blockers` per stage: stages x findings)."""
    everywhere: set[str] = set()
    per_pool: dict[str, set[str]] = {}
    for f in findings:
        if f.get("severity") != "blocker":
            continue
        if f.get("scope", "cluster") != "pool":
            everywhere.add(str(f.get("id")))
        else:
            for pool in f.get("pools") or []:
                per_pool.setdefault(str(pool), set()).add(str(f.get("id")))

    def of(pool: str | None) -> list[str]:
        return sorted(everywhere | (per_pool.get(pool, set()) if pool is not None else set()))

    return of
