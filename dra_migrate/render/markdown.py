"""The view model (render/view.py) as GitHub-flavoured Markdown: headings, GitHub tables (tabulate),
fenced code. Commands' `-o markdown` and the report's Markdown both come from here."""

from __future__ import annotations

import re

from tabulate import tabulate

from dra_migrate.render.view import Badge, Chart, Code, Section, Table, text


def markdown_table(t: Table) -> str:
    """A GitHub table of every column (wide ones included); `t.empty` when there is no row."""
    if not t.rows:
        return t.empty
    cols = t.columns("markdown")
    rows = [[_cell(text(r[i] if i < len(r) else "")) for i in cols] for r in t.rows]
    headers = [_cell(t.headers[i]) or " " for i in cols]
    return str(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))


def markdown_section(s: Section, out: list[str]) -> None:
    """A section and its blocks, appended to `out` as lines."""
    out += ["#" * s.level + " " + md_text(s.title), ""]
    for b in s.blocks:
        if isinstance(b, Section):
            markdown_section(b, out)
        elif isinstance(b, Table):
            out += [markdown_table(b), ""]
        elif isinstance(b, Code):
            # A fence longer than any backtick run inside keeps the block closed.
            fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", b.text)), default=0))
            out += [fence + b.lang, b.text.rstrip("\n"), fence, ""]
        elif isinstance(b, Badge):
            out += [f"**{md_text(b.text)}**", ""]
        elif isinstance(b, Chart):
            continue  # the capacity table beside it says the same in numbers
        else:
            out += [md_text(str(b)), ""]


def _cell(value: str) -> str:
    # A pipe would end the cell, also after an even run of backslashes (which escape each other), in a code
    # span too: GitHub splits a row before it reads spans.
    return re.sub(r"(?<!\\)((?:\\\\)*)\|", r"\1\\|", md_text(value))


# A code span as CommonMark reads it: a run of backticks, closed by the next run of the same length.
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
# Outside code spans: what could start raw HTML, a link or image, or escape the next character.
_ACTIVE = re.compile(r"([\\<\[\]])")


def md_text(value: str) -> str:
    """Text from anywhere (a journal's error, an object's name) as one line of inert Markdown: newlines joined
    (no heading, list or table row can start), and outside code spans no raw HTML (`<img onerror>`), no link
    or image (`![x](url)`), no backslash that unescapes what follows. Code spans (our `--flags`) stay spans:
    inside them CommonMark shows everything as it is."""
    value = " ".join(value.splitlines())
    out, at = [], 0
    for m in _CODE_SPAN.finditer(value):
        out += [_ACTIVE.sub(r"\\\1", value[at : m.start()]), m.group(0)]
        at = m.end()
    out.append(_ACTIVE.sub(r"\\\1", value[at:]))
    return "".join(out)
