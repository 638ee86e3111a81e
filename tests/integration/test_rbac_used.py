"""Least privilege, proven from the API server's audit log (issue 23): every read-only command runs as a
user bound to deploy/rbac/readonly.yaml, and an apply (killed mid-wave, resumed, rolled back, all with
--state in-cluster) as a user bound to it plus operator.yaml and state.yaml. Every (verb, resource) each
user's requests used is collected from the audit log, and the roles must grant exactly those: nothing
refused that the command needed, no verb or resource granted that it did not use.

Two things the audit log of this cluster cannot show, handled by name:
- kinds the tool reads only when their CRD is installed (kubeflow, Ray, Kueue, ...: `optional` in
  cluster/kinds.py) are not served here, so they are never listed. The role must grant those exactly
  the verbs the tool used on the served kinds it reads the same way, and the role's kinds must be
  exactly cluster/kinds.py's.
- the read-only commands ask the API server to judge CEL selectors with a dry-run DeviceClass create
  (dra/validate.py). RBAC cannot grant a create that is only ever a dry run, so the read-only role does
  not grant it: those requests are refused (the command says the server could not judge, and goes on),
  and they are the only refusals allowed.
Paths of apply a short clean run does not take (a failed canary, a renewal) are in FAILURE_ONLY, with where
they are exercised.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from nodes import TwinNodes, dra_fleet
from ruamel.yaml import YAML

from dra_migrate.cluster.kinds import ALL_KINDS
from dra_migrate.plan import io as plan_io
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
RUN = uuid.uuid4().hex[:6]
POOL = f"rb-{RUN}"
RBAC = "/apis/rbac.authorization.k8s.io/v1"

Use = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)

# Granted to apply for a path this short, successful run does not (always) take; why, and where it is exercised.
FAILURE_ONLY: dict[Use, str] = {
    ("resource.k8s.io", "resourceclaims", "get"): "the canary's claim when the watch has not delivered it yet "
    "(a race: execute/ops_canary.py)",
    ("", "events", "list"): "a failed canary's reason from the kubelet (tests/integration/test_image_realnode.py)",
    # A clean run reads the canary from the pods watch (issue 25); the GET is left for these two cases.
    ("", "pods", "get"): "the canary read fresh when its wait times out, or after it left the pods watch "
    "(execute/ops_canary.py `_canary_now`; every read when not watching: tests/unit/test_canary_races.py)",
    ("coordination.k8s.io", "leases", "update"): "renewing the Lease, every 20 s of a run "
    "(tests/integration/test_lock.py::test_renewal_keeps_it_alive_past_its_duration)",
}


def load(rel: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all((ROOT / rel).read_text()) if d]


def grants(role: dict[str, Any]) -> set[Use]:
    out = set()
    for rule in role["rules"]:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                out.update((group, resource, verb) for verb in rule["verbs"])
    return out


def non_resource(role: dict[str, Any]) -> list[str]:
    return [u for rule in role["rules"] for u in rule.get("nonResourceURLs", [])]


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet, kube: Kube) -> Iterator[TwinNodes]:
    specs = [GpuNodeSpec.small(f"{POOL}-{i}", gpus=2, pool=POOL, driver_version="580.95.05") for i in range(2)]
    with dra_fleet(kwok, kube, specs) as f:
        yield f


@pytest.fixture(scope="module")
def users(control_plane: controlplane.ControlPlane, kube: Kube, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:  # fmt: skip
    """`reader` bound to the read-only role; `applier` to it, the operator role and the state Role (in a
    namespace of its own, the lock's). The roles are deploy/'s, renamed for this run."""
    lock_ns = f"rb-{RUN}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": lock_ns}})
    made: list[str] = [f"/api/v1/namespaces/{lock_ns}"]
    names = {"reader": f"reader-{RUN}", "applier": f"applier-{RUN}"}

    def bind(kind: str, doc: dict[str, Any], user: str, namespace: str = "") -> None:
        doc = {**doc, "metadata": {"name": f"{doc['metadata']['name']}-{RUN}-{user}"}}
        where = f"{RBAC}/namespaces/{namespace}" if namespace else RBAC
        plural = "roles" if kind == "Role" else "clusterroles"
        kube.create(f"{where}/{plural}", doc)
        binding = {"metadata": {"name": doc["metadata"]["name"]},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": doc["metadata"]["name"]},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}  # fmt: skip
        kube.create(f"{where}/{plural[:-1]}bindings", binding)
        name = doc["metadata"]["name"]
        made.extend([f"{where}/{plural[:-1]}bindings/{name}", f"{where}/{plural}/{name}"])

    readonly, operator, state = load("deploy/rbac/readonly.yaml")[0], load("deploy/rbac/operator.yaml")[0], \
        load("deploy/rbac/state.yaml")[0]  # fmt: skip
    bind("ClusterRole", readonly, names["reader"])
    bind("ClusterRole", readonly, names["applier"])
    bind("ClusterRole", operator, names["applier"])
    bind("Role", state, names["applier"], lock_ns)
    tmp = tmp_path_factory.mktemp("rbac")
    kcs = {k: controlplane.mint_kubeconfig(control_plane, u, [], tmp / f"{k}.kubeconfig") for k, u in names.items()}
    yield {"names": names, "kubeconfigs": kcs, "lock_ns": lock_ns, "readonly": readonly, "operator": operator,
           "state": state}  # fmt: skip
    for path in reversed(made):
        kube.delete(path)


def cli(*args: str | Path, crash_at: str = "") -> subprocess.CompletedProcess[str]:
    head = [str(ROOT / "tests/integration/crashing.py"), crash_at] if crash_at else ["-m", "dra_migrate"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, *head, *map(str, args)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env, check=False)  # fmt: skip


def used(cp: controlplane.ControlPlane, user: str, settle_s: float = 3.0) -> list[dict[str, Any]]:
    """The audit events of `user`'s requests (the log is written as requests complete: let it settle)."""
    time.sleep(settle_s)
    return [e for e in controlplane.audit_events(cp, "") if (e.get("user") or {}).get("username") == user]


def uses(events: list[dict[str, Any]]) -> set[Use]:
    out = set()
    for e in events:
        ref = e.get("objectRef")
        if ref:
            resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            out.add((ref.get("apiGroup", ""), resource, e["verb"]))
    return out


def refused(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if (e.get("responseStatus") or {}).get("code") == 403]


def is_selector_dry_run(e: dict[str, Any]) -> bool:
    ref = e.get("objectRef") or {}
    return e["verb"] == "create" and ref.get("resource") == "deviceclasses" and "dryRun=All" in e["requestURI"]


def served(kube: Kube) -> set[tuple[str, str]]:
    out = {("", r["name"]) for r in kube.get("/api/v1")["resources"]}
    for g in kube.get("/apis")["groups"]:
        version = g["preferredVersion"]["groupVersion"]
        out |= {(g["name"], r["name"]) for r in kube.get(f"/apis/{version}")["resources"]}
    return out


def test_the_read_only_role_grants_exactly_what_the_read_only_commands_use(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, users: dict[str, Any],
    tmp_path: Path,
) -> None:  # fmt: skip
    kc = users["kubeconfigs"]["reader"]
    plan = tmp_path / "plan.yaml"
    commands: list[list[str | Path]] = [
        ["inventory", "-o", "json"], ["check", "-o", "json"], ["snapshot", "--out", tmp_path / "snap.jsonl"],
        ["plan", "--out", plan, "--soak", "0s"], ["match", "-o", "json"], ["generate", "deviceclasses"],
        ["generate", "dependents", "-o", "json"], ["diff", plan], ["report", plan, "-o", "json"],
        ["status", plan, "--state", "in-cluster", "--lock-namespace", users["lock_ns"]],
    ]  # fmt: skip
    for args in commands:
        r = cli(*args, "--kubeconfig", kc)
        assert r.returncode in (0, 2), (args, r.stderr)  # 2: check's blockers, diff's differences
    events = used(control_plane, users["names"]["reader"])
    assert events, "the audit log has none of the reader's requests"
    assert all(is_selector_dry_run(e) for e in refused(events)), [e["requestURI"] for e in refused(events)]
    needed = uses([e for e in events if not is_selector_dry_run(e)])
    granted = grants(users["readonly"])

    assert needed - granted == set(), f"used but not granted: {sorted(needed - granted)}"
    here = served(kube)
    generic = {v for g, r, v in needed if (g, r) == ("apps", "deployments")}  # how every kind is read
    unused = granted - needed
    idle = sorted(u for u in unused if u[:2] in here)
    assert idle == [], f"granted, served here, never used: {idle}"
    odd = sorted(u for u in unused if u[2] not in generic)
    assert odd == [], f"granted on kinds not served here, beyond how every kind is read ({generic}): {odd}"
    listed = {(k.group, k.plural) for k in ALL_KINDS}
    not_kinds = {("", "namespaces"), ("authentication.k8s.io", "selfsubjectreviews")}  # identity, who am I
    assert {(g, r) for g, r, _ in granted} - not_kinds == listed, "the role's kinds are cluster/kinds.py's"
    names = {(e["objectRef"].get("name"), e["verb"]) for e in events if (e.get("objectRef") or {}).get("resource")
             == "namespaces"}  # fmt: skip
    assert names <= {("kube-system", "get")}, names

    paths = {e["requestURI"].split("?")[0] for e in events if not e.get("objectRef")}
    patterns = non_resource(users["readonly"])
    assert all(any(fnmatch.fnmatch(p, pat) for pat in patterns) for p in paths), paths
    assert all(any(fnmatch.fnmatch(p, pat) for p in paths) for pat in patterns), (patterns, paths)


@pytest.fixture
def gpu_workload(kube: Kube, namespace: str, fleet: TwinNodes) -> Iterator[str]:
    """A GPU quota (the plan adds its DRA limit: set-quota) and a GPU pod on the pool (the drain evicts it)."""
    kube.create(path_of("v1", "resourcequotas", namespace=namespace),
                {"metadata": {"name": "gpu"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}})  # fmt: skip
    pod = {
        "metadata": {"labels": {"app": "w"}},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-nodepool": POOL},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }
    kube.create(path_of("apps/v1", "deployments", namespace=namespace), {"metadata": {"name": "w"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "w"}}, "template": pod}})  # fmt: skip
    pods = path_of("v1", "pods", namespace=namespace)
    wait_for("the GPU pod running", lambda: any(p["status"].get("phase") == "Running"
                                                for p in kube.list_all(pods)[0]), timeout=60)  # fmt: skip
    yield namespace
    # Gone now, not when the namespace finishes terminating: the next module's plan reads every quota.
    kube.delete(path_of("v1", "resourcequotas", "gpu", namespace))
    kube.delete(path_of("apps/v1", "deployments", "w", namespace))
    for p in kube.list_all(pods)[0]:
        kube.delete(f"{pods}/{p['metadata']['name']}", {"gracePeriodSeconds": 0})


def test_the_apply_roles_grant_exactly_what_apply_resume_and_rollback_use(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, users: dict[str, Any],
    gpu_workload: str, tmp_path: Path,
) -> None:  # fmt: skip
    kc, ns = users["kubeconfigs"]["applier"], users["lock_ns"]
    admin_plan = tmp_path / "admin" / "plan.yaml"
    admin_plan.parent.mkdir()
    r = cli("plan", "--kubeconfig", control_plane.kubeconfig, "--out", admin_plan, "--soak", "0s",
            "--max-unavailable", "100%", "--order", POOL)  # fmt: skip
    assert r.returncode == 0, r.stderr
    plan = tmp_path / "plan.yaml"
    shutil.copy(admin_plan, plan)
    body = plan_io.load(plan)
    assert "set-quota" in str(body["stages"][0]), "the plan must exercise the quota step"
    stage = next(s for s in body["stages"] if s.get("waves"))
    node = stage["waves"][0]["nodes"][0]["node"]
    state = ["--state", "in-cluster", "--lock-namespace", ns, "--kubeconfig", kc]
    crashed = cli("apply", plan, "--yes", *state, crash_at=f"{stage['name']}/{node}/enable-dra-plugin:start")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    resumed = cli("apply", plan, "--yes", *state)  # takes over the dead run's Lease, resumes its journal
    assert resumed.returncode == 0, resumed.stderr
    back = cli("rollback", plan, "--yes", *state)
    assert back.returncode == 0, back.stderr

    events = used(control_plane, users["names"]["applier"])
    assert refused(events) == [], [(e["verb"], e["requestURI"]) for e in refused(events)]
    needed = uses(events) - grants(users["readonly"])
    # The read-only role's `get namespaces` is kube-system's only (resourceNames, which `grants` leaves out):
    # apply's read of the canary's namespace (execute/ops_canary.py) needs the operator role's.
    if any((e.get("objectRef") or {}).get("resource") == "namespaces" and e["verb"] == "get"
           and e["objectRef"].get("name") != "kube-system" for e in events):  # fmt: skip
        needed.add(("", "namespaces", "get"))
    apply_grants = grants(users["operator"]) | grants(users["state"])
    assert needed - apply_grants == set(), f"used but not granted: {sorted(needed - apply_grants)}"
    assert apply_grants - needed - set(FAILURE_ONLY) == set(), f"granted, unused: {sorted(apply_grants - needed)}"
    paths = {e["requestURI"].split("?")[0] for e in events if not e.get("objectRef")}
    assert all(any(fnmatch.fnmatch(p, pat) for pat in non_resource(users["readonly"])) for p in paths), paths
    state_uses = {(g, r) for g, r, _ in grants(users["state"])}
    refs = [(e, e.get("objectRef") or {}) for e in events]
    outside = [e for e, ref in refs if (ref.get("apiGroup", ""), ref.get("resource")) in state_uses
               and ref.get("namespace") != ns and e["verb"] != "list"]  # fmt: skip
    assert outside == [], "the lock and journal live in the lock's namespace only"
