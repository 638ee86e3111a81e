"""Nodes of the plan that the pool's lifecycle removes or replaces while a plan is applied (hours on a fleet).

An autoscaler scales a pool down (the cluster autoscaler removes an unneeded node after `scale-down-unneeded-time`;
a node the migration has not reached carries no `scale-down-disabled` annotation yet: kubernetes/autoscaler
cluster-autoscaler/core/scaledown/eligibility/eligibility.go `unremovableReasonAndNodeUtilization` spares only
nodes being deleted and annotated ones, not cordoned ones), a spot reclaim deletes one, GKE auto-repair or a
Karpenter replacement recreates one under the same name with another uid. The node's own first step refuses it
(`_check_node`), but its wave's other lanes start beside it: a healthy node of the wave was protected and cordoned
(and, with a slower refusal, drained) for nothing, then rolled back, on every resume again. The check before a
wave now stops the run first, touching nothing, saying to make a new plan.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dra_migrate.execute.journal import Journal
from dra_migrate.execute.runner import ApplyOptions, Runner
from dra_migrate.plan.model import Plan
from dra_migrate.testing.execute import FakeClock, FakeOps
from tests.unit.test_pool_budget import NODES, _lanes, _pool_of_ten


def _with_uids(plan: Plan) -> Plan:
    """The plan's fingerprint records its nodes' uids, as a real plan's does (the step precondition checks them)."""
    objects = [o for o in plan.fingerprint.get("objects") or [] if o.get("kind") != "Node"]
    objects += [{"kind": "Node", "group": "", "namespace": "", "name": n, "uid": f"uid-{n}"} for n in NODES]
    return replace(plan, fingerprint={**plan.fingerprint, "objects": objects})


def _writes_on(ops: FakeOps, node: str) -> list[str]:
    return [op for op, n in ops.calls if n == node and op not in ("node_state", "node_states")]


def _apply(plan: Plan, ops: FakeOps, tmp_path: Path, done: set[str] | None = None, **kw: Any) -> Any:
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        return Runner(plan, ops, j, actor="t", clock=ops.clock, **kw).apply(ApplyOptions(), done or set())


def test_a_node_deleted_since_the_plan_stops_the_run_before_its_wave_touches_a_node(tmp_path: Path) -> None:
    plan, _stage = _pool_of_ten()
    plan = _with_uids(plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-05"].exists = False  # scaled down while waves 1 and 2 ran
    result = _apply(plan, ops, tmp_path)
    assert not result.ok and result.outcome == "failed"
    failure = result.failure or ""
    assert "gpu-05" in failure and "no longer exists" in failure and "nothing of the wave was touched" in failure
    assert "make a new plan" in failure and "\n" not in failure
    assert _writes_on(ops, "gpu-04") == [], "the healthy node of its wave was not protected, cordoned, rolled back"
    assert not result.rolled_back
    assert all(ops.nodes[n].labels.get(ops.dp_label) == ops.dp_off for n in NODES[:4]), "waves 1 and 2 ran"


def test_a_node_replaced_under_its_name_stops_the_run_before_its_wave(tmp_path: Path) -> None:
    """GKE auto-repair, a Karpenter replacement: the same name, another uid. The plan's values are the old
    node's; its steps refuse the new one, and the wave's other node is not touched either."""
    plan, _stage = _pool_of_ten()
    plan = _with_uids(plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-05"].uid = "uid-recreated"
    result = _apply(plan, ops, tmp_path)
    failure = result.failure or ""
    assert not result.ok and "gpu-05" in failure and "replaced" in failure and "make a new plan" in failure
    assert _writes_on(ops, "gpu-04") == [] and _writes_on(ops, "gpu-05") == []


def test_a_resume_after_a_node_was_deleted_mid_wave_does_not_cordon_its_wave_again(tmp_path: Path) -> None:
    """The wave of a node deleted mid-wave was rolled back; the resume meets the gone node before touching the
    wave's other node again (the journal shows both touched: their first run's cordons are no reason to skip)."""
    plan, stage = _pool_of_ten()
    plan = _with_uids(plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-03"].exists = False
    first = {p.id for lane in _lanes(stage, 0) for p in lane}
    result = _apply(plan, ops, tmp_path, first, touched_nodes=frozenset({"gpu-02", "gpu-03"}))
    assert not result.ok and "gpu-03" in (result.failure or "") and "no longer exists" in (result.failure or "")
    assert _writes_on(ops, "gpu-02") == []


def test_a_node_whose_steps_are_all_done_may_be_gone(tmp_path: Path) -> None:
    """A node migrated in an interrupted run, removed since (scaled down once it was idle on DRA): nothing of
    the plan is left to do on it, so a resume goes on."""
    plan, stage = _pool_of_ten()
    plan = _with_uids(plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    gpu_00 = {p.id for lane in _lanes(stage, 0) for p in lane if p.node == "gpu-00"}
    ops.nodes["gpu-00"].exists = False
    result = _apply(plan, ops, tmp_path, set(gpu_00))
    assert result.ok, result.failure


def test_a_node_deleted_under_its_steps_is_said_so_in_one_line(tmp_path: Path) -> None:
    """Removed right after its drain (emptied, the autoscaler took it): its next write meets no Node. The
    failure said "removed since the plan was made: re-plan", wrong for a node that was there when its steps
    began; it names the run and what to do, and the wave is rolled back with nothing left to undo."""
    plan, _stage = _pool_of_ten()
    plan = _with_uids(plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    real = ops.drain

    def drain(node: str, *args: Any, **kw: Any) -> Any:
        out = real(node, *args, **kw)
        if node == "gpu-03":
            ops.nodes["gpu-03"].exists = False
        return out

    ops.drain = drain  # type: ignore[method-assign]
    result = _apply(plan, ops, tmp_path)
    failure = result.failure or ""
    assert result.outcome == "failed" and "gpu-03" in failure and "during the run" in failure, failure
    assert "make a new plan" in failure and "\n" not in failure
    assert not result.rollback_left and not ops.nodes["gpu-02"].unschedulable


def test_nodes_that_joined_a_migrated_pool_on_the_device_plugin_are_named_at_the_end_of_apply(
    tmp_path: Path,
) -> None:
    """A scale-up during the run makes nodes from the node group's template, which the in-place switch never
    changed: they come up on the device plugin after the pool's stage is done. `plan` warned of the template
    (`in-place-pool-template`); the run's end names the nodes it left so, once their pool's stage is done."""
    from test_runner import make_plan
    from test_runner_session import plan_file, session

    from dra_migrate.testing.execute import FakeNode

    plan = make_plan([["a", "b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    pool = {"cloud.google.com/gke-nodepool": "p0"}
    ops.nodes["p0-new"] = FakeNode("p0-new", "uid-p0-new", labels=dict(pool))  # joined, on the device plugin
    on_dra = {**pool, ops.dra_label: ops.dra_on, ops.dp_label: ops.dp_off}
    ops.nodes["p0-dra"] = FakeNode("p0-dra", "uid-p0-dra", labels=on_dra)  # joined with the template fixed
    ops.nodes["p1-new"] = FakeNode("p1-new", "uid-p1-new", labels={"cloud.google.com/gke-nodepool": "p1"})
    logs: list[str] = []
    result = session(path, ops, clock=ops.clock, log=logs.append).apply(ApplyOptions())
    assert result.ok, result.failure
    said = [line for line in logs if "p0-new" in line]
    assert len(said) == 1, logs
    assert "joined" in said[0] and "device plugin" in said[0] and "in-place-pool-template" in said[0], said
    assert "p0-dra" not in said[0] and not any("p1-new" in line for line in logs)
