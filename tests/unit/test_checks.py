"""Each readiness rule on a state that triggers it and one that must not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.context import parse_feature_gates
from dra_migrate.checks.model import Finding, ObjectRef
from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.errors import InputError
from tests.unit.helpers import container, node, obj, pod, pod_spec, template

ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
POOL = "cloud.google.com/gke-nodepool"


def _text(objects: tuple[ObjectRef, ...]) -> tuple[str, ...]:
    return tuple(map(str, objects))


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
    assert _text(f[0].objects) == ("ClusterPolicy cluster-policy", "Node a")
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
    # The DRA chart's default placement: slices beside device-plugin allocatable, no claim yet -> a warning
    # that names the danger; once a claim holds one of those devices -> a blocker.
    f = findings(make(gpu_node("a", n=4), slice_for("a", 4), gpu_node("b")), "dual-advertising")
    assert [(x.severity.value, _text(x.objects)) for x in f] == [("warning", ("Node a",))]
    assert "allocatable twice" in f[0].message and "ResourceClaims" in f[0].message
    claim = obj("resource.k8s.io/v1", "ResourceClaim", "c", {})
    claim["status"] = {
        "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "a", "device": "gpu-0"}]}}
    }
    f = findings(make(gpu_node("a", n=4), slice_for("a", 4), gpu_node("b"), claim), "dual-advertising")
    assert [(x.severity.value, _text(x.objects)) for x in f] == [("blocker", ("Node a",))]
    assert findings(fixture("half-migrated"), "dual-advertising") == []
    assert severities(fixture("upstream-stack"), "dual-advertising") == ["warning"]
    assert findings(fixture("upstream-ready"), "dual-advertising") == []


def _kubelet(n: dict[str, Any], version: str) -> dict[str, Any]:
    n.setdefault("status", {})["nodeInfo"] = {"kubeletVersion": version}
    return n


@pytest.mark.parametrize(
    ("kubelet", "gates", "blocked"),
    [
        ("v1.33.9", {"DRAExtendedResource": True}, True),  # no DRA at all
        ("v1.34.2", {}, True),
        ("v1.35.4-eks-1a2b3c", {}, True),
        ("v1.35.4", {"DRAExtendedResource": True}, False),  # declared on
        ("v1.36.0", {}, False),
        ("v1.36.0", {"DRAExtendedResource": False}, True),
        ("v1.37.2", {"DRAExtendedResource": False}, False),  # GA, locked on
        ("", {}, False),  # unknown: not judged
    ],
)
def test_kubelet_version_unsupported(kubelet: str, gates: dict[str, bool], blocked: bool) -> None:
    state = make(_kubelet(gpu_node("a"), kubelet), _kubelet(gpu_node("b"), "v1.37.2"))
    f = findings(state, "kubelet-version-unsupported", feature_gates=gates)
    assert [(x.severity.value, _text(x.objects)) for x in f] == ([("blocker", ("Node a",))] if blocked else [])


def test_kubelet_skew_counts_nothing_after_and_on_fixtures() -> None:
    r = assess(fixture("upstream-stack"))
    old = [c for c in r.capacity if c.pool == "h100old"]
    assert [(c.before, c.after, c.fits, c.after_source) for c in old] == [(16, 0, False, "excluded")]
    assert [_text(f.objects) for f in r.findings if f.id == "kubelet-version-unsupported"] == [
        ("Node aks-h100old-81477113-vmss000000", "Node aks-h100old-81477113-vmss000001")
    ]
    assert severities(fixture("upstream-ready"), "kubelet-version-unsupported") == []
    declared = assess(fixture("upstream-stack"), feature_gates={"DRAExtendedResource": True})
    assert [c.after for c in declared.capacity if c.pool == "h100old"] == [16]


def _ds(name: str, ns: str = "nvidia-dra-driver-gpu", **spec: Any) -> dict[str, Any]:
    tmpl = {"spec": {"containers": [{"name": "c", "image": "x"}], **spec}}
    return obj("apps/v1", "DaemonSet", name, {"template": tmpl}, namespace=ns)


DRA_DS = "dra-driver-nvidia-gpu-kubelet-plugin"
GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def _affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }


def test_dra_plugin_placement_unknown() -> None:
    # Affinity only on labels NFD/GFD own: no label an operator sets can switch it on a node that lacks them.
    managed = _ds(DRA_DS, affinity=_affinity([{"key": "feature.node.kubernetes.io/pci-10de.present",
                                              "operator": "In", "values": ["true"]}]))  # fmt: skip
    f = findings(make(gpu_node("a"), managed), "dra-plugin-placement-unknown")
    assert [(x.severity.value, _text(x.objects)) for x in f] == [("blocker", ("Node a",))]
    # matchFields and Gt cannot be satisfied by a label either.
    gt = _ds(DRA_DS, affinity=_affinity([{"key": "gpu-gen", "operator": "Gt", "values": ["3"]}]))
    assert severities(make(gpu_node("a"), gt), "dra-plugin-placement-unknown") == ["blocker"]
    # A taint the DaemonSet does not tolerate: no label helps.
    tainted = gpu_node("a", **{"nvidia.com/dra-kubelet-plugin": "false"})
    tainted["spec"]["taints"] = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    sel = _ds(DRA_DS, nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})
    assert severities(make(tainted, sel), "dra-plugin-placement-unknown") == ["blocker"]
    # Must not: a nodeSelector label, an Exists term, an ORed term that a label satisfies, the chart default.
    assert findings(make(gpu_node("a"), sel), "dra-plugin-placement-unknown") == []
    ored = _ds(DRA_DS, affinity=_affinity(
        [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}],
        [{"key": "example.com/dra", "operator": "Exists"}]))  # fmt: skip
    assert findings(make(gpu_node("a"), ored), "dra-plugin-placement-unknown") == []
    assert findings(fixture("upstream-stack"), "dra-plugin-placement-unknown") == []


def test_device_plugin_placement_unknown() -> None:
    standalone = _ds("nvidia-device-plugin-daemonset", ns="kube-system")
    f = findings(make(gpu_node("a"), standalone), "device-plugin-placement-unknown")
    assert [(x.severity.value, _text(x.objects)) for x in f] == [("blocker", ("Node a",))]
    assert severities(fixture("h100-homogeneous"), "device-plugin-placement-unknown") == ["blocker"]
    notin = _ds("nvidia-device-plugin-daemonset", ns="kube-system", affinity=_affinity(
        [{"key": "nvidia.com/gpu.deploy.device-plugin", "operator": "NotIn", "values": ["false"]}]))  # fmt: skip
    assert findings(make(gpu_node("a"), notin), "device-plugin-placement-unknown") == []
    assert findings(fixture("demo"), "device-plugin-placement-unknown") == []


# The standalone k8s-device-plugin Helm chart v0.18.0 (deployments/helm/nvidia-device-plugin/values.yaml): its
# DaemonSet's default affinity ORs three terms on labels NFD and the GPU Operator own, and its tolerations.
CHART_TERMS = [
    [{"key": "feature.node.kubernetes.io/pci-10de.present", "operator": "In", "values": ["true"]}],
    [{"key": "feature.node.kubernetes.io/cpu-model.vendor_id", "operator": "In", "values": ["NVIDIA"]}],
    [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}],
]
CHART_TOLERATIONS = [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *GPU_TOL]
SWITCH = {"key": "nvidia.com/gpu.deploy.device-plugin", "operator": "NotIn", "values": ["false"]}


def test_the_standalone_chart_device_plugin_cannot_be_switched_off_until_every_term_has_the_switch() -> None:
    from dra_migrate.inventory.model import build_inventory

    nfd = gpu_node("a", **{"feature.node.kubernetes.io/pci-10de.present": "true"})

    def chart(*terms: list[dict[str, Any]]) -> dict[str, Any]:
        return _ds("nvdp-nvidia-device-plugin", ns="nvidia-device-plugin", tolerations=CHART_TOLERATIONS,
                   affinity=_affinity(*terms))  # fmt: skip

    # As the chart installs it: every label it selects on is NFD's or GFD's, so no label stops it.
    (f,) = findings(make(nfd, chart(*CHART_TERMS)), "device-plugin-placement-unknown")
    assert (f.severity.value, _text(f.objects)) == ("blocker", ("Node a",))
    assert "(feature.node.kubernetes.io/pci-10de.present In [true]) OR (" in f.message, f.message
    assert "every nodeSelectorTerm" in f.remediation and "NotIn" in f.remediation, f.remediation
    # The switch in one term only: the node still matches another term (pci-10de), so still a blocker.
    half = chart(CHART_TERMS[0], CHART_TERMS[1], [*CHART_TERMS[2], SWITCH])
    assert severities(make(nfd, half), "device-plugin-placement-unknown") == ["blocker"]
    # The remediation applied (the chart's `affinity` value with the switch in every term): the plan flips it.
    fixed = chart(*[[*t, SWITCH] for t in CHART_TERMS])
    assert findings(make(nfd, fixed), "device-plugin-placement-unknown") == []
    p = build_inventory(make(nfd, fixed)).nodes[0].dp_placement
    assert p is not None and (p.mode, p.label, p.value) == ("label", "nvidia.com/gpu.deploy.device-plugin", "false")


def test_placement_decides_what_each_switch_is() -> None:
    from dra_migrate.inventory.model import build_inventory

    chart_default = _ds(DRA_DS, tolerations=GPU_TOL, affinity=_affinity(
        [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]))  # fmt: skip
    operator = _ds("nvidia-dra-driver-kubelet-plugin", ns="gpu-operator",
                   nodeSelector={"nvidia.com/gpu.deploy.dra-driver": "true"})  # fmt: skip
    dp = _ds("nvidia-device-plugin-daemonset", ns="gpu-operator",
             nodeSelector={"nvidia.com/gpu.deploy.device-plugin": "true"})  # fmt: skip
    on = gpu_node("a", **{"nvidia.com/gpu.deploy.device-plugin": "true"})
    inv = build_inventory(make(on, chart_default, dp))
    n = inv.nodes[0]
    assert (n.dra_placement.mode, n.dp_placement.mode) == ("runs", "label")  # type: ignore[union-attr]
    assert (n.dp_placement.label, n.dp_placement.value) == ("nvidia.com/gpu.deploy.device-plugin", "false")  # type: ignore[union-attr]
    n = build_inventory(make(on, operator, dp)).nodes[0]
    assert (n.dra_placement.mode, n.dra_placement.label, n.dra_placement.value) == (  # type: ignore[union-attr]
        "label", "nvidia.com/gpu.deploy.dra-driver", "true")  # fmt: skip
    off = gpu_node("a", **{"nvidia.com/gpu.deploy.device-plugin": "false"})
    off["status"]["allocatable"][GPU] = "0"  # the device plugin left: allocatable 0 (capacity kept)
    n = build_inventory(make(off, chart_default, dp)).nodes[0]
    assert n.dp_placement.mode == "off" and not n.device_plugin_enabled and n.dra_plugin_enabled  # type: ignore[union-attr]


def test_pdb_null_selector_selects_nothing_empty_selects_all() -> None:
    from dra_migrate.inventory.placement import label_selector_matches, pdb_selects

    p = pod("p", pod_spec(container(requests={GPU: 1})))
    p["metadata"]["labels"] = {"app": "llm"}
    null = obj("policy/v1", "PodDisruptionBudget", "null", {"maxUnavailable": 0})
    null["status"] = {"disruptionsAllowed": 0}
    assert findings(make(gpu_node("gpu-1"), p, null), "pdb-blocks-drain") == []
    assert not pdb_selects(null, p)
    empty = obj("policy/v1", "PodDisruptionBudget", "all", {"selector": {}, "maxUnavailable": 0})
    empty["status"] = {"disruptionsAllowed": 0}
    assert severities(make(gpu_node("gpu-1"), p, empty), "pdb-blocks-drain") == ["warning"]
    other_ns = obj("policy/v1", "PodDisruptionBudget", "x", {"selector": {}}, namespace="web")
    assert not pdb_selects(other_ns, p)
    assert label_selector_matches({"matchExpressions": [{"key": "app", "operator": "In", "values": ["llm"]}]},
                                  {"app": "llm"})  # fmt: skip
    assert not label_selector_matches({"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]},
                                      {"x": "5"})  # fmt: skip
    assert findings(fixture("upstream-stack"), "pdb-blocks-drain") == []


def test_operator_validator_device_plugin() -> None:
    assert severities(make(gpu_node("a"), cluster_policy()), "operator-validator-device-plugin") == ["warning"]
    off = cluster_policy(devicePlugin={"enabled": False})
    assert severities(make(gpu_node("a"), off), "operator-validator-device-plugin") == []
    assert severities(fixture("h100-homogeneous"), "operator-validator-device-plugin") == []  # no operator
    assert severities(fixture("upstream-stack"), "operator-validator-device-plugin") == ["warning"]


def test_driver_manager_eviction_label() -> None:
    sel = _ds(DRA_DS, nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})
    env = [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "nvidia.com/dra-kubelet-plugin"}]
    unset = make(gpu_node("a"), sel, cluster_policy())
    assert severities(unset, "driver-manager-eviction-label") == ["warning"]
    wrong = make(gpu_node("a"), sel, cluster_policy(driver={"manager": {"env": [{**env[0], "value": "x"}]}}))
    assert "is 'x'" in findings(wrong, "driver-manager-eviction-label")[0].message
    ok = make(gpu_node("a"), sel, cluster_policy(driver={"manager": {"env": env}}))
    assert findings(ok, "driver-manager-eviction-label") == []
    no_driver = make(gpu_node("a"), sel, cluster_policy(driver={"enabled": False}))
    assert findings(no_driver, "driver-manager-eviction-label") == []
    # The chart's default placement has no label to evict by.
    assert "node affinity" in findings(fixture("upstream-stack"), "driver-manager-eviction-label")[0].message
    assert findings(fixture("upstream-ready"), "driver-manager-eviction-label") == []
    assert findings(fixture("half-migrated"), "driver-manager-eviction-label") == []


def test_dynamic_mig_unpredicted() -> None:
    gated = _ds(DRA_DS, nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})
    gated["spec"]["template"]["spec"]["containers"][0]["args"] = ["--feature-gates=DynamicMIG=true"]
    f = findings(make(gpu_node("a"), gated), "dynamic-mig-unpredicted")
    assert [(x.severity.value, _text(x.objects)) for x in f] == [("blocker", ("Node a",))]
    plain = _ds(DRA_DS, nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})
    assert findings(make(gpu_node("a"), plain), "dynamic-mig-unpredicted") == []
    # Published slices give the count: nothing to predict.
    running = gpu_node("a", **{"nvidia.com/dra-kubelet-plugin": "true"})
    counters = slice_for("a", 2)
    counters["spec"]["sharedCounters"] = [{"name": "gpu-0-counter-set", "counters": {"memory": {"value": "80Gi"}}}]
    assert findings(make(running, gated, counters), "dynamic-mig-unpredicted") == []
    # Counters in the slices mark DynamicMIG even when the DaemonSet was not read.
    from dra_migrate.inventory.model import build_inventory

    assert build_inventory(make(running, counters)).nodes[0].dynamic_mig


def test_dra_driver_parameter_is_used_by_the_checks() -> None:
    amd = slice_for("a", 4)
    amd["spec"]["driver"] = "gpu.amd.com"
    state = make(gpu_node("a", n=4), amd)
    assert severities(state, "dual-advertising") == []  # not the NVIDIA driver's slices
    assert severities(state, "dual-advertising", dra_driver="gpu.amd.com") == ["warning"]
    assert severities(state, "dra-driver-missing", dra_driver="gpu.amd.com") == []


def test_duplicate_extended_resource_name() -> None:
    two = make(gpu_node("a"), device_class("gpu.nvidia.com", GPU), device_class("mine", GPU, "2026-02-01T00:00:00Z"))
    assert severities(two, "duplicate-extended-resource-name") == ["warning"]
    assert severities(fixture("half-migrated"), "duplicate-extended-resource-name") == []


def test_shared_gpu_capacity_loss_blocks_when_consumers_no_longer_fit() -> None:
    # demo's A100 pool: 2 nodes x 8 GPUs shared 4 ways (64 allocatable) hold 17 one-GPU requests;
    # under DRA 16 whole GPUs serve them.
    f = findings(fixture("demo"), "shared-gpu-capacity-loss")
    assert [(x.severity.value, _text(x.objects)) for x in f] == [("blocker", ("Pool a100-shared-pool",))]


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
    assert _text(f[0].objects) == ("Deployment ml/tts-api", "Service ml/sd-turbo")
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
    assert [(x.severity.value, _text(x.objects)) for x in f] == [
        ("warning", ("PodDisruptionBudget ml/llm", "Pod ml/p"))
    ]
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


def test_gang_workload_split_across_many_pools_names_a_few() -> None:
    """Across 40 pools the finding names eight and counts the rest, in the message and the fix (a message
    listing every pool of a large fleet was unreadable, and written by PyYAML: issue 29); across two it
    gives the whole `--order`."""
    spec = pod_spec(container(requests={GPU: 8}))
    workers = {"Worker": {"replicas": 40, "template": template(spec)}}
    pj = obj("kubeflow.org/v1", "PyTorchJob", "wide", {"pytorchReplicaSpecs": workers})
    nodes = [gpu_node(f"n{i:02d}", pool=f"p{i:02d}") for i in range(40)]
    pods = [pod(f"w-{i}", spec, owner=pj, node=f"n{i:02d}") for i in range(40)]
    [f] = [f for f in assess(make(*nodes, pj, *pods)).findings if f.id == "gang-workload-split"]
    assert "p00, p01, p02, p03, p04, p05, p06, p07 and 32 more" in f.message and "p08" not in f.message
    assert "plan --order <its 40 pools: inventory -o json>" in f.remediation and "p39" not in f.remediation
    two = [f for f in assess(make(*nodes[:2], pj, *pods[:2])).findings if f.id == "gang-workload-split"]
    assert "runs across pools p00, p01," in two[0].message and "plan --order p00,p01)" in two[0].remediation


def test_every_rule_has_a_test_and_a_documented_reason() -> None:
    from dra_migrate.checks.registry import RULES

    assess(make())  # the catalog imports its rule modules on the first run

    # Rules of every module count, their tests in any unit-test file.
    here = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    # docs/rules.md is generated from each rule's docstring (tools/docs/generate): when it fires, what it rests on.
    # A rule whose docstring does not say so must be documented by hand in a docs/ page of its topic.
    by_hand = "".join(p.read_text() for p in (ROOT / "docs").rglob("*.md") if p.name != "rules.md")
    for rule_id, r in RULES.items():
        assert f'"{rule_id}"' in here, f"no test for {rule_id}"
        doc = " ".join((r.fn.__doc__ or "").split())
        documented = ("When:" in doc and "Rests on:" in doc) or f"`{rule_id}`" in by_hand
        assert documented, f"{rule_id}: say in its docstring when it fires (When:) and what it rests on (Rests on:)"


def test_fractional_gpu_requests_are_flagged_once_per_workload() -> None:
    # HAMi: a vGPU with 30% of the cores and 3000 MiB (fixtures/manifests/refused/hami-pod.yaml).
    hami = pod_spec(container(limits={GPU: 1, "nvidia.com/gpucores": 30, "nvidia.com/gpumem": 3000}))
    dep = obj("apps/v1", "Deployment", "nb", {"replicas": 2, "template": template(hami)})
    rs = obj("apps/v1", "ReplicaSet", "nb-1", {"replicas": 2, "template": template(hami)}, owner=dep)
    bare = pod("vgpu", hami)
    (f,) = findings(make(gpu_node("a"), dep, rs, pod("nb-1-x", hami, owner=rs), bare), "fractional-gpu-request")
    assert f.severity.value == "warning"
    assert _text(f.objects) == ("Deployment ml/nb", "Pod ml/vgpu")
    assert "nvidia.com/gpucores" in f.message
    whole = pod_spec(container(limits={GPU: 1}))
    assert severities(make(gpu_node("a"), pod("p", whole)), "fractional-gpu-request") == []


def test_the_catalog_lists_every_rule_module_of_the_package() -> None:
    """A rule module the catalog does not list would register nothing: its rules would go unrun by `check`
    and `plan`, and undocumented. The list is the package's rules.py and rules_*.py, no more, no fewer."""
    import pkgutil

    import dra_migrate.checks
    from dra_migrate.checks.catalog import rule_modules

    found = {m.name for m in pkgutil.iter_modules(dra_migrate.checks.__path__)}
    listed = sorted(m.__name__.rpartition(".")[2] for m in rule_modules())
    assert listed == sorted(n for n in found if n == "rules" or n.startswith("rules_"))
