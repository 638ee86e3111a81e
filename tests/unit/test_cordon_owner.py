"""A cordon the migration did not make is not the migration's to lift.

An apply runs for hours. A node of a later wave that someone cordons meanwhile (a GPU fault, maintenance, a
node-problem remediation) used to be cordoned "again" by its cordon step and then uncordoned by its uncordon
step, which sets the value the plan recorded (schedulable): the migration put a node back into service that its
owner had taken out. kubectl's uncordon does the same, but kubectl is told which node; a plan is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.execute.journal import Journal, read_journal
from dra_migrate.execute.progress import progress_of
from dra_migrate.execute.runner import ApplyOptions, Runner
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.testing.execute import FakeClock, FakeOps

DP = "nvidia.com/gpu.deploy.device-plugin"
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"


def _plan() -> Plan:
    body = build_plan(load_snapshot(DEMO), PlanParams(soak="0s")).to_dict()
    return Plan.from_dict(plan_io.seal(body))


def _first_node(plan: Plan) -> tuple[str, str]:
    stage = next(s for s in plan.pool_stages() if s.strategy != "replace-pool")
    entry = stage.waves[0].nodes[0]
    assert entry.original["unschedulable"] is False
    return stage.name, entry.node


def test_a_node_cordoned_by_someone_else_mid_run_is_not_uncordoned(tmp_path: Path) -> None:
    plan = _plan()
    stage = next(s for s in plan.pool_stages() if s.strategy != "replace-pool")
    first, second = stage.waves[0].nodes[0].node, stage.waves[1].nodes[0].node
    assert stage.waves[1].nodes[0].original["unschedulable"] is False
    ops = FakeOps.for_plan(plan, FakeClock())
    real = ops.drain

    def drain(node: str, *args: Any, **kw: Any) -> Any:
        if node == first:
            ops.nodes[second].unschedulable = True  # someone's cordon, while the first wave runs
        return real(node, *args, **kw)

    ops.drain = drain  # type: ignore[method-assign]
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until=stage.name), set())
    assert not result.ok and result.outcome == "failed"
    assert result.failure is not None and "cordoned since the plan" in result.failure and second in result.failure
    assert ops.nodes[second].unschedulable is True, "its owner's cordon is kept"
    assert ops.nodes[second].annotations == {} and ops.nodes[second].labels.get(DP) != "false", "not touched"
    assert ops.nodes[first].labels.get(DP) == "false" and not ops.nodes[first].unschedulable, "wave 1 done"
    assert not result.rolled_back, "nothing of the wave was touched: nothing to undo"


def test_a_resumed_run_takes_the_cordon_it_finds_on_a_node_it_touched_for_its_own(tmp_path: Path) -> None:
    """A crash between the cordon's write and its journal record leaves the node cordoned by the migration:
    the resumed run cannot tell the two apart on a node its journal shows it touched, and goes on."""
    plan = _plan()
    stage, node = _first_node(plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes[node].unschedulable = True
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        runner = Runner(plan, ops, j, actor="t", clock=ops.clock, touched_nodes=frozenset({node}))
        result = runner.apply(ApplyOptions(until=stage), set())
    assert result.ok, result.failure
    assert ops.nodes[node].unschedulable is False


def test_a_step_refused_by_its_precondition_is_not_undone(tmp_path: Path) -> None:
    """A step that refuses to act (its node is not as it must be: the GPU Operator began a driver reload during
    the drain, the node went NotReady) changed nothing. Undoing it, as the wave's rollback and `rollback` undo
    a failed step, wrote the plan's recorded value over what the cluster holds now: here the device plugin's
    label back to "true" under the driver manager, which had paused it and would write back what it read."""
    plan = _plan()
    stage = next(s for s in plan.pool_stages() if s.strategy != "replace-pool")
    node = stage.waves[0].nodes[0].node
    ops = FakeOps.for_plan(plan, FakeClock())
    real = ops.drain

    def drain(name: str, *args: Any, **kw: Any) -> Any:
        out = real(name, *args, **kw)
        if name == node:
            ops.nodes[name].labels[DP] = "paused-for-driver-upgrade"  # a reload began during the drain
        return out

    ops.drain = drain  # type: ignore[method-assign]
    path = tmp_path / "j.jsonl"
    with Journal.open(path, plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until=stage.name), set())
    assert not result.ok and "paused-for-driver-upgrade" in (result.failure or "")
    switch = f"{stage.name}/{node}/disable-device-plugin"
    assert switch not in result.rolled_back, "it wrote nothing: nothing to undo"
    assert ops.nodes[node].labels[DP] == "paused-for-driver-upgrade", "the driver manager's label is left to it"
    assert switch not in progress_of(plan, read_journal(path)).undoable(), "nor for a later `rollback`"
    assert f"{stage.name}/{node}/cordon" in result.rolled_back, "what it did before is undone as ever"


def test_the_check_before_a_wave_reads_the_watched_nodes_not_one_get_each() -> None:
    """Before each wave every node is read for someone else's cordon: from the executor's watches (one GET per
    node would add a request per migrated node to a fleet's run), while a step's own precondition GETs."""
    from dra_migrate.execute.ops import LiveOps
    from dra_migrate.testing.server import FakeServer

    server = FakeServer()
    path = "/api/v1/nodes/n1"
    server.put(path, {"metadata": {"name": "n1", "uid": "u1"}, "spec": {"unschedulable": True}})
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    live.watch()
    try:
        assert live.node_state("n1", watched=True)["unschedulable"] is True
        assert server.calls("GET", path) == 0
        assert live.node_state("n1")["unschedulable"] is True
        assert server.calls("GET", path) == 1
    finally:
        live.unwatch()
