"""The report as GitHub-flavoured Markdown: its layout (report/layout.py) drawn by render/markdown.py."""

from __future__ import annotations

from dra_migrate.render.markdown import markdown_section, md_text
from dra_migrate.report.layout import layout


def render_markdown(report: dict[str, object]) -> str:
    title, lead, sections = layout(dict(report))
    # The title and lead quote the cluster (its name, its API server's version) and the plan's path: inert too.
    lead = [md_text(line) for line in lead]
    out = [f"# {md_text(title)}", "", *[f"{line}  " for line in lead[:-1]], lead[-1], ""]
    for s in sections:
        markdown_section(s, out)
    return "\n".join(out).rstrip("\n") + "\n"
