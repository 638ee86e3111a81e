"""What else depends on nvidia.com/gpu (issue 27): inventory, findings and plan steps on
fixtures/dependents/cluster.yaml, and each rule's quiet case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.model import Finding
from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dependents import (
    dcgm_exporters,
    gpu_queues,
    gpu_quota_limits,
    gpu_rule_exprs,
    kueue_install,
    workloads_by_scheduler,
)
from dra_migrate.inventory.gitops import gitops_owner
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, node, obj, pod, pod_spec, state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "cluster.yaml"
CLASS = "gpu-extended.nvidia.com"


@pytest.fixture(scope="module")
def fleet() -> ClusterState:
    return load_snapshot(FIXTURE)


@pytest.fixture(scope="module")
def found(fleet: ClusterState) -> list[Finding]:
    return assess(fleet, pool_labels=("pool",)).findings


def by_id(findings: list[Finding], rule_id: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(f.severity.value, tuple(map(str, f.objects))) for f in findings if f.id == rule_id]


# -- inventory ----------------------------------------------------------------------------------------


def test_inventory_reads_every_gpu_quota_limit(fleet: ClusterState) -> None:
    limits = {
        (q.namespace, q.quota, q.key): (q.value, q.scoped, str(q.owner) if q.owner else None)
        for q in gpu_quota_limits(fleet)
    }
    assert limits == {
        ("team-a", "gpu", "requests.nvidia.com/gpu"): ("8", False, None),
        ("team-b", "gpu", "requests.nvidia.com/gpu"): ("4", False, "argocd Application team-b-quotas"),
        ("team-c", "gpu-high", "requests.nvidia.com/gpu"): ("2", True, None),
        ("team-d", "shared", "requests.nvidia.com/gpu.shared"): ("16", False, None),
    }


def test_inventory_reads_kueue_queues_and_install(fleet: ClusterState) -> None:
    install = kueue_install(fleet)
    assert (
        install is not None
        and install.version == (0, 13, 4)
        and install.deployment == "kueue-system/kueue-controller-manager"
    )
    queues = {q.name: (q.resources, q.tas_flavors, q.local_queues) for q in gpu_queues(fleet)}
    assert queues == {
        "research": ({"nvidia.com/gpu": {"h100": "12"}}, (), ("team-a/default",)),
        "topo": ({"nvidia.com/gpu": {"h100-tas": "4"}}, ("h100-tas",), ()),
    }


def test_inventory_reads_monitoring_and_schedulers(fleet: ClusterState) -> None:
    assert [(e.source, e.dra_attribution) for e in dcgm_exporters(fleet)] == [
        ("DaemonSet monitoring/dcgm-exporter", False)
    ]
    exprs = {e.rule: (e.terms, e.per_pod_dcgm) for e in gpu_rule_exprs(fleet)}
    assert exprs == {"GpuCapacityLow": (("nvidia_com_gpu",), False), "GpuIdleByPod": ((), True)}  # NodeDown: not GPU
    by_sched = workloads_by_scheduler(build_inventory(fleet).consumers)
    assert {k: [(c.namespace, c.name) for c in v] for k, v in by_sched.items()} == {
        "kai-scheduler": [("team-b", "kai-job-0")]
    }


TEMPLATE_SCHEDULERS = ROOT / "fixtures" / "dependents" / "template-schedulers.yaml"


def test_schedulers_declared_only_in_pod_templates_are_inventoried_and_flagged() -> None:
    """A CronJob between runs, a Deployment and a StatefulSet scaled to zero and a suspended Job have no pod
    to show their schedulerName; their next pod still lands on a migrated node. Read from the pods alone,
    only `webhooked` (whose pod a webhook gave a scheduler its template does not name) was found."""
    fleet = load_snapshot(TEMPLATE_SCHEDULERS)
    inventory = build_inventory(fleet, ("pool",))
    named = {(c.namespace, c.name): sorted(c.schedulers) for c in inventory.consumers}
    assert named == {
        ("team-a", "nightly"): ["volcano"],
        ("team-b", "chat"): ["kai-scheduler"],
        ("team-b", "sweep"): ["my-batch-scheduler"],
        ("team-c", "shards"): ["my-batch-scheduler"],
        ("team-c", "explicit-default"): [],  # kube-scheduler, named
        ("team-d", "webhooked"): ["volcano"],  # from its pod
    }
    assert next(c for c in inventory.to_dict()["consumers"] if c["name"] == "nightly")["schedulerNames"] == ["volcano"]
    found = {
        f.message.split("schedulerName ")[1].split(" ")[0]: tuple(map(str, f.objects))
        for f in assess(fleet, pool_labels=("pool",)).findings
        if f.id == "scheduler-dra-support"
    }
    assert found == {
        "kai-scheduler": ("apps/Deployment team-b/chat",),
        "my-batch-scheduler": ("batch/Job team-b/sweep", "apps/StatefulSet team-c/shards"),
        "volcano": ("batch/CronJob team-a/nightly", "apps/ReplicaSet team-d/webhooked"),
    }


@pytest.mark.parametrize(
    ("meta", "owner"),
    [
        ({"annotations": {"argocd.argoproj.io/tracking-id": "app1:apps/Deployment:ns/x"}}, "argocd Application app1"),
        ({"labels": {"app.kubernetes.io/instance": "app2"}}, "argocd Application app2"),
        # Helm writes the same label: on a Helm-managed object it is Helm's release, not Argo CD's.
        ({"labels": {"app.kubernetes.io/instance": "rel", "app.kubernetes.io/managed-by": "Helm"}}, None),
        (
            {"labels": {"helm.toolkit.fluxcd.io/name": "gpu", "helm.toolkit.fluxcd.io/namespace": "flux-system"}},
            "flux HelmRelease flux-system/gpu",
        ),
        ({"labels": {"kustomize.toolkit.fluxcd.io/name": "apps"}}, "flux Kustomization apps"),
        ({"labels": {"app": "x"}, "annotations": "not a map"}, None),
    ],
)
def test_gitops_owner(meta: dict[str, Any], owner: str | None) -> None:
    found = gitops_owner({"metadata": {"name": "x", **meta}})
    assert (str(found) if found else None) == owner


# -- findings -----------------------------------------------------------------------------------------


def test_quota_findings(found: list[Finding]) -> None:
    assert sorted(by_id(found, "quota-continuity")) == [
        ("info", ("ResourceQuota team-a/gpu",)),
        ("info", ("ResourceQuota team-b/gpu",)),
        ("warning", ("ResourceQuota team-c/gpu-high",)),
        ("warning", ("ResourceQuota team-d/shared",)),
    ]
    team_a = next(f for f in found if f.id == "quota-continuity" and "team-a" in str(f.objects[0]))
    assert f"`{CLASS}.deviceclass.resource.k8s.io/devices: 8`" in team_a.message
    team_b = next(f for f in found if f.id == "quota-continuity" and "team-b" in str(f.objects[0]))
    assert "owning repository" in team_b.remediation and "team-b-quotas" in team_b.remediation


def test_kueue_findings(found: list[Finding]) -> None:
    assert sorted(by_id(found, "kueue-dra-support")) == [
        ("blocker", ("Pool train",)),  # the pool its TAS flavor pins workloads to: only that stage is blocked
        ("warning", ("kueue.x-k8s.io/ClusterQueue research",)),
    ]
    research = next(f for f in found if f.id == "kueue-dra-support" and f.severity.value == "warning")
    mapping = f"deviceClassMappings: [{{name: nvidia.com/gpu, deviceClassNames: [{CLASS}, gpu.nvidia.com]}}]"
    assert mapping in research.remediation  # and the class convert's templates claim (test_kueue_classes.py)


def test_monitoring_scheduler_and_gitops_findings(found: list[Finding]) -> None:
    assert by_id(found, "dcgm-dra-attribution") == [("warning", ("apps/DaemonSet monitoring/dcgm-exporter",))]
    assert len(by_id(found, "prometheus-rule-gpu")) == 2
    assert by_id(found, "scheduler-dra-support") == [("warning", ("Pod team-b/kai-job-0",))]
    assert sorted(by_id(found, "gitops-owned")) == [
        ("warning", ("ResourceQuota team-b/gpu",)),
        ("warning", ("apps/Deployment team-a/trainer",)),
    ]


def test_limitrange_findings(found: list[Finding]) -> None:
    assert sorted(by_id(found, "limitrange-gpu")) == [
        ("warning", ("LimitRange team-a/gpu-bounds",)),
        ("warning", ("LimitRange team-c/per-pod",)),
    ]
    adds, refuses = sorted((f for f in found if f.id == "limitrange-gpu"), key=lambda f: str(f.objects[0]))
    assert "adds `nvidia.com/gpu: 4` to every container that does not name it" in adds.message
    assert "refuses every pod whose containers do not name nvidia.com/gpu (Pod max 8" in refuses.message


def _gpu_state(*extra: dict[str, Any]) -> ClusterState:
    n = node("gpu-1", {"pool": "p", "nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "8"})
    return state(n, pod("p1", pod_spec(container(requests={"nvidia.com/gpu": "1"}))), *extra)


def _ids(s: ClusterState) -> set[str]:
    return {f.id for f in assess(s, pool_labels=("pool",)).findings}


DEPENDENT_RULES = {
    "quota-continuity",
    "kueue-dra-support",
    "scheduler-dra-support",
    "dcgm-dra-attribution",
    "prometheus-rule-gpu",
    "gitops-owned",
    "limitrange-gpu",
}


def test_quiet_without_dependents() -> None:
    cpu_quota = obj("v1", "ResourceQuota", "cpu", {"hard": {"requests.cpu": "10"}})
    cpu_bounds = obj("v1", "LimitRange", "cpu", {"limits": [{"type": "Container", "max": {"cpu": "4"}}]})
    assert not _ids(_gpu_state(cpu_quota, cpu_bounds)) & DEPENDENT_RULES


def test_kueue_with_dra_gates_gives_only_the_mapping_to_confirm() -> None:
    """With every gate on, the Configuration's deviceClassMappings are still to confirm (INFO)."""
    kueue = obj(
        "apps/v1",
        "Deployment",
        "kueue-controller-manager",
        {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "m",
                            "image": "registry.k8s.io/kueue/kueue:v0.17.0",
                            "args": ["--feature-gates=DynamicResourceAllocation=true,DRAExtendedResources=true"],
                        }
                    ]
                }
            }
        },
        namespace="kueue-system",
    )
    cq = obj(
        "kueue.x-k8s.io/v1beta1",
        "ClusterQueue",
        "q",
        {
            "resourceGroups": [
                {"flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}
            ]
        },
        namespace=None,
    )
    assert [f.severity.value for f in assess(_gpu_state(kueue, cq)).findings if f.id == "kueue-dra-support"] == ["info"]
    kueue["spec"]["template"]["spec"]["containers"][0]["args"] = ["--feature-gates=DynamicResourceAllocation=true"]
    assert [f.severity.value for f in assess(_gpu_state(kueue, cq)).findings if f.id == "kueue-dra-support"] == ["info"]


def test_dcgm_with_dra_attribution_is_info() -> None:
    ds = obj(
        "apps/v1",
        "DaemonSet",
        "dcgm",
        {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "e",
                            "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.8.4-4.6.0-ubuntu22.04",
                            "env": [{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}],
                        }
                    ]
                }
            }
        },
    )
    assert [f.severity.value for f in assess(_gpu_state(ds)).findings if f.id == "dcgm-dra-attribution"] == ["info"]


def test_malformed_dependents_are_read_as_absent() -> None:
    """These kinds are not validated on the way in: any shape must be read without an exception."""
    bad = [
        obj("v1", "ResourceQuota", "q", {"hard": ["not", "a", "map"]}),
        obj("kueue.x-k8s.io/v1beta1", "ClusterQueue", "c", {"resourceGroups": {"x": 1}}, namespace=None),
        obj(
            "kueue.x-k8s.io/v1beta1", "ClusterQueue", "d", {"resourceGroups": [{"flavors": [None, 3]}]}, namespace=None
        ),
        obj("monitoring.coreos.com/v1", "PrometheusRule", "r", {"groups": [{"rules": [{"expr": None}, 7]}]}),
        obj("apps/v1", "DaemonSet", "x", {"template": {"spec": {"containers": [{"image": 5, "env": "x"}]}}}),
        obj("v1", "LimitRange", "l", {"limits": [None, {"type": "Container", "max": ["nvidia.com/gpu"]}]}),
        obj("v1", "LimitRange", "m", {"limits": {"type": "Pod"}}),
    ]
    assert not _ids(_gpu_state(*bad)) & DEPENDENT_RULES


# -- plan steps ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planned(fleet: ClusterState) -> dict[str, Any]:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    return build_plan(fleet, PlanParams(pool_labels=("pool",))).to_dict()


def test_plan_adds_dra_quota_limits_before_any_node_moves(planned: dict[str, Any]) -> None:
    prepare = planned["stages"][0]
    assert prepare["name"] == "prepare" and all("pool" in s for s in planned["stages"][1:])
    actions = [s["action"] for s in prepare["steps"]]
    # after the DeviceClasses it counts (the class mapping must exist), before the driver check and any pool
    assert actions == ["create-deviceclass", "set-quota", "confirm-dra-driver"]
    quota = prepare["steps"][1]
    # Only team-a: team-b is Argo CD's (its repository changes it), team-c is scoped, team-d has no class.
    assert quota["id"] == "prepare/set-quota/team-a/gpu"
    assert quota["params"] == {
        "namespace": "team-a",
        "name": "gpu",
        # the extended-resource class, and the class convert's claims use (tests/unit/test_quota_classes.py)
        "set": {
            f"{CLASS}.deviceclass.resource.k8s.io/devices": "8",
            "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8",
        },
        "continues": {"requests.nvidia.com/gpu": "8"},  # what it continues: apply checks it is unchanged
    }
    assert quota["inverse"] == {
        "action": "restore-quota",
        "restore": {
            "namespace": "team-a",
            "name": "gpu",
            "hard": {
                f"{CLASS}.deviceclass.resource.k8s.io/devices": None,
                "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": None,
            },
        },
    }
    # The old limit is never removed: no step anywhere touches requests.nvidia.com/gpu.
    every = [s for st in planned["stages"] for s in st.get("steps", []) + st.get("nodeSteps", [])]
    assert not any("requests.nvidia.com/gpu" in str(s["params"].get("set", "")) for s in every)


def test_plan_with_quota_steps_validates_and_a_tampered_inverse_is_refused(planned: dict[str, Any]) -> None:
    import copy

    from dra_migrate.plan.validate import validate

    assert [p for p in validate(planned) if "set-quota" in str(p) or "quota" in str(p)] == []
    bad = copy.deepcopy(planned)
    bad["stages"][0]["steps"][1]["inverse"]["restore"]["hard"] = {}
    assert any("restore-quota" in str(p) for p in validate(bad))


def test_set_quota_runs_and_rolls_back_through_the_registry(planned: dict[str, Any]) -> None:
    from dra_migrate.execute.actions import StepContext, preflight, run_step, undo_step
    from dra_migrate.execute.contract import StepFailed
    from dra_migrate.plan.model import Step
    from dra_migrate.testing.execute import FakeClock, FakeOps

    step = Step.from_dict(planned["stages"][0]["steps"][1], "s")
    preflight([(step, None)])
    ops = FakeOps([], clock=FakeClock())
    ops.quotas[("team-a", "gpu")] = {"requests.cpu": "200", "requests.nvidia.com/gpu": "8"}
    key = f"{CLASS}.deviceclass.resource.k8s.io/devices"
    key2 = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
    ctx = StepContext(ops, step, None, 30.0)
    dry = run_step(StepContext(ops, step, None, 30.0, dry_run=True))
    assert dry is not None and key not in ops.quotas[("team-a", "gpu")]  # a dry run changes nothing
    change = run_step(ctx)
    assert change is not None and change.before == {"hard": {key: None, key2: None}}
    assert change.after == {"hard": {key: "8", key2: "8"}}
    assert ops.quotas[("team-a", "gpu")] == {"requests.cpu": "200", "requests.nvidia.com/gpu": "8", key: "8", key2: "8"}
    undo_step(ctx)
    assert ops.quotas[("team-a", "gpu")] == {"requests.cpu": "200", "requests.nvidia.com/gpu": "8"}
    # Someone raised the GPU limit since the plan: a device limit of 8 would now block; the step stops.
    ops.quotas[("team-a", "gpu")]["requests.nvidia.com/gpu"] = "16"
    with pytest.raises(StepFailed, match="changed since the plan"):
        run_step(ctx)
    assert key not in ops.quotas[("team-a", "gpu")]


# -- generate dependents: the change for the owning repository ----------------------------------------


def test_generate_dependents_writes_each_change_with_its_owner() -> None:
    import json

    from tests.unit.cli import run

    r = run("generate", "dependents", "--snapshot", str(FIXTURE), "-o", "json")
    assert r.code == 0, r.stderr
    changes = {c["target"]: c for c in json.loads(r.stdout)["changes"]}
    assert sorted(changes) == ["Kueue Configuration", "ResourceQuota team-a/gpu", "ResourceQuota team-b/gpu"]
    key = f"{CLASS}.deviceclass.resource.k8s.io/devices"
    team_b = changes["ResourceQuota team-b/gpu"]
    assert team_b["gitops"]["name"] == "team-b-quotas" and team_b["manifest"]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "4",
        key: "4",
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
    }
    assert changes["ResourceQuota team-a/gpu"]["gitops"] is None
    assert changes["ResourceQuota team-a/gpu"]["manifest"]["spec"]["hard"]["requests.cpu"] == "200"  # kept whole
    mappings = changes["Kueue Configuration"]["manifest"]["resources"]["deviceClassMappings"]
    assert mappings == [{"name": "nvidia.com/gpu", "deviceClassNames": [CLASS, "gpu.nvidia.com"]}]
    text = run("generate", "dependents", "--snapshot", str(FIXTURE))
    assert "change it in the repository of argocd Application team-b-quotas" in text.stdout


def test_two_names_served_by_one_class_share_its_device_limit() -> None:
    from dra_migrate.inventory.dependents import add_quantities

    assert add_quantities(None, "4") == "4"
    assert add_quantities("4", "2") == "6"
    assert add_quantities("4", "1k") == "4"


def test_a_tas_flavor_without_node_labels_blocks_the_whole_plan() -> None:
    flavor = obj("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "tas", {"topologyName": "t"}, namespace=None)
    cq = obj(
        "kueue.x-k8s.io/v1beta1",
        "ClusterQueue",
        "q",
        {
            "resourceGroups": [
                {"flavors": [{"name": "tas", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}
            ]
        },
        namespace=None,
    )
    found = [f for f in assess(_gpu_state(flavor, cq)).findings if f.id == "kueue-dra-support"]
    assert [(f.severity.value, tuple(map(str, f.objects))) for f in found] == [
        ("blocker", ("kueue.x-k8s.io/ClusterQueue q",))
    ]


def test_gitops_owned_names_only_quotas_that_limit_gpus() -> None:
    """A quota of the same name in another namespace, without GPU limits, is not the migration's business."""
    argo = {"argocd.argoproj.io/tracking-id": "a:/ResourceQuota:x/gpu"}
    gpu = obj(
        "v1", "ResourceQuota", "gpu", {"hard": {"requests.nvidia.com/gpu": "4"}}, namespace="ml", annotations=argo
    )
    cpu = obj("v1", "ResourceQuota", "gpu", {"hard": {"requests.cpu": "4"}}, namespace="other", annotations=argo)
    found = [f for f in assess(_gpu_state(gpu, cpu)).findings if f.id == "gitops-owned"]
    assert [tuple(map(str, f.objects)) for f in found] == [("ResourceQuota ml/gpu",)]


@pytest.mark.parametrize(
    ("api_version", "kind", "namespace"),
    [
        ("monitoring.coreos.com/v1", "PrometheusRule", "monitoring"),
        ("monitoring.googleapis.com/v1", "Rules", "monitoring"),  # Managed Service for Prometheus (GKE)
        ("monitoring.googleapis.com/v1", "ClusterRules", None),
        ("monitoring.googleapis.com/v1", "GlobalRules", None),
        ("operator.victoriametrics.com/v1beta1", "VMRule", "monitoring"),
    ],
)
def test_alerting_rules_are_read_in_every_operators_object(api_version: str, kind: str, namespace: str | None) -> None:
    rules = {
        "groups": [
            {
                "name": "gpu",
                "rules": [{"alert": "NoGpus", "expr": 'kube_node_status_allocatable{resource="nvidia_com_gpu"} == 0'}],
            }
        ]
    }
    o = obj(api_version, kind, "gpu-alerts", rules, namespace=namespace)
    found = [f for f in assess(state(o)).findings if f.id == "prometheus-rule-gpu"]
    group = api_version.partition("/")[0]
    assert [str(x) for f in found for x in f.objects] == [
        f"{group}/{kind} {f'{namespace}/' if namespace else ''}gpu-alerts"
    ]
    assert "NoGpus" in found[0].message and "nvidia_com_gpu" in found[0].message


def _kueue_with_args(args: list[str]) -> dict[str, Any]:
    return obj(
        "apps/v1",
        "Deployment",
        "kueue-controller-manager",
        {
            "template": {
                "spec": {"containers": [{"name": "m", "image": "registry.k8s.io/kueue/kueue:v0.17.0", "args": args}]}
            }
        },
        namespace="kueue-system",
    )


def _gpu_cluster_queue() -> dict[str, Any]:
    return obj(
        "kueue.x-k8s.io/v1beta1",
        "ClusterQueue",
        "q",
        {
            "resourceGroups": [
                {"flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}
            ]
        },
        namespace=None,
    )


def test_kueue_gates_given_as_a_separate_argument_are_read() -> None:
    """Go's flag package takes `--feature-gates VALUE` as well as `--feature-gates=VALUE` (sigs.k8s.io/kueue@v0.17.0
    cmd/kueue/main.go `flag.StringVar(&featureGates, "feature-gates", ...)`)."""
    kueue = _kueue_with_args(["--feature-gates", "DynamicResourceAllocation=true,DRAExtendedResources=true"])
    found = [f for f in assess(_gpu_state(kueue, _gpu_cluster_queue())).findings if f.id == "kueue-dra-support"]
    assert [f.severity.value for f in found] == ["info"]


def test_kueue_without_a_gates_flag_is_not_said_to_run_without_dra() -> None:
    """Kueue v0.17.0 also takes its gates from its Configuration's `featureGates` (apis/config/v1beta2
    configuration_types.go; cmd/kueue/main.go `SetFromMap(cfg.FeatureGates)`), which is not read: with no
    --feature-gates flag the tool cannot say the gate is off. And the flag and the Configuration's map cannot
    both be set (pkg/config/validation.go `ValidateFeatureGates`), so the remediation must not simply add the flag."""
    kueue = _kueue_with_args(["--config=/controller_manager_config.yaml"])
    (f,) = [f for f in assess(_gpu_state(kueue, _gpu_cluster_queue())).findings if f.id == "kueue-dra-support"]
    assert f.severity.value == "warning"
    assert "runs without DynamicResourceAllocation" not in f.message
    assert "featureGates" in f.message and "not both" in f.remediation
    # With the flag present and the gate absent from it, the Configuration cannot hold gates: the gate is off.
    kueue = _kueue_with_args(["--feature-gates=TopologyAwareScheduling=false"])
    (f,) = [f for f in assess(_gpu_state(kueue, _gpu_cluster_queue())).findings if f.id == "kueue-dra-support"]
    assert "runs without DynamicResourceAllocation" in f.message
    assert "--feature-gates=TopologyAwareScheduling=false,DynamicResourceAllocation=true" in f.remediation


def _quota_info(*extra: dict[str, Any]) -> Finding:
    quota = obj("v1", "ResourceQuota", "gpu", {"hard": {"requests.nvidia.com/gpu": "4"}})
    (f,) = [
        f
        for f in assess(_gpu_state(quota, *extra)).findings
        if f.id == "quota-continuity" and f.severity.value == "info"
    ]
    return f


def test_quota_finding_says_what_each_limit_counts_under_kubernetes_1_37() -> None:
    """k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/resource_claims.go `addExtendedResourceQuota`: any
    claim of a class whose extendedResourceName is R also counts under `requests.R` (less what its owning pod
    already counts there). So a converted claim of the NVIDIA chart's gpu.nvidia.com (extendedResourceName
    nvidia.com/gpu on resource.k8s.io/v1, dra-driver-nvidia-gpu v0.4.1 templates/deviceclass-gpu.yaml) is held by
    the old limit too; one of a class without it is held only by its own device limit, and while a namespace's
    workloads are part converted, part not, the two limits together admit up to twice the old one."""
    apart = _quota_info()
    assert "gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 4" in apart.message
    assert "twice" in apart.message and "counts only under its own DeviceClass" not in apart.message
    chart = obj(
        "resource.k8s.io/v1",
        "DeviceClass",
        "gpu.nvidia.com",
        {"extendedResourceName": "nvidia.com/gpu", "selectors": [{"cel": {"expression": "true"}}]},
        namespace=None,
    )
    held = _quota_info(chart)
    assert "`gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 4`" in held.message
    assert "twice" not in held.message and "counts only under its own DeviceClass" not in held.message
    assert "also counts converted claims" in held.message
