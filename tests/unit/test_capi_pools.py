"""Pools of a fleet Cluster API provisions: its nodes name their MachineSet in annotations, not labels.

Found reading how pools are read: only labels were (cloud node-pool labels, then the instance type). A fleet on
its own metal provisioned by Cluster API (Metal3, Rancher's RKE2 provisioning) carries no cloud pool label and
often no instance type, so every GPU node, A100 and H100 alike, fell into one `(unpooled)` pool, one stage.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.inventory.fleet import UNPOOLED, pool_of
from dra_migrate.sim.kwok import node_manifest
from dra_migrate.sim.spec import GpuNodeSpec
from tests.unit.test_checks import gpu_node, make

KIND, NAME = "cluster.x-k8s.io/owner-kind", "cluster.x-k8s.io/owner-name"


def _capi(name: str, machine_set: str, kind: str = "MachineSet", **labels: str) -> dict[str, Any]:
    n = gpu_node(name, **labels)
    n["metadata"]["labels"].pop("cloud.google.com/gke-nodepool", None)
    n["metadata"]["annotations"] = {KIND: kind, NAME: machine_set, "cluster.x-k8s.io/machine": f"{name}-m"}
    return n


def test_a_cluster_api_fleet_is_pooled_by_machine_set_and_machine_pool() -> None:
    state = make(
        _capi("a100-1", "gpu-a100-7f9c4"), _capi("a100-2", "gpu-a100-7f9c4"),
        _capi("h100-1", "gpu-h100-pool", kind="MachinePool"),
    )  # fmt: skip
    pools = {p.name: p.nodes for p in assess(state).inventory.pools}
    assert pools == {"gpu-a100-7f9c4": ["a100-1", "a100-2"], "gpu-h100-pool": ["h100-1"]}
    groups = {p.name: (p.platform.provisioner, p.platform.group) for p in assess(state).inventory.pools if p.platform}
    assert groups == {"gpu-a100-7f9c4": ("capi-machineset", "gpu-a100-7f9c4"),
                      "gpu-h100-pool": ("capi-machineset", "gpu-h100-pool")}  # fmt: skip


def test_what_names_the_pool_first() -> None:
    capi = {KIND: "MachineSet", NAME: "ms-1"}
    typed = {"node.kubernetes.io/instance-type": "bm.gpu.h100"}
    assert pool_of({"cloud.google.com/gke-nodepool": "gke-a"}, (), capi) == "gke-a"  # a platform's pool label
    assert pool_of({"team": "llm", **typed}, ("team",), capi) == "llm"  # the operator's --pool-label
    assert pool_of(typed, ("node.kubernetes.io/instance-type",), capi) == "bm.gpu.h100"  # even that one
    assert pool_of(typed, (), capi) == "ms-1"  # before the instance type
    assert pool_of(typed, (), {KIND: "KubeadmControlPlane", NAME: "cp"}) == "bm.gpu.h100"  # not a worker group
    assert pool_of({}, (), {KIND: "MachineSet", NAME: ""}) == UNPOOLED


def test_the_twin_keeps_the_annotations_that_name_the_pool() -> None:
    """A rehearsal reads the twin's pools as the plan's: its KWOK nodes carry the group annotations."""
    node = _capi("a100-1", "gpu-a100-7f9c4")
    node["metadata"]["annotations"]["unrelated.example/x"] = "y"
    spec = GpuNodeSpec.from_node(node)
    assert spec.group_annotations == {KIND: "MachineSet", NAME: "gpu-a100-7f9c4"}
    annotations = node_manifest(spec, 0, "fleet")["metadata"]["annotations"]
    assert annotations[NAME] == "gpu-a100-7f9c4" and "unrelated.example/x" not in annotations
