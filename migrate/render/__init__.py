"""Output for humans and machines: the only place that formats anything.

Formats: table (plain text), markdown (GitHub tables), json, yaml. Data goes to stdout; the CLI
writes logs to stderr. Colour is used only on a terminal and never when NO_COLOR is set
(https://no-color.org).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

import orjson
from tabulate import tabulate

FORMATS = ("table", "json", "yaml", "markdown")


def use_color(stream: TextIO) -> bool:
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def to_json(data: Any) -> str:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"


def to_yaml(data: Any) -> str:
    from migrate.cluster.yamlio import dumper

    yaml = dumper()
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def counts(m: dict[str, int]) -> str:
    """{"nvidia.com/gpu": 8} -> "nvidia.com/gpu=8"; empty -> "-"."""
    return ", ".join(f"{k}={v}" for k, v in sorted(m.items())) or "-"


class Document:
    """A sequence of headings, paragraphs and tables rendered as plain text or Markdown."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []

    def heading(self, text: str) -> None:
        self.blocks.append(("heading", text))

    def line(self, text: str) -> None:
        self.blocks.append(("line", text))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], empty: str = "(none)") -> None:
        self.blocks.append(("table", (list(headers), [list(r) for r in rows], empty)))

    def render(self, fmt: str, color: bool = False) -> str:
        out: list[str] = []
        for kind, value in self.blocks:
            if kind == "heading":
                if out:
                    out.append("")
                if fmt == "markdown":
                    out.append(f"## {value}")
                else:
                    out.append(f"\033[1m{value}\033[0m" if color else value)
            elif kind == "line":
                out.append(value)
            else:
                headers, rows, empty = value
                if not rows:
                    out.append(empty)
                    continue
                if fmt == "markdown":
                    out.append("")
                    rows = [[_md_cell(c) for c in r] for r in rows]
                    out.append(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
                    out.append("")
                else:
                    out.append(
                        tabulate(rows, headers=[h.upper() for h in headers], tablefmt="plain", disable_numparse=True)
                    )
        return "\n".join(out).rstrip("\n") + "\n"


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|")


def emit(text: str, stream: TextIO | None = None) -> None:
    (stream or sys.stdout).write(text)
