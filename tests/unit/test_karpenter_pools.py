"""Karpenter NodePools as Karpenter's own API and controllers treat them (sigs.k8s.io/karpenter v1.8.0).

Found auditing the replace-pool manifest and the in-place waves on Karpenter nodes: the manifest kept the old
NodePool's `weight`, which the NodePool CRD refuses beside `replicas`; and an in-place wave drains a Karpenter
node and leaves it empty with nothing keeping Karpenter's consolidation off it.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.inventory.platform import PoolPlatform
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.strategies import platform_command
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
