"""Conventions of issue 28 item 6: `--out` names the format when `-o` is absent, `rollback` without a
journal is "nothing to do" (exit 0, as documented)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.yaml"
    assert run("plan", "--snapshot", DEMO, "--out", str(path)).code == 0
    return path


def test_report_out_html_without_o_writes_html(plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run("report", str(plan), "--out", str(out))
    assert r.code == 0, r.stderr
    assert out.read_text().lstrip().lower().startswith("<!doctype html")
    md = tmp_path / "r.md"
    assert run("report", str(plan), "--out", str(md)).code == 0
    assert md.read_text().startswith("#")


def test_an_o_that_contradicts_the_out_extension_is_refused(plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run("report", str(plan), "-o", "markdown", "--out", str(out))
    assert r.code == 1 and "two formats" in r.stderr and not out.exists()
    # An extension that names no format leaves -o (or the default) in charge.
    other = tmp_path / "r.report"
    assert run("report", str(plan), "-o", "html", "--out", str(other)).code == 0
    assert "<html" in other.read_text().lower()


def test_rollback_without_a_journal_is_nothing_to_do(plan: Path) -> None:
    r = run("rollback", str(plan), "--yes")
    assert r.code == 0, r.stderr
    assert "nothing to roll back" in r.stderr
