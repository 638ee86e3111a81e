"""One rendering path (issue 29 item 5): a command's table and the report's section that shows the same
thing come from one view function, so they cannot disagree. Checked on real output: `check -o markdown`
and `report -o markdown` for the demo plan and the snapshot it was made from, table by table."""

from __future__ import annotations

from pathlib import Path

from cli import run
from test_plan_diff import DEMO, make_plan

from dra_migrate.render.checks import capacity_table, findings_table
from dra_migrate.render.inventory import pools_table
from dra_migrate.render.markdown import markdown_table
from dra_migrate.render.view import Section

SNAPSHOT = "fixtures/clusters/demo.yaml"
PLAN = "plans/demo-example.yaml"


def _tables(markdown: str) -> dict[str, list[str]]:
    """Each heading's Markdown table lines, by heading text (a count in parentheses dropped)."""
    out: dict[str, list[str]] = {}
    heading = ""
    for line in markdown.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip().split(" (")[0]
        elif line.startswith("|"):
            out.setdefault(heading, []).append(line)
    return out


def test_check_and_report_show_the_same_findings_and_capacity_tables() -> None:
    check = run("check", "--snapshot", SNAPSHOT, "-o", "markdown", env={"NO_COLOR": "1"})
    report = run("report", PLAN, "--snapshot", SNAPSHOT, "-o", "markdown")
    assert report.code == 0, report.stderr
    c, r = _tables(check.stdout), _tables(report.stdout)
    assert c["Findings"] and c["Findings"] == r["Findings"]
    assert (
        c["Capacity per pool, before and after"]
        and c["Capacity per pool, before and after"] == r["Capacity before and after"]
    )
    # Scope is the finding's, not the plan's: check names the pool a pool-scoped blocker stops.
    assert any("| pool a100-shared-pool" in line for line in c["Findings"])


def test_inventory_and_report_show_the_same_consumers_and_pools_tables() -> None:
    inventory = run("inventory", "--snapshot", SNAPSHOT, "-o", "markdown", env={"NO_COLOR": "1"})
    report = run("report", PLAN, "--snapshot", SNAPSHOT, "-o", "markdown")
    i, r = _tables(inventory.stdout), _tables(report.stdout)
    assert len(i["GPU consumers"]) > 3 and i["GPU consumers"] == r["Consumers"]
    assert len(i["GPU pools"]) > 3 and i["GPU pools"] == r["Pools"]


def test_a_section_shows_a_views_table_as_the_command_does() -> None:
    findings = [
        {"severity": "blocker", "id": "x", "message": "m | pipe", "objects": ["Pool p"], "remediation": "fix",
         "scope": "pool", "pools": ["p"]},
        {"severity": "info", "id": "y", "message": "n", "objects": [], "remediation": "-"},
    ]  # fmt: skip
    capacity = [{"pool": "p", "resource": "nvidia.com/gpu", "before": 8, "sharingReplicas": 1, "after": None,
                 "afterSource": "", "demand": 2, "fits": False, "deviceClass": None}]  # fmt: skip
    pools = [{"name": "p", "nodes": 2, "allocatable": {"nvidia.com/gpu": 16}, "requested": {}, "consumers": 1}]
    for table in (findings_table(findings), capacity_table(capacity), pools_table(pools)):
        section = Section("s", "S")
        section.add(table)
        assert markdown_table(section.blocks[0]) == markdown_table(table)


def test_show_and_report_show_the_same_disruption_tables() -> None:
    show = run("show", PLAN, "-o", "markdown", env={"NO_COLOR": "1"})
    report = run("report", PLAN, "-o", "markdown")
    assert show.code == 0, show.stderr
    s, r = _tables(show.stdout), _tables(report.stdout)
    for heading in ("Disruption per wave", "Disruption per gang"):
        assert len(s[heading]) > 2 and s[heading] == r[heading], heading


def test_diff_and_report_show_the_same_details_table(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(DEMO, tmp_path / "b.yaml", "--max-unavailable", "2")
    diff = run("diff", str(a), str(b), "-o", "markdown", env={"NO_COLOR": "1"})
    report = run("report", str(b), "--against", str(a), "-o", "markdown")
    assert report.code == 0, report.stderr
    d, r = _tables(diff.stdout), _tables(report.stdout)
    assert len(d["Details"]) > 2 and d["Details"] == r["Details"]
