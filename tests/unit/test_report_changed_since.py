"""The report's final verification, with a cluster read: the nodes the journal verified that no longer hold the
migration (deleted, replaced by their node group, device plugin back, DRA plugin off) are named. The journal alone
said "verified" after any of them, and a report after the migration is where an operator looks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.inventory.model import build_inventory
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.report.execution import NodeVerification, Verification, with_cluster
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
HALF = ROOT / "fixtures" / "clusters" / "half-migrated.yaml"
MIGRATED = "ip-10-42-54-11.us-east-2.compute.internal"
RECREATED = "ip-10-42-54-12.us-east-2.compute.internal"  # migrated, but the plan recorded another uid
ON_DEVICE_PLUGIN = "ip-10-42-82-11.us-east-2.compute.internal"


def _plan(uids: dict[str, str]) -> Plan:
    plan = Plan.from_dict(plan_io.load(ROOT / "plans" / "demo-example.yaml"))
    objects = [{"kind": "Node", "name": n, "uid": u} for n, u in uids.items()]
    return replace(plan, fingerprint={**plan.fingerprint, "objects": objects})


def _verified(*nodes: str, stage: str = "pool-x") -> Verification:
    return Verification(None, "verified", [NodeVerification(n, stage, "wave-1", "ok", "ok") for n in nodes])


def _uid(state: Any, name: str) -> str:
    return next(str(o["metadata"]["uid"]) for o in state.of("Node") if o["metadata"]["name"] == name)


def test_verified_nodes_that_no_longer_hold_the_migration_are_named_with_what_they_are_now() -> None:
    state = load_snapshot(HALF)
    inv = build_inventory(state)
    plan = _plan(
        {MIGRATED: _uid(state, MIGRATED), RECREATED: "an-older-uid", ON_DEVICE_PLUGIN: _uid(state, ON_DEVICE_PLUGIN)}
    )
    v = with_cluster(_verified(MIGRATED, RECREATED, ON_DEVICE_PLUGIN, "gone-node"), plan, state, inv.nodes)
    now = {x.node: x.now for x in v.changed_since or []}
    assert MIGRATED not in now, "a node still migrated is not named"
    assert now[RECREATED] == "replaced by a new node of the same name"
    assert now[ON_DEVICE_PLUGIN] == "on the device plugin (its DRA plugin is off)"
    assert now["gone-node"] == "deleted"
    assert v.verdict == "verified", "the journal's verdict is kept; what changed since is said beside it"


def test_a_node_not_verified_or_of_a_replaced_pool_is_not_judged_and_no_cluster_means_unknown() -> None:
    state = load_snapshot(HALF)
    inv = build_inventory(state)
    plan = _plan({})
    failed = Verification(None, "failed", [NodeVerification(ON_DEVICE_PLUGIN, "pool-x", "w", "failed", "not-run")])
    assert with_cluster(failed, plan, state, inv.nodes).changed_since == []
    retired = next((s.name for s in plan.pool_stages() if s.strategy == "replace-pool"), None)
    if retired is not None:
        v = with_cluster(_verified(ON_DEVICE_PLUGIN, stage=retired), plan, state, inv.nodes)
        assert v.changed_since == [], "a replace-pool's old node is retired, not migrated"
    assert _verified(MIGRATED).changed_since is None


def test_report_with_the_cluster_names_them_in_every_format(tmp_path: Path) -> None:
    """The demo plan, its journal saying every node verified, and the demo cluster read as it is (no node
    migrated): every node of an in-place stage is named, in JSON, Markdown and the badge; without the cluster,
    nothing is claimed of since."""
    plan = tmp_path / "demo.yaml"
    plan.write_bytes((ROOT / "plans" / "demo-example.yaml").read_bytes())
    doc = plan_io.load(plan)
    records: list[dict[str, Any]] = [{"seq": 1, "time": "t0", "event": "run-start", "phase": "apply"}]
    for stage in doc["stages"]:
        for wave in stage.get("waves") or []:
            for n in wave["nodes"]:
                for action in ("wait-dra-ready", "canary"):
                    sid = f"{stage['name']}/{n['node']}/{action}"
                    start = {"seq": len(records) + 1, "time": "t", "event": "start", "phase": "apply", "stepId": sid}
                    records += [start, {**start, "seq": len(records) + 2, "event": "end", "result": "ok"}]
    records.append({"seq": len(records) + 1, "time": "t1", "event": "run-end", "phase": "apply", "result": "ok"})
    Path(f"{plan}.journal.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    typed = Plan.from_dict(doc)
    in_place = {n.node for s in typed.pool_stages() if s.strategy != "replace-pool" for w in s.waves for n in w.nodes}
    assert in_place

    r = run("report", str(plan), "--snapshot", "fixtures/clusters/demo.yaml", "-o", "json")
    assert r.code == 0, r.stderr
    v = json.loads(r.stdout)["verification"]
    assert v["verdict"] == "verified"
    assert {x["node"] for x in v["changedSince"]} == in_place
    assert all(x["now"] == "on the device plugin (its DRA plugin is off)" for x in v["changedSince"])
    md = run("report", str(plan), "--snapshot", "fixtures/clusters/demo.yaml", "-o", "markdown").stdout
    assert f"Verdict: verified; {len(in_place)} node(s) changed since" in md
    assert f"Changed since (the cluster read for this report): {len(in_place)} node(s)" in md
    html = run("report", str(plan), "--snapshot", "fixtures/clusters/demo.yaml", "-o", "html").stdout
    assert f"verification: verified; {len(in_place)} node(s) changed since" in html
    offline = json.loads(run("report", str(plan), "-o", "json").stdout)["verification"]
    assert offline["changedSince"] is None and offline["verdict"] == "verified"
