"""`unmanaged-gpu-pod`: GPU pods that the drain deletes for good, since no controller recreates them.

Found reading the drain: its docstring said "the plan lists them for review beforehand", and nothing did;
the demo fleet's `research/cuda-debug-jsmith` (a hand-made CUDA shell) would have been evicted with the
h100 pool's first wave, and the plan said "evicted pods are recreated by their controllers".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from tests.unit.cli import run
from tests.unit.helpers import container, node, pod, pod_spec
from tests.unit.test_checks import GPU, findings, gpu_node, make

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")
SHELL = pod_spec(container(limits={GPU: 1}))


def _with_owner(p: dict[str, Any], kind: str, controller: bool) -> dict[str, Any]:
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": kind, "name": "x", "uid": f"u-{kind}", "controller": controller}
    ]
    return p


def _flagged(*objects: dict[str, Any]) -> list[str]:
    found = findings(make(*objects), "unmanaged-gpu-pod")
    assert len(found) <= 1
    return [str(o) for o in found[0].objects] if found else []


def test_a_gpu_pod_without_a_controller_is_flagged_with_its_pool() -> None:
    (f,) = findings(make(gpu_node("gpu-1", pool="h100"), pod("shell", SHELL)), "unmanaged-gpu-pod")
    assert f.severity.value == "warning"
    assert [str(o) for o in f.objects] == ["Pod ml/shell"]
    assert "ml/shell (pool h100)" in f.message and "nothing recreates them" in f.message
    assert assess(make(gpu_node("gpu-1", pool="h100"), pod("shell", SHELL))).scope_of(f) == {
        "scope": "pool",
        "pools": ["h100"],
    }


@pytest.mark.parametrize(
    ("case", "make_pod"),
    [
        ("a ReplicaSet's", lambda: _with_owner(pod("rs-x", SHELL), "ReplicaSet", True)),
        ("a training job's", lambda: _with_owner(pod("job-x", SHELL), "PyTorchJob", True)),
        ("a mirror pod (its Node controls it)", lambda: _with_owner(pod("static", SHELL), "Node", True)),
        ("finished: Succeeded", lambda: pod("done", SHELL, phase="Succeeded")),
        ("finished: Failed", lambda: pod("failed", SHELL, phase="Failed")),
        ("no GPU (the drain's default scope leaves it)", lambda: pod("cpu", pod_spec(container()))),
        ("on a CPU node", lambda: pod("elsewhere", SHELL, node="cpu-1")),
        ("not bound to a node", lambda: pod("pending", SHELL, node=None, phase="Pending")),
    ],
)
def test_what_the_drain_does_not_lose_is_not_flagged(case: str, make_pod: Any) -> None:
    assert _flagged(gpu_node("gpu-1"), node("cpu-1"), make_pod()) == [], case


def test_an_owner_that_is_not_a_controller_recreates_nothing() -> None:
    """`ownerReferences` without `controller: true` (garbage collection only) bring nothing back."""
    shell = _with_owner(pod("gc-owned", SHELL), "ConfigMap", False)
    assert _flagged(gpu_node("gpu-1"), shell) == ["Pod ml/gc-owned"]


def test_a_pending_pod_bound_to_the_node_is_flagged_and_one_being_deleted_is_not() -> None:
    pending = pod("starting", SHELL, phase="Pending")
    going = pod("going", SHELL)
    going["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    assert _flagged(gpu_node("gpu-1"), pending, going) == ["Pod ml/starting"]


def test_a_node_already_migrated_is_not_drained_again() -> None:
    migrated = gpu_node(
        "gpu-1", **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    )
    migrated["status"]["allocatable"].pop(GPU)
    assert _flagged(migrated, pod("shell", SHELL)) == []


def test_the_message_names_three_and_counts_the_rest() -> None:
    pods = [pod(f"shell-{i}", SHELL) for i in range(5)]
    (f,) = findings(make(gpu_node("gpu-1"), *pods), "unmanaged-gpu-pod")
    assert "5 GPU pod(s)" in f.message and "and 2 more" in f.message and len(f.objects) == 5


def test_the_plan_carries_it_for_its_pool_only(tmp_path: Path) -> None:
    """The demo fleet's CUDA shell is on the h100 pool: a plan of that pool lists it, one without it does not."""
    with_pool = tmp_path / "with.yaml"
    without = tmp_path / "without.yaml"
    assert run("plan", "--snapshot", DEMO, "--out", str(with_pool)).code == 0
    assert run("plan", "--snapshot", DEMO, "--out", str(without), "--exclude-pools", "h100-pool").code == 0
    ids = {
        p: [f["id"] for f in json.loads(run("show", str(p), "-o", "json").stdout)["findings"]]
        for p in (with_pool, without)
    }
    assert "unmanaged-gpu-pod" in ids[with_pool] and "unmanaged-gpu-pod" not in ids[without]


# -- what the drain may delete: the pods the plan recorded ----------------------------------------------
# The finding told the operator; the drain must delete no other pod no controller owns, and must not stop
# at one the operator was shown. A pod made while a long apply runs (an hour after the plan, on a later
# wave's node) was evicted without a word: `Plan.reviewed_pods` is what the drain may take.

CLAIM_ONLY = {**pod_spec(container()), "resourceClaims": [{"name": "gpu", "resourceClaimName": "shell-gpu"}]}


def _plan_of(*objects: dict[str, Any]) -> Any:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    return build_plan(make(*objects), PlanParams())


def _uid(p: dict[str, Any]) -> str:
    return str(p["metadata"]["uid"])


def test_the_plan_records_every_pod_the_finding_shows_and_no_other() -> None:
    shell = pod("shell", SHELL)
    claim_only = pod("claim-only", CLAIM_ONLY)  # uses devices, yet no GPU consumer: recorded all the same
    odd = pod("odd", pod_spec(container(limits={"nvidia.com/gpu.shared": 1})))
    owned = _with_owner(pod("rs-x", SHELL), "ReplicaSet", True)
    done = pod("done", SHELL, phase="Succeeded")
    cpu = pod("cpu", pod_spec(container()))
    elsewhere = pod("elsewhere", SHELL, node="cpu-1")
    migrated = gpu_node(
        "gpu-2", **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    )
    migrated["status"]["allocatable"].pop(GPU)
    # A DRA notebook on a node already migrated is not the plan's (nor drift that refuses a resume).
    notebook = pod("notebook", CLAIM_ONLY, node="gpu-2")
    objects = (
        gpu_node("gpu-1"),
        node("cpu-1"),
        migrated,
        shell,
        claim_only,
        odd,
        owned,
        done,
        cpu,
        elsewhere,
        notebook,
    )
    plan = _plan_of(*objects)
    shown = {str(o) for f in plan.findings if f["id"] == "unmanaged-gpu-pod" for o in f["objects"]}
    assert shown == {"Pod ml/shell", "Pod ml/claim-only", "Pod ml/odd"}
    reviewed = plan.reviewed_pods()
    assert {_uid(shell), _uid(claim_only), _uid(odd)} <= reviewed
    # A bare GPU pod is recorded wherever it runs (a GPU consumer of its own), a finished one too: no drain
    # takes `elsewhere`, and the drain deletes a finished pod without asking (kubectl's unreplicatedFilter).
    assert not {_uid(owned), _uid(cpu), _uid(notebook)} & reviewed


@pytest.mark.parametrize("fixture", sorted((ROOT / "fixtures" / "clusters").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_fixture_plan_lets_its_drains_take_the_pods_it_showed(fixture: Path) -> None:
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    state = load_snapshot(str(fixture))
    plan = build_plan(state, PlanParams())
    uids = {f"Pod {p['metadata'].get('namespace')}/{p['metadata']['name']}": _uid(p) for p in state.of("Pod")}
    shown = [str(o) for f in plan.findings if f["id"] == "unmanaged-gpu-pod" for o in f["objects"]]
    assert {uids[o] for o in shown} <= plan.reviewed_pods()


def test_the_runner_hands_each_drain_the_plans_reviewed_pods(tmp_path: Path) -> None:
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.execute.journal import Journal
    from dra_migrate.execute.runner import OK, ApplyOptions, Runner
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams
    from dra_migrate.testing.execute import FakeClock, FakeOps

    state = load_snapshot(DEMO)
    plan = plan_io.seal_plan(build_plan(state, PlanParams()))
    shell = next(p for p in state.of("Pod") if p["metadata"]["name"] == "cuda-debug-jsmith")
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="test", clock=clock).apply(ApplyOptions(soak_override_s=0), set())
    assert result.outcome == OK, result.failure
    drained = {n for op, n in ops.calls if op == "drain"}
    assert drained and set(ops.reviewed) == drained
    assert all(r == plan.reviewed_pods() and _uid(shell) in r for r in ops.reviewed.values())


@pytest.mark.parametrize(
    ("case", "make_pod", "lost"),
    [
        ("made since the plan", lambda: pod("new", SHELL), True),
        ("pending on the node", lambda: pod("new", SHELL, phase="Pending"), True),
        ("only garbage-collected by its owner", lambda: _with_owner(pod("gc", SHELL), "ConfigMap", False), True),
        ("recorded by the plan", lambda: pod("seen", SHELL), False),
        ("a controller recreates it", lambda: _with_owner(pod("rs-x", SHELL), "ReplicaSet", True), False),
        ("finished", lambda: pod("done", SHELL, phase="Failed"), False),
    ],
)
def test_the_drain_refuses_only_what_it_would_lose_unseen(case: str, make_pod: Any, lost: bool) -> None:
    from dra_migrate.execute.ops_drain import _lost_unreviewed

    p = make_pod()
    reviewed = {_uid(p)} if p["metadata"]["name"] == "seen" else {"uid-of-another-pod"}
    assert _lost_unreviewed(p, reviewed) is lost, case
    going = {**p, "metadata": {**p["metadata"], "deletionTimestamp": "2026-12-06T10:00:00Z"}}
    assert _lost_unreviewed(going, set()) is False, "a pod already being deleted only needs waiting for"


def test_delete_unowned_pods_lets_every_drain_take_any(tmp_path: Path) -> None:
    """apply --delete-unowned-pods (kubectl drain --force): the runner hands the drains no reviewed set."""
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.execute.journal import Journal
    from dra_migrate.execute.runner import OK, ApplyOptions, Runner
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams
    from dra_migrate.testing.execute import FakeClock, FakeOps

    plan = plan_io.seal_plan(build_plan(load_snapshot(DEMO), PlanParams()))
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        opts = ApplyOptions(soak_override_s=0, delete_unowned_pods=True)
        result = Runner(plan, ops, j, actor="test", clock=clock).apply(opts, set())
    assert result.outcome == OK, result.failure
    assert ops.reviewed and all(r is None for r in ops.reviewed.values())
