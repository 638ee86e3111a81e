"""A wave takes at most `maxUnavailable` nodes of a pool out, counting the pool's nodes already out.

The plan cuts each pool into waves of at most `maxUnavailable` nodes, but an apply runs for hours: nodes of the
pool that went NotReady, were cordoned by someone else or are being deleted meanwhile were not counted, so a pool
of 10 with a budget of 2 and 2 nodes NotReady had 4 out during the next wave. A PodDisruptionBudget counts its
unhealthy pods against maxUnavailable (k8s.io/kubernetes@v1.37.2 pkg/controller/disruption/disruption.go
countHealthyPods, `disruptionsAllowed := currentHealthy - desiredHealthy`), and Karpenter counts a NodePool's
NotReady and deleting nodes against its disruption budget (sigs.k8s.io/karpenter@v1.8.0
pkg/controllers/disruption/helpers.go BuildDisruptionBudgetMapping): the runner now does the same before a wave.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.execute.contract import Cancel
from dra_migrate.execute.journal import Journal
from dra_migrate.execute.runner import ApplyOptions, Runner
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan, PoolStage, Wave
from dra_migrate.plan.params import PlanParams
from dra_migrate.testing.execute import FakeClock, FakeOps

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"
NODES = [f"gpu-{i:02d}" for i in range(10)]


def _pool_of_ten() -> tuple[Plan, PoolStage]:
    """One in-place pool of 10 nodes in 5 waves of 2 (maxUnavailable 2), from the demo plan's first pool."""
    body = build_plan(load_snapshot(DEMO), PlanParams(soak="0s", max_unavailable="2")).to_dict()
    demo = Plan.from_dict(plan_io.seal(body))
    stage = next(s for s in demo.pool_stages() if s.strategy != "replace-pool")
    entry = stage.waves[0].nodes[0]
    entries = [replace(entry, node=n) for n in NODES]
    waves = tuple(Wave(f"wave-{k + 1}", tuple(entries[2 * k : 2 * k + 2]), 0, "0s") for k in range(5))
    pool = replace(stage, waves=waves)
    return replace(demo, stages=(pool,)), pool


def _cordons(ops: FakeOps) -> list[str]:
    return [n for op, n in ops.calls if op == "set_unschedulable" and n is not None]


def test_a_wave_does_not_take_the_pool_past_its_budget_with_two_nodes_already_out(tmp_path: Path) -> None:
    plan, _stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-08"].ready = False  # NotReady: a GPU fault
    ops.nodes["gpu-09"].deleting = True  # the autoscaler removes it
    logs: list[str] = []
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock, log=logs.append).apply(ApplyOptions(), set())
    assert not result.ok and result.outcome == "failed"
    assert result.failure is not None
    assert "gpu-08" in result.failure and "gpu-09" in result.failure and "maxUnavailable" in result.failure
    assert "nothing of the wave was touched" in result.failure
    assert _cordons(ops) == [], "no node of the wave was cordoned"
    assert all(not ops.nodes[n].unschedulable for n in NODES[:8])
    assert not result.rolled_back
    assert any("waiting" in line and "gpu-08" in line for line in logs), "the wait is told on stderr"
    assert ops.clock.monotonic() >= 1000.0 + 600.0, "it waited its documented bound before stopping"


def test_one_other_node_out_still_fits_a_one_node_wave(tmp_path: Path) -> None:
    """The budget is the pool's: a wave of 1 with 1 other node out is 2 of 2, and runs at once."""
    plan, stage = _pool_of_ten()
    single = tuple(Wave(f"wave-{k + 1}", (n,), 0, "0s") for k, n in enumerate(e for w in stage.waves for e in w.nodes))
    plan = replace(plan, stages=(replace(stage, waves=single),))
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-09"].ready = False  # its own wave, the last, is not this test's concern
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert all(ops.nodes[n].labels.get(ops.dp_label) == ops.dp_off for n in NODES[:9])
    assert ops.clock.monotonic() < 1000.0 + 600.0, "no wave waited"


def test_a_node_this_run_took_out_is_not_counted(tmp_path: Path) -> None:
    """A node the migration itself cordoned and left so (a replace-pool's old node stays cordoned; here its
    uncordon writes nothing) is its own disruption, already within the waves it ran: not counted again."""
    plan, _stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    real = ops.set_unschedulable

    def set_unschedulable(node: str, value: bool, **kw: Any) -> Any:
        if node in ("gpu-00", "gpu-01") and value is False:
            return real(node, True, **kw)  # it stays cordoned
        return real(node, value, **kw)

    ops.set_unschedulable = set_unschedulable  # type: ignore[method-assign]
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert result.ok, result.failure
    assert ops.clock.monotonic() < 1000.0 + 600.0, "no wave waited"


def test_a_node_the_journal_shows_touched_is_not_counted(tmp_path: Path) -> None:
    """The same across a resume: the journal's touched nodes (`nodes_touched`) are the migration's."""
    plan, stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    first = [p.id for lane in _lanes(stage, 0) for p in lane]
    ops.nodes["gpu-00"].unschedulable = ops.nodes["gpu-01"].unschedulable = True  # its rollback left them so
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        runner = Runner(plan, ops, j, actor="t", clock=ops.clock, touched_nodes=frozenset({"gpu-00", "gpu-01"}))
        result = runner.apply(ApplyOptions(), set(first))
    assert result.ok, result.failure
    assert "gpu-02" in _cordons(ops)


def test_a_node_that_recovers_while_the_run_waits_lets_the_wave_start(tmp_path: Path) -> None:
    plan, stage = _pool_of_ten()

    class Recovering(FakeClock):
        def sleep(self, seconds: float, cancel: Cancel) -> None:
            super().sleep(seconds, cancel)
            if self.monotonic() >= 1000.0 + 120.0:
                ops.nodes["gpu-08"].ready = True  # its kubelet is back after 2 minutes

    ops = FakeOps.for_plan(plan, Recovering())
    ops.nodes["gpu-08"].ready = False
    started: list[float] = []
    real = ops.set_unschedulable

    def set_unschedulable(node: str, value: bool, **kw: Any) -> Any:
        started.append(ops.clock.monotonic())
        return real(node, value, **kw)

    ops.set_unschedulable = set_unschedulable  # type: ignore[method-assign]
    logs: list[str] = []
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        runner = Runner(plan, ops, j, actor="t", clock=ops.clock, log=logs.append)
        result = runner.apply(ApplyOptions(until=stage.name), set())
    assert result.ok, result.failure
    assert started and started[0] >= 1000.0 + 120.0, "the first wave began once gpu-08 was back"
    assert any("waiting" in line for line in logs)
    assert all(ops.nodes[n].labels.get(ops.dp_label) == ops.dp_off for n in NODES)


def test_a_dry_run_reports_it_without_waiting(tmp_path: Path) -> None:
    plan, _stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-08"].ready = False
    ops.nodes["gpu-09"].unschedulable = True
    logs: list[str] = []
    runner = Runner(plan, ops, None, actor="t", clock=ops.clock, log=logs.append)
    runner.apply(ApplyOptions(dry_run=True), set())
    said = [line for line in logs if "gpu-08" in line and "gpu-09" in line]
    assert said and "maxUnavailable" in said[0], logs
    assert ops.clock.monotonic() < 1000.0 + 60.0, "a dry run does not wait"


def _lanes(stage: PoolStage, k: int) -> list[list[Any]]:
    from dra_migrate.execute.units import PlannedStep

    return [[PlannedStep(stage.name, stage.waves[k].name, n.node, s) for s in stage.steps_for(n)]
            for n in stage.waves[k].nodes]  # fmt: skip


def test_a_lock_lost_while_waiting_stops_the_run_for_a_resume(tmp_path: Path) -> None:
    from dra_migrate.execute.contract import LockLost

    plan, _stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-08"].ready = ops.nodes["gpu-09"].ready = False

    def guard() -> None:
        if ops.clock.monotonic() >= 1000.0 + 30.0:
            raise LockLost("the cluster lock was taken over (injected)", "see status")

    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock, guard=guard).apply(ApplyOptions(), set())
    assert not result.ok and result.outcome == "stopped", result.failure
    assert "taken over" in (result.failure or "") and _cordons(ops) == []


def test_a_dry_run_reads_each_node_of_the_pool_once_for_the_budget() -> None:
    """A dry run has no watches: a GET of every pool node before every wave would be a pool's square."""
    plan, _stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    before_its_wave: list[str] = []
    real = ops.node_state

    def node_state(node: str, **kw: Any) -> Any:
        if node == "gpu-09" and not any(n in ("gpu-08", "gpu-09") for op, n in ops.calls if op != "node_state"):
            before_its_wave.append(node)
        return real(node, **kw)

    ops.node_state = node_state  # type: ignore[method-assign]
    result = Runner(plan, ops, None, actor="t", clock=ops.clock).apply(ApplyOptions(dry_run=True), set())
    assert result.ok, result.failure
    # once for the budget of waves 1 to 4 (a read per wave was 4), then twice by its own wave's check of
    # someone else's cordon (before and after the budget's wait)
    assert len(before_its_wave) == 3


def test_a_node_the_plan_recorded_cordoned_does_not_hold_every_wave(tmp_path: Path) -> None:
    """A node cordoned before the plan (a GPU fault the operator took out, reviewed in the plan) is not someone's
    action during the run: counted, it held every wave of a pool whose waves fill the budget, for the whole wait,
    then stopped the run. Cordoned since the plan, or NotReady, it still counts (the first test)."""
    plan, stage = _pool_of_ten()
    cordoned = {"unschedulable": True}
    waves = tuple(
        replace(w, nodes=tuple(replace(e, original={**e.original, **cordoned}) if e.node == "gpu-09" else e
                               for e in w.nodes))
        for w in stage.waves
    )  # fmt: skip
    plan = replace(plan, stages=(replace(stage, waves=waves),))
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-09"].unschedulable = True
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert result.ok, result.failure
    assert ops.clock.monotonic() < 1000.0 + 600.0, "no wave waited"
    assert ops.nodes["gpu-09"].unschedulable, "its cordon is kept: the plan recorded it"


def test_a_node_the_gpu_operator_paused_is_left_to_its_own_step_not_called_an_edited_plan(tmp_path: Path) -> None:
    """A driver upgrade pauses the node's deploy labels (`paused-for-driver-upgrade`) for a while: they differ from
    what the plan recorded, but the advice is to wait for the operator, which the node's first step says when it
    refuses the node; the pre-wave check does not stop the run calling the plan edited ("make a new plan")."""
    plan, _stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.nodes["gpu-00"].labels[ops.dp_label] = "paused-for-driver-upgrade"
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert "make a new plan" not in (result.failure or "")
    assert "GPU Operator" in (result.failure or ""), result.failure


def _joined(ops: FakeOps, pool: str, name: str, **state: Any) -> None:
    """A node of the pool the plan does not list: it joined since (a scale-up, a replacement)."""
    from dra_migrate.testing.execute import FakeNode

    labels = {"cloud.google.com/gke-nodepool": pool, **state.pop("labels", {})}
    ops.nodes[name] = FakeNode(name, f"uid-{name}", labels=labels, **state)


def test_nodes_that_joined_the_pool_since_the_plan_count_against_its_budget(tmp_path: Path) -> None:
    """The budget counted only the nodes the plan lists: two nodes an autoscaler added since, one NotReady and
    one being deleted, left the first wave to take 4 of the pool's nodes out with maxUnavailable 2. Karpenter
    counts every initialized node of the NodePool (`BuildDisruptionBudgetMapping`), a PDB every pod it selects."""
    plan, stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    _joined(ops, stage.pool, "gpu-new-0", ready=False)
    _joined(ops, stage.pool, "gpu-new-1", deleting=True)
    _joined(ops, "another-pool", "cpu-0", ready=False)  # another pool's: not this budget's
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert not result.ok and result.outcome == "failed"
    failure = result.failure or ""
    assert "gpu-new-0" in failure and "gpu-new-1" in failure and "cpu-0" not in failure, failure
    assert "joined the pool since the plan" in failure, failure
    assert _cordons(ops) == [], "no node of the wave was cordoned"


def test_a_node_still_coming_up_does_not_hold_the_wave(tmp_path: Path) -> None:
    """A node launched but not initialized takes no pods yet: Karpenter leaves it out of the count
    (`!node.Initialized()`), and so does the budget; once initialized and NotReady, it counts. A node with no
    Ready condition yet (no kubelet reported) is not counted either; a Ready, schedulable one never is."""
    plan, stage = _pool_of_ten()
    ops = FakeOps.for_plan(plan, FakeClock())
    _joined(ops, stage.pool, "gpu-new-0", ready=False, labels={"karpenter.sh/nodepool": stage.pool})
    _joined(ops, stage.pool, "gpu-new-1", ready=False, labels={"karpenter.sh/nodepool": stage.pool})
    _joined(ops, stage.pool, "gpu-new-2")
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until=stage.name), set())
    assert result.ok, result.failure
    assert ops.clock.monotonic() < 1000.0 + 600.0, "no wave waited"


def test_live_node_states_read_the_watched_copy_or_one_list() -> None:
    """The budget reads every node before each wave and each poll of its wait: from the executor's watches (no
    request), else one list of the nodes, never a GET each."""
    from dra_migrate.execute.ops import LiveOps
    from dra_migrate.testing.server import FakeServer

    server = FakeServer()
    for name, status in (("n1", "True"), ("n2", "False")):
        ready = {"conditions": [{"type": "Ready", "status": status}]}
        server.put(f"/api/v1/nodes/{name}", {"metadata": {"name": name, "uid": f"u-{name}"}, "status": ready})
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    states = live.node_states()
    assert {n: s["notReady"] for n, s in states.items()} == {"n1": None, "n2": "False"}
    assert server.calls("GET", "/api/v1/nodes/n1") == 0
    live.watch()
    try:
        listed = server.calls("GET", "/api/v1/nodes")
        assert set(live.node_states(watched=True)) == {"n1", "n2"}
        assert server.calls("GET", "/api/v1/nodes") == listed, "the watched copy: no request"
    finally:
        live.unwatch()
