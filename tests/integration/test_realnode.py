"""The real-node tier: a real kubelet v1.37.2, containerd 2.x and our GPU plugins (tools/k8s/node), migrated
and rolled back by the tool's own commands, with the kubelet behaviour the cutover relies on measured.

One control plane and one real node for the module (its own, not the session's: `plan` covers every GPU
node of a cluster, and the other modules' KWOK nodes must not be in it). The tests run in file order
and each leaves the node as the next expects: device plugin serving, DRA plugin off.

Measured figures are printed at the end of the module (and kept in MEASURED); README "Real-node tier"
quotes one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import controlplane
import pytest
import realnode
from conftest import wait_for
from realnode import (
    GPU,
    IMAGE,
    ROOT,
    apply_records,
    cli,
    message,
    node_obj,
    plan_estimate_s,
    real_node,
    report_measured,
    slice_devices,
    start_pod,
    step_end,
)
from ruamel.yaml import YAML

from dra_migrate.plan import io as plan_io
from dra_migrate.sim.kube import Kube, path_of

pytestmark = [pytest.mark.cluster, pytest.mark.realnode]

DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
NEEDS = "kubelet, containerd, network namespaces"
PAUSE = "dra-migrate.local/pause:1"
DEVICES = 2
CLASS = "gpu-extended.nvidia.com"  # the DeviceClass the plan makes for nvidia.com/gpu
MEASURED: dict[str, float] = {}


@dataclass(frozen=True)
class RealNode:
    cp: controlplane.ControlPlane
    name: str
    dir: Path  # DIR/node
    kube: Kube


@pytest.fixture(scope="module")
def node(
    real_node_turn: None, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealNode]:
    t0 = time.monotonic()
    try:
        with real_node(tmp_path_factory, "real-node", NEEDS, "--devices", str(DEVICES)) as (cp, kube, up):
            MEASURED["node up (s, incl. cached build check)"] = round(time.monotonic() - t0, 1)
            install_dra_daemonset(kube)
            yield RealNode(cp, up.stdout.strip().splitlines()[-1], cp.dir / "node", kube)
    finally:
        report_measured(request, "real-node measurements", MEASURED)


def install_dra_daemonset(kube: Kube) -> None:
    """The DRA driver chart's kubelet-plugin DaemonSet (v0.4 name), placed by the GPU Operator recipe's label.
    Its pod runs our pause image on the real node; the plugin itself runs as a host process (pods cannot
    reach an API server on 127.0.0.1), started and stopped by the same label."""
    ns = "nvidia-dra-driver-gpu"
    kube.create_or_exists("/api/v1/namespaces", {"metadata": {"name": ns}})
    labels = {"app.kubernetes.io/name": "dra-driver-nvidia-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
    kube.create_or_exists(
        path_of("apps/v1", "daemonsets", namespace=ns),
        {
            "metadata": {"name": "dra-driver-nvidia-gpu-kubelet-plugin", "namespace": ns, "labels": labels},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {DRA: "true"},
                        "tolerations": [{"operator": "Exists"}],
                        "automountServiceAccountToken": False,
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "gpus", "image": PAUSE, "imagePullPolicy": "Never"}],
                    },
                },
            },
        },
    )


# -- helpers -------------------------------------------------------------------------------------------


def gpu_status(n: RealNode) -> tuple[str | None, str | None]:
    st = node_obj(n)["status"]
    return (st.get("capacity") or {}).get(GPU), (st.get("allocatable") or {}).get(GPU)


def uuids_published(n: RealNode) -> set[str]:
    return {d["attributes"]["uuid"]["string"] for d in slice_devices(n)}


def run_gpu_pod(n: RealNode, command: str = "nvidia-smi -L", timeout: float = 60) -> dict[str, Any]:
    """`command` in a GPU pod (realnode.run_gpu_pod), then the NVIDIA_VISIBLE_DEVICES it was given."""
    return realnode.run_gpu_pod(n, f"{command}; echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES", timeout)


def timed(what: str, probe: Callable[[], Any], timeout: float, poll: float = 0.2) -> float:
    """Seconds until `probe` is truthy (polling every `poll` s)."""
    t0 = time.monotonic()
    while not probe():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)
    return round(time.monotonic() - t0, 1)


def plan_for(n: RealNode, dir: Path, name: str, *extra: str) -> Path:
    out = dir / name
    res = cli(n.cp, "plan", "--out", str(out), "--soak", "0s", "--canary-image", IMAGE, *extra)
    assert res.returncode == 0, res.stderr
    assert plan_io.load(out)["applicable"] is True, res.stdout + res.stderr
    return out


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def step_seconds(plan: Path, step: str) -> float:
    """From the step's last start record to its end record, by the journal's clock."""
    start = [e for e in apply_records(plan, step) if e.get("event") == "start"][-1]
    return round(epoch(step_end(plan, step)["time"]) - epoch(start["time"]), 1)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Plans and journals shared by the tests (the rollback uses the apply's journal)."""
    return tmp_path_factory.mktemp("realnode-plans")


def assert_original(n: RealNode, *, classes: list[str]) -> None:
    """The node as tools/k8s/node started it: device plugin on, DRA label absent, schedulable; and exactly
    `classes` as DeviceClasses (a failed wave rolls back the wave, not the prepare stage that made the class)."""
    obj = node_obj(n)
    labels = obj["metadata"].get("labels") or {}
    assert labels.get(DP) == "true" and DRA not in labels, labels
    assert not obj["spec"].get("unschedulable")
    items, _ = n.kube.list_all("/apis/resource.k8s.io/v1/deviceclasses")
    assert [c["metadata"]["name"] for c in items] == classes
    wait_for("the device plugin to serve again", lambda: gpu_status(n)[1] == str(DEVICES), timeout=60)


# -- the tier ------------------------------------------------------------------------------------------


def test_a_pod_runs_through_the_device_plugin(node: RealNode) -> None:
    assert gpu_status(node) == (str(DEVICES), str(DEVICES))
    pod = run_gpu_pod(node)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert "extendedResourceClaimStatus" not in pod["status"]  # the device plugin served it
    lines = [x for x in message(pod).splitlines() if x.startswith("GPU ")]
    assert len(lines) == 1 and "(UUID: GPU-" in lines[0], message(pod)


def test_apply_moves_the_node_to_dra_and_a_container_uses_its_device(node: RealNode, workdir: Path) -> None:
    plan = plan_for(node, workdir, "dra_migrate.yaml")
    t0 = time.monotonic()
    res = cli(node.cp, "apply", str(plan), "--yes")
    assert res.returncode == 0, res.stderr
    MEASURED["apply of one real node (s)"] = round(time.monotonic() - t0, 1)
    MEASURED["the plan's estimate of that apply (s)"] = plan_estimate_s(plan)
    MEASURED["wait-dra-ready on the real node (s)"] = step_seconds(plan, "wait-dra-ready")
    MEASURED["canary on the real node (s)"] = step_seconds(plan, "canary")
    n = node_obj(node)
    assert n["metadata"]["labels"][DP] == "false" and n["metadata"]["labels"][DRA] == "true"
    assert not n["spec"].get("unschedulable")
    published = uuids_published(node)
    assert len(published) == DEVICES
    # The canary proved use: its termination message names the device its claim was given, by uuid.
    end = step_end(plan, "canary")
    assert end["result"] == "ok"
    assert end["after"]["expected"] and set(end["after"]["expected"]) <= published
    assert all(u in end["after"]["saw"] for u in end["after"]["expected"])
    # The same pod spec as before now runs through DRA: a claim prepared by the real plugin, the
    # CDI-injected environment and device file seen by the container.
    pod = run_gpu_pod(node)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert pod["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"] == GPU
    seen = [x.split("UUID: ")[1].rstrip(")") for x in message(pod).splitlines() if x.startswith("GPU ")]
    assert len(seen) == 1 and seen[0] in published, message(pod)
    assert f"NVIDIA_VISIBLE_DEVICES={seen[0]}" in message(pod)


def probe_role(n: RealNode, tmp_path: Path) -> Path:
    """A kubeconfig for a user holding only deploy/rbac/probe.yaml."""
    role = YAML(typ="safe").load((ROOT / "deploy" / "rbac" / "probe.yaml").read_text())
    user = f"prober-{uuid.uuid4().hex[:6]}"
    role["metadata"]["name"] = user
    n.kube.create_or_exists("/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    n.kube.create_or_exists(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    return controlplane.mint_kubeconfig(n.cp, user, [], tmp_path / "prober.kubeconfig")


def probe_cli(kubeconfig: Path, node: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dra_migrate", "probe", "--kubeconfig", str(kubeconfig), "--node", node,
         "--canary-image", IMAGE, "-o", "json", *extra],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def leftovers(n: RealNode) -> list[str]:
    out = []
    for path in ("/api/v1/pods", "/apis/resource.k8s.io/v1/resourceclaims", "/apis/resource.k8s.io/v1/deviceclasses"):
        items, _ = n.kube.list_all(path, [("labelSelector", "dra-migrate.io/probe")])
        out += [f"{path}/{i['metadata']['name']}" for i in items]
    return out


def test_probe_passes_on_the_migrated_node_with_only_its_role_and_fails_when_prepare_fails(
    node: RealNode, tmp_path: Path
) -> None:
    kc = probe_role(node, tmp_path)
    t0 = time.monotonic()
    res = probe_cli(kc, node.name)
    MEASURED["probe on the real node (s)"] = round(time.monotonic() - t0, 1)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["formatVersion"] == 1 and doc["node"] == node.name and doc["result"] == "ok"
    assert doc["deviceClass"] == CLASS  # the class the plan made for nvidia.com/gpu
    assert {d["attributes"]["uuid"] for d in doc["devices"]} == uuids_published(node)
    assert all(d["capacity"]["memory"] for d in doc["devices"])
    assert doc["match"]["allocated"] and len(doc["match"]["devices"]) == 1
    by_name = {d["name"]: d["attributes"]["uuid"] for d in doc["devices"]}
    assert by_name[doc["match"]["devices"][0]] in doc["match"]["containerSaw"]
    assert doc["mismatch"] == {**doc["mismatch"], "allocated": False}
    assert "cannot allocate all claims" in doc["mismatch"]["reason"]
    assert leftovers(node) == []
    fail = node.dir / "fail-prepare"
    fail.touch()
    try:
        res = probe_cli(kc, node.name)
    finally:
        fail.unlink()
    assert res.returncode == 2, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["result"] == "failed" and "FailedPrepareDynamicResources" in " ".join(doc["problems"])
    assert leftovers(node) == []


def test_capacity_is_held_while_allocatable_is_zero_after_the_device_plugin_left(node: RealNode, workdir: Path) -> None:
    """Device manager: allocatable 0 at once, capacity kept for endpointStopGracePeriod = 5 min (k8s.io/kubernetes
    v1.37.2 pkg/kubelet/cm/devicemanager/endpoint.go, manager.go GetCapacity). The tier watches the first
    75 s of that window (the whole 5 min would double its run time)."""
    stopped = epoch(step_end(workdir / "dra_migrate.yaml", "disable-device-plugin")["time"])
    while time.time() - stopped < 75:
        assert gpu_status(node) == (str(DEVICES), "0")
        time.sleep(5)
    MEASURED["capacity still N with allocatable 0, checked up to (s after the label switch)"] = round(
        time.time() - stopped, 1
    )


def test_rollback_waits_for_the_kubelet_to_wipe_the_slices_then_serves_the_device_plugin_again(
    node: RealNode, workdir: Path
) -> None:
    assert slice_devices(node)
    t0 = time.monotonic()
    res = cli(node.cp, "rollback", str(workdir / "dra_migrate.yaml"), "--yes")
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    # The plugin stops at once (its label is gone) and never deletes its slices; the kubelet wipes them
    # 30 s after the plugin's endpoint went away (defaultWipingDelay, pkg/kubelet/cm/dra/manager.go). Rollback
    # waits for that before the device plugin and the uncordon (execute/actions.py `_wait_dra_gone`):
    # uncordoned earlier, the scheduler allocated claims from the stale slices to pods the node could not start.
    assert not slice_devices(node), "rollback returned while the node still published its slices"
    MEASURED["rollback, the kubelet's wipe of the slices included (s)"] = round(took, 1)
    assert took >= 25, took
    back = timed("allocatable back to N", lambda: gpu_status(node) == (str(DEVICES), str(DEVICES)), timeout=60)
    MEASURED["device plugin serving again after rollback (s)"] = back
    assert_original(node, classes=[])
    pod = run_gpu_pod(node)
    assert pod["status"]["phase"] == "Succeeded" and "extendedResourceClaimStatus" not in pod["status"]


def test_a_pod_terminates_over_its_grace_period(node: RealNode) -> None:
    """A container ignoring SIGTERM is killed when its grace period ends; the pod object goes then."""
    ignore_term = ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]
    path = start_pod(node, f"grace-{uuid.uuid4().hex[:6]}", ignore_term, grace=5)
    wait_for("grace pod running", lambda: node.kube.get(path)["status"].get("phase") == "Running", timeout=60)
    t0 = time.monotonic()
    node.kube.delete(path)
    gone = timed("pod gone", lambda: node.kube.get_or_none(path) is None, timeout=60)
    MEASURED["pod with grace 5 s ignoring SIGTERM: delete to gone (s)"] = gone
    assert 5 <= time.monotonic() - t0 <= 20


def test_a_canary_whose_prepare_fails_fails_the_step_with_the_kubelets_reason_and_rolls_back(
    node: RealNode, workdir: Path
) -> None:
    fail = node.dir / "fail-prepare"
    fail.touch()
    try:
        plan = plan_for(node, workdir, "fail-prepare.yaml")
        res = cli(node.cp, "apply", str(plan), "--yes")
    finally:
        fail.unlink()
    assert res.returncode != 0
    assert "FailedPrepareDynamicResources" in res.stderr and "prepare failure injected" in res.stderr, res.stderr
    assert step_end(plan, "canary")["result"] == "failed"
    assert_original(node, classes=[CLASS])


def test_a_canary_that_sees_no_device_fails_and_rolls_back(node: RealNode, workdir: Path) -> None:
    wait_for("old slices wiped", lambda: not slice_devices(node), timeout=90)
    plan = plan_for(node, workdir, "blind.yaml", "--canary-command", "ls /dev/nvidia9")
    res = cli(node.cp, "apply", str(plan), "--yes")
    assert res.returncode != 0
    assert "exited 1" in res.stderr and "/dev/nvidia9" in res.stderr, res.stderr
    assert_original(node, classes=[CLASS])
    # Undo the prepare stages too, newest plan first; the class goes with the plan that created it (the
    # second found it there and leaves it).
    for name in ("blind.yaml", "fail-prepare.yaml"):
        res = cli(node.cp, "rollback", str(workdir / name), "--yes")
        assert res.returncode == 0, res.stderr
    assert_original(node, classes=[])
