"""Findings: the public contract of `dra-migrate check` (ids and severities are documented in README)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    BLOCKER = "blocker"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"blocker": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    message: str
    remediation: str
    objects: tuple[str, ...] = field(default_factory=tuple)  # "Kind namespace/name" or "Kind name"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "message": self.message,
            "objects": list(self.objects),
            "remediation": self.remediation,
        }


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.severity.rank, f.id, f.objects, f.message))
