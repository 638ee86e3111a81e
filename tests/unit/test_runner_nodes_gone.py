"""Undoing a node's steps when the node is not the plan's node any more: deleted mid-wave (an autoscaler
or a spot reclaim removed it), or replaced by a new Node object of the same name (new uid).

Nothing the tool did survives on such a node: its cordon and labels went with the old object. The
inverses must not fail for ever on the missing node (rollback then never finishes: every run stops at
the same undo), nor write the plan's recorded values onto a new Node the tool never touched (uncordoning
a node its provisioner or an admin holds cordoned).
"""

from __future__ import annotations

from pathlib import Path

from test_runner import Rig, make_plan

from dra_migrate.execute.runner import FAILED


def test_a_node_deleted_mid_wave_does_not_leave_the_rollback_unfinishable(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    # p0-b goes away after its drain (emptied, the autoscaler removed it): its wait fails.
    rig.ops.fail("wait_dra_ready", "p0-b", "permanent")
    real_wait = rig.ops.wait_dra_ready

    def vanish_then_wait(node: str, *args: object, **kwargs: object) -> object:
        if node == "p0-b":
            rig.ops.nodes["p0-b"].exists = False
        return real_wait(node, *args, **kwargs)  # type: ignore[arg-type]

    rig.ops.wait_dra_ready = vanish_then_wait  # type: ignore[method-assign]
    result = rig.run()
    assert result.outcome == FAILED
    assert not result.rollback_left, result.failure  # nothing left that no run could ever undo
    assert rig.nodes()["p0-a"] == {"unschedulable": False, "labels": {"nvidia.com/gpu.deploy.device-plugin": "true"}}
    records = rig.records()
    assert not [r for r in records if r["event"] == "rollback-incomplete"]
    # And a later `rollback` has nothing to fail on either.
    assert rig.rollback().ok


def test_a_rollback_never_writes_the_plans_values_onto_a_replacement_node(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    assert rig.run().ok
    # p0-b is replaced: a new Node object of the same name, held cordoned by its provisioner, with labels of
    # its own. The tool never touched it.
    node = rig.ops.nodes["p0-b"]
    node.uid, node.unschedulable, node.labels = "uid-new", True, {"pool": "fresh"}
    result = rig.rollback()
    assert result.ok, result.failure
    assert rig.nodes()["p0-b"] == {"unschedulable": True, "labels": {"pool": "fresh"}}
    assert rig.nodes()["p0-a"] == {"unschedulable": False, "labels": {"nvidia.com/gpu.deploy.device-plugin": "true"}}
    assert not any(call == ("drain", "p0-b") for call in rig.ops.calls[-20:])  # nothing drained there either
