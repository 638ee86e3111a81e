"""The GPU pods Pending before the migration began, as the journal's first apply recorded them (the runner's
health gate leaves them to their queue)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Backlog:
    """The GPU pods Pending when the migration's first apply began: the cluster's own queue (a training
    cluster often has one), not the migration's doing, so the health gate does not judge them. A pod never
    goes back to Pending once a node is given to it (`spec.nodeName` is set for good), so every unscheduled
    GPU pod created at or before the newest one Pending then was Pending then: `created_up_to` (the API
    server's creationTimestamp, no clock of ours) marks them, however many there are, across resumed runs."""

    pods: int = 0
    created_up_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pods": self.pods, "createdUpTo": self.created_up_to}

    @classmethod
    def of_journal(cls, records: Iterable[Mapping[str, Any]]) -> Backlog | None:
        """What the first real apply of the journal recorded; None before any (the next run reads it). A
        journal whose first apply predates the record judges every pod, as that run did."""
        for r in records:
            if r.get("event") == "run-start" and r.get("phase") == "apply" and r.get("dryRun") is not True:
                b = r.get("pendingBacklog")
                if not isinstance(b, Mapping):
                    return cls()
                upto, pods = b.get("createdUpTo"), b.get("pods")
                return cls(pods if isinstance(pods, int) else 0, upto if isinstance(upto, str) else None)
        return None
