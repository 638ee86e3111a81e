"""Admission policies that name the GPU extended resources (docs/dependents.md "Admission policies"), on
fixtures/dependents/policies.yaml: each policy (a Kyverno one rule by rule) whose spec names one is found,
with where, whether it judges or changes pods, and its owner; a policy that only mentions GPUs in its
metadata, or names none, is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.policies import MUTATING, VALIDATING, gpu_policies
from tests.unit.helpers import state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "policies.yaml"


@pytest.fixture(scope="module")
def fleet() -> ClusterState:
    return load_snapshot(FIXTURE)


def test_every_policy_that_names_a_gpu_resource_is_found_with_where_and_what_it_does(fleet: ClusterState) -> None:
    found = {(p.kind.rpartition("/")[2], p.name, p.rule): (p.action, p.places) for p in gpu_policies(fleet)}
    assert found == {
        ("ValidatingAdmissionPolicy", "gpu-namespaces", None): (VALIDATING, ("spec.variables[0].expression",)),
        ("MutatingAdmissionPolicy", "gpu-runtime-class", None): (MUTATING, ("spec.matchConditions[0].expression",)),
        ("ClusterPolicy", "gpu-pods", "tolerate-gpu-taint"): (MUTATING, ("spec.rules[0].preconditions.any[0].key",)),
        ("ClusterPolicy", "gpu-pods", "require-gpu-limit"): (
            VALIDATING,
            ("spec.rules[1].validate.pattern.spec.containers[0].resources.limits.nvidia.com/gpu",),  # a map key
        ),
        ("ConstraintTemplate", "k8smaxgpus", None): (VALIDATING, ("spec.targets[0].rego",)),
        ("Assign", "gpu-priority", None): (MUTATING, ("spec.parameters.pathTests[0].subPath",)),
    }


def test_findings_say_what_a_claim_steps_around_and_name_the_owning_repository(fleet: ClusterState) -> None:
    found = {str(f.objects[0]): f for f in assess(fleet).findings if f.id == "admission-policy-gpu"}
    allow_list = found["admissionregistration.k8s.io/ValidatingAdmissionPolicy gpu-namespaces"]
    assert "does not judge such a pod" in allow_list.message
    assert (
        "ResourceClaims" in allow_list.remediation and "argocd Application platform-policies" in allow_list.remediation
    )
    runtime = found["admissionregistration.k8s.io/MutatingAdmissionPolicy gpu-runtime-class"]
    assert "does not change such a pod" in runtime.message and "converted workloads" in runtime.remediation
    assert not any("documented-only" in k or "no-latest-tag" in k for k in found)


def _vap(spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p", "uid": "u-p"},
        "spec": spec,
    }


def test_a_policy_nested_deeper_than_python_recurses_is_read() -> None:
    spec: Any = "has(object.spec.containers[0].resources.limits['nvidia.com/mig-1g.10gb'])"
    for _ in range(2_000):
        spec = [spec]
    (p,) = gpu_policies(state(_vap({"validations": spec})))
    assert p.terms == ("nvidia.com/mig-1g.10gb",) and p.places[0].startswith("spec.validations[0][0]")


@pytest.mark.parametrize("spec", [None, "text", [], {"rules": "not a list"}, {"rules": [None, 3]}])
def test_a_policy_of_any_shape_is_read_without_error(spec: Any) -> None:
    kyverno = {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "k", "uid": "u"}}
    assert gpu_policies(state(_vap(spec), {**kyverno, "spec": spec})) == []
