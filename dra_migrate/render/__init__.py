"""Output for humans and machines: the only place that formats anything.

Views are typed blocks (render/view.py: Table, Section, ...) built by one function per view; this
module draws them as plain text (table, wide) and render/markdown.py and render/html.py as Markdown and
HTML, for commands and the report alike.

Formats (`-o`): table (plain text that fits the terminal), wide (every column, nothing shortened),
markdown (GitHub tables), json, yaml, name (one name per line, for scripts). Data goes to stdout; the
CLI writes logs to stderr. Colour carries meaning (blocker red, warning yellow, ok green, diff
additions green and removals red) and is used only on a terminal, never when NO_COLOR is set
(https://no-color.org).
"""

from __future__ import annotations

import io
import os
import re
import sys
import textwrap
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

from dra_migrate.render.view import Table
from dra_migrate.render.view import text as _cell

FORMATS = ("table", "wide", "json", "yaml", "markdown", "name")
TEXT_FORMATS = ("table", "wide", "markdown")

# ANSI SGR codes per meaning (ECMA-48): the palette every command shares.
STYLES = {
    "bad": "31",  # red: blocker, NO, failed, removed
    "warn": "33",  # yellow: warning
    "good": "32",  # green: ok, yes, added
    "heading": "1",  # bold
    "dim": "2",
}
_MIN_CELL = 8  # a shortened column keeps at least this many characters
_ELLIPSIS = "…"


class Styled(str):
    """A string with a meaning (`STYLES`), rendered in colour on a terminal and plain everywhere else,
    and optionally a shorter form that a table too wide for the terminal uses first."""

    style: str | None
    short: str | None

    def __new__(cls, text: str, style: str | None, short: str | None = None) -> Styled:
        obj = super().__new__(cls, text)
        obj.style = style
        obj.short = short
        return obj


# What a terminal acts on instead of showing: C0 controls but tab and newline (ESC starts CSI, OSC 8 hyperlinks
# and OSC 0 window titles; BEL, BS and CR overwrite what was shown), DEL, C1 controls (U+009B is CSI by itself,
# ECMA-48 section 5.3), and the bidirectional overrides and isolates that reorder the characters after them
# (Unicode UAX #9; CVE-2021-42574, "Trojan Source").
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


def terminal_safe(text: str) -> str:
    """Text from the cluster or a journal (an API server's or webhook's message, an object's name) as a terminal
    shows it, never acts on it: every control character written out as `\\x1b`, `\\u202e`. Tabs and newlines
    stay (layout); a `Styled` keeps its meaning and short form."""
    if not _UNSAFE.search(text):
        return text
    safe = _UNSAFE.sub(_visible, text)
    if isinstance(text, Styled):
        return Styled(safe, text.style, terminal_safe(text.short) if text.short else None)
    return safe


def styled(text: Any, style: str | None) -> str:
    return Styled(str(text), style) if style else str(text)


def short(text: str, shorter: str) -> str:
    return Styled(text, None, shorter) if shorter != text else text


SEVERITY_STYLE = {"blocker": "bad", "warning": "warn", "info": "dim"}


def severity(value: str) -> str:
    """BLOCKER in red, WARNING in yellow, INFO dim."""
    return styled(value.upper(), SEVERITY_STYLE.get(value.lower()))


_CHANGE_STYLE = {"added": "good", "removed": "bad", "changed": "warn", "moved": "warn"}


def change(word: str) -> str:
    """A diff's change: added green, removed red (as `diff --color` shows + and - lines)."""
    return styled(word, _CHANGE_STYLE.get(word))


def verdict(ok: bool, yes: str = "yes", no: str = "NO") -> str:
    return styled(yes, "good") if ok else styled(no, "bad")


def paint(text: str, style: str | None, color: bool) -> str:
    if not color or not style or style not in STYLES:
        return text
    return f"\033[{STYLES[style]}m{text}\033[0m"


_COLOR_OFF = [False]  # the CLI's global --no-color, set once per invocation (`set_color_off`)


def set_color_off(off: bool) -> None:
    _COLOR_OFF[0] = off


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal; never with --no-color, NO_COLOR set to any value, even empty
    (no-color.org), or TERM=dumb (a terminal that declares it has no escape sequences: Emacs' shell buffer,
    a CI log viewer; clig.dev "Output": disable colour when TERM=dumb)."""
    if _COLOR_OFF[0] or "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width tables must fit: $COLUMNS, else the terminal's; None when piped (nothing is shortened)."""
    env = os.environ.get("COLUMNS", "")
    if env.isdecimal() and int(env) > 0:
        return int(env)
    stream = stream or sys.stdout
    if hasattr(stream, "isatty") and stream.isatty():
        # os's, not shutil's (which would re-read $COLUMNS): `import shutil` loads bz2 and lzma, 0.5 MB
        # of `show`'s peak memory, which issue 29 holds to 5x the plan file.
        try:
            return os.get_terminal_size(stream.fileno()).columns or 80
        except (AttributeError, OSError, ValueError):
            return 80
    return None


def to_json(data: Any) -> str:
    import orjson  # not at import: drawing a table needs none (`show`'s memory, issue 29)

    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"


def to_yaml(data: Any) -> str:
    from dra_migrate.cluster.yamlio import dumper

    yaml = dumper()
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def to_names(names: Sequence[str]) -> str:
    return "".join(f"{n}\n" for n in names)


def counts(m: dict[str, int]) -> str:
    """{"nvidia.com/gpu": 8} -> "nvidia.com/gpu=8" (narrow tables: "gpu=8"); empty -> "-"."""
    full = ", ".join(f"{k}={v}" for k, v in sorted(m.items())) or "-"
    return short(full, ", ".join(f"{k.removeprefix('nvidia.com/')}={v}" for k, v in sorted(m.items())) or "-")


def _shorten(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: max(width - 1, 0)] + _ELLIPSIS


def plain_table(t: Table, fmt: str, color: bool, width: int | None) -> Iterator[str]:
    """A table as aligned plain text: `table` leaves out wide columns and, given a `width`, uses the cells'
    short forms and then shortens the widest columns until it fits; `wide` shows everything whole.

    Two passes over the rows, the text of each cell made in each and kept in neither: a 10,000-node plan's
    node tables held every cell's text at once, twice (`show`'s peak is held to 5x the plan file, issue 29)."""
    cols = t.columns(fmt)
    header = [t.headers[i].upper() for i in cols]
    fitting = width if fmt == "table" else None  # the width a table must fit, if any
    full, short = [len(h) for h in header], [len(h) for h in header]
    for row in t.rows:
        for j, (raw, text) in enumerate(_texts(row, cols)):
            full[j] = max(full[j], len(text))
            if fitting is not None:
                short[j] = max(short[j], len(_short_text(raw, text)))
    use_short = fitting is not None and _total(full) > fitting  # the short forms first, then shortening
    widths = short if use_short else full
    if fitting is not None:
        widths = _fit(widths, [len(h) for h in header], fitting)
    yield _join([_shorten(h, w) for h, w in zip(header, widths, strict=True)], widths, [None] * len(cols), color)
    for row in t.rows:
        pairs = list(_texts(row, cols))
        cells = [_short_text(raw, text) if use_short else text for raw, text in pairs]
        styles = [getattr(raw, "style", None) for raw, _ in pairs]
        yield _join([_shorten(c, w) for c, w in zip(cells, widths, strict=True)], widths, styles, color)


def _texts(row: Sequence[Any], cols: list[int]) -> Iterator[tuple[Any, str]]:
    """(the cell, its text) of each shown column of a row."""
    for i in cols:
        raw = row[i] if i < len(row) else ""
        yield raw, terminal_safe(_cell(raw))


def _short_text(raw: Any, text: str) -> str:
    return terminal_safe(getattr(raw, "short", None) or text)


def _total(widths: list[int]) -> int:
    return sum(widths) + 2 * (len(widths) - 1)


def _fit(widths: list[int], header: list[int], total: int) -> list[int]:
    """Shrink the widest columns, one character at a time, until the row fits `total` (2-space gaps)."""
    widths = list(widths)
    # The first column names the row (a node, a pool, a workload): it is shortened last.
    floor = [widths[0]] + [min(w, max(_MIN_CELL, min(h, 12))) for w, h in zip(widths[1:], header[1:], strict=True)]
    while _total(widths) > total:
        candidates = [j for j, w in enumerate(widths) if w > floor[j]]
        if not candidates:
            break
        j = max(candidates, key=lambda k: widths[k])
        widths[j] -= 1
    if _total(widths) > total and widths[0] > _MIN_CELL * 2:
        widths[0] = max(_MIN_CELL * 2, widths[0] - (_total(widths) - total))
    return widths


def _join(cells: list[str], widths: list[int], styles: list[str | None], color: bool) -> str:
    parts = [paint(c, s, color) + " " * (w - len(c)) for c, w, s in zip(cells, widths, styles, strict=True)]
    return "  ".join(parts).rstrip()


class Document:
    """A sequence of headings, paragraphs and tables rendered as plain text or Markdown."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, Any]] = []

    def heading(self, text: str) -> None:
        self.blocks.append(("heading", text))

    def line(self, text: str) -> None:
        self.blocks.append(("line", text))

    def table(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[Any]],
        empty: str = "(none)",
        wide: Sequence[str] = (),
    ) -> None:
        """`wide`: headers of the columns `-o table` leaves out (`-o wide` and markdown show them)."""
        # A row that is a list or a tuple is kept, not copied: a plan's node tables are thousands of rows.
        self.add(
            Table(list(headers), [r if isinstance(r, list | tuple) else list(r) for r in rows], empty, frozenset(wide))
        )

    def add(self, table: Table) -> None:
        """A table built by a view function (the report shows the same `Table`)."""
        self.blocks.append(("table", table))

    def render(self, fmt: str, color: bool = False, width: int | None = None) -> str:
        """fmt: table | wide | markdown. `width` (table only): what lines and tables must fit."""
        return "".join(self.pieces(fmt, color, width))

    def pieces(self, fmt: str, color: bool = False, width: int | None = None) -> Iterator[str]:
        """`render`'s text a line at a time, to be written as it is drawn: `show` of a 10,000-node plan
        never holds its whole output (its peak memory is held to 5x the plan file, issue 29). As `render`
        promises: no blank line at the end, one newline."""
        held = ""  # newlines that end the text so far: written only if more text follows
        for line in self._lines(fmt, color, width):
            body = line.rstrip("\n")
            if body:
                yield held + body
                held = line[len(body) :] + "\n"
            else:
                held += line + "\n"
        yield "\n"

    def _lines(self, fmt: str, color: bool, width: int | None) -> Iterator[str]:
        fit = width if fmt == "table" else None
        started = False
        for kind, value in self.blocks:
            if kind == "heading":
                if started:
                    yield ""
                yield f"## {_md(value)}" if fmt == "markdown" else paint(terminal_safe(value), "heading", color)
            elif kind == "line":
                # Markdown goes to a terminal too (and into tickets): inert as Markdown, and no control sequence.
                yield from _wrap(_md(value) if fmt == "markdown" else terminal_safe(value), fit, color)
            elif not value.rows:
                yield terminal_safe(value.empty)
            elif fmt == "markdown":
                # Imported here: tabulate (~0.08 s and ~4 MB at start-up) draws only Markdown.
                from dra_migrate.render.markdown import markdown_table

                yield from ("", terminal_safe(markdown_table(value)), "")
            else:
                yield from plain_table(value, fmt, color, fit)
            started = True


def _md(text: str) -> str:
    # Imported here, as markdown_table is: render/markdown.py loads tabulate.
    from dra_migrate.render.markdown import md_text

    return terminal_safe(md_text(text))


def _wrap(text: str, width: int | None, color: bool) -> list[str]:
    style = getattr(text, "style", None)
    if width is None or len(text) <= width:
        return [paint(str(text), style, color)]
    indent = " " * (len(text) - len(text.lstrip(" ")))
    lines = textwrap.wrap(
        str(text), width, subsequent_indent=indent + "  ", break_long_words=False, break_on_hyphens=False
    )
    return [paint(line, style, color) for line in lines] or [""]


def emit(text: str | Iterable[str], stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    if isinstance(text, str):
        out.write(text)
        return
    for piece in text:
        out.write(piece)
