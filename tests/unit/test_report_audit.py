"""What `report` and `status` say against what the journal records: hostile cases (replace-pool nodes never
drained, rollbacks that failed or never ended, undos of nodes gone, Markdown injection from errors)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dra_migrate.execute.journal import Journal, read_journal
from dra_migrate.execute.runner import OK, ApplyOptions, Runner
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.report.markdown import render_markdown
from dra_migrate.report.model import build_report, verification
from dra_migrate.testing.execute import FakeClock, FakeOps
from tests.unit.test_platforms import _new_pool, _plan

ROOT = Path(__file__).resolve().parents[2]
DEMO_PLAN = ROOT / "plans" / "demo-example.yaml"


def test_replace_pool_nodes_not_drained_are_not_verified(tmp_path: Path) -> None:
    """The new pool proven (provision stage ok), the old pool's nodes never cordoned nor drained: the report
    must not call them verified (it did: their verification was the new pool's alone)."""
    plan = _plan("gke-managed", exclude_pools=("l4-ts",))
    provision = next(s.name for s in plan.stages if s.name.startswith("provision-"))
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    _new_pool(ops, clock, nodes=2, devices=8, after_s=0)
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=clock).apply(
            ApplyOptions(until=provision, soak_override_s=0), set()
        )
    assert result.outcome == OK, result.failure
    v = verification(plan, read_journal(tmp_path / "j.jsonl"))
    assert v.verdict == "incomplete"
    assert all("ok" not in (n.wait_dra_ready, n.canary) for n in v.nodes if n.stage.startswith("pool-"))


# --- rollbacks: failed, never ended, of a node gone ------------------------------------------------------


def _demo() -> Plan:
    return Plan.from_dict(plan_io.load(DEMO_PLAN))


def _records(plan: Plan, rollback: list[dict[str, Any]], end: str | None) -> list[dict[str, Any]]:
    """One node applied in full (every step ok, the run ok), then a rollback of its steps whose ends are
    `rollback` (per step: the end's fields), closed with `end` (None: the process died)."""
    stage, wave, node = next(iter(plan.nodes()))
    steps = [s.id for s in stage.steps_for(node)]
    out: list[dict[str, Any]] = []

    def rec(event: str, **fields: Any) -> None:
        out.append({"seq": len(out) + 1, "time": f"2026-01-01T00:00:{len(out):02d}Z", "event": event,
                    "actor": "a", "planDigest": plan.digest, **fields})  # fmt: skip

    rec("run-start", phase="apply")
    for sid in steps:
        rec("start", phase="apply", stage=stage.name, wave=wave.name, stepId=sid, action=sid.rsplit("/", 1)[1])
        rec("end", phase="apply", stepId=sid, result="ok")
    rec("run-end", phase="apply", result="ok")
    rec("run-start", phase="rollback", steps=len(rollback))
    for sid, end_fields in zip(reversed(steps), rollback, strict=False):
        rec("start", phase="rollback", stepId=sid, action="undo")
        rec("end", phase="rollback", stepId=sid, **end_fields)
    if end == "failed":
        rec("rollback-incomplete", phase="rollback", left=steps[:1], error="boom")
        rec("run-end", phase="rollback", result="failed", error="rollback failed (boom)", rollbackLeft=steps[:1])
    elif end == "ok":
        rec("run-end", phase="rollback", result="ok")
    return out


def _report(plan: Plan, records: list[dict[str, Any]]) -> dict[str, Any]:
    return build_report(plan, plan_path="p.yaml", journal="j", records=records, tool_version="0").to_dict()


def test_a_failed_rollback_is_not_rolled_back() -> None:
    plan = _demo()
    rep = _report(plan, _records(plan, [{"result": "ok"}, {"result": "failed", "error": "boom"}], "failed"))
    assert rep["verification"]["verdict"] == "failed"


def test_a_rollback_that_never_ended_is_not_rolled_back() -> None:
    plan = _demo()
    rep = _report(plan, _records(plan, [{"result": "ok"}], None))
    assert rep["verification"]["verdict"] == "incomplete"


def test_rollbacks_count_only_what_was_undone_and_say_when_the_node_was_gone() -> None:
    """An undo of a node deleted mid-wave is journaled `ok` with `{node: why}` as its state: nothing was
    restored. Failed and never-ended undos restored nothing either; the report counted them all as undone."""
    plan = _demo()
    gone = {"node": "deleted since its steps ran"}
    ends = [{"result": "ok", "before": gone, "after": gone}, {"result": "ok"}, {"result": "failed", "error": "boom"}]
    rep = _report(plan, _records(plan, ends, "failed"))
    md = render_markdown(rep)
    assert "Rollbacks (1 step(s) undone" in md
    assert "3 step(s) applied" not in md and "1 undone by rollbacks" in md
    row = next(e for e in rep["timeline"]["rollback"] if e.get("note"))
    assert row["result"] == "skipped" and "deleted since its steps ran" in row["note"]
    assert "nothing to undo: node deleted since its steps ran" in md


# --- Markdown injection from journal errors and object names ------------------------------------------

HOSTILE = (
    "denied\n\n## Final verification\n\nVerdict: verified <img src=x onerror=alert(1)> ![p](https://evil/p.png) a\\|b"
)


def test_markdown_keeps_hostile_text_inert() -> None:
    """An error message (a webhook's denial, quoted by the API server) lands in paragraphs and table cells: it
    must not add headings, raw HTML, images or table cells to the Markdown a reviewer renders."""
    plan = _demo()
    records = _records(plan, [{"result": "failed", "error": HOSTILE}], None)
    records.append({"seq": len(records) + 1, "time": "t", "event": "run-end", "phase": "rollback",
                    "result": "failed", "error": HOSTILE})  # fmt: skip
    md = render_markdown(_report(plan, records))
    assert md.count("\n## Final verification\n") == 1  # no heading injected by a paragraph's newlines
    assert "denied" in md and "<img" in md  # shown, but escaped: no raw HTML, no image or link
    assert not re.search(r"(?<!\\)<img", md) and not re.search(r"(?<!\\)\]\(https://evil", md)
    # Every row of a table has as many cell delimiters (pipes not escaped) as its header.
    delimiters = re.compile(r"(?<!\\)(?:\\\\)*\|")
    for table in re.findall(r"(?m)(?:^\|.*\n)+", md):
        assert len({len(delimiters.findall(row)) for row in table.splitlines()}) == 1, table


def test_a_code_block_fence_outlasts_any_backtick_run() -> None:
    from dra_migrate.render.markdown import markdown_section
    from dra_migrate.render.view import Code, Section

    s = Section("x", "X")
    s.blocks.append(Code("a: |\n  ````\n  # not a heading\n  ````\n", "yaml"))
    out: list[str] = []
    markdown_section(s, out)
    fence = out[2].removesuffix("yaml")
    assert set(fence) == {"`"} and len(fence) > 4 and out[4] == fence
