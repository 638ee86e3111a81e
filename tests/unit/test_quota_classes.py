"""The DRA limit a GPU ResourceQuota gets must count the claims converted workloads make.

`convert` writes claims of the NVIDIA driver's classes (gpu.nvidia.com for nvidia.com/gpu, mig.nvidia.com
with a profile selector for nvidia.com/mig-*: convert/claims.py `alternatives_for`). The quota evaluator counts
a claim's devices only under its own class, `<class>.deviceclass.resource.k8s.io/devices`, and under
`requests.R` only when that class's `extendedResourceName` is R (k8s.io/kubernetes@v1.37.2
pkg/quota/v1/evaluator/core/resource_claims.go `Usage`, `addExtendedResourceQuota`). A limit on the
extended-resource class alone (gpu-extended.nvidia.com) leaves every converted workload unlimited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState
from tests.unit.helpers import container, node, obj, pod, pod_spec, state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "cluster.yaml"
DEV = ".deviceclass.resource.k8s.io/devices"


def _plan(s: ClusterState) -> dict[str, Any]:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    return build_plan(s, PlanParams(pool_labels=("pool",))).to_dict()


def _set_quota(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["params"]["name"]: s for st in plan["stages"] for s in st.get("steps", []) if s["action"] == "set-quota"}


def test_the_plan_limits_the_class_converted_workloads_claim() -> None:
    step = _set_quota(_plan(load_snapshot(FIXTURE)))["gpu"]
    assert step["params"]["set"] == {f"gpu-extended.nvidia.com{DEV}": "8", f"gpu.nvidia.com{DEV}": "8"}
    assert step["inverse"]["restore"]["hard"] == dict.fromkeys(step["params"]["set"])


def test_generate_and_the_finding_name_the_class_converted_workloads_claim() -> None:
    from tests.unit.cli import run

    r = run("generate", "dependents", "--snapshot", str(FIXTURE), "-o", "json")
    assert r.code == 0, r.stderr
    changes = {c["target"]: c for c in json.loads(r.stdout)["changes"]}
    assert changes["ResourceQuota team-b/gpu"]["manifest"]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "4",
        f"gpu-extended.nvidia.com{DEV}": "4",
        f"gpu.nvidia.com{DEV}": "4",
    }
    found = assess(load_snapshot(FIXTURE), pool_labels=("pool",)).findings
    team_a = next(f for f in found if f.id == "quota-continuity" and "team-a" in str(f.objects[0]))
    assert f"`gpu.nvidia.com{DEV}: 8`" in team_a.message


def _mig_state(hard: dict[str, str], *names: str) -> ClusterState:
    labels = {"pool": "p", "nvidia.com/gpu.present": "true", "nvidia.com/mig.strategy": "mixed"}
    n = node("gpu-1", labels, {name: "7" for name in names})
    pods = [pod(f"p{i}", pod_spec(container(requests={name: "1"}))) for i, name in enumerate(names)]  # in ml
    quota = obj("v1", "ResourceQuota", "gpu", {"hard": hard}, namespace="ml")
    return state(n, *pods, quota)


def test_mig_profiles_share_the_mig_class_limit_as_their_sum() -> None:
    s = _mig_state(
        {"requests.nvidia.com/mig-1g.10gb": "4", "requests.nvidia.com/mig-2g.20gb": "2"},
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-2g.20gb",
    )
    added = _set_quota(_plan(s))["gpu"]["params"]["set"]
    assert added[f"mig.nvidia.com{DEV}"] == "6"  # one class for every profile: the quota cannot tell them apart


def test_a_mig_class_limit_that_would_block_an_unlimited_profile_is_not_added() -> None:
    """The namespace also runs 3g.40gb, which this quota leaves unlimited: a mig.nvidia.com limit of 4 would
    refuse its converted claims, so the plan does not add one and the finding says the converted MIG claims
    escape the quota."""
    s = _mig_state({"requests.nvidia.com/mig-1g.10gb": "4"}, "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb")
    added = _set_quota(_plan(s))["gpu"]["params"]["set"]
    assert f"mig.nvidia.com{DEV}" not in added and len(added) == 1
    warned = [
        f
        for f in assess(s, pool_labels=("pool",)).findings
        if f.id == "quota-continuity" and f.severity.value == "warning"
    ]
    assert len(warned) == 1 and "mig.nvidia.com" in warned[0].message and "mig-3g.40gb" in warned[0].message


def test_a_quota_that_already_limits_the_driver_class_gets_only_the_missing_key() -> None:
    hard = {"requests.nvidia.com/gpu": "8", f"gpu.nvidia.com{DEV}": "8"}
    n = node("gpu-1", {"pool": "p", "nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "8"})
    s = state(
        n,
        pod("p1", pod_spec(container(requests={"nvidia.com/gpu": "1"}))),
        obj("v1", "ResourceQuota", "q", {"hard": hard}),
    )
    assert _set_quota(_plan(s))["q"]["params"]["set"] == {f"gpu-extended.nvidia.com{DEV}": "8"}


def test_a_limits_key_on_a_gpu_is_said_to_limit_nothing() -> None:
    """`limits.nvidia.com/gpu` passes validation (a name with a `/`: k8s.io/kubernetes@v1.37.2
    pkg/apis/core/validation/validation.go ValidateResourceQuotaResourceName) and limits nothing: the pod evaluator
    charges an extended resource only as `requests.<name>` (pkg/quota/v1/evaluator/core/pods.go)."""
    q = obj("v1", "ResourceQuota", "q", {"hard": {"limits.nvidia.com/gpu": "8"}})
    n = node("gpu-1", {"pool": "p", "nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "8"})
    s = state(n, pod("p1", pod_spec(container(requests={"nvidia.com/gpu": "1"}))), q)
    found = [f for f in assess(s, pool_labels=("pool",)).findings if f.id == "quota-continuity"]
    assert [f.severity.value for f in found] == ["warning"]
    assert "`limits.nvidia.com/gpu`, which limits nothing" in found[0].message
    assert "`requests.nvidia.com/gpu`" in found[0].remediation
    assert "set-quota" not in str(_plan(s))
