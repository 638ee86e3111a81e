"""Karpenter NodePools as Karpenter's own API and controllers treat them (sigs.k8s.io/karpenter v1.8.0).

Found auditing the replace-pool manifest and the in-place waves on Karpenter nodes: the manifest kept the old
NodePool's `weight`, which the NodePool CRD refuses beside `replicas`; and an in-place wave drains a Karpenter
node and leaves it empty with nothing keeping Karpenter's consolidation off it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.execute.journal import Journal, read_journal
from dra_migrate.execute.progress import progress_of
from dra_migrate.execute.runner import ApplyOptions, Runner, planned_steps
from dra_migrate.inventory.platform import PoolPlatform
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.strategies import platform_command
from dra_migrate.plan.validate import validate
from dra_migrate.testing.execute import FakeClock, FakeOps
from tests.unit.helpers import obj
from tests.unit.test_checks import gpu_node, make


def _nodepool(name: str, **spec: Any) -> dict[str, Any]:
    body = {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                   "name": "al2023-gpu"}}}, **spec}  # fmt: skip
    return obj("karpenter.sh/v1", "NodePool", name, body, namespace=None)


def test_the_static_nodepool_drops_what_the_crd_refuses_beside_replicas() -> None:
    # karpenter.sh_nodepools.yaml (v1.8.0): "'weight' is not supported on static NodePools", "only 'limits.nodes'
    # is supported on static NodePools"
    old = _nodepool("gpu", weight=50, limits={"nvidia.com/gpu": "64"})
    p = PoolPlatform(platform="eks", provisioner="karpenter", group="gpu", owner="platform", detail="",
                     autoscaler="karpenter", strategy="replace-pool", switching="", sources=(), nodes=2,
                     raw_nodepool=old)  # fmt: skip
    manifest = platform_command("gpu", p, PlanParams(), "c")[1]
    assert manifest is not None and manifest["spec"]["replicas"] == 2
    assert "weight" not in manifest["spec"] and "limits" not in manifest["spec"]


def _karpenter_node(name: str) -> dict[str, Any]:
    n = gpu_node(name, **{"karpenter.sh/nodepool": "gpu"})
    n["metadata"]["labels"].pop("cloud.google.com/gke-nodepool")
    return n


def _consolidation(state: Any) -> list[str]:
    return [f.message for f in assess(state).findings if f.id == "karpenter-consolidates-drained-node"]


def test_an_in_place_wave_on_consolidating_karpenter_nodes_is_warned() -> None:
    # Karpenter's disruption candidates are not filtered on spec.unschedulable (state/statenode.go
    # ValidateNodeDisruptable checks do-not-disrupt, nomination, deletion, initialisation): a drained node is
    # empty, and consolidation (WhenEmpty and WhenEmptyOrUnderutilized alike) removes it after consolidateAfter.
    nodes = (_karpenter_node("k1"), _karpenter_node("k2"))
    pool = _nodepool("gpu", disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"})
    found = _consolidation(make(*nodes, pool))
    assert len(found) == 1 and "consolidateAfter 1m" in found[0]
    # consolidateAfter: Never turns consolidation off: nothing to warn of
    never = _nodepool("gpu", disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    assert _consolidation(make(*nodes, never)) == []


HALF_MIGRATED = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "half-migrated.yaml"
DND = "karpenter.sh/do-not-disrupt"


def test_in_place_karpenter_nodes_are_kept_from_consolidation_while_they_are_drained(tmp_path: Path) -> None:
    """Karpenter took a drained in-place node (empty, cordoned: its consolidation does not look at the cordon)
    before its DRA plugin was up. The plan now sets do-not-disrupt before the cordon and gives the annotation back
    its own value after the uncordon; an operator's own do-not-disrupt on a node is kept; rollback restores it."""
    before = Plan.from_dict(plan_io.seal(build_plan(load_snapshot(HALF_MIGRATED), PlanParams(soak="0s")).to_dict()))
    first = sorted(e.node for s in before.pool_stages() for w in s.waves for e in w.nodes)
    state = load_snapshot(HALF_MIGRATED)
    own = next(n for n in state.of("Node") if n["metadata"]["name"] == first[0])
    own["metadata"].setdefault("annotations", {})[DND] = "true"  # the operator's own: kept, not taken off
    plan = Plan.from_dict(plan_io.seal(build_plan(state, PlanParams(soak="0s")).to_dict()))
    [stage] = [s for s in plan.pool_stages() if s.strategy != "replace-pool"]
    ids = [s.id for s in stage.node_steps]
    assert ids[0] == "protect" and ids[-1] == "unprotect" and ids.index("uncordon") == len(ids) - 2, ids
    nodes = sorted(e.node for w in stage.waves for e in w.nodes)
    assert nodes[0] == first[0]
    assert [e.original["annotations"] for w in stage.waves for e in w.nodes if e.node != nodes[0]] == [{DND: None}] * (
        len(nodes) - 1
    )
    ops = FakeOps.for_plan(plan, FakeClock())
    seen: dict[str, tuple[bool, str | None]] = {}
    real = ops.drain

    def drain(node: str, *args: Any, **kw: Any) -> Any:
        seen[node] = (ops.nodes[node].unschedulable, ops.nodes[node].annotations.get(DND))
        return real(node, *args, **kw)

    ops.drain = drain  # type: ignore[method-assign]
    path = tmp_path / "plan.yaml.journal.jsonl"
    with Journal.open(path, plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert result.ok, result.failure
    assert all(seen[n] == (True, "true") for n in nodes), seen  # protected while drained and empty
    assert [ops.nodes[n].annotations.get(DND) for n in nodes] == ["true"] + [None] * (len(nodes) - 1)
    progress = progress_of(plan, read_journal(path))
    order = [p.id for p in planned_steps(plan)]
    with Journal.open(path, plan_digest=plan.digest) as j:
        undo = [s for s in reversed(order) if s in progress.undoable()]
        assert Runner(plan, ops, j, actor="t", clock=ops.clock).rollback(undo).ok
    assert [ops.nodes[n].annotations.get(DND) for n in nodes] == ["true"] + [None] * (len(nodes) - 1), "as recorded"


def test_a_plan_whose_in_place_protection_was_edited_out_is_refused() -> None:
    state = load_snapshot(HALF_MIGRATED)
    body = build_plan(state, PlanParams(soak="0s")).to_dict()
    stage = next(s for s in body["stages"] if s.get("nodeSteps") and s.get("strategy") != "replace-pool")
    stage["nodeSteps"] = [s for s in stage["nodeSteps"] if s["id"] != "unprotect"]
    problems = [p.message for p in validate(body)]
    assert any("per-node steps must be protect, cordon" in m and "uncordon, unprotect" in m for m in problems), problems
    stage["nodeSteps"] = [s for s in stage["nodeSteps"] if s["id"] != "protect"]
    for w in stage["waves"]:
        for n in w["nodes"]:
            n["original"].pop("annotations", None)
    assert validate(body) == [], "a plan without protection is a plan (one made before it): not refused"


DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"
CA = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def test_in_place_nodes_of_a_cluster_autoscaler_pool_are_kept_from_scale_down_while_they_are_drained(
    tmp_path: Path,
) -> None:
    """The cluster autoscaler does not spare a cordoned node either: its scale-down eligibility looks at deletion,
    the scale-down-disabled annotation, the node group, readiness and utilisation only (kubernetes/autoscaler
    cluster-autoscaler/core/scaledown/eligibility/eligibility.go `unremovableReasonAndNodeUtilization`), and a
    drained GPU node's GPU utilisation is 0. After `--scale-down-unneeded-time` (10 minutes by default, less where
    operators tune it for costly GPU nodes) it removed a drained node whose apply was interrupted or slow."""
    plan = Plan.from_dict(plan_io.seal(build_plan(load_snapshot(DEMO), PlanParams(soak="0s")).to_dict()))
    stages = [s for s in plan.pool_stages() if s.strategy != "replace-pool"]
    assert stages, "the demo's GKE pools are switched in place"
    for stage in stages:
        ids = [s.id for s in stage.node_steps]
        assert ids[0] == "protect" and ids[-1] == "unprotect", (stage.name, ids)
        assert stage.node_steps[0].params["key"] == CA
        assert {str(e.original["annotations"]) for w in stage.waves for e in w.nodes} == {str({CA: None})}
    ops = FakeOps.for_plan(plan, FakeClock())
    seen: dict[str, str | None] = {}
    real = ops.drain

    def drain(node: str, *args: Any, **kw: Any) -> Any:
        seen[node] = ops.nodes[node].annotations.get(CA)
        return real(node, *args, **kw)

    ops.drain = drain  # type: ignore[method-assign]
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(), set())
    assert result.ok, result.failure
    assert seen and set(seen.values()) == {"true"}, seen
    assert all(CA not in n.annotations for n in ops.nodes.values()), "given back as it was: absent"
