"""GPU nodes played by KWOK on the session's real control plane (tools/k8s/up), instant timing: kubelet,
device plugin and DRA kubelet plugin behaviour per node as the tool reads it, the NVIDIA stack installer,
workload loading and the `python -m dra_migrate.sim` CLI. The measured delays and windows, and the canary,
are test_kwok's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import orjson
import pytest
from conftest import wait_for
from nodes import TwinNodes, gpu_status, node, on_kwok, pod, slices_of

from dra_migrate.cluster.state import SourceInfo, StateBuilder
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.load import load_workloads
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.stack import DRA_PLUGIN_DAEMONSET, install_nvidia_stack

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]  # the control plane is shared with other modules: keep our names apart
POOL = f"sim-{RUN}"


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet) -> Iterator[TwinNodes]:
    specs = [
        GpuNodeSpec.small(f"{POOL}-h100", gpus=2, pool=POOL),
        GpuNodeSpec.small(f"{POOL}-mig", gpus=2, pool=POOL, mig={"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
        GpuNodeSpec.small(f"{POOL}-t4", gpus=2, pool=POOL, product="Tesla-T4", memory_mib=15360, replicas=4),
    ]
    with on_kwok(kwok, specs) as f:
        yield f


def test_nodes_become_ready_and_schedulable(fleet: TwinNodes, kube: Kube) -> None:
    for name in fleet.node_names:
        n = node(kube, name)
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert not n["spec"].get("unschedulable")
        lease = kube.get(path_of("coordination.k8s.io/v1", "leases", name, "kube-node-lease"))
        # Held by kwok (its own identity, for every node it plays) where a kubelet holds it as the node: the
        # node lifecycle controller reads only the renewal, and the tool never reads node Leases.
        assert lease["spec"]["holderIdentity"] and lease["spec"]["renewTime"]
    assert node(kube, f"{POOL}-h100")["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert node(kube, f"{POOL}-t4")["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node(kube, f"{POOL}-mig")["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "4"
    # Admission taints a new Node not-ready; the node lifecycle controller lifts it once it sees Ready.
    for name in fleet.node_names:

        def untainted(name: str = name) -> bool:
            taints = node(kube, name)["spec"].get("taints") or []
            return not [t for t in taints if t["key"].startswith("node.kubernetes.io/")]

        wait_for(f"{name} without node.kubernetes.io taints", untainted, timeout=20)


def test_heartbeat_renews_the_lease(fleet: TwinNodes, kube: Kube) -> None:
    path = path_of("coordination.k8s.io/v1", "leases", f"{POOL}-h100", "kube-node-lease")
    first = kube.get(path)["spec"]["renewTime"]
    # kwok renews at a quarter of the Lease's duration (conftest.TEST_LEASE_S: every 3 s).
    wait_for("a renewed lease", lambda: kube.get(path)["spec"]["renewTime"] != first, timeout=8)


def test_device_plugin_label_toggles_allocatable(fleet: TwinNodes, kube: Kube) -> None:
    name = f"{POOL}-h100"
    fleet.set_device_plugin(name, False)
    # Instant timing: no capacity grace, both read 0 (the key kept), as after a real node's grace.
    wait_for("capacity and allocatable 0", lambda: gpu_status(kube, name) == ("0", "0"), timeout=5)
    fleet.set_device_plugin(name, True)
    wait_for("capacity and allocatable 2", lambda: gpu_status(kube, name) == ("2", "2"), timeout=5)


@pytest.mark.parametrize(("suffix", "count"), [("h100", 2), ("mig", 8), ("t4", 2)])
def test_dra_label_publishes_and_deletes_a_slice(fleet: TwinNodes, kube: Kube, suffix: str, count: int) -> None:
    name = f"{POOL}-{suffix}"
    assert slices_of(kube, name) == []
    # Set the label the GPU operator uses (the other toggle is exercised by set_dra_plugin below).
    kube.merge_patch(
        path_of("v1", "nodes", name), {"metadata": {"labels": {"nvidia.com/gpu.deploy.dra-driver": "true"}}}
    )
    found = wait_for("a ResourceSlice", lambda: slices_of(kube, name), timeout=3)
    assert len(found) == 1
    s = found[0]
    # Created, so the real API server validated every device (names, attribute types, semver, limits).
    assert s["spec"]["driver"] == "gpu.nvidia.com"
    assert s["spec"]["pool"]["name"] == name and s["spec"]["pool"]["resourceSliceCount"] == 1
    assert len(s["spec"]["devices"]) == count
    owner = s["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", name, node(kube, name)["metadata"]["uid"])
    fleet.set_dra_plugin(name, False)
    wait_for("no ResourceSlice", lambda: not slices_of(kube, name), timeout=3)
    fleet.set_dra_plugin(name, True)
    again = wait_for("a ResourceSlice again", lambda: slices_of(kube, name), timeout=3)
    assert again[0]["spec"]["pool"]["generation"] > s["spec"]["pool"]["generation"]
    fleet.set_dra_plugin(name, False)
    wait_for("no ResourceSlice", lambda: not slices_of(kube, name), timeout=3)


def test_bound_pod_runs_and_deleted_pod_goes(fleet: TwinNodes, kube: Kube, namespace: str) -> None:
    pods = path_of("v1", "pods", namespace=namespace)
    kube.create(pods, pod("bound", nodeName=f"{POOL}-mig"))
    p = wait_for(
        "Running",
        lambda: (lambda o: o if o["status"].get("phase") == "Running" else None)(kube.get(f"{pods}/bound")),
        timeout=5,
    )
    assert p["status"]["podIP"] and p["status"]["startTime"]
    assert {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"] == "True"
    assert p["status"]["containerStatuses"][0]["state"]["running"]
    kube.delete(f"{pods}/bound")  # default grace period: KWOK's pod-kill Stage finishes it
    wait_for("pod gone", lambda: kube.get_or_none(f"{pods}/bound") is None, timeout=5)


def test_scheduler_places_a_gpu_pod_on_a_device_plugin_node(fleet: TwinNodes, kube: Kube, namespace: str) -> None:
    pods = path_of("v1", "pods", namespace=namespace)
    body = pod("gpu", nodeSelector={"cloud.google.com/gke-nodepool": POOL})
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    kube.create(pods, body)
    p = wait_for(
        "Running",
        lambda: (lambda o: o if o["status"].get("phase") == "Running" else None)(kube.get(f"{pods}/gpu")),
        timeout=15,
    )
    assert p["spec"]["nodeName"] in (f"{POOL}-h100", f"{POOL}-t4")


def test_install_nvidia_stack(fleet: TwinNodes, kube: Kube) -> None:
    policy = {
        "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"enabled": True}},
        "status": {"state": "ready"},
    }
    install_nvidia_stack(kube.api_client, cluster_policy=policy)
    install_nvidia_stack(kube.api_client, cluster_policy=policy)  # re-runnable
    cp = kube.get("/apis/nvidia.com/v1/clusterpolicies/cluster-policy")
    assert cp["spec"]["devicePlugin"] == {"enabled": True} and cp["status"]["state"] == "ready"
    ds_pods = path_of("v1", "pods", namespace="nvidia-dra-driver-gpu")
    name = f"{POOL}-t4"
    fleet.set_dra_plugin(name, True)
    try:

        def running() -> bool:
            items, _ = kube.list_all(ds_pods, [("fieldSelector", f"spec.nodeName={name}")])
            return any(p["status"].get("phase") == "Running" for p in items)

        wait_for(f"{DRA_PLUGIN_DAEMONSET} pod Running on {name}", running, timeout=15)
    finally:
        fleet.set_dra_plugin(name, False)


# Pods are kept in a snapshot's state only when they use devices (ClusterState.other_pods).
GPU_CONTAINER = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def test_load_workloads(fleet: TwinNodes, kube: Kube) -> None:
    ns = f"load-{RUN}"
    template = {
        "metadata": {"labels": {"app": "w"}},
        "spec": {
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
            "nodeSelector": {"cloud.google.com/gke-nodepool": POOL},
        },
    }
    server_meta = {
        "uid": "11111111-0000-0000-0000-000000000000",
        "resourceVersion": "42",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "generation": 3,
    }
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "w", "namespace": ns, **server_meta},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "w"}}, "template": template},
            "status": {"replicas": 1},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "w-abc",
                "namespace": ns,
                "uid": "2",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "w",
                        "uid": server_meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template},
        },
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "pt", "namespace": ns, "uid": "33333333-0000-0000-0000-000000000000"},
            "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": template}}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "pt-worker-0",
                "namespace": ns,
                "uid": "4",
                "ownerReferences": [
                    {
                        "apiVersion": "kubeflow.org/v1",
                        "kind": "PyTorchJob",
                        "name": "pt",
                        "uid": "33333333-0000-0000-0000-000000000000",
                        "controller": True,
                    }
                ],
            },
            "spec": {"nodeName": f"{POOL}-h100", "containers": [GPU_CONTAINER]},
            "status": {"phase": "Running"},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "w-abc-xyz",
                "namespace": ns,
                "uid": "5",
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "w-abc", "uid": "2", "controller": True}
                ],
            },
            "spec": {"containers": [GPU_CONTAINER]},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bare", "namespace": ns, "uid": "6"},
            "spec": {"nodeName": f"{POOL}-mig", "containers": [GPU_CONTAINER]},
        },
    ]
    builder = StateBuilder(SourceInfo(kind="snapshot", location="test"))
    builder.add_all(objs)
    report = load_workloads(kube.api_client, builder.state)
    assert report.skipped == []
    assert report.created["apps/Deployment"] == 1 and report.created["kubeflow.org/PyTorchJob"] == 1
    assert report.created["Pod"] == 2 and "apps/ReplicaSet" not in report.created
    pt = kube.get(path_of("kubeflow.org/v1", "pytorchjobs", "pt", ns))
    worker = kube.get(path_of("v1", "pods", "pt-worker-0", ns))
    assert worker["metadata"]["ownerReferences"][0]["uid"] == pt["metadata"]["uid"]
    pods = path_of("v1", "pods", namespace=ns)

    def all_running() -> bool:
        items, _ = kube.list_all(pods)
        return len(items) == 3 and all(p["status"].get("phase") == "Running" for p in items)

    wait_for("the Deployment's pod and the copied pods Running", all_running, timeout=20)
    kube.delete(path_of("v1", "namespaces", ns))


def test_cli_runs_until_sigterm(control_plane: controlplane.ControlPlane, kube: Kube, tmp_path: Path) -> None:
    name = f"{POOL}-cli"
    spec = GpuNodeSpec.small(name, gpus=1, pool=POOL)
    node_obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": spec.labels},
        "status": {"capacity": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"}},
    }
    snap = tmp_path / "snap.json"
    snap.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": [node_obj]}))
    env = {**os.environ, "PYTHONPATH": str(controlplane.REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dra_migrate.sim",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--snapshot",
            str(snap),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        wait_for("the CLI's node", lambda: kube.get_or_none(path_of("v1", "nodes", name)), timeout=15)
        wait_for("allocatable", lambda: node(kube, name)["status"].get("allocatable", {}).get("nvidia.com/gpu") == "1")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err.decode()
        assert b"stopped" in err
    finally:
        if proc.poll() is None:
            proc.kill()
        kube.delete(path_of("v1", "nodes", name))
