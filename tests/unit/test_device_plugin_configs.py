"""Hostile inputs from device-plugin configurations as k8s-device-plugin v0.18.0 implements them.

Each test names the upstream file whose behaviour it pins; the node shapes are what the device plugin and GPU
Feature Discovery (GFD) write for that configuration.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.dra.deviceclasses import generate, mig_profile_of
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, node, obj, pod, pod_spec

POOL = "eks.amazonaws.com/nodegroup"


def make(*objects: dict[str, Any]) -> ClusterState:
    b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
    b.add_all(objects)
    return b.state


def config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    cm = obj("v1", "ConfigMap", name, namespace=namespace)
    cm.pop("spec")
    cm["data"] = data
    return cm


def gpu_pods(resource: str, n: int, node_name: str) -> list[dict[str, Any]]:
    return [pod(f"p{i}", pod_spec(container(requests={resource: "1"})), node=node_name) for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------
# A time-sliced MIG profile under renameByDefault: `nvidia.com/mig-<profile>.shared`


MIXED_RENAMED = """\
version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/mig-1g.10gb
      replicas: 2
"""


def _mixed_renamed_node() -> dict[str, Any]:
    # GFD labels the profile under its own name (internal/lm/resource.go: resourceName is the unrenamed one; no
    # -SHARED suffix on a renamed resource), the device plugin advertises <name>.shared (api/config/v1
    # replicas.go DefaultSharedRename) with 7 x 8 instances x 2 replicas.
    labels = {
        POOL: "mig",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.count": "56",
        "nvidia.com/mig-1g.10gb.replicas": "2",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "time-slicing",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
    }
    return node("g1", labels, {"nvidia.com/mig-1g.10gb.shared": "112"})


def test_a_shared_mig_name_is_no_mig_profile() -> None:
    assert mig_profile_of("nvidia.com/mig-1g.10gb.shared") is None
    assert mig_profile_of("nvidia.com/mig-1g.23gb.me.shared") is None
    assert mig_profile_of("nvidia.com/mig-1g.23gb.me.all") == "1g.23gb+me.all"


def test_a_renamed_time_sliced_mig_profile_gets_no_device_class_for_a_profile_that_does_not_exist() -> None:
    st = make(
        _mixed_renamed_node(),
        config_map("dp", "nvidia-device-plugin", {"default": MIXED_RENAMED}),
        *gpu_pods("nvidia.com/mig-1g.10gb.shared", 70, "g1"),
    )
    gen = generate(st, build_inventory(st))
    assert [p.extended_resource_name for p in gen.proposals] == []
    assert [(n.extended_resource_name, "time-slicing/MPS shared name" in n.reason) for n in gen.not_generated] == [
        ("nvidia.com/mig-1g.10gb.shared", True)
    ]
    report = assess(st)
    assert "unmapped-gpu-resource" in {f.id for f in report.findings}
    (cap,) = [c for c in report.capacity if c.resource == "nvidia.com/mig-1g.10gb.shared"]
    assert (cap.before, cap.after, cap.replicas) == (112, None, 2)
