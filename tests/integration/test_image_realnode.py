"""The image on the real node (issue 23): imported into the node's containerd, it runs as a pod under the
ServiceAccount of deploy/in-cluster, reads the cluster with the in-cluster credentials the kubelet mounts,
and does so as uid 65532 on a read-only root filesystem.

One real node per machine: the node fixture waits for its turn (controlplane.real_node_lock).
  python3 -m pytest -m realnode tests/integration/test_image_realnode.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from realnode import real_node
from ruamel.yaml import YAML

from dra_migrate import __version__
from dra_migrate.execute.cluster_journal import read_cluster_journal
from dra_migrate.plan import io as plan_io
from dra_migrate.sim.kube import Kube, path_of

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = f"dra-migrate.local/dra-migrate:{__version__}"
RBIN = Path(os.environ.get("DRA_MIGRATE_REALNODE_CACHE", Path.home() / ".cache" / "dra-migrate" / "realnode")) / "bin"


def _run(*args: str | Path, timeout: float = 900) -> str:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False)
    assert r.returncode == 0, f"{args[:2]} exited {r.returncode}:\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image archive, built as `make release` builds it (the Debian layer is cached per machine), or
    DRA_MIGRATE_IMAGE_ARCHIVE: one built before taking the real-node lock, to keep the hold short."""
    if os.environ.get("DRA_MIGRATE_IMAGE_ARCHIVE"):
        return Path(os.environ["DRA_MIGRATE_IMAGE_ARCHIVE"])
    out = tmp_path_factory.mktemp("image")
    wheel = _run(ROOT / "tools" / "release" / "dist", out).split()[-1]
    return Path(_run(ROOT / "tools" / "image" / "build", wheel, out).split()[-1])


@pytest.fixture(scope="module")
def node(
    real_node_turn: None, tmp_path_factory: pytest.TempPathFactory, image: Path
) -> Iterator[tuple[controlplane.ControlPlane, Kube]]:
    needs = "kubelet, containerd, network namespaces"
    with real_node(tmp_path_factory, "real-node", needs, "--devices", "1") as (cp, kube, _):
        sock = cp.dir / "node" / "containerd" / "containerd.sock"
        _run(RBIN / "ctr", "--address", sock, "-n", "k8s.io", "images", "import", "--base-name",
             IMAGE.rsplit(":", 1)[0], image)  # fmt: skip
        yield cp, kube


def _install(kube: Kube, rel: str) -> None:
    kinds = {"Namespace": ("v1", "namespaces"), "ServiceAccount": ("v1", "serviceaccounts"),
             "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles"),
             "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings"),
             "Role": ("rbac.authorization.k8s.io/v1", "roles"),
             "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings"),
             "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses")}  # fmt: skip
    for doc in YAML(typ="safe").load_all((ROOT / rel).read_text()):
        version, plural = kinds[doc["kind"]]
        kube.create_or_exists(path_of(version, plural, namespace=doc["metadata"].get("namespace")), doc)


def _pod(port: str, script: str) -> dict[str, Any]:
    """The apply Job's pod settings (deploy/in-cluster/apply-job.yaml), with the host's network: the real
    node has no kube-proxy, so the API server is reached where it listens, on 127.0.0.1."""
    return {
        "metadata": {"name": f"dra-migrate-{uuid.uuid4().hex[:6]}", "namespace": "dra-migrate"},
        "spec": {
            "serviceAccountName": "dra-migrate",
            "restartPolicy": "Never",
            "hostNetwork": True,
            "tolerations": [{"operator": "Exists"}],
            # As the Job: no uid in the pod (OpenShift's restricted-v2 rejects one outside the namespace's
            # range), so the uid 65532 the test reads back is the image's own USER.
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                {
                    "name": "tool",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "env": [
                        {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                        {"name": "KUBERNETES_SERVICE_PORT", "value": port},
                    ],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }


def test_the_image_reads_the_cluster_in_a_pod_as_its_service_account(
    node: tuple[controlplane.ControlPlane, Kube],
) -> None:
    cp, kube = node
    for rel in ("deploy/rbac/readonly.yaml", "deploy/in-cluster/serviceaccount.yaml",
                "deploy/in-cluster/readonly-binding.yaml"):  # fmt: skip
        _install(kube, rel)
    wait_for("the ServiceAccount", lambda: kube.get_or_none(path_of("v1", "serviceaccounts", "dra-migrate",
                                                                    "dra-migrate")))  # fmt: skip
    port = cp.server.rsplit(":", 1)[1]
    # The verdict goes to the termination message (the real node serves no pod logs to the API server here).
    script = (
        "dra-migrate inventory -o json >/tmp/inv.json 2>/tmp/err; rc=$?; "
        'if [ $rc -eq 0 ]; then python3 -c \'import json,os; d=json.load(open("/tmp/inv.json")); '
        'print(d["cluster"]["source"], len(d["nodes"]), os.getuid())\' >/dev/termination-log; '
        "else tail -c 2000 /tmp/err >/dev/termination-log; fi; exit $rc"
    )
    body = _pod(port, script)
    path = path_of("v1", "pods", body["metadata"]["name"], "dra-migrate")
    kube.create(path_of("v1", "pods", namespace="dra-migrate"), body)
    t0 = time.monotonic()

    def finished() -> dict[str, Any] | None:
        pod = kube.get(path)
        return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

    pod = wait_for("the tool's pod finished", finished, timeout=180)
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    message = state.get("message", "")
    assert state["exitCode"] == 0, message
    source, nodes, uid = message.split()
    assert (source, uid) == ("live", "65532"), message
    assert int(nodes) >= 1, "the real node is a GPU node: inventory must list it"
    print(f"\nimage pod ran inventory in-cluster in {time.monotonic() - t0:.1f}s")


def _job(port: str, name: str) -> dict[str, Any]:
    """deploy/in-cluster/apply-job.yaml's Job, with one change the real node needs: the host's network (see
    `_pod`). The plan comes from the ConfigMap and the journal goes to the cluster, as written."""
    doc = next(d for d in YAML(typ="safe").load_all((ROOT / "deploy/in-cluster/apply-job.yaml").read_text())
               if d["kind"] == "Job")  # fmt: skip
    doc["metadata"]["name"] = name
    pod = doc["spec"]["template"]["spec"]
    pod.pop("affinity")  # the one real node is a GPU node: the Job runs beside what it migrates here
    pod["hostNetwork"] = True
    pod["tolerations"] = [{"operator": "Exists"}]  # it cordons this node, then runs on it again to resume
    for c in pod["containers"]:
        c["image"], c["imagePullPolicy"] = IMAGE, "Never"
        c["env"] = [*c.get("env", []), *_pod(port, "")["spec"]["containers"][0]["env"]]  # DRA_MIGRATE_POD_UID kept
    return doc  # type: ignore[no-any-return]


def _records(kube: Kube, plan: Path) -> list[dict[str, Any]]:
    """The Jobs' journal, read from the cluster as `status --state in-cluster` reads it."""
    return read_cluster_journal(kube.api_client, "dra-migrate", str(plan_io.load(plan)["digest"]))


def _ended(kube: Kube, plan: Path, action: str) -> bool:
    return any(r.get("event") == "end" and str(r.get("stepId", "")).endswith("/" + action)
               for r in _records(kube, plan))  # fmt: skip


def _remaining(cp: controlplane.ControlPlane, plan: Path) -> list[str]:
    """`status` on the host, from the journal in the cluster (no file beside the host's copy of the plan)."""
    r = subprocess.run([sys.executable, "-m", "dra_migrate", "status", str(plan), "-o", "name", "--state", "in-cluster",
                        "--lock-namespace", "dra-migrate", "--kubeconfig", str(cp.kubeconfig)],
                       capture_output=True, text=True, check=False, env={**os.environ, "NO_COLOR": "1"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_a_job_applies_the_plan_and_a_second_resumes_after_the_first_is_killed(
    node: tuple[controlplane.ControlPlane, Kube], tmp_path: Path
) -> None:
    from test_realnode import DRA, GPU, install_dra_daemonset
    from test_realnode import IMAGE as BUSYBOX

    cp, kube = node
    for rel in ("deploy/rbac/readonly.yaml", "deploy/rbac/operator.yaml", "deploy/in-cluster/serviceaccount.yaml",
                "deploy/rbac/state.yaml", "deploy/in-cluster/readonly-binding.yaml",
                "deploy/in-cluster/apply-binding.yaml", "deploy/in-cluster/priorityclass.yaml"):  # fmt: skip
        _install(kube, rel)
    install_dra_daemonset(kube)
    (gpu_node,) = [n for n in kube.list_all("/api/v1/nodes")[0] if n["status"].get("allocatable", {}).get(GPU)]
    plan_file = tmp_path / "plan.yaml"
    plan = subprocess.run(
        [sys.executable, "-m", "dra_migrate", "plan", "--kubeconfig", str(cp.kubeconfig), "--out",
         str(plan_file), "--soak", "0s", "--canary-image", BUSYBOX],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    # As the operator does: kubectl -n dra-migrate create configmap dra-migrate-plan --from-file=plan.yaml=...
    kube.create(path_of("v1", "configmaps", namespace="dra-migrate"),
                {"metadata": {"name": "dra-migrate-plan"}, "data": {"plan.yaml": plan_file.read_text()}})  # fmt: skip
    port = cp.server.rsplit(":", 1)[1]
    jobs = path_of("batch/v1", "jobs", namespace="dra-migrate")
    pods = path_of("v1", "pods", namespace="dra-migrate")

    # The first Job, killed once the wave has started on the node (cordoned, drained).
    kube.create(jobs, _job(port, "apply-1"))
    wait_for("the first Job to drain the node", lambda: _ended(kube, plan_file, "drain"), timeout=180)
    for p in kube.list_all(pods, (("labelSelector", "job-name=apply-1"),))[0]:
        kube.delete(f"{pods}/{p['metadata']['name']}", {"gracePeriodSeconds": 0})
    kube.delete(f"{jobs}/apply-1", {"propagationPolicy": "Background"})
    wait_for("the first Job's pod gone", lambda: not kube.list_all(pods, (("labelSelector", "job-name=apply-1"),))[0],
             timeout=60)  # fmt: skip
    middle = _remaining(cp, plan_file)
    assert middle and any(s.endswith("/uncordon") for s in middle), middle  # `status` from the host: mid-wave

    # A second runner must wait for the killed one's Lease to expire (another pod cannot tell it is gone).
    lease = path_of("coordination.k8s.io/v1", "leases", "dra-migrate", "dra-migrate")

    def lease_free() -> bool:
        spec = (kube.get_or_none(lease) or {}).get("spec") or {}
        if not spec.get("renewTime"):
            return True
        renewed = datetime.fromisoformat(spec["renewTime"].replace("Z", "+00:00"))
        return (datetime.now(UTC) - renewed).total_seconds() > int(spec.get("leaseDurationSeconds") or 0) + 1

    wait_for("the killed runner's Lease to expire", lease_free, timeout=120)
    kube.create(jobs, _job(port, "apply-2"))

    def succeeded() -> dict[str, Any] | None:
        status = kube.get(f"{jobs}/apply-2").get("status") or {}
        assert not status.get("failed"), f"the resuming Job failed: {_records(kube, plan_file)[-3:]}"
        return status if status.get("succeeded") else None

    wait_for("the second Job to finish the plan", succeeded, timeout=300)
    assert _remaining(cp, plan_file) == []
    assert not list(tmp_path.glob("*.journal.jsonl")), "the journal is in the cluster, not beside the plan"
    runs = [r for r in _records(kube, plan_file) if r.get("event") == "run-start"]
    assert len(runs) == 2, "the second Job resumed the first's journal, not a new one"
    labels = kube.get(f"/api/v1/nodes/{gpu_node['metadata']['name']}")["metadata"]["labels"]
    assert labels.get(DRA) == "true"
    kube.delete(f"{jobs}/apply-2", {"propagationPolicy": "Background"})
    kube.delete(path_of("v1", "configmaps", "dra-migrate-plan", "dra-migrate"))
