"""A report in one of its formats: markdown, html, or json (the `Report.to_dict()` object as it is)."""

from __future__ import annotations

from dra_migrate.render import to_json
from dra_migrate.report.html import render_html
from dra_migrate.report.markdown import render_markdown
from dra_migrate.report.model import Report

FORMATS = ("markdown", "html", "json")


def render(report: Report, fmt: str) -> str:
    data = report.to_dict()
    if fmt == "json":
        return to_json(data)
    if fmt == "html":
        return render_html(data)
    if fmt == "markdown":
        return render_markdown(data)
    raise ValueError(f"unknown report format {fmt!r}")
