"""A plan against a cluster that moved on: what `plan` leaves out, what `apply`'s staleness check (plan/drift.py)
refuses with a message naming what changed, and what it lets through because it changes nothing the plan does."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.errors import InputError
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.drift import drift
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams

ROOT = Path(__file__).resolve().parents[2]
# The DRA chart installed on nvidia.com/dra-kubelet-plugin=true beside the GPU Operator's device plugin
# (fixtures/clusters/README.md): every planned node gets a label switch for each plugin.
DRA_DS = ("dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu-kubelet-plugin")
DP_DS = ("gpu-operator", "nvidia-device-plugin-daemonset")
NODE = "aks-h100-35768863-vmss000000"


@cache
def _items() -> tuple[dict[str, Any], ...]:
    doc = yaml.safe_load((ROOT / "fixtures" / "clusters" / "upstream-ready.yaml").read_text())
    return tuple(doc["items"])


def items() -> list[dict[str, Any]]:
    return copy.deepcopy(list(_items()))


def state_of(objs: list[dict[str, Any]]) -> ClusterState:
    b = StateBuilder(SourceInfo(kind="snapshot", location="test", kubernetes_version="v1.37.2"))
    b.add_all(objs)
    return b.state


@cache
def planned() -> Plan:
    return build_plan(state_of(items()), PlanParams(max_unavailable="2"))


def find(objs: list[dict[str, Any]], kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    return next(
        o
        for o in objs
        if o["kind"] == kind and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
    )


def planned_nodes(plan: Plan) -> set[str]:
    return {e.node for _, _, e in plan.nodes()}


# --- the plugins' DaemonSets: what the plan's label switches act through --------------------------------


def test_the_dra_daemonset_removed_since_the_plan_is_drift_naming_it() -> None:
    """Without the DRA kubelet-plugin DaemonSet, the plan's enable-dra-plugin label starts nothing: apply would
    drain the node, set the label and time out in wait-dra-ready with the node dark. A plan-vs-cluster check
    that looks only at nodes, consumers and DeviceClasses let it through."""
    objs = [o for o in items() if not (o["kind"] == "DaemonSet" and o["metadata"]["name"] == DRA_DS[1])]
    d = drift(planned(), state_of(objs))
    assert not d.holds
    changed = [c for c in d.placement_changed if c["node"] == NODE and c["plugin"] == "draPlugin"]
    assert changed and changed[0]["planned"]["daemonSet"] == "/".join(DRA_DS)
    assert changed[0]["now"]["daemonSet"] is None
    assert d.counts()["placementChanged"] == len(planned_nodes(planned()))


def test_the_dra_daemonset_selecting_another_label_is_drift() -> None:
    """An upgrade of the DRA chart with another kubeletPlugin.nodeSelector: the plan's label no longer selects it."""
    objs = items()
    find(objs, "DaemonSet", DRA_DS[1], DRA_DS[0])["spec"]["template"]["spec"]["nodeSelector"] = {
        "example.com/dra": "on"
    }
    d = drift(planned(), state_of(objs))
    assert not d.holds
    ours = [c for c in d.placement_changed if c["node"] == NODE and c["plugin"] == "draPlugin"]
    assert ours and ours[0]["now"]["label"] == "example.com/dra" and ours[0]["now"]["value"] == "on"
    assert ours[0]["planned"]["label"] == "nvidia.com/dra-kubelet-plugin"


def test_the_device_plugin_daemonset_losing_its_selector_is_drift() -> None:
    """The device plugin now runs on every node: the plan's disable-device-plugin label turns nothing off, and
    wait-dra-ready would time out with the device plugin still advertising the GPUs."""
    objs = items()
    find(objs, "DaemonSet", DP_DS[1], DP_DS[0])["spec"]["template"]["spec"]["nodeSelector"] = {}
    d = drift(planned(), state_of(objs))
    assert not d.holds
    assert any(c["node"] == NODE and c["plugin"] == "devicePlugin" for c in d.placement_changed)


def test_an_upgrade_that_keeps_the_placement_is_not_drift() -> None:
    """A new DRA driver image (the chart upgraded, same node selector) changes nothing the plan does."""
    objs = items()
    ds = find(objs, "DaemonSet", DRA_DS[1], DRA_DS[0])
    for c in ds["spec"]["template"]["spec"]["containers"]:
        c["image"] = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0"
    ds["metadata"]["resourceVersion"] = "99999999"
    d = drift(planned(), state_of(objs))
    assert d.holds, d.to_dict()["summary"]


def test_apply_refuses_a_plan_whose_plugin_placement_moved_and_names_the_daemonset(tmp_path: Path) -> None:
    from dra_migrate.execute.session import ApplySession
    from dra_migrate.plan import io as plan_io

    path = tmp_path / "plan.yaml"
    plan_io.write_sealed(planned(), path)
    plan = Plan.from_dict(plan_io.load(path))
    s = ApplySession(plan, path, ops=object(), lock_api=None, actor="t")  # type: ignore[arg-type]
    objs = [o for o in items() if not (o["kind"] == "DaemonSet" and o["metadata"]["name"] == DRA_DS[1])]
    with pytest.raises(InputError, match="stale") as e:
        s.refuse_if_stale(lambda: state_of(objs))
    assert "/".join(DRA_DS) in e.value.message


# --- nodes that cannot be migrated now ------------------------------------------------------------------


def _ready(node: dict[str, Any], status: str) -> None:
    for c in node["status"]["conditions"]:
        if c["type"] == "Ready":
            c["status"] = status


@pytest.mark.parametrize("status", ["False", "Unknown"])
def test_a_not_ready_node_is_left_out_with_its_reason(status: str) -> None:
    """A NotReady kubelet confirms no pod deletion: the drain waits its whole timeout on pods stuck terminating
    (kubectl drain has --skip-wait-for-delete-timeout for them), and the DRA plugin cannot start there."""
    objs = items()
    _ready(find(objs, "Node", NODE), status)
    plan = build_plan(state_of(objs), PlanParams(max_unavailable="2"))
    assert NODE not in planned_nodes(plan)
    left = {e["node"]: e["reason"] for e in plan.summary["excludedNodes"]}
    assert left[NODE].startswith("node-not-ready:"), left
    assert planned_nodes(plan) == planned_nodes(planned()) - {NODE}, "the rest of its pool is still planned"
    assert plan.applicable


def test_a_node_being_deleted_is_left_out() -> None:
    objs = items()
    find(objs, "Node", NODE)["metadata"]["deletionTimestamp"] = "2026-11-20T10:00:00Z"
    plan = build_plan(state_of(objs), PlanParams(max_unavailable="2"))
    assert NODE not in planned_nodes(plan)
    left = {e["node"]: e["reason"] for e in plan.summary["excludedNodes"]}
    assert left[NODE].startswith("node-deleting:"), left


# --- options ----------------------------------------------------------------------------------------------


def test_a_pool_named_twice_in_order_is_refused() -> None:
    """--order h100,h100 made two stages pool-h100: a plan that `show` and `apply` then refused to load."""
    with pytest.raises(InputError, match="--order names h100 twice"):
        PlanParams(order=("h100", "h100")).validate()


def test_order_naming_a_left_out_pool_says_why() -> None:
    with pytest.raises(InputError, match="h100: left out by --exclude-pools"):
        build_plan(state_of(items()), PlanParams(order=("h100",), exclude_pools=("h100",)))


def test_a_resumed_run_ignores_the_placement_its_own_switches_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a run set a node's DRA label, that node's DRA plugin runs: its placement moved by the run's own hand,
    which is no reason to refuse the resume; a node still ahead whose placement moved is."""
    from test_runner import make_plan
    from test_runner_session import plan_file, session

    from dra_migrate.execute.runner import ApplyOptions
    from dra_migrate.plan.drift import Drift
    from dra_migrate.testing.execute import FakeClock, FakeOps

    plan = make_plan([["a"], ["b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())

    def moved(node: str) -> dict[str, Any]:
        was = {"mode": "label", "daemonSet": "ns/dra", "label": "k", "value": "true"}
        return {"node": node, "plugin": "draPlugin", "planned": was, "now": {**was, "mode": "runs", "label": None}}

    found = Drift(plan={}, placement_changed=[moved("p0-a")])
    monkeypatch.setattr("dra_migrate.plan.drift.drift", lambda _plan, _state: found)
    ops.fail("canary", "p0-b", "transient")
    session(path, ops, clock=ops.clock).apply(ApplyOptions())  # wave 1 done, then stopped in wave 2
    s = session(path, ops, clock=ops.clock)
    assert s.resuming
    s.refuse_if_stale(lambda: None)
    found.placement_changed.append(moved("p0-c"))
    with pytest.raises(InputError, match="the DRA plugin on node p0-c was planned as label k=true"):
        s.refuse_if_stale(lambda: None)


@pytest.mark.parametrize("how", ["not-ready", "deleting"])
def test_a_node_that_went_not_ready_or_is_deleted_since_the_plan_fails_before_its_cordon(
    tmp_path: Path, how: str
) -> None:
    """The plan was made while the node was Ready; by apply its kubelet is gone (or the Node is being deleted).
    Cordoning and draining it would hold the wave for the whole drain timeout on pods that never finish
    terminating: the node's first step refuses it instead, before anything is changed on it."""
    from test_runner import BEFORE, Rig, make_plan

    from dra_migrate.execute.runner import FAILED

    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    if how == "not-ready":
        rig.ops.nodes["p0-b"].ready = False
    else:
        rig.ops.nodes["p0-b"].deleting = True
    drains: list[str] = []
    drain = rig.ops.drain
    rig.ops.drain = lambda node, *a, **kw: (drains.append(node), drain(node, *a, **kw))[1]  # type: ignore[method-assign]
    result = rig.run()
    assert result.outcome == FAILED
    assert ("not Ready" if how == "not-ready" else "being deleted") in (result.failure or "")
    assert "p0-b" not in drains
    assert rig.nodes()["p0-b"] == BEFORE


@pytest.mark.parametrize(
    ("conditions", "meta", "not_ready", "deleting"),
    [
        ([{"type": "Ready", "status": "True"}], {}, None, False),
        ([{"type": "Ready", "status": "Unknown"}], {}, "Unknown", False),  # the node controller's "unreachable"
        ([{"type": "Ready", "status": "False"}], {}, "False", False),
        ([], {}, None, False),  # no kubelet ever posted: not called NotReady (a bare API server's nodes)
        ([{"type": "Ready", "status": "True"}], {"deletionTimestamp": "2026-11-20T10:00:00Z"}, None, True),
    ],
)
def test_live_node_state_says_not_ready_and_deleting(
    conditions: list[dict[str, str]], meta: dict[str, str], not_ready: str | None, deleting: bool
) -> None:
    from dra_migrate.execute.ops import LiveOps
    from dra_migrate.testing.server import FakeServer

    server = FakeServer()
    server.put(
        "/api/v1/nodes/n1",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1", **meta},
         "spec": {}, "status": {"conditions": conditions}},
    )  # fmt: skip
    state = LiveOps(server.client).node_state("n1")
    assert (state["notReady"], state["deleting"]) == (not_ready, deleting)


# --- pools the plan leaves out ----------------------------------------------------------------------------


def _with_node_like(objs: list[dict[str, Any]], template: str, name: str) -> list[dict[str, Any]]:
    node = copy.deepcopy(find(objs, "Node", template))
    node["metadata"].update(name=name, uid=f"uid-{name}", resourceVersion="7777777")
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    return [*objs, node]


def _stale_check(plan: Plan, tmp_path: Path, objs: list[dict[str, Any]]) -> None:
    from dra_migrate.execute.session import ApplySession
    from dra_migrate.plan import io as plan_io

    path = tmp_path / "plan.yaml"
    plan_io.write_sealed(plan, path)
    loaded = Plan.from_dict(plan_io.load(path))
    ApplySession(loaded, path, ops=object(), lock_api=None, actor="t").refuse_if_stale(  # type: ignore[arg-type]
        lambda: state_of(objs)
    )


def test_a_node_an_autoscaler_adds_to_a_pool_the_plan_leaves_out_does_not_make_it_stale(tmp_path: Path) -> None:
    """`plan --pools h100` on a fleet whose other GPU pools scale: a node added to one of those (or its status
    and labels moving) changes nothing the plan does, and apply refused every such plan as stale within minutes.
    `diff` still shows it; a node added to a planned pool is still refused."""
    plan = build_plan(state_of(items()), PlanParams(pools=("h100",)))
    other = _with_node_like(items(), "aks-a100ts-14333790-vmss000000", "aks-a100ts-14333790-vmss000009")
    find(other, "Node", "aks-h100old-81477113-vmss000000")["metadata"]["labels"]["example.com/team"] = "b"
    assert not drift(plan, state_of(other)).holds  # diff reports it
    _stale_check(plan, tmp_path, other)  # apply goes on
    ours = _with_node_like(items(), NODE, "aks-h100-35768863-vmss000009")
    with pytest.raises(InputError, match="nodesAdded: 1"):
        _stale_check(plan, tmp_path, ours)
