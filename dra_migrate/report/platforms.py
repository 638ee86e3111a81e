"""The report's platform view: how each planned pool is cut over and why (plan review.strategies,
dra_migrate/plan/strategies.py; docs/platforms/)."""

from __future__ import annotations

from typing import Any

from dra_migrate.render.view import Section


def strategies_section(s: Section, ways: list[dict[str, Any]]) -> None:
    if not ways:
        return
    sub = s.sub("strategies", f"How each pool is cut over ({len(ways)})")
    sub.table(
        ["pool", "strategy", "platform", "gpu stack", "why", "sources"],
        [
            [
                x["pool"],
                x["strategy"],
                x.get("platform") or "-",
                x.get("stackOwner") or "-",
                x["why"],
                ", ".join(x.get("sources") or []) or "-",
            ]
            for x in ways
        ],
    )
