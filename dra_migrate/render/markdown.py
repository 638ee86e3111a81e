"""The view model (render/view.py) as GitHub-flavoured Markdown: headings, GitHub tables (tabulate),
fenced code. Commands' `-o markdown` and the report's Markdown both come from here."""

from __future__ import annotations

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
    out += ["#" * s.level + " " + s.title, ""]
    for b in s.blocks:
        if isinstance(b, Section):
            markdown_section(b, out)
        elif isinstance(b, Table):
            out += [markdown_table(b), ""]
        elif isinstance(b, Code):
            # A fence longer than any backtick run inside keeps the block closed.
            fence = "```" if "```" not in b.text else "````"
            out += [fence + b.lang, b.text.rstrip("\n"), fence, ""]
        elif isinstance(b, Badge):
            out += [f"**{b.text}**", ""]
        elif isinstance(b, Chart):
            continue  # the capacity table beside it says the same in numbers
        else:
            out += [str(b), ""]


def _cell(value: str) -> str:
    # A pipe would end the cell and a newline the row.
    return value.replace("|", "\\|").replace("\n", " ")
