"""When the twin counts as settled before a rehearsal fingerprints its plan (rehearse/run.py `stable_state`),
and the steady nodes that let it settle sooner (sim/kwok.py `node_manifest`, `content_pending`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import dra_migrate.rehearse.run as run
from dra_migrate.errors import InputError
from dra_migrate.sim.kwok import NOT_READY_TAINT, content_pending, node_manifest
from dra_migrate.sim.placement import LABEL_RULES
from dra_migrate.sim.spec import LABEL_DEVICE_PLUGIN, GpuNodeSpec
from dra_migrate.sim.stages import A_DP, NODE_READY, node_conditions, ready_status

OS_ARCH = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}


def _node(name: str, *, ready: bool = True, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A twin node as a read shows it (by hand: the test holds on code without `steady`)."""
    labels = {**OS_ARCH, "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
    return {
        "metadata": {"name": name, "labels": labels, "annotations": {A_DP: "running"}},
        "spec": {"taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


class _State:
    """What stable_state reads of a ClusterState (its nodes), and the fingerprint a read of it gives."""

    def __init__(self, nodes: list[dict[str, Any]], fp: dict[str, Any]) -> None:
        self.nodes, self.fp = nodes, fp

    def of(self, key: str) -> list[dict[str, Any]]:
        return self.nodes if key == "Node" else []


def _fp(ds_version: str, node_content: str = "c1") -> dict[str, Any]:
    objects = [
        {"kind": "DaemonSet", "group": "apps", "namespace": "m", "name": "probe", "uid": "u1",
         "resourceVersion": ds_version, "content": "spec1"},
        {"kind": "Node", "group": "", "namespace": "", "name": "n1", "uid": "u2", "resourceVersion": "7",
         "content": node_content},
    ]  # fmt: skip
    return {"kubernetesVersion": "v1.37.2", "digest": f"sha256:{ds_version}{node_content}", "objects": objects}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_State]]:
    """The twin's reads, in order; a read past the last fails the test (the old loop read on and on)."""
    queue: list[_State] = []
    done: list[_State] = []

    def read_cluster(_kubeconfig: Path) -> _State:
        if not queue:
            raise AssertionError(f"read {len(done) + 1} times: the twin was never taken as settled")
        done.append(queue.pop(0))
        return done[-1]

    monkeypatch.setattr(run, "read_cluster", read_cluster)
    monkeypatch.setattr(run, "assess", lambda state, pool_labels: None)
    monkeypatch.setattr(run, "fingerprint", lambda state, readiness: state.fp)
    monkeypatch.setattr(run.time, "sleep", lambda _s: None)
    yield queue


def test_a_status_that_keeps_moving_does_not_hold_the_twin(reads: list[_State]) -> None:
    """A GPU DaemonSet's status moves its resourceVersion while its pods start: apply's staleness check calls
    that status only (plan/drift.py), so the twin is settled once uids and contents agree."""
    reads.extend(_State([_node("n1")], _fp(str(v))) for v in (10, 11, 12, 13))
    state, fp = run.stable_state(Path("kubeconfig"), (), 30)
    assert state is not None and len(reads) == 2, "taken at the second read, which agreed on everything apply checks"
    assert fp == _fp("11"), "the settled read's own fingerprint, for twin_plan"


def test_the_twins_plan_takes_the_settled_reads_fingerprint_without_assessing_the_twin_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """stable_state fingerprints the read it settles on; twin_plan seals that fingerprint and runs no second pass
    of the checks over the same state (0.6 s of a 2,000-node rehearsal, before its first wave)."""
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.model import Plan

    root = Path(__file__).resolve().parents[2]
    plan = Plan.from_dict(plan_io.load(root / "plans" / "demo-example.yaml"))
    state = load_snapshot(root / "fixtures" / "clusters" / "demo.yaml")
    settled = run.fingerprint(state, run.assess(state, pool_labels=run.pool_labels(plan)))

    def no_assess(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the twin was assessed again")

    monkeypatch.setattr(run, "assess", no_assess)
    derived = run.twin_plan(plan, state, 0.1, settled)
    assert derived.fingerprint == settled


def test_the_twin_is_not_settled_while_the_node_lifecycle_controller_still_owes_a_taint(reads: list[_State]) -> None:
    """Two reads that agree do not settle it while a Ready node still carries the not-ready taint: the node
    lifecycle controller lifts it a moment later, and a plan fingerprinted before would be stale."""
    tainted = [_node("n1", taints=[{"key": NOT_READY_TAINT, "effect": "NoSchedule"}])]
    reads.extend([_State(tainted, _fp("1", "tainted")), _State(tainted, _fp("1", "tainted"))])
    reads.extend([_State([_node("n1")], _fp("2")), _State([_node("n1")], _fp("2"))])
    state, _ = run.stable_state(Path("kubeconfig"), (), 30)
    assert state.of("Node")[0]["spec"]["taints"] == [] and not reads


def test_a_twin_that_never_settles_names_the_nodes_it_waits_for(reads: list[_State]) -> None:
    reads.extend(_State([_node("n1", ready=False)], _fp("1")) for _ in range(2))
    with pytest.raises(InputError, match=r"1 node\(s\) still settling \(first: n1: not Ready\)"):
        run.stable_state(Path("kubeconfig"), (), 0)


def test_the_nodes_settle_from_a_list_of_nodes_before_the_twin_is_read_whole(reads: list[_State]) -> None:
    """With the API, the nodes are watched settle by LISTing nodes alone; the whole reads come after."""
    lists = [[_node("n1", ready=False)], [_node("n1", ready=False)], [_node("n1")]]

    class Kube:
        def list_all(self, path: str) -> tuple[list[dict[str, Any]], str]:
            assert path == "/api/v1/nodes"
            return lists.pop(0), "1"

    reads.extend(_State([_node("n1")], _fp("1")) for _ in range(2))
    run.stable_state(Path("kubeconfig"), (), 30, LABEL_RULES, Kube())  # type: ignore[arg-type]
    assert not lists and not reads


def test_a_steady_node_registers_as_the_cluster_showed_it() -> None:
    """The snapshot's nodes were up: Ready, labels as the node lifecycle controller left them, the device
    plugin's capacity where its placement runs it — nothing left to change in what a plan fingerprints."""
    on = node_manifest(GpuNodeSpec.small("n1", gpus=4, labels=OS_ARCH), steady=True)
    assert content_pending(on, LABEL_RULES) is None
    assert on["status"]["capacity"]["nvidia.com/gpu"] == "4" and on["metadata"]["annotations"][A_DP] == "running"
    assert on["metadata"]["labels"]["beta.kubernetes.io/arch"] == "amd64"
    assert not any(t["key"] == NOT_READY_TAINT for t in on["spec"].get("taints", []))
    off = node_manifest(GpuNodeSpec.small("n2", gpus=4, labels={LABEL_DEVICE_PLUGIN: "false"}), steady=True)
    assert content_pending(off, LABEL_RULES) is None, "where the plugin does not run: gone, capacity 0, already"
    assert off["status"]["capacity"]["nvidia.com/gpu"] == "0" and off["metadata"]["annotations"][A_DP] == "gone"


def test_a_booted_node_brings_the_not_ready_taint_and_is_settled_once_ready() -> None:
    """A new pool's node boots: no conditions yet, and the not-ready taint the API server's admission would
    add (a rehearsal's API server runs without that plugin)."""
    booted = node_manifest(GpuNodeSpec.small("n1", gpus=1, labels=OS_ARCH))
    assert {"key": NOT_READY_TAINT, "effect": "NoSchedule"} in booted["spec"]["taints"]
    assert "conditions" not in booted["status"] and "beta.kubernetes.io/os" not in booted["metadata"]["labels"]
    assert content_pending(booted, LABEL_RULES) == "not Ready"
    booted["status"].update(ready_status("2026-12-05T00:00:00Z"))
    assert content_pending(booted, LABEL_RULES) == "its taints are not yet the node lifecycle controller's"
    booted["spec"]["taints"] = []
    assert content_pending(booted, LABEL_RULES) == "its OS and arch labels are not yet reconciled"


def test_a_steady_nodes_status_is_the_one_node_initialize_posts() -> None:
    now = "2026-12-05T00:00:00Z"
    rendered = (
        NODE_READY.split("\n", 2)[2]
        .replace("{{ $now | Quote }}", f'"{now}"')
        .replace("{{ $since | Quote }}", f'"{now}"')
    )
    assert YAML(typ="safe").load(rendered)["status"] == ready_status(now)


def _snapshot_node(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    labels = {**OS_ARCH, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "4"}
    return {
        "metadata": {"name": "n1", "labels": labels},
        "spec": spec,
        "status": status or {"capacity": {"nvidia.com/gpu": "4"}, **ready_status("2026-12-05T00:00:00Z")},
    }


def test_a_node_cordoned_in_the_snapshot_stays_cordoned_on_the_twin() -> None:
    """A node the operator cordoned (spec.unschedulable, and the taint the node lifecycle controller keeps with
    it) must take no pods on the twin either. Registered without spec.unschedulable, the controller lifted the
    taint (k8s.io/kubernetes@v1.37.2 pkg/controller/nodelifecycle/node_lifecycle_controller.go
    doNoScheduleTaintingPass: the unschedulable taint follows spec.unschedulable) and the twin's scheduler
    placed a wave's evicted pods there: a rehearsal that passed where the cluster leaves them Pending."""
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    spec = GpuNodeSpec.from_node(_snapshot_node({"unschedulable": True, "taints": [cordon]}))
    node = node_manifest(spec, steady=True)
    assert node["spec"].get("unschedulable") is True
    assert cordon in node["spec"]["taints"]
    assert content_pending(node, LABEL_RULES) is None, "nothing for the node lifecycle controller to change"
    booted = node_manifest(spec)
    assert booted["spec"].get("unschedulable") is True
    assert not node_manifest(GpuNodeSpec.from_node(_snapshot_node({})), steady=True)["spec"].get("unschedulable")


def test_a_new_pools_nodes_do_not_inherit_the_cordon_of_the_nodes_they_replace() -> None:
    """A replace-pool's new nodes are the replaced pool's under new names: new machines, not cordoned, with no
    taint the node lifecycle controller keeps for the old ones' state; the old ones' own taints stay."""
    from types import SimpleNamespace

    from dra_migrate.plan.actions import Action
    from dra_migrate.rehearse.twinops import NewPools

    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    own = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
    old = replace(GpuNodeSpec.small("old-1", gpus=4), unschedulable=True, taints=(cordon, own), ready="Unknown")
    await_pool = SimpleNamespace(action=Action.AWAIT_POOL, params={"selector": {"pool": "new"}})
    stage = SimpleNamespace(name="provision-p", steps=[await_pool], waves=())
    plan = SimpleNamespace(
        stages=[stage], nodes=lambda: iter([(SimpleNamespace(pool="p"), None, SimpleNamespace(node="old-1"))])
    )
    started: list[list[GpuNodeSpec]] = []
    NewPools(plan, [old], {}, started.append, lambda _m: None).provision({"pool": "new"}, 2)  # type: ignore[arg-type]
    (new,) = started
    assert [(n.unschedulable, n.ready) for n in new] == [(False, "True"), (False, "True")]
    assert all(n.taints == (own,) for n in new)


def _down_status() -> dict[str, Any]:
    status = {"capacity": {"nvidia.com/gpu": "4"}, **ready_status("2026-12-05T00:00:00Z")}
    for cond in status["conditions"]:
        cond.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")
    return status


def test_a_node_not_ready_in_the_snapshot_stays_not_ready_on_the_twin() -> None:
    """A node whose kubelet was down when the snapshot was read (Ready Unknown, the unreachable taints) is left
    out of the plan (plan/exclusions.py node-not-ready), and takes no pods on the cluster. Registered Ready,
    the node lifecycle controller lifted its unreachable taint and the twin's scheduler placed the waves'
    evicted pods on it: a rehearsal that passed where the cluster leaves them Pending. It registers as the
    snapshot shows it, and no Stage makes it Ready (kwok keeps its Lease, so the controller leaves it so)."""
    taints = [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]
    spec = GpuNodeSpec.from_node(_snapshot_node({"taints": taints}, _down_status()))
    node = node_manifest(spec, steady=True)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "Unknown"
    assert node["spec"]["taints"] == taints
    assert content_pending(node, LABEL_RULES) is None, "settled as it is: no Ready to wait for"
    for name, cond in node_conditions():
        assert jq_bool(cond, [node]) == [False], f"{name} would play on a node whose kubelet is down"
    up = node_manifest(GpuNodeSpec.from_node(_snapshot_node({})), steady=True)
    assert jq_bool(node_conditions()[0][1], [{**up, "status": {}}]) == [True], "a booted node is still initialized"


def jq_bool(expr: str, objects: list[dict[str, Any]]) -> list[bool]:
    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("the jq binary evaluates the Stages' selectors (apt install jq)")
    out = subprocess.run([jq, "-c", f"[.[] | ({expr})]"], input=json.dumps(objects), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [bool(v) for v in json.loads(out.stdout)]
