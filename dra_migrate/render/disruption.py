"""Disruption: the views `plan`/`show` print and the report's "Stages and waves" section shows (one
function each, so the two cannot disagree)."""

from __future__ import annotations

from typing import Any

from dra_migrate.render.view import Table

WAVE_HEADERS = ["stage", "wave", "nodes unavailable", "pods evicted", "soak after", "nodes"]
GANG_HEADERS = ["gang", "waves that evict it", "times broken"]


def _node_name(n: Any) -> str:
    return str(n["node"]) if isinstance(n, dict) else str(n)


def waves_table(stages: list[dict[str, Any]]) -> Table:
    """One row per wave: how many nodes it takes out at once, the pods it evicts, the soak after it, and
    (wide) its nodes. Stages as the plan or the report holds them (a wave's nodes as entries or names)."""
    rows: list[list[Any]] = [
        [st["name"], w["name"], len(w["nodes"]), w["evictedPods"], w["soakAfter"],
         ", ".join(_node_name(n) for n in w["nodes"])]
        for st in stages
        for w in st.get("waves") or []
    ]  # fmt: skip
    return Table(WAVE_HEADERS, rows, empty="Nothing to migrate.", wide=frozenset({"nodes"}))


def gangs_table(gangs: list[dict[str, Any]]) -> Table:
    """A gang is broken once for every wave that evicts any of its pods."""
    return Table(GANG_HEADERS, [[g["gang"], ", ".join(g["waves"]), len(g["waves"])] for g in gangs])
