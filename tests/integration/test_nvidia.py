"""The nvidia tier: the real NVIDIA device plugin and GPU Feature Discovery (k8s-device-plugin v0.18.0) and the
real NVIDIA DRA driver's kubelet plugin (dra-driver-nvidia-gpu v0.4.1), built from the module proxy on go-nvml's
mock NVML (tools/nvidia/build), run as DaemonSet pods on the real node (tools/nvidia/stack; docs/nvidia-tier.md).

One control plane and one real node for the module; each node setup of the mock (tools/nvidia/nvmock) is
brought up on it in turn by restarting the stack. For every setup, `match`'s prediction from the node's labels
and capacity is checked against the real driver's ResourceSlices; on the A100 setup a full cutover (plan, apply,
the canary through the real driver's CDI injection, rollback) is run with the tool's own commands.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from realnode import (
    GPU,
    IMAGE,
    ROOT,
    cli,
    message,
    node_obj,
    real_node,
    report_measured,
    run_gpu_pod,
    set_labels,
    slice_devices,
    step_end,
)

from dra_migrate.dra.census import census_differences
from dra_migrate.dra.devices import predict_devices
from dra_migrate.plan import io as plan_io
from dra_migrate.sim.kube import Kube, path_of

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.nvidia]

STACK_TOOL = ROOT / "tools" / "nvidia" / "stack"
DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
NS = "nvidia-gpu-operator"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
MEASURED: dict[str, float] = {}

A100_MIG = {"1g.5gb": "9", "2g.10gb": "1", "3g.20gb": "1", "7g.40gb": "1"}
# go-nvlib names a MIG profile from its memory share of the GPU (pkg/nvlib/device/mig_profile.go
# getMigMemorySizeGB): the mock H200's 1-slice instance is 18432 MiB of 144384, more than 1/8, so `1g.35gb`.
H200_MIG = {"1g.35gb": "2", "2g.35gb": "1", "3g.88gb": "1", "7g.141gb": "1"}
# Setup -> (the device plugin's and GFD's MIG strategy, what the real device plugin advertises). Mixed MIG as
# the GPU Operator configures it for heterogeneous MIG (mig.strategy=mixed); none as the plugin's chart default.
SETUPS: dict[str, tuple[str, dict[str, str]]] = {
    "a100-mixed": ("mixed", {GPU: "4", **{f"nvidia.com/mig-{p}": n for p, n in A100_MIG.items()}}),
    "h200-mig": ("mixed", {GPU: "2", **{f"nvidia.com/mig-{p}": n for p, n in H200_MIG.items()}}),
    "a30": ("none", {GPU: "4"}),
    "h100": ("none", {GPU: "8"}),
    "a100": ("none", {GPU: "8"}),  # last: the cutover runs on it
}


@dataclass
class NvidiaNode:
    cp: controlplane.ControlPlane
    name: str
    kube: Kube
    setup: str = ""


@pytest.fixture(scope="module")
def node(
    real_node_turn: None, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NvidiaNode]:
    t0 = time.monotonic()
    try:
        with real_node(tmp_path_factory, "nvidia", "kubelet, containerd, mknod", "--nvidia") as (cp, kube, up):
            MEASURED["node up (s)"] = round(time.monotonic() - t0, 1)
            yield NvidiaNode(cp, up.stdout.strip().splitlines()[-1], kube)
    finally:
        report_measured(request, "nvidia tier measurements", MEASURED)


# -- helpers -------------------------------------------------------------------------------------------


def nvidia_allocatable(n: NvidiaNode) -> dict[str, str]:
    alloc = node_obj(n)["status"].get("allocatable") or {}
    return {k: str(v) for k, v in alloc.items() if k.startswith("nvidia.com/")}


def pods_of(n: NvidiaNode, daemonset: str) -> list[dict[str, Any]]:
    items, _ = n.kube.list_all(path_of("v1", "pods", namespace=NS))
    return [p for p in items if p["metadata"]["name"].startswith(daemonset + "-")]


def only_gpus(resources: dict[str, str], count: str) -> bool:
    return resources.get(GPU) == count and all(v == "0" for k, v in resources.items() if k != GPU)


def stop_plugins(n: NvidiaNode) -> None:
    """Both plugins off (their labels off), their pods gone and the driver's slices removed: the kubelet
    would wipe them 30 s later (pkg/kubelet/cm/dra/manager.go defaultWipingDelay); the tier does not wait."""
    set_labels(n, {DP: "false", DRA: None})
    wait_for("plugin pods gone", lambda: not pods_of(n, "nvidia-device-plugin-daemonset")
             and not pods_of(n, "dra-driver-nvidia-gpu-kubelet-plugin"), timeout=90)  # fmt: skip
    items, _ = n.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={n.name}")])
    for s in items:
        n.kube.delete(path_of("resource.k8s.io/v1", "resourceslices", s["metadata"]["name"]))


def bring_up(n: NvidiaNode, setup: str) -> None:
    """The stack in `setup`, device plugin serving (allocatable as the real plugin advertises it), DRA plugin
    off. No-op when the node is there already."""
    if n.setup == setup and nvidia_allocatable(n) == {**{k: "0" for k in nvidia_allocatable(n)}, **SETUPS[setup][1]}:
        return
    stop_plugins(n)
    mig, advertised = SETUPS[setup]
    t0 = time.monotonic()
    res = subprocess.run(
        [str(STACK_TOOL), "up", str(n.cp.dir), setup, "--mig-strategy", mig],
        capture_output=True, text=True, timeout=1800, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    set_labels(n, {DP: "true"})

    def serving() -> bool:
        alloc = nvidia_allocatable(n)
        return all(alloc.get(k) == v for k, v in advertised.items()) and all(
            v == "0" for k, v in alloc.items() if k not in advertised
        )

    try:
        wait_for(f"the real device plugin to advertise {advertised}", serving, timeout=120)
    except AssertionError as e:
        raise AssertionError(f"{e}; it advertises {nvidia_allocatable(n)}") from None
    MEASURED[f"{setup}: stack up to device plugin serving (s)"] = round(time.monotonic() - t0, 1)
    n.setup = setup


def published_by_real_driver(n: NvidiaNode) -> list[dict[str, Any]]:
    """Turns the DRA kubelet plugin on and returns its devices once published; leaves it on."""
    set_labels(n, {DRA: "true"})
    t0 = time.monotonic()
    devices = wait_for("the real DRA driver to publish", lambda: slice_devices(n) or None, timeout=120)
    MEASURED[f"{n.setup}: DRA plugin on to slices published (s)"] = round(time.monotonic() - t0, 1)
    return list(devices)


def run_pod(n: NvidiaNode, command: str, timeout: float = 90) -> dict[str, Any]:
    return run_gpu_pod(n, command, timeout)


# -- predictions against the real driver ----------------------------------------------------------------


@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_prediction_from_labels_and_capacity_is_what_the_real_driver_publishes(
    node: NvidiaNode, setup: str
) -> None:
    bring_up(node, setup)
    # What `match` predicts for a node without slices: from the Node object alone (GFD's labels, the device
    # plugin's capacity), read before the driver runs.
    predicted = predict_devices(node_obj(node))
    published = published_by_real_driver(node)
    assert len(predicted) == len(published)
    assert census_differences(predicted, published) == []
    set_labels(node, {DRA: None})
    wait_for("DRA plugin pod gone", lambda: not pods_of(node, "dra-driver-nvidia-gpu-kubelet-plugin"), timeout=90)
    items, _ = node.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={node.name}")])
    for s in items:
        node.kube.delete(path_of("resource.k8s.io/v1", "resourceslices", s["metadata"]["name"]))


# -- a full cutover with the real plugins ---------------------------------------------------------------


def test_a_real_node_cuts_over_from_the_real_device_plugin_to_the_real_dra_driver_and_back(
    node: NvidiaNode, tmp_path: Path
) -> None:
    bring_up(node, "a100")
    assert not slice_devices(node)
    # Before: the real device plugin serves the pod (envvar strategy: it names the GPU in the environment).
    pod = run_pod(node, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES")
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert "extendedResourceClaimStatus" not in pod["status"]
    assert "NVIDIA_VISIBLE_DEVICES=GPU-" in message(pod), message(pod)

    plan = tmp_path / "dra_migrate.yaml"
    res = cli(node, "plan", "--out", str(plan), "--soak", "0s", "--canary-image", IMAGE)
    assert res.returncode == 0, res.stderr
    assert plan_io.load(plan)["applicable"] is True, res.stdout + res.stderr
    t0 = time.monotonic()
    res = cli(node, "apply", str(plan), "--yes")
    assert res.returncode == 0, res.stderr
    MEASURED["apply of the real node (s)"] = round(time.monotonic() - t0, 1)
    obj = node_obj(node)
    assert obj["metadata"]["labels"][DP] == "false" and obj["metadata"]["labels"][DRA] == "true"
    # The real device plugin left: allocatable 0, capacity held (kubelet devicemanager's 5-min grace).
    assert obj["status"]["allocatable"][GPU] == "0" and obj["status"]["capacity"][GPU] == "8"
    wait_for("the device plugin's pod gone", lambda: not pods_of(node, "nvidia-device-plugin-daemonset"), timeout=60)
    published = {d["attributes"]["uuid"]["string"] for d in slice_devices(node)}
    assert len(published) == 8
    end = step_end(plan, "canary")
    assert end["result"] == "ok", end
    assert end["after"]["expected"] and set(end["after"]["expected"]) <= published
    # The same pod spec now runs through DRA: the real driver prepared its claim and its CDI spec gave the
    # container the GPU's device node (and the driver root's nvidia-smi, which lists what it can open).
    pod = run_pod(node, "ls -l /dev/nvidia[0-9]*; nvidia-smi -L")
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert pod["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"] == GPU
    seen = [x.split("UUID: ")[1].rstrip(")") for x in message(pod).splitlines() if x.startswith("GPU ")]
    assert len(seen) == 1 and seen[0] in published, message(pod)
    assert message(pod).count(" 195, ") == 1, message(pod)  # one NVIDIA character device node

    t0 = time.monotonic()
    res = cli(node, "rollback", str(plan), "--yes")
    assert res.returncode == 0, res.stderr
    # Resources of earlier setups (nvidia.com/mig-*) stay in the Node's status at 0.
    wait_for("the real device plugin serving 8 again", lambda: only_gpus(nvidia_allocatable(node), "8"), timeout=120)
    MEASURED["rollback to the device plugin serving again (s)"] = round(time.monotonic() - t0, 1)
    obj = node_obj(node)
    labels = obj["metadata"]["labels"]
    assert labels[DP] == "true" and DRA not in labels and not obj["spec"].get("unschedulable")
    assert obj["status"]["capacity"][GPU] == "8"
    wait_for("DRA plugin pod gone", lambda: not pods_of(node, "dra-driver-nvidia-gpu-kubelet-plugin"), timeout=90)
    pod = run_pod(node, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES")
    assert pod["status"]["phase"] == "Succeeded" and "extendedResourceClaimStatus" not in pod["status"]
    assert "NVIDIA_VISIBLE_DEVICES=GPU-" in message(pod), message(pod)
