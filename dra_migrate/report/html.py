"""The report as one self-contained HTML file: its layout (report/layout.py) drawn by render/html.py.

It opens from a file or a mail attachment as it is, reads on a phone (the chart scales through its
`viewBox`, wide tables scroll in their own box), and prints (`@media print`: no navigation, headings kept
with what follows them, tables kept whole where they fit, page breaks before the big sections, "page N of
M" in the margin through CSS Paged Media `@page` counters). Every piece of text goes through
`html.escape`: names, messages and errors come from the cluster and the journal, which anyone able to
create a workload partly controls.
"""

from __future__ import annotations

from html import escape
from typing import Any

from dra_migrate.render.html import CSS, html_badge, html_section, html_text
from dra_migrate.report.layout import applicability_badge, layout, rehearsal_badge, verification_badge

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def render_html(report: dict[str, Any]) -> str:
    title, lead, sections = layout(report)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # Defence in depth behind the escaping: no script runs and nothing is fetched (no beacon, no form), even
        # if some text ever got through unescaped. Only the inline stylesheet is allowed. A file opened from disk
        # or mail has no HTTP header: a <meta> CSP, before any content it governs (https://www.w3.org/TR/CSP3/
        # "The meta element"; frame-ancestors, sandbox and report-uri are ignored there, so none is used).
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{escape(title)}</h1>",
        *[f"<p>{html_text(line)}</p>" for line in lead],
        '<p class="badges">'
        + html_badge(applicability_badge(report))
        + html_badge(verification_badge(report))
        + (html_badge(rehearsal_badge(report)) if report.get("rehearsal") else "")
        + "</p>",
        "</header>",
        "<nav>" + "".join(f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in sections) + "</nav>",
        "<main>",
    ]
    for s in sections:
        html_section(s, out)
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"
