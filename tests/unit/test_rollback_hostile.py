"""`rollback` against what a production operator meets after an apply: a DeviceClass workloads now use,
node fields someone changed since the migration wrote them.

Each test failed on the code before its fix (the class deleted under allocated claims; a node an operator
cordoned after the apply put back into service by the rollback).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_runner import Rig, make_plan

from dra_migrate.errors import InputError

DP = "nvidia.com/gpu.deploy.device-plugin"
DRA = "nvidia.com/dra-kubelet-plugin"


def test_a_deviceclass_allocated_claims_use_is_not_deleted(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    # A workload made after the migration holds an allocated claim through the plan's class.
    rig.ops.claims["team/train-0-gpu"] = {"deviceClass": "gpu", "allocated": True}
    result = rig.rollback()
    assert not result.ok
    assert "gpu" in rig.ops.device_classes  # kept: deleting it leaves such claims unallocatable
    assert result.rollback_left == ["prepare/create-deviceclass/gpu"]
    assert "team/train-0-gpu" in str(result.failure)
    # The nodes were still rolled back (the prepare stage is undone last).
    assert rig.nodes()["p0-a"] == {"unschedulable": False, "labels": {DP: "true"}}
    # Once the claim is gone, running rollback again finishes.
    del rig.ops.claims["team/train-0-gpu"]
    again = rig.rollback()
    assert again.ok, again.failure
    assert "gpu" not in rig.ops.device_classes


def test_a_claim_of_another_class_does_not_hold_the_rollback(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    rig.ops.claims["team/x"] = {"deviceClass": "gpu.nvidia.com", "allocated": True}
    assert rig.rollback().ok
    assert "gpu" not in rig.ops.device_classes


def test_a_node_an_operator_cordoned_after_the_apply_is_not_uncordoned(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    assert rig.run().ok
    rig.ops.nodes["p0-b"].unschedulable = True  # an XID error: the operator took it out of service
    calls = len(rig.ops.calls)
    with pytest.raises(InputError) as e:
        rig.rollback()
    assert "p0-b" in str(e.value) and "unschedulable" in str(e.value)
    assert e.value.hint  # says what to do
    writes = [c for c in rig.ops.calls[calls:] if c[0] not in ("node_state",)]
    assert not writes, writes  # refused before anything was changed
    assert rig.nodes()["p0-b"]["unschedulable"] is True
    assert rig.nodes()["p0-a"]["labels"][DRA] == "true"  # the other node untouched too


def test_a_label_changed_since_the_apply_refuses_the_rollback(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    rig.ops.nodes["p0-a"].labels[DP] = "true"  # someone switched the device plugin back on by hand
    with pytest.raises(InputError) as e:
        rig.rollback()
    assert f"label {DP}" in str(e.value)
    assert rig.nodes()["p0-a"]["labels"][DRA] == "true"


def test_the_drift_check_accepts_what_a_crashed_rollback_left(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    assert rig.run().ok
    # The first rollback stops at p0-a's device plugin switch back (its other undos done or not).
    rig.ops.fail("set_label", "p0-a", "permanent", after=1)
    first = rig.rollback()
    assert not first.ok
    second = rig.rollback()  # neither a drift refusal nor a failure: the values are the tool's own
    assert second.ok, second.failure
    for n in ("p0-a", "p0-b"):
        assert rig.nodes()[n] == {"unschedulable": False, "labels": {DP: "true"}}


def test_a_replaced_node_is_not_judged_for_drift(tmp_path: Path) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b"]]))
    assert rig.run().ok
    node = rig.ops.nodes["p0-b"]
    node.uid, node.unschedulable, node.labels = "uid-new", True, {"pool": "fresh"}
    assert rig.rollback().ok


def test_rollback_says_which_migrated_nodes_it_drains_before_it_acts(tmp_path: Path) -> None:
    """Pods scheduled on migrated nodes hold their GPUs through DRA claims; the undo drains them. The operator
    is told before the confirmation (and before a dry run's output), not only in the journal afterwards."""
    from test_runner_session import plan_file, session

    from dra_migrate.execute.runner import ApplyOptions
    from dra_migrate.testing.execute import FakeClock, FakeOps

    plan = make_plan([["a", "b"], ["c"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.fail("drain", "p0-c", "permanent")  # wave 2 fails at its drain and is rolled back: nothing to drain
    assert not session(path, ops, clock=ops.clock).apply(ApplyOptions()).ok
    s = session(path, ops, clock=ops.clock)
    notice = s.rollback_notice(s.to_undo(None))
    assert notice is not None
    assert "2 migrated node(s)" in notice and "p0-a" in notice and "p0-b" in notice and "p0-c" not in notice
    assert "--dry-run" in notice
    assert s.rollback_notice([i for i in s.to_undo(None) if i.startswith("prepare/")]) is None


def test_the_live_claim_reading_finds_the_class_in_exactly_and_first_available() -> None:
    from dra_migrate.execute.ops_base import claims_naming_class

    def claim(name: str, requests: list[dict[str, object]], allocated: bool = False) -> dict[str, object]:
        status = {"allocation": {"devices": {"results": [{"device": "gpu-0"}]}}} if allocated else {}
        return {"metadata": {"namespace": "ml", "name": name}, "spec": {"devices": {"requests": requests}},
                "status": status}  # fmt: skip

    claims = [
        claim("a", [{"name": "r", "exactly": {"deviceClassName": "gpu"}}], allocated=True),
        claim(
            "b",
            [
                {
                    "name": "r",
                    "firstAvailable": [
                        {"name": "s", "deviceClassName": "mig"},
                        {"name": "t", "deviceClassName": "gpu"},
                    ],
                }
            ],
        ),
        claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}], allocated=True),
        {"metadata": {"namespace": "ml", "name": "d"}},  # no spec at all: names nothing
    ]
    assert claims_naming_class(claims, "gpu") == ["ml/a (allocated)", "ml/b"]
    assert claims_naming_class(claims, "mig") == ["ml/b"]


def test_claims_of_pods_the_rollback_drained_do_not_hold_the_class() -> None:
    """A rollback evicts the pods that hold GPUs through DRA before the prepare stage's undo; their claims (owned
    by the pod: a template's, or the scheduler's for an extended-resource request) linger for the pods' grace
    periods. Counted, they failed every rollback of a migration whose workloads ran (the real cluster's
    test_cutover): a claim on its way out allocates nothing again. A claim someone made, or one of a pod still
    running, still holds it."""
    from dra_migrate.execute.ops_base import claims_naming_class, going_claim

    def claim(name: str, owner: str | None = None, deleting: bool = False) -> dict[str, object]:
        meta: dict[str, object] = {"namespace": "ml", "name": name}
        if owner:
            meta["ownerReferences"] = [{"kind": "Pod", "name": owner, "uid": f"uid-{owner}"}]
        if deleting:
            meta["deletionTimestamp"] = "2026-12-07T08:00:00Z"
        requests = [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]
        return {"metadata": meta, "spec": {"devices": {"requests": requests}}, "status": {"allocation": {}}}

    pods = {
        "running": {"metadata": {"uid": "uid-running"}, "status": {"phase": "Running"}},
        "terminating": {"metadata": {"uid": "uid-terminating", "deletionTimestamp": "t"},
                        "status": {"phase": "Running"}},
        "done": {"metadata": {"uid": "uid-done"}, "status": {"phase": "Succeeded"}},
        "replaced": {"metadata": {"uid": "another-uid"}, "status": {"phase": "Running"}},
    }  # fmt: skip
    claims = [
        claim("of-running", "running"),
        claim("of-terminating", "terminating"),
        claim("of-done", "done"),
        claim("of-replaced", "replaced"),
        claim("of-gone", "gone"),
        claim("being-deleted", "running", deleting=True),
        claim("someones-own"),
    ]

    def going(c: dict[str, object]) -> bool:
        return going_claim(c, lambda _ns, name: pods.get(name))

    assert claims_naming_class(claims, "gpu", going) == ["ml/of-running", "ml/someones-own"]


def test_a_dry_run_rollback_does_not_stop_at_claims_its_drains_would_free(tmp_path: Path) -> None:
    """A dry run evicts nothing, so the claims of the pods the drains would evict are still there: it says which
    claims name the class now and goes on (it stopped: "the rollback would stop"), the class untouched."""
    from dataclasses import replace as dc_replace

    from dra_migrate.execute.progress import progress_of
    from dra_migrate.execute.runner import ApplyOptions, planned_steps

    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    rig.ops.claims["team/train-0-gpu"] = {"deviceClass": "gpu", "allocated": True}
    p_order = [s.id for s in planned_steps(rig.plan)]
    undoable = progress_of(rig.plan, rig.records()).undoable()
    to_undo = [s for s in reversed(p_order) if s in undoable]
    result = rig.runner(None).rollback(to_undo, dc_replace(ApplyOptions(soak_override_s=None), dry_run=True))
    assert result.ok, result.failure
    assert "gpu" in rig.ops.device_classes
    shown = [c for c in result.changes if c.target == "DeviceClass gpu"]
    assert shown and shown[0].before.get("claimsNow") == ["team/train-0-gpu (allocated)"]


def test_a_node_is_uncordoned_only_once_its_dra_slices_are_gone(tmp_path: Path) -> None:
    """Undone, the DRA switch leaves the node's slices behind for a while (the kubelet wipes an unregistered
    plugin's slices after a grace period); uncordoned meanwhile, the scheduler allocated claims from them to
    pods the node could never start, and those claims held the DeviceClass (the real cluster's test_cutover:
    a Deployment's replacement pod on a just-rolled-back MIG node). The undo now waits, with the stage's DRA
    readiness timeout, for the node to publish nothing, before the device plugin and the uncordon; and says
    so when the slices stay."""
    from dra_migrate.execute.contract import StepFailed

    rig = Rig(tmp_path, make_plan([["a"]]))
    assert rig.run().ok
    start = len(rig.ops.calls)
    seen: list[tuple[str, list[str], int]] = []
    real = rig.ops.wait_dra_ready

    def wait(node: str, resources: list[str], devices: int, timeout_s: float, **kw: object) -> object:
        seen.append((node, resources, devices))
        return real(node, resources, devices, timeout_s, **kw)  # type: ignore[arg-type]

    rig.ops.wait_dra_ready = wait  # type: ignore[method-assign]
    assert rig.rollback().ok
    assert seen == [("p0-a", [], 0)]
    calls = [c for c in rig.ops.calls[start:] if c[1] == "p0-a"]
    ops = [op for op, _ in calls]
    dra_off = max(i for i, (op, _) in enumerate(calls) if op == "set_label" and i < ops.index("wait_dra_ready"))
    assert dra_off < ops.index("wait_dra_ready") < max(i for i, op in enumerate(ops) if op == "set_unschedulable")

    (tmp_path / "2").mkdir()
    rig2 = Rig(tmp_path / "2", make_plan([["a"]]))
    assert rig2.run().ok

    def stays(*_a: object, **_k: object) -> object:
        raise StepFailed("node p0-a not ready for DRA after 300s", "check the plugins")

    rig2.ops.wait_dra_ready = stays  # type: ignore[method-assign]
    result = rig2.rollback()
    assert not result.ok and "still publishes" in str(result.failure)
    assert rig2.nodes()["p0-a"]["unschedulable"] is True, "not uncordoned while its slices stay"
