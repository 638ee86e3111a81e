"""Helpers of the real-node tiers (test_realnode, test_nvidia, test_image_realnode): one real node (kubelet,
containerd; tools/k8s/node) on its module's own control plane, the tool's CLI against it, and reads of the
node, its ResourceSlices, a GPU pod's run and the apply journal."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import controlplane
import pytest
from conftest import wait_for

from dra_migrate.execute.journal import journal_path
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.params import parse_duration
from dra_migrate.sim.kube import Kube, new_api_client, path_of

ROOT = Path(__file__).resolve().parents[2]
NODE_TOOL = ROOT / "tools" / "k8s" / "node"
GPU = "nvidia.com/gpu"
DRIVER = "gpu.nvidia.com"
IMAGE = "dra-migrate.local/busybox:test"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class OnNode(Protocol):
    """A module's real node: its control plane, its name, an admin client."""

    @property
    def cp(self) -> controlplane.ControlPlane: ...

    @property
    def name(self) -> str: ...

    @property
    def kube(self) -> Kube: ...


@contextlib.contextmanager
def real_node(
    tmp_path_factory: pytest.TempPathFactory, tier: str, needs: str, *up_args: str
) -> Iterator[tuple[controlplane.ControlPlane, Kube, subprocess.CompletedProcess[str]]]:
    """A control plane of its own and a real node on it (`tools/k8s/node up DIR *up_args`), taken down at
    the end. Yields the control plane, an admin client, and node up's run (its last stdout line names the node).
    `needs`: why the tier needs root, said when it does not run as root."""
    if os.geteuid() != 0:
        pytest.fail(f"the {tier} tier needs root ({needs})", pytrace=False)
    if not controlplane.binaries_present():
        controlplane.build()
    cp = controlplane.start(tmp_path_factory.mktemp(tier.replace(" ", "")))
    api = None
    try:
        res = subprocess.run(
            [str(NODE_TOOL), "up", str(cp.dir), *up_args],
            capture_output=True, text=True, timeout=1800, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if res.returncode != 0:
            pytest.fail(f"tools/k8s/node up failed (exit {res.returncode}):\n{res.stderr[-4000:]}", pytrace=False)
        api = new_api_client(cp.kubeconfig, "dra-migrate-tests")
        yield cp, Kube(api), res
    finally:
        if api is not None:
            api.close()
        subprocess.run([str(NODE_TOOL), "down", str(cp.dir)], capture_output=True, check=False)
        controlplane.stop(cp)


def report_measured(request: pytest.FixtureRequest, title: str, measured: Mapping[str, float]) -> None:
    """The module's measured figures, printed at its end (README quotes one run)."""
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if reporter is not None and measured:
        reporter.write_line(f"\n{title}: " + json.dumps(dict(measured), indent=1))


def node_obj(n: OnNode) -> dict[str, Any]:
    return n.kube.get(path_of("v1", "nodes", n.name))


def set_labels(n: OnNode, values: dict[str, str | None]) -> None:
    n.kube.merge_patch(path_of("v1", "nodes", n.name), {"metadata": {"labels": values}})


def slice_devices(n: OnNode) -> list[dict[str, Any]]:
    """The devices the NVIDIA DRA driver publishes for the node."""
    items, _ = n.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={n.name}")])
    return [d for s in items if s["spec"]["driver"] == DRIVER for d in s["spec"].get("devices") or []]


def cli(on: controlplane.ControlPlane | OnNode, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, against the node's (or `on`'s) control plane."""
    cp = on if isinstance(on, controlplane.ControlPlane) else on.cp
    return subprocess.run(
        [sys.executable, "-m", "dra_migrate", *args, "--kubeconfig", str(cp.kubeconfig)],
        capture_output=True, text=True, timeout=900, cwd=ROOT, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def start_pod(n: OnNode, name: str, command: list[str], grace: int, limits: dict[str, str] | None = None) -> str:
    """Create a pod of the test image running `command` (with these limits, if any); its API path."""
    container: dict[str, Any] = {"name": "c", "image": IMAGE, "imagePullPolicy": "Never", "command": command}
    if limits:
        container["resources"] = {"limits": limits}
    spec = {"terminationGracePeriodSeconds": grace, "automountServiceAccountToken": False, "containers": [container]}
    n.kube.create(path_of("v1", "pods", namespace="default"), {"metadata": {"name": name}, "spec": spec})
    return path_of("v1", "pods", name, "default")


def run_gpu_pod(n: OnNode, command: str, timeout: float, resource: str = GPU) -> dict[str, Any]:
    """A pod requesting `resource`: 1 (the same spec before and after the cutover) that runs `command`
    and keeps its output as the termination message; returns it finished."""
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    n.kube.create(
        path_of("v1", "pods", namespace="default"),
        {
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": False,
                "containers": [{
                    "name": "c", "image": IMAGE, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", f"{{ {command}; }} >/dev/termination-log 2>&1; cat /dev/termination-log"],
                    "resources": {"limits": {resource: "1"}},
                }],
            },
        },
    )  # fmt: skip
    path = path_of("v1", "pods", name, "default")
    try:

        def finished() -> dict[str, Any] | None:
            pod = n.kube.get(path)
            return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None

        try:
            result: dict[str, Any] = wait_for(f"pod {name} finished", finished, timeout=timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}: {pod_trouble(n, name)}") from None
        return result
    finally:
        n.kube.delete(path, {"gracePeriodSeconds": 0})


def pod_trouble(n: OnNode, name: str) -> str:
    """A stuck pod's status (conditions, container states) and its events: what the kubelet or scheduler said."""
    pod = n.kube.get(path_of("v1", "pods", name, "default"))
    status = {k: pod["status"].get(k) for k in ("phase", "conditions", "containerStatuses")}
    events, _ = n.kube.list_all(path_of("v1", "events", namespace="default"))
    said = [f"{e.get('reason')}: {e.get('message')}" for e in events if e.get("involvedObject", {}).get("name") == name]
    return json.dumps({"status": status, "events": said[-5:]})


def message(pod: dict[str, Any]) -> str:
    return str(pod["status"]["containerStatuses"][0]["state"]["terminated"].get("message") or "")


def plan_estimate_s(plan: Path) -> float:
    """The plan's own estimate of its duration (summary.estimatedDuration), in seconds: measured beside
    the real run it estimates (issue 25 item 5: the estimate against the real-node runs)."""
    return float(parse_duration(str(plan_io.load(plan)["summary"]["estimatedDuration"])))


def journal(plan: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in journal_path(plan).read_text().splitlines() if x.strip()]


def apply_records(plan: Path, step: str) -> list[dict[str, Any]]:
    return [e for e in journal(plan) if e.get("phase") == "apply" and str(e.get("stepId", "")).endswith("/" + step)]


def step_end(plan: Path, step: str) -> dict[str, Any]:
    """The last `end` record of the step whose id ends with /`step`."""
    ends = [e for e in apply_records(plan, step) if e.get("event") == "end"]
    assert ends, f"no end record of {step} in {journal_path(plan)}"
    return ends[-1]
