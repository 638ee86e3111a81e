"""An in-place pool is switched node by node with labels; the node group that made its nodes does not know.

The nodes it makes later (a scale-up, an auto-repair, a node upgrade that recreates every node: GKE's surge
upgrades, EKS AMI updates, AKS node-image upgrades) carry the group's template labels, not the plan's switches:
they come up on the device plugin, and an upgrade after the migration silently undoes it pool-wide.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from tests.unit.test_plan_placement import DP, ds, gpu_node, make

DRA = ds("dra-driver-nvidia-gpu-kubelet-plugin", ns="nvidia-dra-driver-gpu",
         nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})  # fmt: skip
RULE = "in-place-pool-template"


def _found(*objects: dict[str, Any]) -> list[Any]:
    return [f for f in assess(make(*objects, DP, DRA)).findings if f.id == RULE]


def _gke(name: str, **labels: str) -> dict[str, Any]:
    return gpu_node(name, pool="a100", **labels)  # cloud.google.com/gke-nodepool=a100


def _unpooled(name: str) -> dict[str, Any]:
    n = gpu_node(name)
    del n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
    return n


def test_a_node_groups_in_place_pool_is_told_which_labels_its_template_must_carry() -> None:
    [f] = _found(_gke("a"), _gke("b"))
    assert f.severity == "warning" and f.objects[0].name == "a100"
    # the switches the plan sets on each node, as the DaemonSets select them
    assert "nvidia.com/gpu.deploy.device-plugin=false" in f.message
    assert "nvidia.com/dra-kubelet-plugin=true" in f.message
    assert "pool(s) a100 are" in f.message and "GKE node pool" in f.message and "upgrade" in f.message


def test_pools_alike_are_one_finding_that_names_them() -> None:
    """A fleet of many node pools read one finding per pool, all alike (400 at 2,000 nodes in pools of 5)."""
    nodes = [gpu_node(f"n{i}", pool=f"pool-{i // 2}") for i in range(14)]
    [f] = _found(*nodes)
    assert len(f.objects) == 7 and "and 2 more" in f.message


def test_karpenter_is_told_that_changing_the_template_replaces_its_nodes() -> None:
    k = [gpu_node(n, **{"karpenter.sh/nodepool": "gpu"}) for n in ("a", "b")]
    [f] = _found(*k)
    assert "Karpenter NodePool" in f.message and "drift" in f.remediation


def test_no_finding_where_no_node_group_makes_nodes_or_nothing_is_left_to_switch() -> None:
    assert _found(_unpooled("a"), _unpooled("b")) == [], "no node group read: nothing makes nodes of its own"
    done = {"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    assert _found(_gke("a", **done), _gke("b", **done)) == [], "every node migrated"


def _aks(name: str) -> dict[str, Any]:
    n = gpu_node(name, **{"kubernetes.azure.com/agentpool": "gpu"})
    del n["metadata"]["labels"]["cloud.google.com/gke-nodepool"]
    return n


def test_aks_is_told_that_nodepool_update_labels_replaces_the_pools_labels() -> None:
    """ "Updating labels will overwrite the old labels" (learn.microsoft.com/azure/aks/use-labels, "Updating labels
    on existing node pools"): `az aks nodepool update --labels` with the switches alone drops the pool's own labels,
    which its workloads may select. The remediation says to pass them too."""
    [f] = _found(_aks("a"), _aks("b"))
    assert "AKS node pool" in f.message
    assert "az aks nodepool update" in f.remediation and "overwrite" in f.remediation
    [gke] = _found(_gke("a"), _gke("b"))
    assert "az aks" not in gke.remediation
