"""The report as GitHub-flavoured Markdown: headings, GitHub tables (tabulate), YAML code blocks."""

from __future__ import annotations

from tabulate import tabulate

from dra_migrate.report.layout import Badge, Chart, Code, Section, Table, layout


def render_markdown(report: dict[str, object]) -> str:
    title, lead, sections = layout(dict(report))
    out = [f"# {title}", "", *[f"{line}  " for line in lead[:-1]], lead[-1], ""]
    for s in sections:
        _section(s, out)
    return "\n".join(out).rstrip("\n") + "\n"


def _section(s: Section, out: list[str]) -> None:
    out += ["#" * s.level + " " + s.title, ""]
    for b in s.blocks:
        if isinstance(b, Section):
            _section(b, out)
        elif isinstance(b, Table):
            _table(b, out)
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


def _table(t: Table, out: list[str]) -> None:
    if not t.rows:
        out += [t.empty, ""]
        return
    rows = [[_cell(c) for c in r] for r in t.rows]
    headers = [_cell(h) or " " for h in t.headers]
    out += [tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]


def _cell(value: str) -> str:
    # A pipe would end the cell and a newline the row.
    return value.replace("|", "\\|").replace("\n", " ")
