"""A plan's progress as its journal tells it: for `status`, resume and rollback."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.execute.journal import DONE, FAILED, INTERRUPTED, ROLLED_BACK, STARTED, Progress, Record
from dra_migrate.execute.runner import planned_step_ids
from dra_migrate.plan.model import Plan
from dra_migrate.secrets import scrub


@dataclass
class PlanProgress:
    plan: Plan
    progress: Progress
    records: tuple[Record, ...] = ()

    @property
    def step_ids(self) -> list[str]:
        return list(planned_step_ids(self.plan))

    def done_steps(self, phase: str = "apply") -> set[str]:
        return self.progress.done_steps(phase)

    def undoable(self) -> set[str]:
        """Steps a rollback must undo: done, half-done (started, no end: a crash), interrupted or failed
        while applying, and those a previous rollback started or failed on. Undone ones are not undone again."""
        out = set()
        for step_id, s in self.progress.steps.items():
            if s.status == ROLLED_BACK:
                continue
            applied = s.phase == "apply" and s.status in (DONE, STARTED, FAILED, INTERRUPTED)
            if applied or (s.phase == "rollback" and s.status in (STARTED, FAILED, INTERRUPTED)):
                out.add(step_id)
        return out

    def runs(self) -> list[dict[str, Any]]:
        """Each run: phase, actor, start, its runtime overrides, and how it ended (None: never closed)."""
        out: list[dict[str, Any]] = []
        for r in self.records:
            if r.get("event") == "run-start":
                out.append({"phase": r.get("phase"), "actor": r.get("actor"), "started": r.get("time"),
                            "dryRun": bool(r.get("dryRun")), "overrides": r.get("overrides") or {},
                            "result": None})  # fmt: skip
            elif r.get("event") == "run-end" and out and out[-1]["result"] is None:
                out[-1].update(ended=r.get("time"), result=r.get("result"), error=scrub(r.get("error")))
                if r.get("rollbackLeft"):
                    out[-1]["rollbackLeft"] = r.get("rollbackLeft")
        return out

    def to_dict(self) -> dict[str, Any]:
        ids = self.step_ids
        done = self.done_steps("apply")
        current = self.progress.current
        runs = self.runs()
        return {
            "plan": self.plan.digest,
            "runs": self.progress.runs,
            "steps": len(ids),
            "done": sum(1 for i in ids if i in done),
            "rolledBack": len(self.done_steps("rollback")),
            "remaining": sum(1 for i in ids if i not in done),
            "current": current.to_dict() if current else None,
            "failed": [f.to_dict() for f in self.progress.failed],
            "lastRun": runs[-1] if runs else None,
            "stages": [s.to_dict() for s in self.progress.summary(ids)],
        }


def progress_of(plan: Plan, records: Iterable[Record]) -> PlanProgress:
    kept = tuple(records)
    return PlanProgress(plan, Progress.from_records(kept), kept)
