"""OpenShift: what its admission makes of the pods the tool ships or creates, and how its Machine API pools read.

The pods are judged by a model of OpenShift's default SecurityContextConstraints `restricted-v2`, the one every
authenticated user and ServiceAccount may use (openshift/cluster-kube-apiserver-operator bindata
`0000_20_kube-apiserver-operator_00_scc-restricted-v2.yaml`): runAsUser MustRunAsRange, fsGroup and
supplementalGroups MustRunAs, each over the range the namespace was allocated (its `openshift.io/sa.scc.uid-range`
and `openshift.io/sa.scc.supplemental-groups` annotations, from 1000000000 up), no privilege, ALL capabilities
dropped (NET_BIND_SERVICE may be added), no host namespaces, seccomp runtime/default, and the volume types
configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret. The admission plugin
fills in what a pod leaves unset and rejects what it sets outside (openshift/apiserver-library-go
pkg/securitycontextconstraints/sccmatching/provider.go `ApplyToPod`; user/mustrunasrange.go `ValidateContainer`:
"must be in the ranges: [min, max]").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from dra_migrate.execute.ops_canary import _canary_pod

ROOT = Path(__file__).resolve().parents[2]
# A namespace's allocation as OpenShift writes it (one block of 10,000 per namespace).
UID_RANGE = (1000680000, 1000689999)
VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}


def restricted_v2(spec: dict[str, Any]) -> list[str]:
    """Why `restricted-v2` rejects a pod of this spec in a namespace allocated UID_RANGE ([] when it admits it)."""
    lo, hi = UID_RANGE
    out: list[str] = []
    psc = spec.get("securityContext") or {}
    for key in ("fsGroup",):
        if key in psc and not lo <= int(psc[key]) <= hi:
            out.append(f"spec.securityContext.{key}: {psc[key]} must be in the ranges: [{lo}, {hi}]")
    for g in psc.get("supplementalGroups") or []:
        if not lo <= int(g) <= hi:
            out.append(f"spec.securityContext.supplementalGroups: {g} must be in the ranges: [{lo}, {hi}]")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"spec.{key}: not allowed")
    for v in spec.get("volumes") or []:
        kind = next(k for k in v if k != "name")
        if kind not in VOLUMES:
            out.append(f"spec.volumes: {kind} volumes are not allowed to be used")
    profile = (psc.get("seccompProfile") or {}).get("type")
    if profile not in (None, "RuntimeDefault"):
        out.append(f"spec.securityContext.seccompProfile: {profile} is not runtime/default")
    for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
        sc = c.get("securityContext") or {}
        uid = sc.get("runAsUser", psc.get("runAsUser"))
        if uid is not None and not lo <= int(uid) <= hi:
            out.append(f"{c['name']}: runAsUser: {uid} must be in the ranges: [{lo}, {hi}]")
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged containers are not allowed")
        if sc.get("allowPrivilegeEscalation") is True:
            out.append(f"{c['name']}: allowPrivilegeEscalation is not allowed")
        added = set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            out.append(f"{c['name']}: capabilities {sorted(added)} are not allowed")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"{c['name']}: host ports are not allowed")
    return out


def _job_pod_spec() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy/in-cluster/apply-job.yaml").read_text()) if d]
    job = next(d for d in docs if d["kind"] == "Job")
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_the_model_rejects_what_restricted_v2_rejects() -> None:
    """The model itself: a fixed uid or fsGroup outside the namespace's range, a hostPath, a privileged container."""
    spec = {
        "securityContext": {"runAsUser": 65532, "fsGroup": 65532},
        "containers": [{"name": "c", "securityContext": {"privileged": True}}],
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
    }
    assert len(restricted_v2(spec)) == 4
    assert restricted_v2({"containers": [{"name": "c", "securityContext": {"runAsUser": UID_RANGE[0]}}]}) == []


def test_the_apply_job_is_admitted_by_restricted_v2() -> None:
    """The Job's pod named uid, gid and fsGroup 65532: restricted-v2 rejected it (the Job controller's pod
    creation failed, `FailedCreate`, and the Job never started) in every namespace but one given `nonroot-v2` or
    `anyuid`. The image's own USER 65532:65532 (Containerfile) runs it as 65532 elsewhere; on OpenShift the
    namespace's uid."""
    spec = _job_pod_spec()
    assert restricted_v2(spec) == []
    # ...and still non-root on any cluster, with what Pod Security `restricted` asks for set in the manifest
    # (the admission fills them in on OpenShift; a namespace enforcing `restricted` elsewhere wants them written).
    psc = spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}


def test_the_image_user_is_numeric_and_not_root() -> None:
    """Without runAsUser in the pod, runAsNonRoot is checked by the kubelet against the image's USER, which it
    can only verify when numeric (k8s.io/kubernetes pkg/kubelet/kuberuntime/security_context_others.go
    `verifyRunAsNonRoot`: a non-numeric user is refused)."""
    users = [line.split()[1] for line in (ROOT / "Containerfile").read_text().splitlines() if line.startswith("USER ")]
    assert users and all(u.partition(":")[0].isdigit() and int(u.partition(":")[0]) != 0 for u in users)


def test_the_canary_pod_is_admitted_by_restricted_v2() -> None:
    """The canary asks for its GPU through the scheduler (DRA's extended-resource claim), with no privilege or
    host path, and as the first uid of the namespace's range (ops_canary reads it from the namespace's
    `openshift.io/sa.scc.uid-range`): restricted-v2 admits it, whatever namespace it runs in. Its fixed non-root
    uid elsewhere (what Pod Security `restricted` needs of an image running as root) is refused here."""
    pod = _canary_pod("gpu-1", {"kubernetes.io/hostname": "gpu-1"}, "nvidia.com/gpu", "ubuntu:24.04", "t", "true",
                      uid=UID_RANGE[0])  # fmt: skip
    assert restricted_v2(pod["spec"]) == []
    elsewhere = _canary_pod("gpu-1", {}, "nvidia.com/gpu", "ubuntu:24.04", "t", "true")
    assert restricted_v2(elsewhere["spec"]) != []


def test_apply_runs_as_a_uid_with_no_passwd_entry(monkeypatch: Any) -> None:
    """On OpenShift the Job runs as the namespace's uid, which the image's /etc/passwd does not name, with no
    USER or LOGNAME in its environment: `getpass.getuser()` raises there (KeyError on Python 3.11, OSError from
    3.13: Lib/getpass.py). apply named its actor with it and died before its first step."""
    import getpass
    import pwd

    from dra_migrate.cli import apply as cli_apply
    from dra_migrate.execute import lock

    for var in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(var, raising=False)

    def no_entry(uid: int) -> Any:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    try:
        getpass.getuser()
        raise AssertionError("getuser() should fail without a passwd entry")
    except (KeyError, OSError):
        pass
    import os

    assert cli_apply._actor().startswith(f"{os.getuid()}@")
    assert lock.holder_identity("abc").startswith(f"{os.getuid()}@")


# -- the Machine API's pools ------------------------------------------------------------------------------------

PLATFORMS = ROOT / "fixtures" / "clusters" / "platforms"
MACHINESETS = ("ocp-ml-7xk2p-worker-gpu-us-east-1a", "ocp-ml-7xk2p-worker-gpu-us-east-1b")


def test_each_machineset_is_its_own_pool() -> None:
    """The installer makes a MachineSet per zone, all of one instance type. Keyed by instance type they were one
    pool whose group was one of the MachineSets: the template warning named that one (the other zone's new nodes
    came up on the device plugin), and the retire command deleted that one only. The node's
    `machine.openshift.io/machine` annotation names its Machine, which a MachineSet names after itself
    (openshift/machine-api-operator pkg/controller/machineset/controller.go: GenerateName `<machineset>-`)."""
    from dra_migrate.checks.run import assess
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.inventory.fleet import node_pool
    from dra_migrate.plan.strategies import retire_command

    state = load_snapshot(PLATFORMS / "openshift.yaml")
    assert sorted({node_pool(n, ()) for n in state.of("Node")}) == list(MACHINESETS)
    readiness = assess(state)
    pools = {p.name: p.platform for p in readiness.inventory.pools if p.platform is not None}
    assert sorted(pools) == list(MACHINESETS)
    for name, p in pools.items():
        assert (p.platform, p.provisioner, p.group, p.autoscaler) == (
            "openshift",
            "openshift-machineset",
            name,
            "cluster-autoscaler",
        )
        assert retire_command(name, p, "ocp-ml") == f"oc delete machineset {name} -n openshift-machine-api"
    # --pool-label still comes first
    assert {node_pool(n, ("topology.kubernetes.io/zone",)) for n in state.of("Node")} == {"us-east-1a", "us-east-1b"}


def test_the_twin_keeps_each_node_in_its_machineset() -> None:
    """The twin's nodes carry the annotation that names their pool, so a rehearsal's pools are the plan's (without
    it the twin's OpenShift nodes fell back to one instance-type pool, and every planned node read as moved)."""
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.inventory.fleet import node_pool
    from dra_migrate.sim.spec import GpuNodeSpec

    for n in load_snapshot(PLATFORMS / "openshift.yaml").of("Node"):
        spec = GpuNodeSpec.from_node(n)
        twin = {"metadata": {"labels": dict(spec.labels), "annotations": dict(spec.group_annotations)}}
        assert node_pool(twin, ()) == node_pool(n, ()) and node_pool(n, ()) in MACHINESETS


def test_the_new_machineset_selects_its_own_machines() -> None:
    """A MachineSet selects its Machines by `machine.openshift.io/cluster-api-machineset: <its name>` in
    spec.selector.matchLabels and spec.template.metadata.labels (OpenShift docs, "Creating a compute machine set":
    both carry `<infrastructure_id>-<role>-<zone>`). A copy renamed without them selects the old pool's machines,
    and its own carry the old name; its nodes must also keep the device plugin off, as on the other platforms."""
    from dra_migrate.checks.run import assess
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.plan.params import PlanParams
    from dra_migrate.plan.strategies import new_pool_name, platform_command

    state = load_snapshot(PLATFORMS / "openshift.yaml")
    pool = next(p for p in assess(state).inventory.pools if p.platform is not None)
    assert pool.platform is not None
    p = pool.platform
    params = PlanParams()
    cmd, manifest = platform_command(pool.name, p, params, "ocp-ml")
    assert manifest is None
    assert "machine.openshift.io/cluster-api-machineset" in cmd and "spec.selector.matchLabels" in cmd
    assert f"{params.device_plugin_label}={params.device_plugin_off}" in cmd
    assert new_pool_name(pool.name, p) in cmd


# -- the Machine Config Operator ------------------------------------------------------------------------------

MCO_STATE = "machineconfiguration.openshift.io/state"


def _with_node_annotations(state: Any, name: str, annotations: dict[str, str]) -> Any:
    for n in state.of("Node"):
        if n["metadata"]["name"] == name:
            n["metadata"].setdefault("annotations", {}).update(annotations)
    return state


def test_a_node_the_machine_config_operator_is_updating_is_named() -> None:
    """The Machine Config Daemon cordons, drains, reboots and uncordons a node it updates (its state annotation
    `Working`, its desiredConfig not yet its currentConfig: openshift/machine-config-operator
    pkg/daemon/constants/constants.go; the drain controller acts on `desiredDrain` `uncordon-<config>`). A node
    of the plan it updates is put back into service in the middle of its migration; nothing said so."""
    from dra_migrate.checks.run import assess
    from dra_migrate.cluster.snapshot import load_snapshot

    state = load_snapshot(PLATFORMS / "openshift.yaml")
    quiet = {f.id for f in assess(state).findings}
    assert "openshift-machine-config-update" not in quiet
    busy = "ocp-ml-7xk2p-worker-gpu-us-east-1b-r9z1c"
    state = _with_node_annotations(load_snapshot(PLATFORMS / "openshift.yaml"), busy, {
        MCO_STATE: "Working",
        "machineconfiguration.openshift.io/currentConfig": "rendered-worker-1",
        "machineconfiguration.openshift.io/desiredConfig": "rendered-worker-2",
    })  # fmt: skip
    found = [f for f in assess(state).findings if f.id == "openshift-machine-config-update"]
    assert len(found) == 1
    assert [r.name for r in found[0].objects] == [busy]
    assert "paused" in found[0].remediation
    # Done, and on its desired config: quiet again
    state = _with_node_annotations(load_snapshot(PLATFORMS / "openshift.yaml"), busy, {
        MCO_STATE: "Done",
        "machineconfiguration.openshift.io/currentConfig": "rendered-worker-2",
        "machineconfiguration.openshift.io/desiredConfig": "rendered-worker-2",
    })  # fmt: skip
    assert "openshift-machine-config-update" not in {f.id for f in assess(state).findings}
