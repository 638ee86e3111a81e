"""The canary pod refused by admission must stop apply before a wave touches anything.

The canary runs in one namespace (`default`) under whatever admission guards it: Pod Security (a namespace
or cluster default of `restricted` refuses it: it runs as root without a seccomp profile), a ResourceQuota
that requires cpu/memory requests, a policy webhook (Kyverno, Gatekeeper). The API server refuses such a
pod at creation (403/400/422), the same for every node. Found at the first canary, it cost a whole wave:
every node cordoned, drained, switched and then rolled back (drained again). A server-side dry run of the
same pod (`dryRun=All`: admission and validation run, nothing is stored; k8s.io/apiserver v0.37.2
pkg/admission) says so before the wave's first cordon.
"""

from __future__ import annotations

from pathlib import Path

from test_runner import BEFORE, Rig, make_plan

from dra_migrate.execute.runner import FAILED, OK, STOPPED, ApplyOptions


def test_a_canary_admission_refuses_stops_the_run_before_the_wave_touches_a_node(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    rig.ops.fail("canary-admission", None, "refused", times=99)
    result = rig.run()
    assert result.outcome == FAILED and "canary" in (result.failure or "")
    assert all(s == BEFORE for s in rig.nodes().values())
    assert not [c for c in rig.ops.calls if c[0] in ("set_unschedulable", "drain", "set_label")]
    started = [r["stepId"] for r in rig.records() if r["event"] == "start"]
    assert not [s for s in started if s.startswith("pool-")], "no step of the wave started"
    assert not result.rolled_back


def test_the_admission_check_is_a_dry_run_once_per_canary_and_the_run_goes_on(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"], ["c"]]))
    result = rig.run()
    assert result.outcome == OK, result.failure
    assert [c for c in rig.ops.calls if c[0] == "canary-admission"] == [("canary-admission", "p0-a")]


def test_apply_dry_run_reports_the_refusal(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    rig.ops.fail("canary-admission", None, "refused", times=99)
    result = rig.run(ApplyOptions(), dry_run=True)
    assert not result.ok and "canary" in (result.failure or "")


def test_an_unreachable_server_at_the_check_stops_for_a_resume(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    rig.ops.fail("canary-admission", None, "transient")
    result = rig.run()
    assert result.outcome == STOPPED
    assert rig.run().outcome == OK


def test_a_node_gone_since_the_plan_is_its_lanes_problem_not_an_admission_refusal(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    rig.ops.nodes["p0-a"].exists = False
    result = rig.run()
    assert result.outcome == FAILED and "no longer exists" in (result.failure or ""), result.failure
    assert "refuse" not in (result.failure or ""), result.failure
    # The check before the wave meets the gone node first (execute/lifecycle.py): no canary is asked, no node
    # of the wave touched.
    assert [c for c in rig.ops.calls if c[0] == "canary-admission"] == []
    assert [c for c in rig.ops.calls if c[1] == "p0-b" and c[0] != "node_state"] == []
