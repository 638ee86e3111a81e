"""The nvidia tier: the real NVIDIA device plugin and GPU Feature Discovery (k8s-device-plugin v0.18.0) and the
real NVIDIA DRA driver's kubelet plugin (dra-driver-nvidia-gpu v0.4.1), built from the module proxy on go-nvml's
mock NVML (tools/nvidia/build), run as DaemonSet pods on the real node (tools/nvidia/stack; docs/nvidia-tier.md).

One control plane and one real node for the module; each node setup of the mock (tools/nvidia/nvmock) is
brought up on it in turn by restarting the stack. For every setup, `match`'s prediction from the node's labels
and capacity is checked against the real driver's ResourceSlices; on the A100 setup a full cutover (plan, apply,
the canary through the real driver's CDI injection, rollback) is run with the tool's own commands.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
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
    plan_estimate_s,
    real_node,
    report_measured,
    run_gpu_pod,
    set_labels,
    slice_devices,
    start_pod,
    step_end,
)

from dra_migrate.dra.census import census_differences
from dra_migrate.dra.devices import predict_devices
from dra_migrate.inventory.migparted import parse_mig_configs
from dra_migrate.plan import io as plan_io
from dra_migrate.sim.kube import Kube, path_of

pytestmark = [pytest.mark.cluster, pytest.mark.realnode, pytest.mark.nvidia]

STACK_TOOL = ROOT / "tools" / "nvidia" / "stack"
DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
NS = "nvidia-gpu-operator"
# The standalone charts' DaemonSets (tools/nvidia/stack --placement standalone) and NFD's label they select.
STANDALONE_DP = "nvdp-nvidia-device-plugin"
STANDALONE_DAEMONSETS = [("nvidia-device-plugin", STANDALONE_DP),
                         ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu-kubelet-plugin")]  # fmt: skip
PLUGIN_DAEMONSETS = ["nvidia-device-plugin-daemonset", "dra-driver-nvidia-gpu-kubelet-plugin", STANDALONE_DP]
NFD_PCI = "feature.node.kubernetes.io/pci-10de.present"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
MEASURED: dict[str, Any] = {}  # timings (s), and what each side allocated (topology)

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

# The MIG Manager configs (mig-parted format) the mixed setups' layouts would have been applied from: the GPUs of
# tools/nvidia/nvmock's setups in order. With the device plugin's capacity gone, GFD's labels do not say which GPU
# holds what (a100-mixed's GPU3 is MIG-enabled with no instances); the applied config does.
MIG_MANAGER_CONFIGS = {
    "a100-mixed": """version: v1
mig-configs:
  tier:
    - {devices: all, mig-enabled: false}
    - {devices: [0], mig-enabled: true, mig-devices: {"7g.40gb": 1}}
    - {devices: [1], mig-enabled: true, mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}
    - {devices: [2], mig-enabled: true, mig-devices: {"1g.5gb": 7}}
    - {devices: [3], mig-enabled: true, mig-devices: {}}
""",
    "h200-mig": """version: v1
mig-configs:
  tier:
    - {devices: all, mig-enabled: false}
    - {devices: [0], mig-enabled: true, mig-devices: {"1g.35gb": 2, "2g.35gb": 1, "3g.88gb": 1}}
    - {devices: [1], mig-enabled: true, mig-devices: {"7g.141gb": 1}}
""",
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
    """The DaemonSet's pods, in whichever namespace its placement put it (the operator's or the charts')."""
    items, _ = n.kube.list_all(path_of("v1", "pods"))
    return [p for p in items if p["metadata"]["name"].startswith(daemonset + "-")]


def serving(n: NvidiaNode, advertised: dict[str, str]) -> bool:
    """The node's allocatable is exactly what the device plugin advertises in the setup (resources of earlier
    setups stay in the Node's status at 0)."""
    alloc = nvidia_allocatable(n)
    return all(alloc.get(k) == v for k, v in advertised.items()) and all(
        v == "0" for k, v in alloc.items() if k not in advertised
    )


def stop_plugins(n: NvidiaNode) -> None:
    """Both plugins off (their labels off; the standalone charts' DaemonSets, which no label stops, deleted),
    their pods gone and the driver's slices removed: the kubelet would wipe them 30 s later
    (pkg/kubelet/cm/dra/manager.go defaultWipingDelay); the tier does not wait."""
    set_labels(n, {DP: "false", DRA: None, NFD_PCI: None})
    for ns, name in STANDALONE_DAEMONSETS:
        n.kube.delete(path_of("apps/v1", "daemonsets", name, ns))
    wait_for("plugin pods gone", lambda: not any(pods_of(n, ds) for ds in PLUGIN_DAEMONSETS), timeout=90)
    items, _ = n.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={n.name}")])
    for s in items:
        n.kube.delete(path_of("resource.k8s.io/v1", "resourceslices", s["metadata"]["name"]))


def bring_up(n: NvidiaNode, setup: str, placement: str = "operator") -> None:
    """The stack in `setup`, device plugin serving (allocatable as the real plugin advertises it), DRA plugin
    off (placement "operator": both switched by labels) or running beside it (placement "standalone": both as
    their charts place them by default). No-op when the node is there already."""
    setup_name = setup if placement == "operator" else f"{setup} ({placement})"
    if n.setup == setup_name and serving(n, SETUPS[setup][1]):
        return
    stop_plugins(n)
    # The old device plugin's devices must be seen gone (allocatable 0) before the new one registers: two setups
    # that advertise the same count (a100 then h100) would otherwise read as "serving" on the stale figure, and a
    # pod admitted then fails ("no healthy devices present").
    wait_for("allocatable 0 after the device plugin left",
             lambda: all(v == "0" for v in nvidia_allocatable(n).values()), timeout=90)  # fmt: skip
    mig, advertised = SETUPS[setup]
    t0 = time.monotonic()
    res = subprocess.run(
        [str(STACK_TOOL), "up", str(n.cp.dir), setup, "--mig-strategy", mig, "--placement", placement],
        capture_output=True, text=True, timeout=1800, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    set_labels(n, {DP: "true"} if placement == "operator" else {DP: None})
    try:
        wait_for(f"the real device plugin to advertise {advertised}", partial(serving, n, advertised), timeout=120)
    except AssertionError as e:
        raise AssertionError(f"{e}; it advertises {nvidia_allocatable(n)}") from None
    MEASURED[f"{setup_name}: stack up to device plugin serving (s)"] = round(time.monotonic() - t0, 1)
    n.setup = setup_name


def published_by_real_driver(n: NvidiaNode) -> list[dict[str, Any]]:
    """Turns the DRA kubelet plugin on and returns its devices once published; leaves it on."""
    set_labels(n, {DRA: "true"})
    t0 = time.monotonic()
    devices = wait_for("the real DRA driver to publish", lambda: slice_devices(n) or None, timeout=120)
    MEASURED[f"{n.setup}: DRA plugin on to slices published (s)"] = round(time.monotonic() - t0, 1)
    return list(devices)


# -- predictions against the real driver ----------------------------------------------------------------


@pytest.mark.parametrize("setup", list(SETUPS))
def test_the_prediction_from_labels_and_capacity_is_what_the_real_driver_publishes(
    node: NvidiaNode, setup: str
) -> None:
    bring_up(node, setup)
    # What `match` predicts for a node without slices: from the Node object alone (GFD's labels, the device
    # plugin's capacity), read before the driver runs.
    obj = node_obj(node)
    predicted = predict_devices(obj)
    published = published_by_real_driver(node)
    assert len(predicted) == len(published)
    assert census_differences(predicted, published) == []
    if setup in MIG_MANAGER_CONFIGS:
        # The device plugin already off (its capacity gone): the layout from the MIG Manager's applied config.
        labels = {
            **obj["metadata"]["labels"],
            "nvidia.com/mig.config": "tier",
            "nvidia.com/mig.config.state": "success",
        }
        bare = {"metadata": {**obj["metadata"], "labels": labels}, "status": {**obj["status"], "capacity": {}}}
        configs = parse_mig_configs(MIG_MANAGER_CONFIGS[setup], setup)
        assert census_differences(predict_devices(bare, configs), published) == []
    set_labels(node, {DRA: None})
    wait_for("DRA plugin pod gone", lambda: not pods_of(node, "dra-driver-nvidia-gpu-kubelet-plugin"), timeout=90)
    items, _ = node.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={node.name}")])
    for s in items:
        node.kube.delete(path_of("resource.k8s.io/v1", "resourceslices", s["metadata"]["name"]))


# -- topology: what each side allocates for a request of several GPUs (issue 24 item 7) -----------------------

PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# The kubelet's device-manager checkpoint: which device IDs it gave each container (pkg/kubelet/cm/devicemanager
# checkpoint; the kubelet's device-plugin directory is fixed, pluginapi.DevicePluginPath).
CHECKPOINT = Path("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint")
# A class of its own (the chart's gpu.nvidia.com selector, no extendedResourceName), removed afterwards: the
# cutover's plan creates the classes it needs and must not find this one.
TOPOLOGY_CLASS = "topology-test.gpu.nvidia.com"


def gpu_index(n: NvidiaNode) -> dict[str, int]:
    """UUID -> GPU index of the node's setup (the mock's table, tools/nvidia/stack DIR/node/gpus.txt)."""
    lines = (n.cp.dir / "node" / "gpus.txt").read_text().splitlines()
    return {ln.split()[1]: i for i, ln in enumerate(lines)}


def device_plugin_devices(pod_uid: str) -> list[str]:
    entries = json.loads(CHECKPOINT.read_text())["Data"].get("PodDeviceEntries") or []  # null before the first
    return sorted(d for e in entries if e["PodUID"] == pod_uid for ids in (e["DeviceIDs"] or {}).values()
                  for d in ids)  # fmt: skip


def sleeper(n: NvidiaNode, name: str, resources: dict[str, Any], claim: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
        "containers": [{"name": "c", "image": IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "3600"],
                        "resources": resources}],
    }  # fmt: skip
    if claim:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim}]
    return n.kube.create(path_of("v1", "pods", namespace="default"), {"metadata": {"name": name}, "spec": spec})


def claim(n: NvidiaNode, name: str, count: int, same_root: bool) -> None:
    exactly = {"deviceClassName": TOPOLOGY_CLASS, "allocationMode": "ExactCount", "count": count}
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": exactly}]}
    if same_root:  # what `dra-migrate convert --topology` writes
        devices["constraints"] = [{"requests": ["gpus"], "matchAttribute": PCIE_ROOT}]
    n.kube.create(path_of("resource.k8s.io/v1", "resourceclaims", namespace="default"),
                  {"metadata": {"name": name}, "spec": {"devices": devices}})  # fmt: skip


def allocated(n: NvidiaNode, name: str) -> list[str] | None:
    c = n.kube.get(path_of("resource.k8s.io/v1", "resourceclaims", name, "default"))
    results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return sorted(r["device"] for r in results) or None


def unschedulable(n: NvidiaNode, name: str) -> bool:
    pod = n.kube.get(path_of("v1", "pods", name, "default"))
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in pod["status"].get("conditions") or [])  # fmt: skip


def delete_all(n: NvidiaNode, pods: list[str], claims: list[str]) -> None:
    for p in pods:
        n.kube.delete(path_of("v1", "pods", p, "default"), {"gracePeriodSeconds": 0})
    wait_for("the test pods gone", lambda: not any(n.kube.get_or_none(path_of("v1", "pods", p, "default"))
                                                   for p in pods), timeout=90)  # fmt: skip
    for c in claims:
        n.kube.delete(path_of("resource.k8s.io/v1", "resourceclaims", c, "default"))


def test_topology_the_device_plugin_picks_a_connected_pair_dra_only_when_the_claim_asks(
    node: NvidiaNode,
) -> None:
    """The same request, 2 of 8 GPUs with one already taken, on both sides. The mock's topology: GPUs in pairs
    behind one PCIe switch, one PCIe root per pair (tools/nvidia/stack's sysfs stand-in)."""
    bring_up(node, "a100")
    index = gpu_index(node)
    pods: list[str] = []
    claims: list[str] = []
    try:
        # Device plugin: one GPU taken, then two asked for. Its GetPreferredAllocation (alignedAlloc) answers
        # with a pair behind one switch.
        for name, count in (("dp-one", 1), ("dp-pair", 2)):
            uid = sleeper(node, name, {"limits": {GPU: str(count)}})["metadata"]["uid"]
            pods.append(name)
            got = wait_for(f"{name} allocated", partial(device_plugin_devices, uid), timeout=90)
            MEASURED[f"topology: device plugin, {count} GPU(s) -> GPU index"] = sorted(index[u] for u in got)
        pair = MEASURED["topology: device plugin, 2 GPU(s) -> GPU index"]
        assert isinstance(pair, list) and len(pair) == 2 and pair[0] // 2 == pair[1] // 2, pair
        delete_all(node, pods, [])
        pods.clear()

        # DRA: the device plugin off, the real driver on (as apply leaves a node).
        stop_plugins(node)
        node.setup = "a100 (topology)"  # names the timing below; not a setup bring_up knows
        node.kube.create_or_exists(path_of("resource.k8s.io/v1", "deviceclasses"), {
            "metadata": {"name": TOPOLOGY_CLASS},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                          "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
        })  # fmt: skip
        devices = published_by_real_driver(node)
        roots = {d["name"]: (d["attributes"].get(PCIE_ROOT) or {}).get("string") for d in devices}
        # The real driver resolved every GPU's PCIe root through the sysfs stand-in: two GPUs per root.
        assert all(roots.values()) and sorted(Counter(roots.values()).values()) == [2, 2, 2, 2], roots
        for name, count, same_root in (("dra-one", 1, False), ("dra-any", 2, False), ("dra-root", 2, True)):
            claim(node, name, count, same_root)
            claims.append(name)
            sleeper(node, name, {"claims": [{"name": "gpus"}]}, claim=name)
            pods.append(name)
            got = wait_for(f"claim {name} allocated", partial(allocated, node, name), timeout=90)
            MEASURED[f"topology: DRA {name} -> pcieRoot"] = [roots[d] for d in got]
        assert len(set(MEASURED["topology: DRA dra-root -> pcieRoot"])) == 1
        # Four GPUs on one root: none has four, so the claim cannot be allocated and its pod stays pending
        # (the check's finding says so from the live slices).
        claim(node, "dra-four", 4, True)
        claims.append("dra-four")
        sleeper(node, "dra-four", {"claims": [{"name": "gpus"}]}, claim="dra-four")
        pods.append("dra-four")
        wait_for("dra-four unschedulable", lambda: unschedulable(node, "dra-four"), timeout=60)
        assert allocated(node, "dra-four") is None
        # The tool, on the live cluster: pods asking nvidia.com/gpu for 2 and 4 of the node's 8 (pending: no
        # DeviceClass serves the name here) are consumers that lose the connected allocation; from the real
        # driver's slices it knows a root holds 2, so 4 on one root cannot be met.
        for name, count in (("inv-pair", 2), ("inv-quad", 4)):
            sleeper(node, name, {"limits": {GPU: str(count)}})
            pods.append(name)
        res = cli(node, "check", "-o", "json")
        assert res.returncode in (0, 2), res.stderr
        (finding,) = [f for f in json.loads(res.stdout)["findings"] if f["id"] == "topology-preferred-allocation"]
        assert {o["name"] for o in finding["objects"]} == {"inv-pair", "inv-quad"}, finding
        assert "no PCIe root holds as many GPUs as Pod default/inv-quad" in finding["message"], finding["message"]
    finally:
        delete_all(node, pods, claims)
        node.kube.delete(path_of("resource.k8s.io/v1", "deviceclasses", TOPOLOGY_CLASS))
        stop_plugins(node)
        node.setup = ""


# -- a full cutover with the real plugins ---------------------------------------------------------------


# The A100 board, the H100 board, a GPU type not in dra-migrate's product table, and the A100 with mixed MIG
# (MIG devices through DRA: the plan's DeviceClasses for nvidia.com/mig-<profile>).
CUTOVER_SETUPS = ["a100", "h100", "a30", "a100-mixed"]
MIG_1G = "nvidia.com/mig-1g.5gb"
# a100-mixed's GPUs that hold 1g.5gb instances (tools/nvidia/nvmock: GPU1 2 of them, GPU2 7): a MIG device's
# CDI spec gives the container its parent GPU's device node (/dev/nvidia<minor>).
MIG_1G_PARENTS = {1, 2}
NVIDIA_MINORS = re.compile(r"\b195,\s+(\d+)\b")


def published_ids(n: NvidiaNode) -> set[str]:
    """The UUIDs of the real driver's devices on the node (GPU-... and MIG-...)."""
    return {d["attributes"]["uuid"]["string"] for d in slice_devices(n)}


@pytest.mark.parametrize("setup", CUTOVER_SETUPS)
def test_a_real_node_cuts_over_from_the_real_device_plugin_to_the_real_dra_driver_and_back(
    node: NvidiaNode, tmp_path: Path, setup: str
) -> None:
    bring_up(node, setup)
    advertised = SETUPS[setup][1]
    mig = [r for r in advertised if r != GPU]
    assert not slice_devices(node)
    # Before: the real device plugin serves the pods (envvar strategy: it names the device in the environment).
    for resource in [GPU, *([MIG_1G] if mig else [])]:
        pod = run_gpu_pod(node, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES", 90, resource)
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert "extendedResourceClaimStatus" not in pod["status"]
        assert re.search(r"NVIDIA_VISIBLE_DEVICES=(GPU|MIG)-", message(pod)), message(pod)

    plan = tmp_path / "dra_migrate.yaml"
    res = cli(node, "plan", "--out", str(plan), "--soak", "0s", "--canary-image", IMAGE)
    assert res.returncode == 0, res.stderr
    assert plan_io.load(plan)["applicable"] is True, res.stdout + res.stderr
    t0 = time.monotonic()
    res = cli(node, "apply", str(plan), "--yes")
    assert res.returncode == 0, res.stderr
    MEASURED[f"{setup}: apply of the real node (s)"] = round(time.monotonic() - t0, 1)
    MEASURED[f"{setup}: the plan's estimate of that apply (s)"] = plan_estimate_s(plan)
    obj = node_obj(node)
    assert obj["metadata"]["labels"][DP] == "false" and obj["metadata"]["labels"][DRA] == "true"
    # The real device plugin left: allocatable 0 for every resource it advertised, capacity held (kubelet
    # devicemanager's 5-min grace).
    assert {r: obj["status"]["allocatable"][r] for r in advertised} == {r: "0" for r in advertised}
    assert {r: obj["status"]["capacity"][r] for r in advertised} == advertised
    wait_for("the device plugin's pod gone", lambda: not pods_of(node, "nvidia-device-plugin-daemonset"), timeout=60)
    published = published_ids(node)
    assert len(published) == sum(int(v) for v in advertised.values())
    end = step_end(plan, "canary")
    assert end["result"] == "ok", end
    assert end["after"]["expected"] and set(end["after"]["expected"]) <= published
    # The same pod spec now runs through DRA: the real driver prepared its claim and its CDI spec gave the
    # container the GPU's device node (and the driver root's nvidia-smi, which lists what it can open).
    pod = run_gpu_pod(node, "ls -l /dev/nvidia[0-9]*; nvidia-smi -L", 90)
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    assert pod["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"] == GPU
    seen = [x.split("UUID: ")[1].rstrip(")") for x in message(pod).splitlines() if x.startswith("GPU ")]
    assert len(seen) == 1 and seen[0] in published, message(pod)
    assert len(NVIDIA_MINORS.findall(message(pod))) == 1, message(pod)  # one NVIDIA GPU device node
    if mig:
        # A pod asking for a MIG profile by its device-plugin name runs through the plan's DeviceClass for it
        # (extendedResourceName nvidia.com/mig-1g.5gb): its claim is a 1g.5gb device, whose CDI spec gives the
        # container its parent GPU's device node and the GPU and compute instances' capability device nodes
        # (/dev/nvidia-caps/nvidia-cap<minor>, major nvidia-caps: tools/nvidia/stack's stand-in 511).
        pod = run_gpu_pod(node, "ls -l /dev/nvidia[0-9]* /dev/nvidia-caps", 90, MIG_1G)
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert pod["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"] == MIG_1G
        minors = {int(m) for m in NVIDIA_MINORS.findall(message(pod))}
        assert len(minors) == 1 and minors <= MIG_1G_PARENTS, message(pod)
        assert len(re.findall(r"\b511,\s+\d+", message(pod))) == 2, message(pod)

    if setup == "a30":  # once: a pod holding a GPU through the real DRA driver when the rollback comes
        holder = hold_gpu_through_dra(node)
        res = cli(node, "rollback", str(plan), "--yes")
        assert res.returncode != 0 and holder in res.stderr, res.stderr  # no controller: named, not deleted
        labels = node_obj(node)["metadata"]["labels"]
        assert labels[DP] == "false" and labels[DRA] == "true", "nothing switched back under the pod"
    t0 = time.monotonic()
    res = cli(node, "rollback", str(plan), "--yes", *(["--delete-unowned-pods"] if setup == "a30" else []))
    assert res.returncode == 0, res.stderr
    if setup == "a30":
        # Evicted, and torn down by the kubelet through the real DRA plugin, before the plugins were switched
        # back: the device plugin never serves a GPU that a pod still holds through DRA.
        assert node.kube.get_or_none(path_of("v1", "pods", holder, "default")) is None
    wait_for(f"the real device plugin serving {advertised} again", partial(serving, node, advertised), timeout=120)
    MEASURED[f"{setup}: rollback to the device plugin serving again (s)"] = round(time.monotonic() - t0, 1)
    obj = node_obj(node)
    labels = obj["metadata"]["labels"]
    assert labels[DP] == "true" and DRA not in labels and not obj["spec"].get("unschedulable")
    assert {r: obj["status"]["capacity"][r] for r in advertised} == advertised
    wait_for("DRA plugin pod gone", lambda: not pods_of(node, "dra-driver-nvidia-gpu-kubelet-plugin"), timeout=90)
    pod = run_gpu_pod(node, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES", 90)
    assert pod["status"]["phase"] == "Succeeded" and "extendedResourceClaimStatus" not in pod["status"]
    assert "NVIDIA_VISIBLE_DEVICES=GPU-" in message(pod), message(pod)


def hold_gpu_through_dra(n: NvidiaNode) -> str:
    """A pod that asks for one nvidia.com/gpu on the migrated node and keeps running: its GPU comes through the
    real DRA driver (a scheduler-made claim). Its name, once it runs."""
    name = f"holder-{time.monotonic_ns() % 1_000_000}"
    start_pod(n, name, ["sleep", "3600"], grace=1, limits={GPU: "1"})

    def running() -> bool:
        pod = n.kube.get(path_of("v1", "pods", name, "default"))
        return pod["status"].get("phase") == "Running" and bool(pod["status"].get("extendedResourceClaimStatus"))

    wait_for(f"pod {name} running with a DRA claim", running, timeout=90)
    return name


# -- the standalone Helm charts' placement (issue 24 item 3: "both the standalone device-plugin Helm install and
# the GPU Operator's label-driven placement") ----------------------------------------------------------------

# What `check` tells the operator to add to every term of the chart's `affinity` value (checks/rules.py
# device-plugin-placement-unknown); applied here as `helm upgrade --set-json affinity=...` would apply it.
SWITCH = {"key": DP, "operator": "NotIn", "values": ["false"]}


def daemonset_rolled_out(n: NvidiaNode, ns: str, name: str) -> bool:
    ds = n.kube.get(path_of("apps/v1", "daemonsets", name, ns))
    st = ds.get("status") or {}
    counts = [st.get(k) for k in ("updatedNumberScheduled", "numberReady", "desiredNumberScheduled")]
    return st.get("observedGeneration") == ds["metadata"]["generation"] and counts == [1, 1, 1]


def test_the_standalone_charts_block_until_the_device_plugin_has_a_switch_then_cut_over_and_back(
    node: NvidiaNode, tmp_path: Path
) -> None:
    """The device plugin as k8s-device-plugin v0.18.0's chart renders it and the DRA kubelet plugin as
    dra-driver-nvidia-gpu v0.4.1's chart places it (tools/nvidia/stack --placement standalone): the chart's
    default affinity rests on NFD's and the GPU Operator's labels only, so `check` blocks the node until the
    affinity carries the switch its remediation names; then plan, apply and rollback flip that one label."""
    setup = "a100"
    gpus = SETUPS[setup][1][GPU]
    try:
        bring_up(node, setup, "standalone")
        assert pods_of(node, STANDALONE_DP) and DP not in node_obj(node)["metadata"]["labels"]
        # The DRA chart's default affinity runs its plugin beside the device plugin: it publishes at once.
        before = wait_for("the real DRA driver to publish", lambda: slice_devices(node) or None, timeout=120)
        assert len(before) == int(gpus)

        # The chart's default affinity: no label an operator can set stops the device plugin on the node.
        res = cli(node, "check", "-o", "json")
        assert res.returncode == 2, res.stdout + res.stderr
        (f,) = [f for f in json.loads(res.stdout)["findings"] if f["id"] == "device-plugin-placement-unknown"]
        assert f["severity"] == "blocker" and [o["name"] for o in f["objects"]] == [node.name], f
        assert f"nvidia-device-plugin/{STANDALONE_DP}" in f["message"] and NFD_PCI in f["message"], f["message"]
        assert "every nodeSelectorTerm" in f["remediation"], f["remediation"]
        plan = tmp_path / "blocked.yaml"
        res = cli(node, "plan", "--out", str(plan), "--soak", "0s", "--canary-image", IMAGE)
        excluded = plan_io.load(plan)["summary"]["excludedNodes"]
        assert [(e["node"], e["reason"].split(":")[0]) for e in excluded] == [
            (node.name, "device-plugin-placement-unknown")
        ], excluded

        # The remediation, as a `helm upgrade` of the chart's affinity value: the switch in every term.
        ds_path = path_of("apps/v1", "daemonsets", STANDALONE_DP, "nvidia-device-plugin")
        affinity = node.kube.get(ds_path)["spec"]["template"]["spec"]["affinity"]
        for term in affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]:
            term["matchExpressions"].append(SWITCH)
        node.kube.merge_patch(ds_path, {"spec": {"template": {"spec": {"affinity": affinity}}}})
        wait_for("the upgraded device plugin rolled out",
                 lambda: daemonset_rolled_out(node, "nvidia-device-plugin", STANDALONE_DP), timeout=120)  # fmt: skip
        wait_for(f"the device plugin serving {gpus}", partial(serving, node, SETUPS[setup][1]), timeout=120)
        pod = run_gpu_pod(node, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES", 90)
        assert pod["status"]["phase"] == "Succeeded" and "extendedResourceClaimStatus" not in pod["status"]

        plan = tmp_path / "dra_migrate.yaml"
        res = cli(node, "plan", "--out", str(plan), "--soak", "0s", "--canary-image", IMAGE)
        assert res.returncode == 0, res.stderr
        doc = plan_io.load(plan)
        assert doc["applicable"] is True and doc["summary"]["excludedNodes"] == [], res.stdout + res.stderr
        labels_before = node_obj(node)["metadata"]["labels"]
        t0 = time.monotonic()
        res = cli(node, "apply", str(plan), "--yes")
        assert res.returncode == 0, res.stderr
        MEASURED[f"{setup} (standalone): apply of the real node (s)"] = round(time.monotonic() - t0, 1)
        obj = node_obj(node)
        # The plan flipped the one label the switch reads; the DRA plugin needed none (its chart runs it).
        assert obj["metadata"]["labels"][DP] == "false" and DRA not in obj["metadata"]["labels"]
        assert obj["status"]["allocatable"][GPU] == "0" and obj["status"]["capacity"][GPU] == gpus
        wait_for("the device plugin's pod gone", lambda: not pods_of(node, STANDALONE_DP), timeout=60)
        published = published_ids(node)
        assert len(published) == int(gpus)
        end = step_end(plan, "canary")
        assert end["result"] == "ok" and set(end["after"]["expected"]) <= published, end
        pod = run_gpu_pod(node, "nvidia-smi -L", 90)
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert pod["status"]["extendedResourceClaimStatus"]["requestMappings"][0]["resourceName"] == GPU

        res = cli(node, "rollback", str(plan), "--yes")
        assert res.returncode == 0, res.stderr
        wait_for(f"the device plugin serving {gpus} again", partial(serving, node, SETUPS[setup][1]), timeout=120)
        obj = node_obj(node)
        # Restored exactly: the switch label absent again, as before; the DRA plugin still runs (it did before).
        assert obj["metadata"]["labels"] == labels_before and not obj["spec"].get("unschedulable")
        assert pods_of(node, STANDALONE_DP) and pods_of(node, "dra-driver-nvidia-gpu-kubelet-plugin")
        pod = run_gpu_pod(node, "echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES", 90)
        assert pod["status"]["phase"] == "Succeeded" and "extendedResourceClaimStatus" not in pod["status"]
        assert "NVIDIA_VISIBLE_DEVICES=GPU-" in message(pod), message(pod)
    finally:
        stop_plugins(node)
        node.setup = ""
