"""Each readiness rule on a state that triggers it and one that must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from migrate.checks.context import parse_feature_gates
from migrate.checks.model import Finding
from migrate.checks.run import assess
from migrate.cluster.snapshot import load_snapshot
from migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from migrate.errors import InputError
from tests.unit.helpers import container, node, obj, pod, pod_spec, template

ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
POOL = "cloud.google.com/gke-nodepool"


def fixture(name: str) -> ClusterState:
    return load_snapshot(ROOT / "fixtures" / "clusters" / f"{name}.yaml")


def make(
    *objects: dict[str, Any], version: str | None = "v1.37.2", served: tuple[str, ...] | None = None
) -> ClusterState:
    b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version=version, served_apis=served))
    b.add_all(objects)
    return b.state


def gpu_node(name: str, pool: str = "p", n: int = 8, **labels: str) -> dict[str, Any]:
    return node(
        name,
        {
            POOL: pool,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.count": str(n),
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            **labels,
        },
        {GPU: str(n)},
    )


def findings(state: ClusterState, rule_id: str, **kw: Any) -> list[Finding]:
    return [f for f in assess(state, **kw).findings if f.id == rule_id]


def severities(state: ClusterState, rule_id: str, **kw: Any) -> list[str]:
    return [f.severity.value for f in findings(state, rule_id, **kw)]


def cluster_policy(**spec: Any) -> dict[str, Any]:
    return obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", spec, namespace=None)


def slice_for(node_name: str, devices: int) -> dict[str, Any]:
    s = obj(
        "resource.k8s.io/v1",
        "ResourceSlice",
        f"{node_name}-gpu.nvidia.com-x",
        namespace=None,
        spec={
            "driver": "gpu.nvidia.com",
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"type": {"string": "gpu"}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for i in range(devices)
            ],
        },
    )
    return s


def device_class(name: str, ern: str | None, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}
    if ern:
        spec["extendedResourceName"] = ern
    return obj("resource.k8s.io/v1", "DeviceClass", name, spec, namespace=None, creationTimestamp=created)


def test_k8s_version_unsupported() -> None:
    assert severities(make(gpu_node("a"), version="v1.33.5"), "k8s-version-unsupported") == ["blocker"]
    assert severities(make(gpu_node("a"), version="v1.34.1"), "k8s-version-unsupported") == ["blocker"]
    assert severities(make(gpu_node("a"), version=None), "k8s-version-unsupported") == ["blocker"]
    assert severities(make(gpu_node("a"), served=("v1", "apps/v1")), "k8s-version-unsupported") == ["blocker"]
    assert severities(make(gpu_node("a"), version="v1.34.2"), "k8s-version-unsupported") == []
    assert (
        severities(
            make(gpu_node("a"), version="v1.37.2-gke.1200", served=("resource.k8s.io/v1",)), "k8s-version-unsupported"
        )
        == []
    )


@pytest.mark.parametrize(
    ("version", "gates", "blocked"),
    [
        ("v1.34.2", {}, True),
        ("v1.35.4", {}, True),
        ("v1.35.4", {"DRAExtendedResource": True}, False),
        ("v1.36.1", {}, False),
        ("v1.36.1", {"DRAExtendedResource": False}, True),
        ("v1.37.2", {"DRAExtendedResource": False}, False),  # GA, locked on
    ],
)
def test_extended_resource_unavailable(version: str, gates: dict[str, bool], blocked: bool) -> None:
    got = severities(make(gpu_node("a"), version=version), "extended-resource-unavailable", feature_gates=gates)
    assert got == (["blocker"] if blocked else [])


def test_feature_gate_parsing() -> None:
    assert parse_feature_gates(("DRAExtendedResource=true,Other=false",)) == {
        "DRAExtendedResource": True,
        "Other": False,
    }
    with pytest.raises(InputError):
        parse_feature_gates(("DRAExtendedResource",))


def test_driver_version_too_old() -> None:
    old = make(
        gpu_node("a", **{"nvidia.com/cuda.driver-version.full": "550.54.15"}),
        cluster_policy(driver={"version": "570.133.20"}),
    )
    f = findings(old, "driver-version-too-old")
    assert [x.severity.value for x in f] == ["blocker"]
    assert f[0].objects == ("ClusterPolicy cluster-policy", "Node a")
    assert (
        findings(make(gpu_node("a"), cluster_policy(driver={"version": "580.95.05"})), "driver-version-too-old") == []
    )


def test_cdi_disabled() -> None:
    assert severities(make(gpu_node("a"), cluster_policy(cdi={"enabled": False})), "cdi-disabled") == ["blocker"]
    assert severities(make(gpu_node("a"), cluster_policy(cdi={"enabled": True})), "cdi-disabled") == []
    assert severities(make(gpu_node("a"), cluster_policy()), "cdi-disabled") == []  # default is on


def test_dra_driver_missing() -> None:
    assert severities(fixture("demo"), "dra-driver-missing") == ["blocker"]
    assert severities(fixture("half-migrated"), "dra-driver-missing") == []


def test_dual_advertising() -> None:
    f = findings(make(gpu_node("a", n=4), slice_for("a", 4), gpu_node("b")), "dual-advertising")
    assert [(x.severity.value, x.objects) for x in f] == [("blocker", ("Node a",))]
    assert findings(fixture("half-migrated"), "dual-advertising") == []


def test_duplicate_extended_resource_name() -> None:
    two = make(gpu_node("a"), device_class("gpu.nvidia.com", GPU), device_class("mine", GPU, "2026-02-01T00:00:00Z"))
    assert severities(two, "duplicate-extended-resource-name") == ["warning"]
    assert severities(fixture("half-migrated"), "duplicate-extended-resource-name") == []


def test_shared_gpu_capacity_loss_blocks_when_consumers_no_longer_fit() -> None:
    # demo's A100 pool: 2 nodes x 8 GPUs shared 4 ways (64 allocatable) hold 17 one-GPU requests;
    # under DRA 16 whole GPUs serve them.
    f = findings(fixture("demo"), "shared-gpu-capacity-loss")
    assert [(x.severity.value, x.objects) for x in f] == [("blocker", ("Pool a100-shared-pool",))]


def test_shared_gpu_capacity_loss_warns_when_they_still_fit() -> None:
    labels = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    spec = pod_spec(container(requests={GPU: 1}), nodeSelector={POOL: "p"})
    dep = obj("apps/v1", "Deployment", "d", {"replicas": 2, "template": template(spec)})
    pods = [pod(f"d-{i}", spec, owner=dep, node="a") for i in range(2)]
    shared = node("a", {POOL: "p", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2", **labels}, {GPU: "8"})
    assert severities(make(shared, dep, *pods), "shared-gpu-capacity-loss") == ["warning"]
    assert severities(make(gpu_node("a"), dep, *pods), "shared-gpu-capacity-loss") == []


def test_unmapped_gpu_resource() -> None:
    f = findings(fixture("mig-timeslice"), "unmapped-gpu-resource")
    assert len(f) == 1 and "nvidia.com/gpu.shared" in f[0].message
    assert f[0].objects == ("Deployment ml/tts-api", "Service ml/sd-turbo")
    assert findings(fixture("demo"), "unmapped-gpu-resource") == []


def test_clusterpolicy_gpucluster_conflict() -> None:
    gc = obj("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", {}, namespace=None)
    assert severities(make(gpu_node("a"), cluster_policy(), gc), "clusterpolicy-gpucluster-conflict") == ["blocker"]
    assert severities(make(gpu_node("a"), gc), "clusterpolicy-gpucluster-conflict") == []


def test_operator_no_in_place_migration() -> None:
    assert severities(fixture("demo"), "operator-no-in-place-migration") == ["warning"]
    assert severities(fixture("h100-homogeneous"), "operator-no-in-place-migration") == []


def test_pdb_blocks_drain() -> None:
    spec = pod_spec(container(requests={GPU: 1}))
    p = pod("p", spec)
    p["metadata"]["labels"] = {"app": "llm"}
    pdb = obj(
        "policy/v1", "PodDisruptionBudget", "llm", {"selector": {"matchLabels": {"app": "llm"}}, "minAvailable": 1}
    )
    pdb["status"] = {"disruptionsAllowed": 0}
    f = findings(make(gpu_node("gpu-1"), p, pdb), "pdb-blocks-drain")
    assert [(x.severity.value, x.objects) for x in f] == [("warning", ("PodDisruptionBudget ml/llm", "Pod ml/p"))]
    pdb["status"] = {"disruptionsAllowed": 1}
    assert findings(make(gpu_node("gpu-1"), p, pdb), "pdb-blocks-drain") == []
    other = obj(
        "policy/v1", "PodDisruptionBudget", "x", {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0}
    )
    assert findings(make(gpu_node("gpu-1"), p, other), "pdb-blocks-drain") == []


def test_gang_workload_split() -> None:
    spec = pod_spec(container(requests={GPU: 8}))
    pj = obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        "llama",
        {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": template(spec)}}},
    )
    split = [pod("w-0", spec, owner=pj, node="a"), pod("w-1", spec, owner=pj, node="b")]
    assert severities(make(gpu_node("a", pool="p1"), gpu_node("b", pool="p2"), pj, *split), "gang-workload-split") == [
        "info"
    ]
    together = [pod("w-0", spec, owner=pj, node="a"), pod("w-1", spec, owner=pj, node="b")]
    assert severities(make(gpu_node("a"), gpu_node("b"), pj, *together), "gang-workload-split") == []


def test_every_rule_has_a_test_and_a_readme_entry() -> None:
    from migrate.checks.registry import RULES

    assess(make())  # the registry imports its rule modules on the first run

    # Rules of every module count, their tests in any unit-test file.
    here = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    readme = (ROOT / "README.md").read_text()
    for rule_id in RULES:
        assert f'"{rule_id}"' in here, f"no test for {rule_id}"
        assert f"`{rule_id}`" in readme, f"README does not document {rule_id}"


def test_fractional_gpu_requests_are_flagged_once_per_workload() -> None:
    # HAMi: a vGPU with 30% of the cores and 3000 MiB (fixtures/manifests/refused/hami-pod.yaml).
    hami = pod_spec(container(limits={GPU: 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 3000}))
    dep = obj("apps/v1", "Deployment", "nb", {"replicas": 2, "template": template(hami)})
    rs = obj("apps/v1", "ReplicaSet", "nb-1", {"replicas": 2, "template": template(hami)}, owner=dep)
    bare = pod("vgpu", hami)
    (f,) = findings(make(gpu_node("a"), dep, rs, pod("nb-1-x", hami, owner=rs), bare), "fractional-gpu-request")
    assert f.severity.value == "warning"
    assert f.objects == ("Deployment ml/nb", "Pod ml/vgpu")
    assert "nvidia.com/gpucores" in f.message
    whole = pod_spec(container(limits={GPU: 1}))
    assert severities(make(gpu_node("a"), pod("p", whole)), "fractional-gpu-request") == []
