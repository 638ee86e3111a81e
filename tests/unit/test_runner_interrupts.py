"""Ctrl-C (or SIGTERM/SIGHUP, raised as `Terminated`, a KeyboardInterrupt) in the middle of a step.

Found auditing "nothing lost on Ctrl-C": a one-lane unit (the prepare stage, a one-node wave) runs its step
on the main thread, where the signal lands; the step was journaled `failed` with "internal error:
KeyboardInterrupt()", so `status` showed a failure the operator never had and the docs' promise ("journals
each open step as interrupted") held only for waves of several nodes.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from test_runner import Rig, make_plan

from dra_migrate.cli.interrupts import Terminated
from dra_migrate.execute.journal import INTERRUPTED
from dra_migrate.execute.progress import progress_of
from dra_migrate.testing.execute import FakeOps


@pytest.mark.parametrize("op", ["canary", "drain", "set_label"])
@pytest.mark.parametrize("when", ["start", "mid"])
def test_ctrl_c_in_a_one_node_wave_journals_the_step_interrupted(tmp_path: Path, op: str, when: str) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    rig.ops.fail(op, "p0-a", "interrupt", when=when)
    with pytest.raises(KeyboardInterrupt):
        rig.run()
    records = rig.records()
    ends = [r for r in records if r["event"] == "end" and r.get("result") not in ("ok", "skipped")]
    assert len(ends) == 1 and ends[0]["result"] == "interrupted", ends
    assert "internal error" not in ends[0].get("error", "")
    assert records[-1]["event"] == "run-end"
    assert rig.progress().status(ends[0]["stepId"]) == INTERRUPTED
    # and a resume finishes the node
    result = rig.run()
    assert result.ok, result.failure
    assert progress_of(rig.plan, rig.records()).to_dict()["remaining"] == 0


def test_sigterm_in_the_prepare_stage_journals_the_step_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))

    def terminated(*_a: object, **_k: object) -> None:
        raise Terminated(signal.SIGTERM)

    monkeypatch.setattr(FakeOps, "create_device_class", terminated)
    with pytest.raises(Terminated):
        rig.run()
    ends = [r for r in rig.records() if r["event"] == "end"]
    assert ends and ends[-1]["result"] == "interrupted" and "terminated" in ends[-1]["error"]


def test_ctrl_c_during_a_rollback_journals_the_undo_interrupted_and_rollback_finishes(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    rig.ops.fail("set_label", "p0-a", "interrupt")
    with pytest.raises(KeyboardInterrupt):
        rig.rollback()
    records = rig.records()
    undo = [r for r in records if r["event"] == "end" and r.get("phase") == "rollback"][-1]
    assert undo["result"] == "interrupted", undo
    assert records[-1]["event"] == "run-end"
    result = rig.rollback()
    assert result.ok, result.failure
    assert all(s["labels"].get("nvidia.com/gpu.deploy.device-plugin") == "true" for s in rig.nodes().values())


def test_a_second_ctrl_c_does_not_close_the_run_under_lanes_still_finishing_their_steps(tmp_path: Path) -> None:
    """Found auditing it: a second Ctrl-C while the wave's lanes finished their in-flight steps cut the wait
    short: the run was closed in the journal, the journal closed and the Lease deleted while a lane was still
    writing to the cluster, and that lane's `end` record failed on the closed journal (the step left open)."""
    import threading
    import time

    from test_runner import assert_journal_consistent

    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    rig.ops.fail("wait_dra_ready", "p0-a", "hang")
    rig.ops.fail("wait_dra_ready", "p0-b", "hang")
    in_flight = threading.Event()
    real = rig.ops.set_label

    def slow_label(node: str, key: str, value: str | None, **kw: object) -> object:
        if node == "p0-c":
            in_flight.set()
            time.sleep(0.6)  # a request in flight: not cancellable
        return real(node, key, value, **kw)  # type: ignore[arg-type]

    rig.ops.set_label = slow_label  # type: ignore[method-assign]

    def operator() -> None:
        in_flight.wait(5)
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)  # a real signal: it wakes the main thread's wait
        time.sleep(0.2)
        signal.pthread_kill(main, signal.SIGINT)  # impatient

    threading.Thread(target=operator, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        rig.run()
    for t in threading.enumerate():
        if t.name.startswith("lane"):
            t.join(5)
    records = rig.records()
    assert records[-1]["event"] == "run-end", records[-3:]
    assert_journal_consistent(records)


# ----------------------------------------------------------------------------------------------------
# SIGKILL (or power loss) mid-step, then `rollback` instead of resume: the undo must restore exactly the
# originals the plan recorded, whether or not the step's `end` (with its `before`) reached the journal.


@pytest.mark.parametrize("op", ["set_unschedulable", "drain", "set_label", "wait_dra_ready", "canary"])
@pytest.mark.parametrize("when", ["start", "mid"])
def test_a_crash_mid_step_then_rollback_restores_the_recorded_originals(tmp_path: Path, op: str, when: str) -> None:
    from test_runner import BEFORE

    from dra_migrate.testing.execute import Crash

    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    rig.ops.fail(op, "p0-b", "crash", when=when)
    with pytest.raises(Crash):
        rig.run()
    result = rig.rollback()
    assert result.ok, result.failure
    assert all(s == BEFORE for s in rig.nodes().values()), rig.nodes()
    assert progress_of(rig.plan, rig.records()).undoable() == set()


@pytest.mark.parametrize("op", ["set_unschedulable", "set_label"])
def test_a_crash_mid_undo_then_rollback_again_restores_the_originals(tmp_path: Path, op: str) -> None:
    from test_runner import BEFORE

    from dra_migrate.testing.execute import Crash

    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    assert rig.run().ok
    rig.ops.fail(op, "p0-b", "crash", when="mid")
    rig.ops.journal = None
    with pytest.raises(Crash):
        rig.rollback()
    result = rig.rollback()
    assert result.ok, result.failure
    assert all(s == BEFORE for s in rig.nodes().values()), rig.nodes()
