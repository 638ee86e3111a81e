"""The runner's semantics on the in-memory FakeOps and a virtual clock: each test runs in milliseconds.

Covered: a full apply, a wave's nodes at once (and --parallelism), resume, a crash half-way through a
step, auto-rollback of done and half-done steps, --no-auto-rollback, the health gate, --stage ordering,
dry runs, one failing node stopping the others mid-wait, transient failures (no rollback), a lost lock
mid-wait, and a rollback that itself fails.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.errors import InputError
from dra_migrate.execute.actions import ACTIONS, INVERSES
from dra_migrate.execute.contract import LockLost
from dra_migrate.execute.journal import INTERRUPTED, Journal, Progress, read_journal
from dra_migrate.execute.progress import progress_of
from dra_migrate.execute.runner import (
    FAILED,
    OK,
    STOPPED,
    ApplyOptions,
    Runner,
    RunResult,
    nodes_touched,
    planned_steps,
)
from dra_migrate.plan import io as plan_io
from dra_migrate.plan import validate
from dra_migrate.plan.model import Action, Inverse, InverseAction, NodeEntry, Plan, PoolStage, PrepareStage, Step, Wave
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.steps import node_steps
from dra_migrate.testing.execute import Crash, CrashableJournal, FakeClock, FakeOps

DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
ORIGINAL = {"unschedulable": False, "labels": {DP: "true", DRA: None}}


def make_plan(waves: list[list[str]], *, soak: str = "0s", pools: int = 1, params: PlanParams | None = None) -> Plan:
    params = dataclasses.replace(params or PlanParams(), soak=soak)
    prepare = PrepareStage(
        "prepare",
        (
            Step("prepare/create-deviceclass/gpu", "create-deviceclass", "DeviceClass gpu",
                 {"manifest": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                               "metadata": {"name": "gpu"}, "spec": {}}}, "none", "30s",
                 Inverse("delete-deviceclass", {"name": "gpu"})),
            Step("prepare/confirm-dra-driver", "confirm-dra-driver", "Driver gpu.nvidia.com",
                 {"driver": "gpu.nvidia.com"}, "installed", "1m", None),
        ),
    )  # fmt: skip
    stages: list[PrepareStage | PoolStage] = [prepare]
    objects = []
    for p in range(pools):
        entries = []
        for w, names in enumerate(waves):
            nodes = tuple(
                NodeEntry(f"p{p}-{n}", 1, 0, 2, ("nvidia.com/gpu",), "nvidia.com/gpu", ORIGINAL) for n in names
            )
            entries.append(Wave(f"wave-{w + 1}", nodes, len(nodes), soak if w < len(waves) - 1 else "0s"))
            objects += [
                {"kind": "Node", "group": "", "namespace": "", "name": e.node, "uid": f"uid-{e.node}",
                 "resourceVersion": "1", "content": "0"}
                for e in nodes
            ]  # fmt: skip
        stages.append(PoolStage(f"pool-p{p}", f"p{p}", ("nvidia.com/gpu",), node_steps(params), tuple(entries)))
    body = {
        "formatVersion": 1,
        "tool": {"name": "dra-migrate", "version": "test"},
        "cluster": "fake",
        "parameters": params.to_dict(),
        "fingerprint": {"kubernetesVersion": "v1.37.2", "digest": "sha256:" + "0" * 64, "objects": objects},
        "applicable": True,
        "findings": [],
        "summary": {},
        "stages": [s.to_dict() for s in stages],
    }
    problems = validate.validate(validate.recompute(body))
    assert not problems, problems  # a plan plan/io.py would load
    return Plan.from_dict(plan_io.seal(validate.recompute(body)))


MIGRATED = {"unschedulable": False, "labels": {DP: "false", DRA: "true"}}
# How long lanes that must meet at a barrier wait for each other: a guard against a deadlock only. Lanes are
# threads; on a loaded 2-core machine 5 s was once too short for the three cordons of one wave.
BARRIER_S = 60
BEFORE = {"unschedulable": False, "labels": {DP: "true"}}


class Rig:
    """A plan, its fake cluster and clock, and a journal on disk."""

    def __init__(self, tmp: Path, plan: Plan, **ops: Any) -> None:
        self.plan = plan
        self.clock = FakeClock()
        self.path = tmp / "plan.yaml.journal.jsonl"
        self.journal: CrashableJournal | None = None
        self.ops = FakeOps.for_plan(plan, self.clock, **ops)
        self.lost = threading.Event()

    def guard(self) -> None:
        if self.lost.is_set():
            raise LockLost("lost the cluster lock: taken over (injected)")

    def run(self, opts: ApplyOptions | None = None, *, dry_run: bool = False) -> RunResult:
        opts = opts or ApplyOptions(soak_override_s=None)
        done = self.progress().done_steps("apply")
        if dry_run:
            return self.runner(None).apply(dataclasses.replace(opts, dry_run=True), done)
        with Journal.open(self.path, plan_digest=self.plan.digest) as j:
            self.journal = CrashableJournal(j)
            self.ops.journal = self.journal
            return self.runner(self.journal).apply(opts, done)

    def rollback(self, opts: ApplyOptions | None = None) -> RunResult:
        p = progress_of(self.plan, self.records())
        order = [s.id for s in planned_steps(self.plan)]
        to_undo = [s for s in reversed(order) if s in p.undoable()]
        with Journal.open(self.path, plan_digest=self.plan.digest) as j:
            return self.runner(j).rollback(to_undo, opts)

    def runner(self, journal: Any) -> Runner:
        # as the session does: nodes the journal shows touched (a resumed run may find its own cordon there)
        touched = (
            nodes_touched(self.plan, progress_of(self.plan, self.records()).undoable()) if self.path.exists() else ()
        )
        applied = progress_of(self.plan, self.records()).done_steps("apply") if self.path.exists() else set()
        self.current = Runner(self.plan, self.ops, journal, actor="test", guard=self.guard, clock=self.clock,
                              touched_nodes=frozenset(touched), applied=frozenset(applied))  # fmt: skip
        return self.current

    def records(self) -> list[dict[str, Any]]:
        return read_journal(self.path)

    def progress(self) -> Progress:
        return Progress.from_records(self.records())

    def nodes(self) -> dict[str, Any]:
        return dict(self.ops.snapshot()["nodes"])


def assert_journal_consistent(records: list[dict[str, Any]]) -> None:
    """seq strictly increasing; every run closed; per run, every step started has ended (no crash here)."""
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(set(seqs)) == list(range(1, len(seqs) + 1))
    assert sum(r["event"] == "run-start" for r in records) == sum(r["event"] == "run-end" for r in records)
    open_steps: set[tuple[str, str]] = set()
    for r in records:
        key = (r.get("phase", ""), r.get("stepId", ""))
        if r["event"] == "start":
            assert key not in open_steps, key
            open_steps.add(key)
        elif r["event"] == "end":
            open_steps.discard(key)
    assert not open_steps


@pytest.fixture
def wave3(tmp_path: Path) -> Rig:
    return Rig(tmp_path, make_plan([["a", "b", "c"]]))


def test_every_action_and_inverse_is_registered_once() -> None:
    from dra_migrate.execute.actions import verifying_actions

    assert verifying_actions() == ("wait-dra-ready", "canary")  # what report's verification reads
    assert set(ACTIONS) == set(Action)
    assert set(INVERSES) == set(InverseAction)
    # The inverse each action must carry is the one the planner gives it.
    for step in node_steps(PlanParams()):
        assert ACTIONS[Action(step.action)].inverse == (InverseAction(step.inverse.action) if step.inverse else None)


def test_a_full_apply_migrates_every_node_and_journals_every_step(wave3: Rig) -> None:
    result = wave3.run()
    assert result.ok and result.outcome == OK, result.failure
    assert all(s == MIGRATED for s in wave3.nodes().values())
    assert wave3.ops.device_classes.keys() == {"gpu"}
    records = wave3.records()
    assert_journal_consistent(records)
    steps = [p.id for p in planned_steps(wave3.plan)]
    assert wave3.progress().done_steps("apply") == set(steps)
    assert result.steps_run == len(steps)
    # run-start records the overrides; run-end closes the run.
    assert records[0]["event"] == "run-start" and records[-1] == {**records[-1], "event": "run-end", "result": "ok"}


def test_a_waves_nodes_progress_at_once(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    # Three lanes must all be inside drain together, or the barrier breaks (sequential lanes would).
    rig.ops.barriers["drain"] = threading.Barrier(3, timeout=BARRIER_S)
    assert rig.run().ok
    assert rig.ops.max_active["drain"] == 3


def test_parallelism_bounds_the_lanes(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c", "d"]]))
    rig.ops.barriers["drain"] = threading.Barrier(2, timeout=BARRIER_S)
    assert rig.run(ApplyOptions(parallelism=2)).ok
    assert rig.ops.max_active["drain"] == 2


def test_the_next_wave_starts_after_the_last_node_of_this_one(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"], ["c"]]))
    assert rig.run().ok
    order = [r["stepId"] for r in rig.records() if r["event"] == "start"]
    last_of_wave1 = max(i for i, s in enumerate(order) if "/p0-a/" in s or "/p0-b/" in s)
    first_of_wave2 = min(i for i, s in enumerate(order) if "/p0-c/" in s)
    assert last_of_wave1 < first_of_wave2


def test_resume_skips_what_is_done(wave3: Rig) -> None:
    wave3.ops.fail("wait_dra_ready", "p0-b", "transient")
    first = wave3.run()
    assert first.outcome == STOPPED
    calls_before = len(wave3.ops.calls)
    second = wave3.run()
    assert second.ok, second.failure
    assert second.steps_skipped > 0
    assert all(s == MIGRATED for s in wave3.nodes().values())
    # Done steps were not sent again: no second create of the DeviceClass.
    assert ("create_device_class", "gpu") not in wave3.ops.calls[calls_before:]
    assert_journal_consistent(wave3.records())


@pytest.mark.parametrize("op", ["set_unschedulable", "drain", "set_label", "wait_dra_ready", "canary"])
@pytest.mark.parametrize("when", ["start", "mid"])
def test_a_crash_half_way_through_a_step_then_resume_converges(tmp_path: Path, op: str, when: str) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    rig.ops.fail(op, "p0-b", "crash", when=when)
    with pytest.raises(Crash):
        rig.run()
    records = rig.records()
    assert records[-1]["event"] != "run-end", "a crashed run is not closed"
    assert any(r["event"] == "start" and "/p0-b/" in r.get("stepId", "") for r in records)
    result = rig.run()  # resume
    assert result.ok, result.failure
    assert all(s == MIGRATED for s in rig.nodes().values())
    assert progress_of(rig.plan, rig.records()).to_dict()["remaining"] == 0


def test_a_permanent_failure_rolls_back_the_whole_wave_done_and_half_done(wave3: Rig) -> None:
    wave3.ops.fail("canary", "p0-a", "permanent")
    result = wave3.run()
    assert not result.ok and result.outcome == FAILED
    assert "canary" in (result.failure or "")
    assert all(s == BEFORE for s in wave3.nodes().values()), "every node of the wave restored"
    assert wave3.ops.device_classes.keys() == {"gpu"}, "the prepare stage stays until a full rollback"
    records = wave3.records()
    assert_journal_consistent(records)
    undone = {r["stepId"] for r in records if r["event"] == "end" and r["phase"] == "rollback"}
    assert {s for s in undone if "/p0-a/" in s} >= {"pool-p0/p0-a/cordon", "pool-p0/p0-a/disable-device-plugin"}


def test_one_failing_node_stops_the_others_mid_wait(wave3: Rig) -> None:
    """b hangs in its wait for DRA; a fails its drain: b's wait is cancelled at once (not at its timeout),
    its step journaled as interrupted, and the wave rolled back."""
    wave3.ops.fail("wait_dra_ready", "p0-b", "hang")
    # c hangs too: a lane that ran to its uncordon before a's failure reached it would wait alone at the
    # barrier below (it broke on a loaded CI machine) — the barrier is for the three cordons at once.
    wave3.ops.fail("wait_dra_ready", "p0-c", "hang")
    wave3.ops.fail("drain", "p0-a", "permanent")
    wave3.ops.barriers["set_unschedulable"] = threading.Barrier(3, timeout=BARRIER_S)
    result = wave3.run()
    assert result.outcome == FAILED and "p0-a/drain" in (result.failure or "")
    ends = {r["stepId"]: r for r in wave3.records() if r["event"] == "end" and r["phase"] == "apply"}
    for node in ("p0-b", "p0-c"):
        steps = [s for s in ends if f"/{node}/" in s]
        assert not any(s.endswith(("canary", "uncordon")) for s in steps), f"{node} stopped at its next boundary"
        wait = ends.get(f"pool-p0/{node}/wait-dra-ready")  # absent if a's failure came before it started
        assert wait is None or wait["result"] == "interrupted"
    interrupted = [r for r in ends.values() if r["result"] == "interrupted"]
    assert all("p0-a" not in r["stepId"] for r in interrupted)
    assert all(s == BEFORE for s in wave3.nodes().values())
    p = wave3.progress()
    assert all(s.status != INTERRUPTED for s in p.steps.values() if s.phase == "rollback")


def test_no_auto_rollback_leaves_the_wave_for_inspection(wave3: Rig) -> None:
    wave3.ops.fail("canary", "p0-c", "permanent")
    result = wave3.run(ApplyOptions(auto_rollback=False))
    assert result.outcome == FAILED and not result.rolled_back
    assert wave3.nodes()["p0-c"]["unschedulable"] is True
    assert not [r for r in wave3.records() if r.get("phase") == "rollback"]


def test_the_health_gate_rolls_back_its_wave_and_stops(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"], ["b"]]))
    real = rig.ops.drain

    def drain(node: str, *args: Any, **kw: Any) -> Any:
        rig.ops.pending = ["ml/stuck-pod"]  # evicted by the wave, and nowhere to go
        return real(node, *args, **kw)

    rig.ops.drain = drain  # type: ignore[method-assign]
    result = rig.run()
    assert result.outcome == FAILED and "health gate" in (result.failure or "") and "ml/stuck-pod" in result.failure
    assert rig.nodes()["p0-a"] == BEFORE, "the gated wave is rolled back"
    assert not any("/p0-b/" in c[1] for c in [(op, n or "") for op, n in rig.ops.calls]), "the next wave never ran"
    gates = [r for r in rig.records() if r["event"] == "gate"]
    assert gates and gates[0]["result"] == "failed"


def test_a_soak_is_slept_on_the_clock(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"], ["b"]], soak="5m"))
    t0 = rig.clock.monotonic()
    assert rig.run().ok
    assert rig.clock.monotonic() - t0 >= 300


def test_stage_ordering(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]], pools=2))
    with pytest.raises(InputError, match="after unfinished"):
        rig.run(ApplyOptions(stage="pool-p1"))
    assert rig.run(ApplyOptions(until="pool-p0")).ok
    assert rig.nodes()["p1-a"] == BEFORE
    assert rig.run(ApplyOptions(stage="pool-p1")).ok
    assert rig.nodes()["p1-a"] == MIGRATED
    with pytest.raises(InputError, match="no stage"):
        rig.run(ApplyOptions(stage="nope"))


def test_a_dry_run_changes_nothing_and_journals_nothing(wave3: Rig) -> None:
    result = wave3.run(dry_run=True)
    assert result.ok
    assert all(s == BEFORE for s in wave3.nodes().values())
    assert not wave3.path.exists()
    targets = {c.target for c in result.changes}
    assert {"Node p0-a", "Node p0-b", "Node p0-c", "DeviceClass gpu"} <= targets
    # Waits and canaries have nothing to wait for in a dry run: not called.
    assert not [c for c in wave3.ops.calls if c[0] in ("wait_dra_ready", "canary")]


@pytest.mark.parametrize("op", ["set_unschedulable", "drain", "set_label", "canary"])
def test_a_transient_failure_stops_without_rollback_then_resume_finishes(wave3: Rig, op: str) -> None:
    wave3.ops.fail(op, "p0-b", "transient")
    result = wave3.run()
    assert result.outcome == STOPPED and not result.rolled_back
    assert "re-run apply to resume" in (result.failure or "")
    assert not [r for r in wave3.records() if r.get("phase") == "rollback"]
    end = wave3.records()[-1]
    assert end["event"] == "run-end" and end["result"] == "stopped"
    assert_journal_consistent(wave3.records())
    assert wave3.run().ok
    assert all(s == MIGRATED for s in wave3.nodes().values())


def test_a_lock_lost_mid_wait_stops_the_run_at_once(wave3: Rig) -> None:
    wave3.ops.fail("wait_dra_ready", None, "hang", times=99)  # every node waits until told to stop

    def lose() -> None:
        while wave3.ops.active.get("wait_dra_ready", 0) < 3:  # all three lanes mid-wait
            threading.Event().wait(0.001)
        wave3.lost.set()
        wave3.current.cancel.cancel("lost the cluster lock")  # what ClusterLock.on_lost does

    thread = threading.Thread(target=lose)
    thread.start()
    result = wave3.run()
    thread.join()
    assert result.outcome == STOPPED and not result.rolled_back
    assert "lock" in (result.failure or "")
    ends = [r for r in wave3.records() if r["event"] == "end" and r["stepId"].endswith("wait-dra-ready")]
    assert len(ends) == 3 and all(r["result"] == "interrupted" for r in ends)


def test_a_failing_rollback_is_journaled_with_what_is_left_and_the_run_closed(wave3: Rig) -> None:
    wave3.ops.fail("canary", "p0-a", "permanent")
    # The rollback's label restore on b fails for good (its first two set_label calls were the apply's).
    wave3.ops.fail("set_label", "p0-b", "permanent", after=2, times=99)
    wave3.ops.barriers["canary"] = threading.Barrier(3, timeout=BARRIER_S)  # b has switched both labels when a fails
    result = wave3.run()
    assert result.outcome == FAILED and result.rollback_left
    assert all("/p0-b/" in s for s in result.rollback_left)
    records = wave3.records()
    incomplete = [r for r in records if r["event"] == "rollback-incomplete"]
    assert incomplete and incomplete[0]["left"] == result.rollback_left
    assert records[-1]["event"] == "run-end" and records[-1]["rollbackLeft"] == result.rollback_left
    assert wave3.nodes()["p0-a"] == BEFORE and wave3.nodes()["p0-c"] == BEFORE
    # What is left stays undoable: a later rollback finishes it.
    wave3.ops.faults.clear()
    assert wave3.rollback().ok
    assert all(s == BEFORE for s in wave3.nodes().values())


def test_rollback_restores_everything_concurrently(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c"]], pools=2))
    assert rig.run().ok
    rig.ops.barriers["set_label"] = threading.Barrier(3, timeout=BARRIER_S)  # a wave's nodes undone at once
    result = rig.rollback()
    assert result.ok, result.failure
    assert all(s == BEFORE for s in rig.nodes().values())
    assert not rig.ops.device_classes
    assert_journal_consistent(rig.records())


def _watch_drains(rig: Rig) -> dict[str, list[tuple[bool, dict[str, str], str, float, Any]]]:
    """Each node's drains, with the node's schedulability and labels when it began, and its arguments."""
    seen: dict[str, list[tuple[bool, dict[str, str], str, float, Any]]] = {}
    real = rig.ops.drain

    def drain(node: str, scope: str, timeout_s: float, **kw: Any) -> Any:
        n = rig.ops.nodes[node]
        seen.setdefault(node, []).append((n.unschedulable, dict(n.labels), scope, timeout_s, kw.get("reviewed")))
        return real(node, scope, timeout_s, **kw)

    rig.ops.drain = drain  # type: ignore[method-assign]
    return seen


def test_rollback_drains_a_migrated_node_again_before_switching_its_plugins_back(tmp_path: Path) -> None:
    """Pods scheduled on a migrated node hold its GPUs through DRA. Switching the plugins back under them let the
    device plugin hand the same GPUs out again (and a pod whose claim the DRA plugin prepared cannot be torn
    down once that plugin is gone); rollback restored the labels with the pods still there."""
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    assert rig.run().ok
    for n in rig.ops.nodes.values():
        n.gpu_pods = 2  # scheduled through DRA since the wave
    drains = _watch_drains(rig)
    result = rig.rollback()
    assert result.ok, result.failure
    for name, n in rig.ops.nodes.items():
        (cordoned, labels, scope, timeout, reviewed), *again = drains[name]
        assert cordoned and labels == {DP: "false", DRA: "true"}, "drained cordoned, before any switch went back"
        assert (scope, timeout, reviewed) == ("gpu", 600.0, rig.plan.reviewed_pods())
        assert all(not later[1].get(DRA) for later in again), "the second switch's drain finds the node drained"
        assert n.gpu_pods == 0
    assert all(s == BEFORE for s in rig.nodes().values())
    undone = [
        r
        for r in rig.records()
        if r["event"] == "end" and r["phase"] == "rollback" and r["stepId"].endswith("/enable-dra-plugin")
    ]
    assert {len(r["before"]["pods"]) for r in undone} == {2}, "the journal names the pods it evicted"


def test_a_rollback_drain_that_fails_leaves_the_node_migrated(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    rig.ops.nodes["p0-a"].gpu_pods = 1
    rig.ops.fail("drain", "p0-a", "permanent")
    result = rig.rollback()
    assert not result.ok and "drain of node p0-a failed" in (result.failure or "")
    assert rig.ops.nodes["p0-a"].labels == {DP: "false", DRA: "true"}, "no plugin switched back under the pod"
    assert any(s.endswith("/enable-dra-plugin") for s in result.rollback_left)


def test_rollback_drains_with_the_runs_timeout_and_delete_unowned_pods(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    drains = _watch_drains(rig)
    assert rig.rollback(ApplyOptions(timeouts={"drain": 42.0}, delete_unowned_pods=True)).ok
    (_, _, _, timeout, reviewed), *_ = drains["p0-a"]
    assert (timeout, reviewed) == (42.0, None)


def test_a_node_replaced_since_the_plan_fails_its_cordon(wave3: Rig) -> None:
    wave3.ops.nodes["p0-c"].uid = "another"
    result = wave3.run()
    assert result.outcome == FAILED and "replaced" in (result.failure or "")
    assert all(s == BEFORE for s in wave3.nodes().values())


def test_a_drain_past_its_timeout_override_fails_the_wave(wave3: Rig) -> None:
    result = wave3.run(ApplyOptions(timeouts={"drain": 5.0}))  # pods take 30 s to go
    assert result.outcome == FAILED and "after 5s" in (result.failure or "")


def test_the_journal_stays_totally_ordered_under_concurrent_lanes(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([[str(i) for i in range(24)]]))
    assert rig.run().ok
    assert_journal_consistent(rig.records())


def test_ctrl_c_stops_every_lane_and_closes_the_run(wave3: Rig) -> None:
    wave3.ops.fail("wait_dra_ready", "p0-b", "hang")
    wave3.ops.fail("wait_dra_ready", "p0-c", "hang")
    wave3.ops.fail("canary", "p0-a", "interrupt")
    with pytest.raises(KeyboardInterrupt):
        wave3.run()
    records = wave3.records()
    assert records[-1]["event"] == "run-end" and records[-1]["result"] == "failed"
    assert not [r for r in records if r.get("phase") == "rollback"]
    waits = [r for r in records if r["event"] == "end" and r["stepId"].endswith("wait-dra-ready")]
    assert {r["result"] for r in waits if "/p0-a/" not in r["stepId"]} <= {"interrupted"}


def test_status_counts_the_planned_steps_without_making_them() -> None:
    """`status` needs only the ids of the concrete steps, in order: the same as `planned_steps` gives, for a
    plan of several pools and waves (the ids, not the steps with every node's parameters filled)."""
    from dra_migrate.execute.runner import planned_step_ids

    plan = make_plan([["a", "b", "c"], ["d"], ["e", "f"]], pools=2)
    ids = list(planned_step_ids(plan))
    assert ids == [p.id for p in planned_steps(plan)]
    assert len(ids) > len(set(p.node for p in planned_steps(plan)))  # several steps per node: order matters
