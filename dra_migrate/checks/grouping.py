"""Findings grouped for people: one entry per rule and cause, its objects counted and the first few named.

At fleet size one rule can fire for dozens of objects with the same cause and the same fix (58
`gang-capacity-after` warnings on a 500-node fleet): a screen of near-identical blocks buries the one
finding that matters. A group is the findings of one rule, severity and remediation (the cause, as the
rule states what to do about it); `check` prints groups, `-o wide` and `-o json` keep every finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SHOWN = 3  # objects named in a group's line; `-o wide` and JSON give all


@dataclass(frozen=True)
class FindingGroup:
    id: str
    severity: str
    remediation: str
    messages: tuple[str, ...]
    objects: tuple[Any, ...]  # as the findings hold them (text or JSON form)

    @property
    def count(self) -> int:
        return len(self.messages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "count": self.count,
            "message": self.messages[0],
            "objects": list(self.objects),
            "remediation": self.remediation,
        }


def group_findings(findings: Iterable[Mapping[str, Any]]) -> list[FindingGroup]:
    """Groups in the order their first finding comes (findings are sorted by severity, then id)."""
    order: dict[tuple[str, str, str], tuple[list[str], list[Any]]] = {}
    for f in findings:
        key = (str(f["id"]), str(f["severity"]), str(f.get("remediation") or ""))
        messages, objects = order.setdefault(key, ([], []))
        messages.append(str(f.get("message") or ""))
        objects.extend(f.get("objects") or [])
    return [FindingGroup(k[0], k[1], k[2], tuple(m), tuple(o)) for k, (m, o) in order.items()]
