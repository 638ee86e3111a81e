"""The view model: what every output shows, as typed blocks that each format renders.

Commands and the report build these (a `Table` of findings, a `Section` of the report); `render/`
draws them as plain text (table, wide), Markdown, HTML, and the JSON of a command is the data they
were built from. One model for every format, and one function per view (e.g. `render.checks.
findings_table`), so a command's table and the report's section showing the same thing cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    """Rows under headers. `wide`: headers of columns `-o table` leaves out (wide, Markdown and HTML
    show them); `empty`: what to say when there is no row; `css`: a class for the HTML rendering."""

    headers: list[str]
    rows: Sequence[Sequence[Any]]  # lists, or tuples (a NodeLine is its row)
    empty: str = "(none)"
    wide: frozenset[str] = frozenset()
    css: str = ""

    def columns(self, fmt: str) -> list[int]:
        """Indices shown: `table` leaves out the columns marked wide; every other format shows all."""
        return [i for i, h in enumerate(self.headers) if fmt != "table" or h not in self.wide]


@dataclass
class Badge:
    """A verdict in colour (HTML) or bold (Markdown): tone good | bad | warn | note | mute."""

    text: str
    tone: str


@dataclass
class Code:
    text: str
    lang: str = ""


@dataclass
class Chart:
    """Capacity before and after per pool and resource (HTML draws it; the other formats have the table)."""

    rows: list[dict[str, Any]]


@dataclass
class Section:
    """A titled part of a document: paragraphs (str), tables, code, charts, badges and sub-sections."""

    id: str
    title: str
    level: int = 2
    blocks: list[Any] = field(default_factory=list)

    def p(self, text: str) -> None:
        self.blocks.append(text)

    def table(self, headers: list[str], rows: list[list[Any]], empty: str = "(none)", css: str = "") -> None:
        self.blocks.append(Table(headers, [[cell(c) for c in r] for r in rows], empty, css=css))

    def add(self, table: Table) -> None:
        """A table built by a shared view function, its cells made text as `table` makes them."""
        self.blocks.append(Table(table.headers, [[cell(c) for c in r] for r in table.rows], table.empty,
                                 table.wide, table.css))  # fmt: skip

    def sub(self, id_: str, title: str) -> Section:
        s = Section(id_, title, self.level + 1)
        self.blocks.append(s)
        return s


def cell(value: Any) -> str:
    """A value as a document's cell: None is "-", booleans yes/no."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def first_few(items: list[str], limit: int = 4) -> str:
    """A list as a cell, its first `limit` items and how many more: a finding's objects, a consumer's pools
    (a DaemonSet on the nodes of 2,000 pools stays one line)."""
    if len(items) <= limit:
        return ", ".join(items) or "-"
    return ", ".join(items[:limit]) + f" (+{len(items) - limit} more)"


def text(value: Any) -> str:
    """A value as a terminal's or Markdown cell: None is empty, lists and maps joined, never a Python repr."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(text(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={text(v)}" for k, v in value.items()) or "-"
    return str(value)
