"""The HTML report in a real browser: Debian's headless Chromium, started by the test.

It takes a screenshot, dumps the DOM as the browser built it (every section heading must be there, the
chart drawn as SVG, no script anywhere), and prints to PDF. No control plane is needed, so these tests
are not marked `cluster`. A missing Chromium fails them — in CI and locally alike, never a skip, as the
control plane does: `.ci/run` installs it (`apt-get install chromium`).

`DRA_MIGRATE_UPDATE_GOLDEN=1 pytest tests/integration/test_report_browser.py` rewrites the README's
picture, docs/report-demo.png.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from dra_migrate.plan import io as plan_io
from dra_migrate.report.layout import SECTIONS
from tests.unit.cli import run
from tests.unit.test_report import _journal

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "demo-example.yaml"
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
PICTURE = ROOT / "docs" / "report-demo.png"
UPDATE = os.environ.get("DRA_MIGRATE_UPDATE_GOLDEN") == "1"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PICTURE_LIMIT = 300_000  # bytes: the README's picture is committed


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    where = "in CI: .ci/run installs it" if IN_CI else "install it: apt-get install chromium"
    pytest.fail(f"Chromium is not installed ({where}); the HTML report must be checked in a browser", pytrace=False)


def _browse(tmp: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        _chromium(),
        "--headless=new",
        "--no-sandbox",  # as root in a container there is no user namespace to sandbox with
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        *flags,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _report(tmp: Path, *args: str) -> Path:
    out = tmp / "report.html"
    r = run("report", *args, "-o", "html", "--out", str(out))
    assert r.code == 0, r.stderr
    return out


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # IHDR comes first
    return width, height


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.section_ids: list[str] = []
        self.tags: dict[str, int] = {}
        self.table_classes: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        a = dict(attrs)
        if tag == "section":
            self.section_ids.append(a.get("id") or "")
        if tag == "table":
            self.table_classes.append(a.get("class") or "")
        if tag == "h2":
            self._in = ""

    def handle_data(self, data: str) -> None:
        if self._in is not None:
            self._in += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "h2" and self._in is not None:
            self.headings.append(self._in.strip())
            self._in = None


def _dom(tmp: Path, page: Path) -> _Dom:
    r = _browse(tmp, page.as_uri(), "--dump-dom")
    assert r.returncode == 0, r.stderr[-2000:]
    dom = _Dom()
    dom.feed(r.stdout)
    return dom


def test_demo_report_in_chromium(tmp_path: Path) -> None:
    page = _report(tmp_path, str(PLAN.relative_to(ROOT)), "--snapshot", str(DEMO.relative_to(ROOT)))

    shot = tmp_path / "report.png"
    r = _browse(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000")
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    assert _png_size(shot) == (1280, 2000)
    assert shot.stat().st_size > 50_000, "the screenshot is (nearly) blank"

    dom = _dom(tmp_path, page)
    assert dom.headings == [title for _, title in SECTIONS]
    assert dom.section_ids == [id_ for id_, _ in SECTIONS]
    assert dom.tags.get("svg") == 1 and dom.tags.get("rect", 0) >= 9  # the capacity chart, drawn
    assert "script" not in dom.tags and "img" not in dom.tags and "link" not in dom.tags

    pdf = tmp_path / "report.pdf"
    r = _browse(tmp_path, page.as_uri(), f"--print-to-pdf={pdf}", "--no-pdf-header-footer")
    assert r.returncode == 0 and pdf.exists(), r.stderr[-2000:]
    data = pdf.read_bytes()
    pages = re.search(rb"/Count (\d+)", data)
    assert data.startswith(b"%PDF") and pages, "not a PDF"
    assert int(pages.group(1)) >= 3  # A4 pages, breaks before the big sections (@media print)

    if UPDATE:
        # A shorter window than the check above keeps the committed picture small.
        PICTURE.parent.mkdir(parents=True, exist_ok=True)
        r = _browse(tmp_path, page.as_uri(), f"--screenshot={PICTURE}", "--window-size=1280,1700")
        assert r.returncode == 0, r.stderr[-2000:]
    assert PICTURE.exists(), f"missing {PICTURE.relative_to(ROOT)}: run with DRA_MIGRATE_UPDATE_GOLDEN=1"
    assert PICTURE.stat().st_size < PICTURE_LIMIT, f"{PICTURE.name} is too big to commit"


def test_rollback_is_set_apart_in_the_browser(tmp_path: Path) -> None:
    plan = tmp_path / "demo.yaml"
    plan.write_bytes(PLAN.read_bytes())
    records = _journal(plan_io.load(plan)["digest"])
    Path(f"{plan}.journal.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in records))
    page = _report(tmp_path, str(plan))

    dom = _dom(tmp_path, page)
    assert "Execution timeline" in dom.headings and "Final verification" in dom.headings
    assert dom.table_classes.count("rollback") == 1
    text = page.read_text()
    rollback_table = text[text.index('<table class="rollback">') :]
    rollback_table = rollback_table[: rollback_table.index("</table>")]
    assert rollback_table.count("<tr>") == 1 + 5  # its header and the five steps undone


# Measured by the browser: the report is loaded into a frame of the width under test (headless Chromium
# has a minimum window width; a frame has none, and its media queries follow its own width). The report
# itself has no script; this probe page next to it does. The page must not scroll sideways, the chart and
# every box must fit the width, wide tables scroll in their own box, and text stays at a readable size.
_PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="report.html" style="width:WIDTHpx;height:2000px;border:0"></iframe>
<script>
document.getElementById("f").addEventListener("load", () => {
  const d = document.getElementById("f").contentDocument;
  const win = d.defaultView;
  const w = d.documentElement.clientWidth;
  const all = (sel) => [...d.querySelectorAll(sel)];
  const over = (el) => el.getBoundingClientRect().right > w + 1;
  const svg = d.querySelector("figure svg");
  const out = {
    width: w,
    pageScrollWidth: d.documentElement.scrollWidth,
    svgWidth: svg.getBoundingClientRect().width,
    svgViewBox: svg.getAttribute("viewBox"),
    boxesOver: all(".scroll, pre, figure, p, h1, h2, h3").filter(over).length,
    tablesScrolling: all(".scroll").filter((x) => x.scrollWidth > x.clientWidth).length,
    tablesOutsideBox: all("table").filter((t) => !t.parentElement.classList.contains("scroll")).length,
    smallestFont: Math.min(...all("p, td, th").map((e) => parseFloat(win.getComputedStyle(e).fontSize))),
    badges: all(".badge").map((b) => [b.textContent, b.className, win.getComputedStyle(b).color]),
  };
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script></body></html>"""


def _measure(tmp: Path, page: Path, width: int) -> dict[str, object]:
    probe = page.parent / f"probe-{width}.html"
    probe.write_text(_PROBE.replace("WIDTH", str(width)))
    flags = ("--dump-dom", f"--window-size={width + 100},2100", "--allow-file-access-from-files")
    r = _browse(tmp, probe.as_uri(), *flags, "--virtual-time-budget=3000")
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.search(r'<pre id="measured">(.*?)</pre>', r.stdout, re.S)
    assert found, "the measuring script did not run: " + r.stdout[-500:]
    return dict(orjson.loads(html.unescape(found.group(1))))


@pytest.mark.parametrize("width", [420, 1400])
def test_report_reads_at_phone_and_desktop_width(tmp_path: Path, width: int) -> None:
    page = _report(tmp_path, str(PLAN.relative_to(ROOT)), "--snapshot", str(DEMO.relative_to(ROOT)))
    m = _measure(tmp_path, page, width)
    assert m["width"] == width
    assert m["pageScrollWidth"] <= width, m  # the page itself never scrolls sideways
    assert m["boxesOver"] == 0, m  # no paragraph, heading, chart or table box past the window
    assert m["tablesOutsideBox"] == 0, m  # every table sits in its own scrolling box
    assert str(m["svgViewBox"]).startswith("0 0 ")
    assert float(str(m["svgWidth"])) <= width, m  # the chart scales down with its viewBox
    if width == 420:
        assert int(str(m["tablesScrolling"])) >= 1, m  # the wide ones scroll inside their box
    else:
        assert float(str(m["svgWidth"])) >= 900, m  # and is drawn at full size when there is room
    assert float(str(m["smallestFont"])) >= 12, m
    badges = {text: (cls, color) for text, cls, color in m["badges"]}  # type: ignore[attr-defined]
    assert "badge bad" in badges["not applicable"][0] or "badge warn" in badges.get("partly applicable", ("",))[0]
    assert any(t.startswith("verification:") for t in badges)
    assert len({color for _, color in badges.values()}) >= 2  # the verdicts are coloured, not plain text


def test_report_prints_with_page_numbers_and_no_stranded_headings(tmp_path: Path) -> None:
    page = _report(tmp_path, str(PLAN.relative_to(ROOT)))  # the plan alone: a report that stands alone
    text = page.read_text()
    assert "counter(page)" in text and "counter(pages)" in text
    assert re.search(r"h2, h3, h4 \{[^}]*break-after: avoid", text)
    assert "Not available" not in text  # capacity and inventory come from the plan's review record
    pdf = tmp_path / "report.pdf"
    r = _browse(tmp_path, page.as_uri(), f"--print-to-pdf={pdf}", "--no-pdf-header-footer")
    assert r.returncode == 0 and pdf.exists(), r.stderr[-2000:]
    pages = re.search(rb"/Count (\d+)", pdf.read_bytes())
    assert pages and int(pages.group(1)) >= 3
