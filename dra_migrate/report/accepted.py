"""The report's accepted risks: findings the ignore file accepted (checks/ignore.py), with their reasons.

Shown under Findings, never hidden: an accepted blocker is still a blocker someone decided to live with,
and the reviewer reads who said why, and until when."""

from __future__ import annotations

from typing import Any, Protocol

from dra_migrate.checks.model import objects_text


class _Section(Protocol):
    def p(self, text: str) -> None: ...

    def table(self, headers: list[str], rows: list[list[Any]], empty: str = ..., css: str = ...) -> None: ...


def accepted_risks(section: _Section, accepted: list[dict[str, Any]]) -> None:
    if not accepted:
        return
    section.p(f"Accepted risks ({len(accepted)}): findings the ignore file accepted, not counted above.")
    section.table(
        ["severity", "id", "finding", "objects", "reason", "expires"],
        [
            [
                a["severity"],
                a["id"],
                a["message"],
                ", ".join(objects_text(a["objects"] or [])) or "-",
                a["reason"],
                a.get("expires") or "-",
            ]
            for a in accepted
        ],
    )
