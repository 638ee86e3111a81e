"""Disruption: the views `plan`/`show` print and the report's "Stages and waves" section shows (one
function each, so the two cannot disagree)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dra_migrate.plan.model import Stage
from dra_migrate.render.view import Table

WAVE_HEADERS = ["stage", "wave", "nodes unavailable", "pods evicted", "soak after", "nodes"]
GANG_HEADERS = ["gang", "waves that evict it", "times broken"]


@dataclass(frozen=True)
class WaveRow:
    """One wave as the table shows it (from the typed plan, or from the report's own waves)."""

    stage: str
    wave: str
    nodes: Sequence[str]
    evicted_pods: int
    soak_after: str


def wave_rows(stages: Iterable[Stage | Mapping[str, Any]]) -> list[WaveRow]:
    """The rows of a plan's pool stages. A stage still in the file's shape (`show`'s, until it reads the
    model) is read by the codec (`stage_from_dict`), not here."""
    from dra_migrate.plan.model import PoolStage, Stage, stage_from_dict  # not for rows drawn from an outline

    typed = (s if isinstance(s, Stage) else stage_from_dict(s, f"stages[{i}]") for i, s in enumerate(stages))
    return [
        WaveRow(st.name, w.name, [n.node for n in w.nodes], w.evicted_pods, w.soak_after)
        for st in typed
        if isinstance(st, PoolStage)
        for w in st.waves
    ]


def waves_table(
    waves: Sequence[WaveRow | Stage | Mapping[str, Any]], nodes: Callable[[list[str]], str] = ", ".join
) -> Table:
    """One row per wave: how many nodes it takes out at once, the pods it evicts, the soak after it, and
    (wide) its nodes, as `nodes` writes them (the report names the first few). Rows (the report's), or a
    plan's stages (`wave_rows`)."""
    stages = [s for s in waves if not isinstance(s, WaveRow)]
    rows = [w for w in waves if isinstance(w, WaveRow)] + (wave_rows(stages) if stages else [])
    cells: list[list[Any]] = [
        [w.stage, w.wave, len(w.nodes), w.evicted_pods, w.soak_after, nodes(list(w.nodes))] for w in rows
    ]
    return Table(WAVE_HEADERS, cells, empty="Nothing to migrate.", wide=frozenset({"nodes"}))


def gangs_table(gangs: list[dict[str, Any]]) -> Table:
    """A gang is broken once for every wave that evicts any of its pods."""
    return Table(GANG_HEADERS, [[g["gang"], ", ".join(g["waves"]), len(g["waves"])] for g in gangs])
