"""A report in one of its formats: markdown, html, or json (the `Report.to_dict()` object as it is)."""

from __future__ import annotations

from dra_migrate.render import terminal_safe, to_json
from dra_migrate.report.html import render_html
from dra_migrate.report.markdown import render_markdown
from dra_migrate.report.model import Report

FORMATS = ("markdown", "html", "json")


def render(report: Report, fmt: str) -> str:
    """Markdown and HTML without control characters (`terminal_safe`): the report is often read where it is
    printed (`report` to stdout, `less`), and HTML forbids them anyway. JSON escapes them itself (RFC 8259)."""
    data = report.to_dict()
    if fmt == "json":
        return to_json(data)
    if fmt == "html":
        return terminal_safe(render_html(data))
    if fmt == "markdown":
        return terminal_safe(render_markdown(data))
    raise ValueError(f"unknown report format {fmt!r}")
