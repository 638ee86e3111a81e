"""The report at fleet size (bench/report_scale.py measures it): a 2,000-node report stays readable (each
Markdown section a bounded number of lines, the HTML a page a browser opens) and still names every failure,
while its JSON keeps every row; and the steps that were pools x consumers, stages x findings, nodes x pools
read their input once."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dra_migrate.checks.context import switched_in_place
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.plan.scope import stage_blockers
from dra_migrate.render import to_json
from dra_migrate.report import model as report_model
from dra_migrate.report.html import render_html
from dra_migrate.report.markdown import render_markdown
from dra_migrate.report.model import build_report
from dra_migrate.report.scale import DETAIL

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "demo-example.yaml"
POOLS, WAVES, PER_WAVE = 40, 10, 5  # 2,000 nodes; 400 waves
FAILED = {f"n-{p:03d}-{w:02d}-2" for p, w in ((1, 3), (17, 0), (39, 9))}  # canary failed, rolled back
BLOCKED = "p-005"  # its stage blocked by a pool blocker


def _fleet_plan(pools: int = POOLS, waves: int = WAVES, per_wave: int = PER_WAVE) -> dict[str, Any]:
    """The demo plan grown to POOLS pools of WAVES waves of PER_WAVE nodes, each node fingerprinted, a gang
    per wave (and some broken twice), a warning per pool and one naming every pool, a blocker of one pool."""
    doc = plan_io.load(PLAN)
    prepare, template = doc["stages"][0], doc["stages"][1]
    node0 = template["waves"][0]["nodes"][0]
    stages, objects, gangs = [prepare], list(doc["fingerprint"]["objects"]), []
    for p in range(pools):
        pool = f"p-{p:03d}"
        st = copy.deepcopy(template)
        st["name"], st["pool"] = f"pool-{pool}", pool
        st["waves"] = []
        for w in range(waves):
            names = [f"n-{p:03d}-{w:02d}-{i}" for i in range(per_wave)]
            st["waves"].append({**template["waves"][0], "name": f"wave-{w + 1}",
                                "nodes": [{**node0, "node": n} for n in names]})  # fmt: skip
            objects += [{**objects[0], "kind": "Node", "namespace": "", "name": n, "uid": f"u-{n}"} for n in names]
            evicting = [f"pool-{pool}/wave-{w + 1}"] + ([f"pool-{pool}/wave-{w + 2}"] if w % 4 == 0 else [])
            gangs.append({"gang": f"JobSet ml/g-{p}-{w}", "waves": evicting})
        stages.append(st)
    warning = {k: v for k, v in doc["findings"][0].items() if k not in ("scope", "pools")}
    findings = [
        {**warning, "id": "shared-gpu-capacity-loss", "severity": "warning", "message": f"pool p-{p:03d} shrinks",
         "objects": [{"kind": "Pool", "namespace": "", "name": f"p-{p:03d}"}], "scope": "pool",
         "pools": [f"p-{p:03d}"]}
        for p in range(pools)
    ] + [
        {**warning, "id": "in-place-pool-template", "severity": "warning", "message": "every pool, in place",
         "objects": [{"kind": "Pool", "namespace": "", "name": f"p-{p:03d}"} for p in range(pools)] * 10,
         "scope": "pool", "pools": [f"p-{p:03d}" for p in range(pools)] * 10},
        {**warning, "id": "shared-gpu-capacity-loss", "severity": "blocker", "message": f"pool {BLOCKED} won't fit",
         "objects": [{"kind": "Pool", "namespace": "", "name": BLOCKED}], "scope": "pool", "pools": [BLOCKED]},
    ]  # fmt: skip
    doc["stages"], doc["findings"] = stages, findings
    doc["fingerprint"]["objects"] = objects
    doc["summary"] = {**doc["summary"], "gangs": gangs, "nodes": pools * waves * per_wave}
    cap = doc["review"]["capacity"][0]
    doc["review"]["capacity"] = [{**cap, "pool": f"p-{p:03d}", "fits": p == 0 or p % 50 != 0} for p in range(pools)]
    return doc


def _journal(plan: Plan) -> list[dict[str, Any]]:
    """Every node applied; the FAILED nodes' canaries failed and their steps rolled back."""
    out: list[dict[str, Any]] = []

    def rec(event: str, **fields: Any) -> None:
        out.append({"seq": len(out) + 1, "time": f"t{len(out):06d}", "event": event, "actor": "ops", **fields})

    rec("run-start", phase="apply")
    for stage, wave, n in plan.nodes():
        for x in stage.steps_for(n):
            rec("start", phase="apply", stage=stage.name, wave=wave.name, stepId=x.id, action=str(x.action),
                target=x.target)  # fmt: skip
            failed = n.node in FAILED and str(x.action) == "canary"
            rec("end", phase="apply", stepId=x.id, result="failed" if failed else "ok",
                error="canary pod stayed Pending" if failed else None)  # fmt: skip
        rec("gate", stage=stage.name, wave=wave.name, result="ok", pending=[])
    rec("run-end", phase="apply", result="failed")
    return out


@pytest.fixture(scope="module")
def fleet() -> dict[str, Any]:
    plan = Plan.from_dict(_fleet_plan())
    return build_report(plan, plan_path="fleet.yaml", journal="fleet.journal.jsonl", records=_journal(plan),
                        tool_version="0").to_dict()  # fmt: skip


def _sections(markdown: str) -> Iterator[tuple[str, list[str]]]:
    title, lines = "", []
    for line in markdown.splitlines():
        if line.startswith("## ") or line.startswith("### "):
            yield title, lines
            title, lines = line, []
        lines.append(line)
    yield title, lines


def test_every_markdown_section_of_a_2000_node_report_stays_readable(fleet: dict[str, Any]) -> None:
    md = render_markdown(fleet)
    for title, lines in _sections(md):
        assert len(lines) <= DETAIL + 20, f"{title}: {len(lines)} lines"
        assert max(map(len, lines), default=0) <= 2000, f"{title}: a line of {max(map(len, lines))} characters"
    assert len(md) < 250_000, len(md)
    assert len(render_html(fleet)) < 300_000


def test_the_summaries_still_name_every_failure(fleet: dict[str, Any]) -> None:
    md = render_markdown(fleet)
    sections = dict(_sections(md))
    applied = "\n".join(sections["### Applied steps"])
    verified = "\n".join(sections["## Final verification"])
    for node in FAILED:
        assert f"{node}/canary" in applied and "canary pod stayed Pending" in applied
        assert node in verified
    assert "Not ended ok (3):" in applied and "Nodes not verified (3):" in verified
    # The blocked pool's stage is shown apart from the 39 alike, its blocker named; findings name the blocker.
    stages = [t for t, _ in _sections(md) if t.startswith("### Stage")]
    assert any(f"Stage pool-{BLOCKED}" in t for t in stages) and len(stages) <= 4, stages
    assert BLOCKED in "\n".join(sections["## Findings"]) and "(+390 more)" in "\n".join(sections["## Findings"])
    gangs = "\n".join(sections["### Disruption per gang"])
    assert "| 2 " in gangs and "JobSet ml/g-0-0" in gangs  # the gangs broken twice, first


def test_the_json_keeps_every_row(fleet: dict[str, Any]) -> None:
    data = json.loads(to_json(fleet))
    nodes = POOLS * WAVES * PER_WAVE
    assert len(data["verification"]["nodes"]) == nodes
    assert len(data["timeline"]["apply"]) == sum(len(s["steps"]) for s in data["stages"][1:]) * WAVES * PER_WAVE
    assert sum(1 for o in data["fingerprint"]["objects"] if o["name"].startswith("n-")) == nodes
    assert sum(len(w["nodes"]) for s in data["stages"] for w in s["waves"]) == nodes
    assert len(data["findings"]) == POOLS + 2 and len(data["summary"]["gangs"]) == POOLS * WAVES


def test_past_a_hundred_pools_the_per_stage_summaries_keep_only_what_is_wrong() -> None:
    plan = Plan.from_dict(_fleet_plan(pools=250, waves=2, per_wave=2))  # 1,000 nodes in 250 pools
    bad = {"n-007-01-1", "n-200-00-0"}
    records = _journal(plan)
    for r in records:  # these two nodes' canaries fail instead
        if r["event"] == "end" and r["stepId"].endswith("/canary"):
            node = r["stepId"].split("/")[1]
            r["result"] = "failed" if node in bad else "ok"
            r["error"] = "canary pod stayed Pending" if node in bad else None
    report = build_report(plan, plan_path="p", journal="j", records=records, tool_version="0").to_dict()
    md = render_markdown(report)
    sections = dict(_sections(md))
    for title, lines in sections.items():
        assert len(lines) <= DETAIL + 20, f"{title}: {len(lines)} lines"
    applied, verified = "\n".join(sections["### Applied steps"]), "\n".join(sections["## Final verification"])
    for node in bad:
        stage = f"pool-p-{node[2:5]}"
        assert f"| {stage}" in applied and f"{node}/canary" in applied
        assert f"| {stage}" in verified and node in verified
    assert "248 other stages" in applied and "248 other stages" in verified
    capacity = "\n".join(sections["## Capacity before and after"])
    assert all(f"| p-{p:03d}" in capacity for p in (50, 100, 150, 200)) and "all 250 pools" in capacity
    assert "| p-001 " not in capacity
    waves = "\n".join(sections["### Disruption per wave"])
    assert "250: pool-p-000" in waves.replace("| ", "")  # every stage of one shape, one row


# --- read once ------------------------------------------------------------------------------------------


class _Counted(dict[str, Any]):
    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        _Counted.reads += 1
        return super().get(key, default)


def test_stage_blockers_read_the_findings_once_not_once_per_stage() -> None:
    plan = Plan.from_dict(_fleet_plan())
    findings = [_Counted(f) for f in plan.findings]
    plan = replace(plan, findings=findings)
    _Counted.reads = 0
    report = build_report(plan, plan_path="p", tool_version="0")
    # stages x findings was POOLS x (POOLS + 2) x 2 stage_blockers calls x 3 reads
    assert _Counted.reads <= 5 * len(findings) + 10 * len(plan.stages), _Counted.reads
    assert {s.name: s.blocked_by for s in report.stages} == {
        s.name: stage_blockers(plan.findings, s.pool) for s in plan.stages
    }
    assert report.stages[[s.pool for s in plan.stages].index(BLOCKED)].applicable is False


class _Pools(frozenset[str]):
    reads = 0

    def __contains__(self, item: object) -> bool:
        _Pools.reads += 1
        return super().__contains__(item)

    def __iter__(self) -> Iterator[str]:
        _Pools.reads += 1
        return super().__iter__()


def test_consumers_per_pool_are_counted_in_one_pass() -> None:
    n = 300
    pools = [SimpleNamespace(name=f"p{i}", nodes=[1], allocatable={}, requested={}, dra_devices={}) for i in range(n)]
    consumers = [
        SimpleNamespace(
            kind="Job",
            api_version="batch/v1",
            namespace="ns",
            name=f"c{i}",
            pools=_Pools({f"p{i}"}),
            totals={"nvidia.com/gpu": 1},
            pods=1,
            source="template",
            templates=[],
        )
        for i in range(n)
    ]
    inv = SimpleNamespace(consumers=consumers, pools=pools, state=SimpleNamespace(source=SimpleNamespace(kind="x")))
    _Pools.reads = 0
    section = report_model._inventory(SimpleNamespace(inventory=inv))  # type: ignore[arg-type]
    assert _Pools.reads <= 3 * n, _Pools.reads  # was pools x consumers: 90,000
    assert [p.consumers for p in section.pools] == [1] * n


class _PoolList(list[Any]):
    reads = 0

    def __iter__(self) -> Iterator[Any]:
        _PoolList.reads += 1
        return super().__iter__()


def test_the_replaced_pools_are_worked_out_once_per_context() -> None:
    pools = _PoolList(SimpleNamespace(name=f"p{i}", platform=None) for i in range(50))
    ctx = SimpleNamespace(inventory=SimpleNamespace(pools=pools))
    nodes = [SimpleNamespace(migrated=False, pool=f"p{i % 50}") for i in range(500)]
    assert all(switched_in_place(ctx, n) for n in nodes)  # type: ignore[arg-type]
    assert _PoolList.reads == 1  # was once per node: nodes x pools


def test_a_diff_that_moves_most_nodes_is_counted_per_stage() -> None:
    from dra_migrate.plan.diff import diff_plans

    older, newer = _fleet_plan(), _fleet_plan()
    for st in newer["stages"][1:]:  # twice as wide a wave: half the waves, every node moved or kept
        nodes = [n for w in st["waves"] for n in w["nodes"]]
        half = len(st["waves"]) // 2
        st["waves"] = [
            {**st["waves"][i], "nodes": nodes[i * 2 * PER_WAVE : (i + 1) * 2 * PER_WAVE]} for i in range(half)
        ]
    newer["parameters"]["maxUnavailable"] = "20%"
    diff = diff_plans(older, newer).to_dict()
    report = build_report(Plan.from_dict(newer), plan_path="b", diff=diff, tool_version="0").to_dict()
    sections = dict(_sections(render_markdown(report)))
    changes, details = sections["## Changes against an older plan"], sections[f"### Details ({len(diff['details'])})"]
    assert len(diff["summary"]["nodes"]["moved"]) > DETAIL and len(diff["details"]) > DETAIL
    assert len(changes) <= DETAIL + 20 and len(details) <= DETAIL + 20
    assert "| parameter | maxUnavailable" in "\n".join(changes).replace("  ", "")
    moved = sum(1 for n in diff["summary"]["nodes"]["moved"] if n["from"].startswith("pool-p-000/"))
    assert f"{moved} of stage pool-p-000" in "\n".join(changes)


def test_past_a_hundred_pools_the_inventory_pools_are_totalled() -> None:
    doc = _fleet_plan(pools=150, waves=1, per_wave=2)
    pool = doc["review"]["inventory"]["pools"][0]
    doc["review"]["inventory"]["pools"] = [{**pool, "name": f"p-{p:03d}", "nodes": 2} for p in range(150)]
    report = build_report(Plan.from_dict(doc), plan_path="p", tool_version="0").to_dict()
    pools = "\n".join(dict(_sections(render_markdown(report)))["### Pools"])
    gpus = sum(pool["allocatable"].values()) * 150
    assert "all 150 pools" in pools and "| 300 " in pools and str(gpus) in pools and "p-007" not in pools
    assert len(report["inventory"]["pools"]) == 150
