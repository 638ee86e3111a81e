"""What the canary's namespace enforces on the canary pod, modelled from the upstream admission code.

- Pod Security `restricted` (k8s.io/pod-security-admission@v0.37.2 policy/check_*.go, level restricted, latest
  version): runAsNonRoot true (pod or every container), runAsUser not 0, allowPrivilegeEscalation false,
  capabilities drop ALL (add only NET_BIND_SERVICE), seccompProfile RuntimeDefault or Localhost, and the
  baseline checks (no privileged, host namespaces, hostPath, host ports). A namespace (or a cluster default)
  enforcing it refused the canary (root, no seccomp profile): the run stopped before the wave, but no canary
  could ever run there.
- A ResourceQuota on cpu or memory (k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/pods.go,
  `Constraints`: every container must request a quota'd `requests.*`/`limits.*` resource) refused it: it
  set no cpu or memory.
- OpenShift's `restricted-v2` SCC takes a uid only from the namespace's `openshift.io/sa.scc.uid-range`: the
  canary's fixed non-root uid comes from there when the namespace has one (tests/unit/test_openshift.py).
- A ResourceQuota on ResourceClaims (`count/resourceclaims.resource.k8s.io`, `<class>.deviceclass.resource.k8s.io/
  devices`, `requests.deviceclass.resource.kubernetes.io/<class>`: k8s.io/kubernetes@v1.37.2
  pkg/quota/v1/evaluator/core/resource_claims.go, `Usage`) is met not by the pod's creation but by the claim
  the scheduler creates for its extended resource (KEP-5004): the pod's dry run passes, and every canary then
  stays unscheduled to its timeout. The dry-run check reads the namespace's quotas for it.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_openshift import UID_RANGE, restricted_v2

from dra_migrate.errors import MigrateError
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops_canary import _canary_pod
from tests.unit.test_canary_races import GPU, NODE, LaggingScheduler, ops_on

NS = "default"


def pod_security_restricted(spec: dict[str, Any]) -> list[str]:
    """Why Pod Security `restricted` (latest) refuses a pod of this spec ([] when it admits it)."""
    out: list[str] = []
    psc = spec.get("securityContext") or {}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"host namespaces ({key})")
    if any("hostPath" in v for v in spec.get("volumes") or []):
        out.append("hostPath volumes")
    if psc.get("runAsNonRoot") is False or psc.get("runAsUser") == 0:
        out.append("pod runAsNonRoot/runAsUser")
    pod_profile = (psc.get("seccompProfile") or {}).get("type")
    for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged"):
            out.append(f"{name}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation != false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"{name}: unrestricted capabilities (must drop ALL)")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: added capabilities")
        if sc.get("runAsNonRoot") is False or (sc.get("runAsNonRoot") is None and psc.get("runAsNonRoot") is not True):
            out.append(f"{name}: runAsNonRoot != true")
        if sc.get("runAsUser") == 0:
            out.append(f"{name}: runAsUser=0")
        profile = (sc.get("seccompProfile") or {}).get("type") or pod_profile
        if profile not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"{name}: hostPort")
    return out


def quota_constraints(spec: dict[str, Any], required: list[str]) -> list[str]:
    """pods.go `Constraints`: the containers missing a request/limit a quota on cpu or memory requires."""
    out: list[str] = []
    for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
        res = c.get("resources") or {}
        for r in required:
            kind, _, name = r.rpartition(".")
            have = res.get("limits" if kind == "limits" else "requests") or {}
            if kind == "requests" and name not in have:
                have = res.get("limits") or {}  # a limit alone defaults the request (defaults.go)
            if name not in have:
                out.append(f"{c['name']}: must specify {r}")
    return out


def canary_spec(uid: int | None = None) -> dict[str, Any]:
    extra = {} if uid is None else {"uid": uid}
    pod = _canary_pod(NODE, {"kubernetes.io/hostname": NODE}, GPU, "ubuntu:24.04", "t", "true", **extra)
    spec: dict[str, Any] = pod["spec"]
    return spec


def test_the_model_refuses_what_restricted_refuses() -> None:
    bare = {"containers": [{"name": "c"}]}
    assert len(pod_security_restricted(bare)) == 4  # escalation, capabilities, runAsNonRoot, seccomp
    assert quota_constraints(bare, ["requests.cpu", "limits.memory"]) == ["c: must specify requests.cpu",
                                                                          "c: must specify limits.memory"]  # fmt: skip


def test_the_canary_pod_is_admitted_by_pod_security_restricted() -> None:
    spec = canary_spec()
    assert pod_security_restricted(spec) == []
    # A fixed uid: the kubelet can verify runAsNonRoot only against a numeric uid, and the default image's
    # user is root (k8s.io/kubernetes@v1.37.2 pkg/kubelet/kuberuntime/security_context_others.go verifyRunAsNonRoot).
    uid = spec["securityContext"]["runAsUser"]
    assert isinstance(uid, int) and uid > 0


def test_the_canary_pod_meets_a_quota_on_cpu_and_memory() -> None:
    required = ["requests.cpu", "limits.cpu", "requests.memory", "limits.memory"]
    assert quota_constraints(canary_spec(), required) == []


def test_the_canary_pod_with_the_namespace_uid_is_admitted_by_both() -> None:
    spec = canary_spec(UID_RANGE[0])
    assert restricted_v2(spec) == [] and pod_security_restricted(spec) == []


class Namespaced(LaggingScheduler):
    """The canary's cluster with its namespace, quotas and DeviceClasses."""

    def __init__(self, namespace: dict[str, Any] | None, quotas: list[dict[str, Any]] = (), **kw: Any) -> None:  # type: ignore[assignment]
        super().__init__(stale=0, saw="GPU 0: NVIDIA A100 (UUID: GPU-aaaa)", **kw)
        self.namespace = namespace
        self.quotas = list(quotas)
        self.classes = [
            {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"extendedResourceName": GPU}},
            {"metadata": {"name": "mig.nvidia.com"}, "spec": {"extendedResourceName": "nvidia.com/mig-1g.10gb"}},
        ]
        self.reads: list[str] = []

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        if path == f"/api/v1/namespaces/{NS}":
            self.reads.append(path)
            return self.namespace
        return super().get_or_none(path)

    def list_all(self, path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        if path.endswith("/resourcequotas"):
            return self.quotas, "1"
        if path.endswith("/deviceclasses"):
            return self.classes, "1"
        return super().list_all(path, query)


def quota(name: str, hard: dict[str, str], used: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"hard": hard}, "status": {"hard": hard, "used": used}}


def test_the_canary_runs_as_the_first_uid_of_an_openshift_namespace() -> None:
    ns = {"metadata": {"name": NS, "annotations": {"openshift.io/sa.scc.uid-range": f"{UID_RANGE[0]}/10000"}}}
    fake = Namespaced(ns)
    ops = ops_on(fake)
    ops.canary(NODE, GPU, "ubuntu:24.04", 10)
    ops.canary(NODE, GPU, "ubuntu:24.04", 10)
    specs = [p["spec"] for p in fake.pods.values()]
    assert [s["securityContext"]["runAsUser"] for s in specs] == [UID_RANGE[0]] * 2
    assert len(fake.reads) == 1, "the namespace is read once"


def test_the_canary_runs_as_nobody_elsewhere() -> None:
    fake = Namespaced({"metadata": {"name": NS}})
    ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 10)
    assert {p["spec"]["securityContext"]["runAsUser"] for p in fake.pods.values()} == {65534}


@pytest.mark.parametrize(
    ("hard", "used"),
    [
        ({"count/resourceclaims.resource.k8s.io": "0"}, {}),
        ({"count/resourceclaims.resource.k8s.io": "10"}, {"count/resourceclaims.resource.k8s.io": "10"}),
        ({"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"},
         {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}),
        ({"requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": "0"}, {}),
    ],
)  # fmt: skip
def test_a_quota_the_canarys_claim_would_exceed_is_found_by_the_dry_run(
    hard: dict[str, str], used: dict[str, str]
) -> None:
    fake = Namespaced({"metadata": {"name": NS}}, [quota("gpus", hard, used)])
    with pytest.raises(MigrateError, match="ResourceQuota default/gpus") as err:
        ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 10, dry_run=True)
    assert not isinstance(err.value, StepFailed), "the namespace's problem, not the node's: the run stops"
    assert next(iter(hard)) in str(err.value)


def test_a_quota_with_room_or_on_another_class_lets_the_dry_run_pass() -> None:
    quotas = [
        quota("room", {"count/resourceclaims.resource.k8s.io": "10"}, {"count/resourceclaims.resource.k8s.io": "9"}),
        quota("mig", {"mig.nvidia.com.deviceclass.resource.k8s.io/devices": "0"}, {}),
        quota("cpu", {"requests.cpu": "1"}, {"requests.cpu": "1"}),  # the pod's own: the dry run's admission judges it
    ]
    fake = Namespaced({"metadata": {"name": NS}}, quotas)
    assert ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 10, dry_run=True).dry_run


# -- the operator's namespace and pull secrets (plan --canary-namespace, --canary-pull-secret) ----------------


def test_the_canary_runs_in_the_given_namespace_with_the_given_pull_secrets() -> None:
    fake = Namespaced(None)
    fake.paths: list[str] = []  # type: ignore[misc]
    create = fake.create

    def recording(path: str, body: dict[str, Any], query: Any = ()) -> dict[str, Any]:
        fake.paths.append(path)
        return create(path, body, query)

    fake.create = recording  # type: ignore[method-assign]
    ops = ops_on(fake)
    ops.canary(NODE, GPU, "registry.internal/canary:1", 10, namespace="gpu-canary", pull_secrets=["regcred"])
    assert fake.paths == ["/api/v1/namespaces/gpu-canary/pods"]
    (pod,) = fake.pods.values()
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert fake.deleted == list(fake.pods)


def test_the_plan_carries_the_namespace_and_pull_secrets_to_the_canary_step(tmp_path: Any) -> None:
    from test_runner import Rig, make_plan

    from dra_migrate.execute.runner import OK
    from dra_migrate.plan.params import PlanParams

    params = PlanParams(canary_namespace="gpu-canary", canary_pull_secrets=("regcred", "mirror")).validate()
    assert params.to_dict()["canaryNamespace"] == "gpu-canary"
    assert PlanParams.from_dict(params.to_dict()) == params
    rig = Rig(tmp_path, make_plan([["a"]], params=params))
    assert rig.run().outcome == OK
    assert rig.ops.canary_places == [("canary-admission", "p0-a", "gpu-canary", ("regcred", "mirror")),
                                     ("canary", "p0-a", "gpu-canary", ("regcred", "mirror"))]  # fmt: skip


def test_a_plan_without_them_keeps_default_and_no_secrets(tmp_path: Any) -> None:
    from test_runner import Rig, make_plan

    rig = Rig(tmp_path, make_plan([["a"]]))
    rig.run()
    assert {(ns, secrets) for _, _, ns, secrets in rig.ops.canary_places} == {("default", ())}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("canary_namespace", "GPU_Canary", "--canary-namespace"),
        ("canary_namespace", "", "--canary-namespace"),
        ("canary_namespace", "a" * 64, "--canary-namespace"),
        ("canary_pull_secrets", ("Reg Cred",), "--canary-pull-secret"),
        ("canary_pull_secrets", ("regcred", "regcred"), "--canary-pull-secret"),
    ],
)
def test_a_bad_namespace_or_secret_name_is_refused_at_plan_time(field: str, value: Any, message: str) -> None:
    from dra_migrate.errors import InputError
    from dra_migrate.plan.params import PlanParams

    with pytest.raises(InputError, match=message):
        PlanParams(**{field: value}).validate()


def test_a_missing_or_terminating_namespace_is_named_by_the_dry_run() -> None:
    with pytest.raises(MigrateError, match="namespace default does not exist") as err:
        ops_on(Namespaced(None)).canary(NODE, GPU, "ubuntu:24.04", 10, dry_run=True)
    assert not isinstance(err.value, StepFailed)
    going = {"metadata": {"name": NS}, "status": {"phase": "Terminating"}}
    with pytest.raises(MigrateError, match="being deleted"):
        ops_on(Namespaced(going)).canary(NODE, GPU, "ubuntu:24.04", 10, dry_run=True)


def test_a_role_that_cannot_read_the_namespace_still_runs_the_canary() -> None:
    """operator.yaml grants `get namespaces` since the canary reads its namespace; a role bound before that is
    refused the read (403), and the canary runs as NOBODY instead of failing every wave."""
    from dra_migrate.kube import ApiError

    class Forbidden(Namespaced):
        def get_or_none(self, path: str) -> dict[str, Any] | None:
            if path == f"/api/v1/namespaces/{NS}":
                raise ApiError("GET", path, 403, b'{"reason": "Forbidden"}')
            return super().get_or_none(path)

    fake = Forbidden(None)
    ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 10, dry_run=True)
    ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 10)
    assert {p["spec"]["securityContext"]["runAsUser"] for p in fake.pods.values()} == {65534}


def test_the_probe_pod_is_admitted_where_the_canary_is() -> None:
    """`dra-migrate probe --node` runs the same check on a first migrated node, with its own claim: the same
    namespace admission meets it."""
    from dra_migrate.execute.probe import ProbeOptions, probe_pod

    pod = probe_pod(ProbeOptions(node=NODE), "match", {}, {}, "claim-1", 65534)
    assert pod_security_restricted(pod["spec"]) == []
    assert quota_constraints(pod["spec"], ["requests.cpu", "limits.cpu", "requests.memory", "limits.memory"]) == []
    assert restricted_v2(probe_pod(ProbeOptions(node=NODE), "match", {}, {}, "c", UID_RANGE[0])["spec"]) == []
