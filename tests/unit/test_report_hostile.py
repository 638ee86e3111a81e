"""Hostile text and hostile journals against `report` and `status`: terminal control sequences from the
cluster (a webhook's denial quoted in a journal error), Markdown from `status -o markdown`, the HTML report's
Content-Security-Policy; `apply`'s and `--dry-run=server`'s lines. Journals with records missing:
test_journal_gaps.py."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from dra_migrate.execute.progress import progress_of
from dra_migrate.render import Document
from dra_migrate.render.status import status_document
from dra_migrate.report.html import render_html
from tests.unit.test_report_audit import _demo, _records, _report

# An OSC 8 hyperlink (the terminal shows "click" and opens the URL), a screen clear, a window-title set, a
# bell, a backspace over what was shown, a C1 CSI, and a right-to-left override that reorders what follows.
EVIL = (
    "denied \x1b]8;;https://evil.example/\x07click\x1b]8;;\x07 \x1b[2J\x1b]0;pwned\x07 ok\x08\x08 \x9b31m \u202egnp.exe"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _status(records: list[dict[str, Any]]) -> dict[str, Any]:
    plan = _demo()
    return {"formatVersion": 1, "cluster": "c", **progress_of(plan, records).to_dict()}


def _failed_apply() -> list[dict[str, Any]]:
    plan = _demo()
    records = _records(plan, [], None)[:3]  # run-start, the first step's start and end
    records[2].update(result="failed", error=EVIL)
    records.append({"seq": 4, "time": "t", "event": "run-end", "phase": "apply", "result": "failed", "error": EVIL})
    return records


@pytest.mark.parametrize("fmt", ["table", "wide", "markdown"])
def test_status_writes_no_control_sequence_from_a_journal_error(fmt: str) -> None:
    """`status` prints the journal's errors, which quote the API server and webhooks: raw, an escape sequence
    in one rewrites the operator's terminal (a hyperlink, a cleared screen, a retitled window)."""
    out = status_document(_status(_failed_apply())).render(fmt, color=False, width=100)
    assert "failed: " in out and "denied" in out
    assert not _CONTROL.search(out), repr(out)
    assert "\\x1b" in out and "https://evil.example/" in out  # shown, as text


def test_a_table_cell_with_control_characters_is_shown_as_text_and_keeps_its_colour() -> None:
    from dra_migrate.render import styled

    doc = Document()
    doc.table(["node", "result"], [["n1\x1b[8m", styled("failed\x1b[0m", "bad")]])
    out = doc.render("table", color=True, width=80)
    assert "\x1b[8m" not in out and "\x1b[0m\x1b[0m" not in out
    assert "n1\\x1b[8m" in out and "\x1b[31mfailed\\x1b[0m\x1b[0m" in out


def test_terminal_safe_keeps_text_and_layout() -> None:
    from dra_migrate.render import terminal_safe

    assert terminal_safe("GPU nodes: a-1, b\tc, éß 中") == "GPU nodes: a-1, b\tc, éß 中"
    assert terminal_safe("a\x1bb\x7fc\x9bd\u202ee") == "a\\x1bb\\x7fc\\x9bd\\u202ee"


def test_status_markdown_keeps_hostile_text_inert() -> None:
    """`status -o markdown` goes into tickets as `report -o markdown` does: its lines (errors) must not add raw
    HTML, images or headings."""
    records = _failed_apply()
    hostile = "x\n\n## Done\n<img src=x onerror=alert(1)> ![p](https://evil/p.png)"
    records[2]["error"] = records[3]["error"] = hostile
    md = status_document(_status(records)).render("markdown")
    assert not re.search(r"(?m)^#+ Done", md)
    assert not re.search(r"(?<!\\)<img", md) and not re.search(r"(?<!\\)\]\(https://evil", md)


def test_error_lines_and_log_records_carry_no_control_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    """What the CLI writes to stderr (the one-line error, warnings quoting API errors) is a terminal too."""
    import click

    from dra_migrate.cli.main import TerminalSafeFormatter, _fail

    with pytest.raises(SystemExit), click.Context(click.Command("x")) as ctx:
        _fail(ctx, f"admission webhook denied the request: {EVIL}", RuntimeError())
    err = capsys.readouterr().err
    assert "denied" in err and not _CONTROL.search(err), repr(err)
    rec = logging.LogRecord("x", logging.WARNING, "f", 1, "identity not recorded: %s", (EVIL,), None)
    line = TerminalSafeFormatter("%(levelname)s %(message)s").format(rec)
    assert line.startswith("WARNING identity not recorded: denied") and not _CONTROL.search(line)


def test_the_html_report_forbids_scripts_and_fetches() -> None:
    """Defence in depth behind the escaping: the report runs no script and fetches nothing (no beacon), even if
    some text ever reached it unescaped. A `<meta>` CSP is what a file opened from disk or mail can carry."""
    html = render_html(_report(_demo(), _failed_apply()))
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert m is not None and html.index(m.group(0)) < html.index("<title>")
    policy = {d.split()[0]: d.split()[1:] for d in m.group(1).split("; ")}
    assert policy["default-src"] == ["'none'"] and policy["style-src"] == ["'unsafe-inline'"]
    assert "script-src" not in policy and "img-src" not in policy  # default-src 'none' covers them
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_the_report_carries_no_control_sequence_and_an_inert_title(fmt: str) -> None:
    """`report` prints to stdout as often as to a file; its title and lead quote the cluster's name and its API
    server's version, which must not add an image or raw HTML to the Markdown either."""
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.model import Plan
    from dra_migrate.report.model import build_report
    from dra_migrate.report.render import render
    from tests.unit.test_report_audit import DEMO_PLAN

    plan = plan_io.load(DEMO_PLAN)
    plan["cluster"] = "prod ![p](https://evil/p.png) <img src=x>"
    typed = Plan.from_dict(plan)
    records = _failed_apply()
    for r in records:
        r["planDigest"] = typed.digest
    out = render(build_report(typed, plan_path="p.yaml", journal="j", records=records, tool_version="0"), fmt)
    assert "denied" in out and not _CONTROL.search(out), repr(_CONTROL.search(out))
    if fmt == "html":
        assert "<img" not in out and "&lt;img src=x&gt;" in out
    else:
        assert not re.search(r"(?<!\\)<img", out) and not re.search(r"(?<!\\)\]\(https://evil", out)


def test_apply_and_server_dry_run_lines_carry_no_control_sequence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`apply` logs a failed step's error, and `--dry-run=server` a rejection, both quoting the API server and
    its webhooks, to the operator's terminal."""
    import dra_migrate.cluster.dryrun
    import dra_migrate.cluster.live
    from dra_migrate.cli.apply import _log
    from dra_migrate.cli.dryrun import server_dry_run

    class Verdict:
        accepted = False

        def describe(self) -> str:
            return f"DeviceClass gpu: admission webhook denied the request: {EVIL}"

    class Cluster:
        server = "https://api"

        def __init__(self, *_: Any) -> None:
            pass

    monkeypatch.setattr(dra_migrate.cluster.live, "LiveCluster", Cluster)
    monkeypatch.setattr(dra_migrate.cluster.dryrun, "dry_run", lambda *_: [Verdict()])
    _log(f"step failed: {EVIL}")
    assert server_dry_run(None, None, []) is False
    err = capsys.readouterr().err
    assert err.count("denied") == 3 and not _CONTROL.search(err.replace("\r\x1b[K", "")), repr(err)
