"""The view model (render/view.py) as HTML: sections, tables, badges, code and the capacity chart, with
the stylesheet they need (inline CSS, an inline SVG chart: no scripts, no fetches).

It reads on a phone (the chart scales through its `viewBox`, wide tables scroll in their own box) and
prints (`@media print`: headings kept with what follows them, tables kept whole where they fit, "page N of
M" through CSS Paged Media `@page` counters). Every piece of text goes through `html.escape`: names,
messages and errors come from the cluster and the journal, which anyone able to create a workload partly
controls.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from dra_migrate.render.view import Badge, Chart, Code, Section, Table

# Cell values that get a colour: severities, results, verdicts.
_TONE = {
    "blocker": "bad",
    "failed": "bad",
    "NO": "bad",
    "interrupted": "bad",
    "refused": "bad",
    "never ended": "bad",
    "warning": "warn",
    "rolled-back": "warn",
    "info": "note",
    "ok": "good",
    "yes": "good",
    "skipped": "note",
    "not-run": "mute",
}

CSS = """
:root { --fg: #1f2328; --mute: #59636e; --line: #d1d9e0; --head: #f6f8fa; --accent: #0969da;
  --bad: #cf222e; --warn: #9a6700; --good: #1a7f37; --note: #0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.5 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--fg);
  margin: 0; background: #fff; }
header { background: #24292f; color: #fff; padding: 20px 32px; }
header h1 { margin: 0 0 6px; font-size: 24px; }
header p { margin: 2px 0; color: #d1d9e0; }
.badge { display: inline-block; margin: 4px 6px 6px 0; padding: 1px 10px; border-radius: 12px;
  font-weight: 600; font-size: 13px; border: 1px solid currentColor; background: #fff; }
.badge.good { color: var(--good); background: #dafbe1; }
.badge.bad { color: var(--bad); background: #ffebe9; }
.badge.warn { color: var(--warn); background: #fff8c5; }
.badge.note { color: var(--note); background: #ddf4ff; }
.badge.mute { color: var(--mute); background: var(--head); }
header .badges { margin-top: 8px; }
nav { padding: 10px 32px; border-bottom: 1px solid var(--line); background: var(--head); display: flex;
  flex-wrap: wrap; gap: 4px 16px; }
nav a { color: var(--accent); text-decoration: none; white-space: nowrap; }
main { padding: 8px 32px 40px; max-width: 1400px; }
h2 { font-size: 20px; border-bottom: 1px solid var(--line); padding-bottom: 4px; margin: 28px 0 10px; }
h3 { font-size: 16px; margin: 18px 0 8px; }
h4 { font-size: 14px; margin: 14px 0 6px; }
p { margin: 6px 0 10px; }
code { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, monospace; background: var(--head);
  padding: 1px 4px; border-radius: 4px; }
pre { font: 12px/1.45 ui-monospace, "DejaVu Sans Mono", Menlo, monospace; background: var(--head);
  border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; overflow-x: auto; }
/* Wide tables scroll in their own box, so the page never scrolls sideways (a phone is 360-420 px). */
.scroll { overflow-x: auto; max-width: 100%; margin: 6px 0 14px; }
.scroll > table { margin: 0; }
table { border-collapse: collapse; margin: 6px 0 14px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--head); font-weight: 600; }
tr:nth-child(even) td { background: #fbfcfd; }
table.kv th:empty { display: none; }
table.rollback { border-left: 4px solid var(--warn); }
table.rollback td { background: #fff8e6; }
td.bad { color: var(--bad); font-weight: 600; }
td.warn { color: var(--warn); font-weight: 600; }
td.good { color: var(--good); }
td.note { color: var(--note); }
td.mute, .empty { color: var(--mute); }
figure { margin: 8px 0 14px; max-width: 100%; }
figure svg { width: 100%; height: auto; max-width: 930px; display: block; }
td { overflow-wrap: break-word; }
@media (max-width: 600px) {
  header, nav, main { padding-left: 12px; padding-right: 12px; }
  header h1 { font-size: 19px; overflow-wrap: anywhere; }
  header p { overflow-wrap: anywhere; }
  td, th { padding: 3px 5px; }
  td { min-width: 4em; }
  table.kv td { overflow-wrap: anywhere; }  /* digests and parameter lists wrap instead of scrolling */
}
figcaption { color: var(--mute); font-size: 12px; }
svg text { font: 12px "DejaVu Sans", Helvetica, Arial, sans-serif; fill: var(--fg); }
@media print {
  @page {
    size: A4; margin: 12mm 12mm 16mm;
    @bottom-right { content: "page " counter(page) " of " counter(pages); font-size: 8pt; color: #59636e; }
  }
  .scroll { overflow: visible; }
  figure svg { max-width: 100%; }
  .badge { border: 1px solid currentColor; }
  body { font-size: 10pt; }
  header { background: none; color: var(--fg); padding: 0 0 8px; border-bottom: 2px solid var(--fg); }
  header p { color: var(--fg); }
  header .verdict { border: 1px solid var(--fg); }
  nav { display: none; }
  main { padding: 0; max-width: none; }
  /* A heading stays with what follows it: never alone at the foot of a page. */
  h2, h3, h4 { break-after: avoid; page-break-after: avoid; break-inside: avoid; }
  h2 + p, h3 + p, h4 + p { break-before: avoid; }
  #findings, #stages, #timeline { break-before: page; }
  table, figure, pre { break-inside: avoid; }
  table { font-size: 8.5pt; }
  pre { white-space: pre-wrap; }
  a { color: inherit; text-decoration: none; }
}
"""


def html_text(s: str) -> str:
    """Escaped, with `backticked` spans as code (after escaping: the spans cannot inject markup)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(s))


def html_section(s: Section, out: list[str]) -> None:
    level = min(s.level, 6)
    if s.level == 2:
        out.append(f'<section id="{escape(s.id)}">')
    out.append(f'<h{level} id="{escape(s.id)}-h">{escape(s.title)}</h{level}>')
    for b in s.blocks:
        if isinstance(b, Section):
            html_section(b, out)
        elif isinstance(b, Table):
            _table(b, out)
        elif isinstance(b, Code):
            out.append(f'<pre><code class="language-{escape(b.lang)}">{escape(b.text)}</code></pre>')
        elif isinstance(b, Chart):
            out.append(capacity_svg(b.rows))
        elif isinstance(b, Badge):
            out.append(f"<p>{html_badge(b)}</p>")
        else:
            out.append(f"<p>{html_text(str(b))}</p>")
    if s.level == 2:
        out.append("</section>")


def html_badge(b: Badge) -> str:
    return f'<span class="badge {escape(b.tone)}">{escape(b.text)}</span>'


def _table(t: Table, out: list[str]) -> None:
    if not t.rows:
        out.append(f'<p class="empty">{html_text(t.empty)}</p>')
        return
    out.append('<div class="scroll">')
    kv = all(h == "" for h in t.headers)
    classes = " ".join(c for c in (t.css, "kv" if kv else "") if c)
    out.append(f'<table class="{classes}">' if classes else "<table>")
    if not kv:
        out.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in t.headers) + "</tr></thead>")
    out.append("<tbody>")
    for row in t.rows:
        cells = []
        for i, c in enumerate(row):
            if kv and i == 0:
                cells.append(f'<th scope="row">{escape(c)}</th>')
                continue
            tone = _TONE.get(c)
            cells.append(f'<td class="{tone}">{escape(c)}</td>' if tone else f"<td>{escape(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")


# --- the capacity chart ------------------------------------------------------------------------------

_BEFORE, _AFTER, _DEMAND = "#8c959f", "#1a7f37", "#cf222e"


def capacity_svg(rows: list[dict[str, Any]]) -> str:
    """Horizontal bars per pool and resource: before (device plugin), after (DRA), demand as a red mark."""
    if not rows:
        return '<p class="empty">No GPU capacity to chart.</p>'
    label_w, bar_w, row_h, top = 260, 560, 46, 30
    width, height = label_w + bar_w + 110, top + row_h * len(rows) + 10
    peak = max([1] + [max(int(r["before"]), int(r["after"] or 0), int(r["demand"])) for r in rows])

    def x(v: int) -> float:
        return float(label_w + bar_w * v / peak)

    parts = [
        # No fixed size: the viewBox scales it to its container (CSS caps it at its drawn width).
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet" '
        'role="img" aria-labelledby="capacity-title">',
        '<title id="capacity-title">GPU capacity per pool: before (device plugin) and after (DRA)</title>',
        f'<rect x="{label_w}" y="6" width="12" height="12" fill="{_BEFORE}"/>'
        f'<text x="{label_w + 16}" y="16">before (device plugin)</text>',
        f'<rect x="{label_w + 180}" y="6" width="12" height="12" fill="{_AFTER}"/>'
        f'<text x="{label_w + 196}" y="16">after (DRA devices)</text>',
        f'<rect x="{label_w + 340}" y="5" width="3" height="14" fill="{_DEMAND}"/>'
        f'<text x="{label_w + 348}" y="16">demand today</text>',
    ]
    for i, r in enumerate(rows):
        y = top + i * row_h
        label = f"{r['pool']} · {r['resource']}"
        parts.append(f'<text x="{label_w - 8}" y="{y + 22}" text-anchor="end">{escape(label)}</text>')
        # Value labels start past both the bar and the demand mark, so the mark never covers them.
        mark = x(r["demand"]) + 3
        before_txt = str(r["before"]) + (f" ({r['sharingReplicas']}x shared)" if r["sharingReplicas"] > 1 else "")
        parts.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{x(r["before"]) - label_w:.1f}" height="15" fill="{_BEFORE}"/>'
            f'<text x="{max(x(r["before"]), mark) + 5:.1f}" y="{y + 16}">{escape(before_txt)}</text>'
        )
        if r["after"] is None:
            parts.append(f'<text x="{label_w + 2}" y="{y + 35}" fill="{_DEMAND}">no DeviceClass maps it</text>')
        else:
            after_txt = f"{r['after']}" + ("" if r["fits"] else " — demand does not fit")
            parts.append(
                f'<rect x="{label_w}" y="{y + 23}" width="{x(r["after"]) - label_w:.1f}" height="15" fill="{_AFTER}"/>'
                f'<text x="{max(x(r["after"]), mark) + 5:.1f}" y="{y + 35}">{escape(after_txt)}</text>'
            )
        parts.append(
            f'<rect x="{x(r["demand"]) - 1:.1f}" y="{y + 1}" width="3" height="40" fill="{_DEMAND}">'
            f"<title>demand {r['demand']}</title></rect>"
        )
    parts.append("</svg>")
    return (
        "<figure>"
        + "".join(parts)
        + "<figcaption>Bars: GPUs a pool offers before and after; red mark: what its workloads request today."
        "</figcaption></figure>"
    )
