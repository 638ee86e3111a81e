"""A plan's progress as its journal tells it: for `status`, resume and rollback."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from migrate.execute.journal import DONE, FAILED, ROLLED_BACK, STARTED, Progress
from migrate.execute.runner import planned_steps


@dataclass
class PlanProgress:
    plan: dict[str, Any]
    progress: Progress

    @property
    def step_ids(self) -> list[str]:
        return [p.id for p in planned_steps(self.plan)]

    def done_steps(self, phase: str = "apply") -> set[str]:
        return self.progress.done_steps(phase)

    def undoable(self) -> set[str]:
        """Steps a rollback must undo: done, half-done (started, no end: a crash) or failed while applying,
        and those a previous rollback started or failed on. Undone ones are not undone again."""
        out = set()
        for step_id, s in self.progress.steps.items():
            if s.status == ROLLED_BACK:
                continue
            applied = s.phase == "apply" and s.status in (DONE, STARTED, FAILED)
            if applied or (s.phase == "rollback" and s.status in (STARTED, FAILED)):
                out.add(step_id)
        return out

    def to_dict(self) -> dict[str, Any]:
        ids = self.step_ids
        done = self.done_steps("apply")
        current = self.progress.current
        return {
            "plan": self.plan.get("digest"),
            "runs": self.progress.runs,
            "steps": len(ids),
            "done": sum(1 for i in ids if i in done),
            "rolledBack": len(self.done_steps("rollback")),
            "remaining": sum(1 for i in ids if i not in done),
            "current": current.to_dict() if current else None,
            "failed": [f.to_dict() for f in self.progress.failed],
            "stages": [s.to_dict() for s in self.progress.summary(ids)],
        }


def progress_of(plan: dict[str, Any], records: Iterable[dict[str, Any]]) -> PlanProgress:
    return PlanProgress(plan, Progress.from_records(records))
