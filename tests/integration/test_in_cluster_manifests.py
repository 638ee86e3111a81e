"""deploy/in-cluster on the real API server: the manifests are accepted as written, and the ServiceAccount
they bind can do what each set of commands needs and nothing of the kind it must not (issue 23)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from ruamel.yaml import YAML

from dra_migrate.kube import ApiError
from dra_migrate.sim.kube import Kube
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
SA = "system:serviceaccount:dra-migrate:dra-migrate"
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:dra-migrate", "system:authenticated"]
REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def _docs(*rel: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in rel:
        out += [d for d in YAML(typ="safe").load_all((ROOT / r).read_text()) if d]
    return out


def _path(doc: dict[str, Any]) -> str:
    group_version, kind, ns = doc["apiVersion"], doc["kind"], doc["metadata"].get("namespace")
    plural = {"ServiceAccount": "serviceaccounts", "Namespace": "namespaces", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings", "Job": "jobs", "Role": "roles",
              "RoleBinding": "rolebindings", "PersistentVolumeClaim": "persistentvolumeclaims",
              "PriorityClass": "priorityclasses"}[kind]  # fmt: skip
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    return f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"


MANIFESTS = (
    "deploy/rbac/readonly.yaml",
    "deploy/rbac/operator.yaml",
    "deploy/in-cluster/serviceaccount.yaml",
    "deploy/rbac/state.yaml",
    "deploy/in-cluster/readonly-binding.yaml",
    "deploy/in-cluster/apply-binding.yaml",
    "deploy/in-cluster/priorityclass.yaml",  # before the Job: the Priority admission plugin refuses a missing class
    "deploy/in-cluster/apply-job.yaml",
)


@pytest.fixture(scope="module")
def installed(kube: Kube) -> Iterator[list[dict[str, Any]]]:
    """Every manifest created as written (a typo in a Job or a binding is refused by the server here)."""
    docs = _docs(*MANIFESTS)
    made: list[dict[str, Any]] = []
    try:
        for d in docs:
            try:
                kube.create(_path(d), d)
                made.append(d)
            except ApiError as e:
                if e.status != 409:
                    raise
                # Another test of the shared control plane made it (test_apf: the namespace and the
                # ServiceAccount): replace it with ours, so the server still judges these manifests, and
                # leave its deletion to its owner.
                at = f"{_path(d)}/{d['metadata']['name']}"
                current = kube.get(at)
                body = {**d, "metadata": {**d["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
                kube.replace(at, body)
        yield docs
    finally:
        for d in reversed(made):
            with contextlib.suppress(ApiError):
                kube.delete(f"{_path(d)}/{d['metadata']['name']}")


def _allowed(kube: Kube, verb: str, resource: str, group: str = "", namespace: str | None = None,
             subresource: str | None = None) -> bool:  # fmt: skip
    attrs: dict[str, Any] = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if subresource:
        attrs["subresource"] = subresource
    review = kube.create(REVIEWS, {"spec": {"user": SA, "groups": SA_GROUPS, "resourceAttributes": attrs}})
    return bool(review["status"].get("allowed"))


def test_the_job_runs_the_image_as_the_service_account_without_root(installed: list[dict[str, Any]]) -> None:
    job = next(d for d in installed if d["kind"] == "Job")
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "dra-migrate"
    # Non-root as the image's USER 65532:65532; no uid, gid or fsGroup named, which OpenShift's restricted-v2 SCC
    # rejects outside the namespace's range (tests/unit/test_openshift.py).
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(pod["securityContext"])
    (apply,) = pod["containers"]
    assert apply["args"][:3] == ["apply", "/plan/plan.yaml", "--yes"]
    args = apply["args"]
    assert args[args.index("--state") + 1] == "in-cluster"  # the journal beside its Lease, not on a volume
    assert args[args.index("--lock-namespace") + 1] == job["metadata"]["namespace"]
    assert all("persistentVolumeClaim" not in v for v in pod["volumes"])


def test_the_service_account_can_do_what_apply_needs(kube: Kube, installed: list[dict[str, Any]]) -> None:
    needs = [
        ("list", "nodes", ""), ("patch", "nodes", ""), ("list", "pods", ""), ("create", "pods", "", "default"),
        ("delete", "pods", "", "default"), ("create", "leases", "coordination.k8s.io", "dra-migrate"),
        ("update", "leases", "coordination.k8s.io", "dra-migrate"), ("create", "deviceclasses", "resource.k8s.io"),
        ("list", "resourceslices", "resource.k8s.io"), ("list", "poddisruptionbudgets", "policy"),
        ("list", "events", "", "default"),  # the canary reads the kubelet's events (found by the real-node Job)
        ("list", "configmaps", "", "dra-migrate"), ("create", "configmaps", "", "dra-migrate"),
        ("patch", "configmaps", "", "dra-migrate"),  # the in-cluster journal
    ]  # fmt: skip
    for verb, resource, group, *ns in needs:
        assert _allowed(kube, verb, resource, group, ns[0] if ns else None), (verb, resource)
    assert _allowed(kube, "create", "pods", "", "default", subresource="eviction")


def test_the_service_account_gets_nothing_it_must_not(kube: Kube, installed: list[dict[str, Any]]) -> None:
    for verb, resource, group in [
        ("get", "secrets", ""), ("list", "secrets", ""), ("delete", "nodes", ""), ("update", "nodes", ""),
        ("create", "clusterrolebindings", "rbac.authorization.k8s.io"), ("patch", "deployments", "apps"),
        ("delete", "resourceslices", "resource.k8s.io"), ("create", "serviceaccounts", ""),
        ("update", "configmaps", ""), ("delete", "namespaces", ""), ("create", "pods/exec", ""),
    ]:  # fmt: skip
        assert not _allowed(kube, verb, resource, group), (verb, resource)
    # The lock and the journal in their namespace only (deploy/rbac/state.yaml is a Role).
    for verb, resource, group, ns in [
        ("create", "leases", "coordination.k8s.io", "kube-system"),
        ("update", "leases", "coordination.k8s.io", "default"),
        ("create", "configmaps", "", "kube-system"), ("patch", "configmaps", "", "default"),
        ("delete", "configmaps", "", "dra-migrate"), ("update", "configmaps", "", "dra-migrate"),
    ]:  # fmt: skip
        assert not _allowed(kube, verb, resource, group, ns), (verb, resource, ns)


def test_read_only_commands_run_as_the_service_account(
    control_plane: controlplane.ControlPlane, installed: list[dict[str, Any]], tmp_path: Path
) -> None:
    kc = controlplane.mint_kubeconfig(control_plane, SA, SA_GROUPS[:2], tmp_path / "sa.kubeconfig")
    r = run("check", "--kubeconfig", str(kc), "-o", "json")
    assert r.code in (0, 2), r.stderr
    assert json.loads(r.stdout)["cluster"]["source"] == "live"
    r = run("plan", "--kubeconfig", str(kc), "--out", str(tmp_path / "p.yaml"))
    assert r.code == 0, r.stderr
