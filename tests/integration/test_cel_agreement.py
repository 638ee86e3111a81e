"""dra_migrate.dra.cel predicts what the real kube-scheduler (v1.37.2) allocates.

Simulated DRA nodes with different products, memory, driver versions and MIG layouts publish their
devices; for each generated case (DeviceClass selector x request selector x count x target node) the
offline prediction says whether the claim is allocatable and where; the scheduler's decision on a real
claim and pod must agree. The scheduler's rule: a request of `count` devices is satisfiable on one node
when that many of its devices match every class and request selector; a selector that fails at runtime
on a device the scheduler considers aborts the attempt on that node (kubernetes/kubernetes
staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocator, `isSelectable`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for
from nodes import TwinNodes, on_kwok

from dra_migrate.dra.cel import Selector, SelectorEvaluationError, compile_selector
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import POOL_LABEL, GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
POOL = f"cel-{RUN}"
DRIVER = "gpu.nvidia.com"
A = "device.attributes['gpu.nvidia.com']"
C = "device.capacity['gpu.nvidia.com']"

NODES = [
    GpuNodeSpec.small(f"{POOL}-h100", gpus=2, pool=POOL, driver_version="570.133.20"),
    GpuNodeSpec.small(
        f"{POOL}-a100",
        gpus=3,
        product="NVIDIA-A100-SXM4-40GB",
        memory_mib=40960,
        pool=POOL,
        driver_version="535.104.05",
    ),
    GpuNodeSpec.small(f"{POOL}-mig", gpus=1, pool=POOL, mig={"3g.40gb": 1, "1g.10gb": 2}, driver_version="580.95.05"),
    GpuNodeSpec.small(
        f"{POOL}-l4", gpus=2, product="NVIDIA-L4", memory_mib=23034, pool=POOL, driver_version="550.54.15"
    ),
]
CLASSES = {
    "gpu": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "mig": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "mig-1g": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && "
    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
}
GPU_SELECTORS = [
    "true",
    f"{C}.memory.compareTo(quantity('40Gi')) >= 0",
    f"{C}.memory.isGreaterThan(quantity('64Gi'))",
    f"{C}.memory == quantity('81559Mi')",
    f"{C}.memory.isLessThan(quantity('32Gi'))",
    f"{A}.productName.startsWith('NVIDIA H100')",
    f"{A}.productName.lowerAscii().contains('a100')",
    f"{A}.productName.matches('^NVIDIA (A|H)100')",
    f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))",
    f"{A}.driverVersion.compareTo(semver('570.133.20')) >= 0",
    f"{A}.driverVersion.isLessThan(semver('540.0.0'))",
    f"{A}.driverVersion.major() == 550",
    f"{A}.profile == '1g.10gb'",  # GPUs have no profile: an evaluation error, never allocatable
    f"!has({A}.profile) && {A}.architecture == 'Ampere'",
    f"cel.bind(d, {A}, d.brand == 'Nvidia' && d.cudaComputeCapability.isGreaterThan(semver('8.5.0')))",
]
MIG_SELECTORS = [
    "true",
    f"{C}.memory.compareTo(quantity('20Gi')) >= 0",
    f"{A}.profile == '3g.40gb'",
    f"{A}.driverVersion.isGreaterThan(semver('580.0.0'))",
    f"{A}.parentUUID.startsWith('GPU-')",
]


@dataclass(frozen=True)
class Case:
    name: str
    device_class: str
    selector: str
    count: int
    node: str | None  # pinned by nodeSelector, or free over the test pool


def cases() -> list[Case]:
    out: list[Case] = []
    for sel in GPU_SELECTORS:
        for count in (1, 2, 3):
            out.append(Case(f"c{len(out)}", "gpu", sel, count, None))
    for sel in MIG_SELECTORS:
        for count in (1, 3):
            out.append(Case(f"c{len(out)}", "mig", sel, count, None))
    for count in (1, 2, 3):
        out.append(Case(f"c{len(out)}", "mig-1g", "true", count, None))
    # Pinned: the same selector allocatable on one node and not on another.
    for node in NODES:
        out.append(Case(f"c{len(out)}", "gpu", f"{C}.memory.compareTo(quantity('40Gi')) >= 0", 2, node.name))
        out.append(Case(f"c{len(out)}", "gpu", f"{A}.driverVersion.isGreaterThan(semver('550.0.0'))", 1, node.name))
    return out


def class_name(family: str) -> str:
    return f"cel-{family}-{RUN}"


def predict(case: Case) -> dict[str, set[str]]:
    """Nodes where the claim is allocatable, with the devices that may serve it there."""
    selectors: list[Selector] = [compile_selector(CLASSES[case.device_class]), compile_selector(case.selector)]
    feasible: dict[str, set[str]] = {}
    for node in NODES:
        if case.node is not None and node.name != case.node:
            continue
        matching: set[str] = set()
        try:
            for device in node.devices:
                d = device.to_json()
                if all(s.matches(d, DRIVER) for s in selectors):
                    matching.add(d["name"])
        except SelectorEvaluationError:
            continue  # the scheduler gives up on this node
        if len(matching) >= case.count:
            feasible[node.name] = matching
    return feasible


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet, kube: Kube) -> Iterator[TwinNodes]:
    with on_kwok(kwok, NODES) as f:
        for node in NODES:
            f.set_device_plugin(node.name, False)
            f.set_dra_plugin(node.name, True)
        for family, expression in CLASSES.items():
            kube.create(
                "/apis/resource.k8s.io/v1/deviceclasses",
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": class_name(family)},
                    "spec": {"selectors": [{"cel": {"expression": expression}}]},
                },
            )
        wait_for("DRA nodes ready", lambda: all(_ready(kube, n) for n in NODES), timeout=30)
        try:
            yield f
        finally:
            for family in CLASSES:
                kube.delete(f"/apis/resource.k8s.io/v1/deviceclasses/{class_name(family)}")


def _ready(kube: Kube, spec: GpuNodeSpec) -> bool:
    node = kube.get(path_of("v1", "nodes", spec.name))
    if node["spec"].get("taints"):
        return False
    slices, _ = kube.list_all(
        "/apis/resource.k8s.io/v1/resourceslices", [("fieldSelector", f"spec.nodeName={spec.name}")]
    )
    return sum(len(s["spec"].get("devices", [])) for s in slices) == len(spec.devices)


def claim(case: Case) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": case.name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": class_name(case.device_class),
                            "selectors": [{"cel": {"expression": case.selector}}],
                            "allocationMode": "ExactCount",
                            "count": case.count,
                        },
                    }
                ]
            }
        },
    }


def pod(case: Case) -> dict[str, Any]:
    selector = {POOL_LABEL: POOL}
    if case.node:
        selector["kubernetes.io/hostname"] = case.node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": case.name},
        "spec": {
            "nodeSelector": selector,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": case.name}],
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "terminationGracePeriodSeconds": 0,
        },
    }


def outcome(kube: Kube, ns: str, name: str) -> tuple[str, str] | None:
    """("scheduled", node) or ("unschedulable", message), once the scheduler has decided."""
    p = kube.get(path_of("v1", "pods", name, ns))
    if p["spec"].get("nodeName"):
        return ("scheduled", str(p["spec"]["nodeName"]))
    for cond in p.get("status", {}).get("conditions", []):
        # Unschedulable, or SchedulerError when a selector fails at runtime: both leave the pod pending.
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ("unschedulable", f"{cond.get('reason')}: {cond.get('message', '')}")
    return None


def test_offline_cel_agrees_with_kube_scheduler(fleet: TwinNodes, kube: Kube, namespace: str) -> None:
    claims = path_of("resource.k8s.io/v1", "resourceclaims", namespace=namespace)
    pods = path_of("v1", "pods", namespace=namespace)
    all_cases = cases()
    assert len(all_cases) >= 50
    disagreements: list[str] = []
    allocatable_cases = 0
    for case in all_cases:
        predicted = predict(case)
        allocatable_cases += bool(predicted)
        kube.create(claims, claim(case))
        kube.create(pods, pod(case))
        kind, detail = wait_for(f"scheduler decision on {case}", lambda c=case: outcome(kube, namespace, c.name), 20)
        if kind == "scheduled":
            node = detail
            results = wait_for(
                "allocation recorded",
                lambda c=case: (kube.get(f"{claims}/{c.name}").get("status") or {}).get("allocation"),
                10,
            )["devices"]["results"]
            devices = {r["device"] for r in results}
            ok = (
                node in predicted
                and {r["pool"] for r in results} == {node}
                and len(devices) == case.count
                and devices <= predicted[node]
            )
            if not ok:
                disagreements.append(
                    f"{case}: scheduler put it on {node} with {sorted(devices)}; predicted {predicted}"
                )
        elif predicted:
            disagreements.append(f"{case}: scheduler says unschedulable ({detail}); predicted {predicted}")
        # Free the devices before the next case: the claim goes once the pod no longer reserves it.
        kube.delete(f"{pods}/{case.name}", {"gracePeriodSeconds": 0})
        kube.delete(f"{claims}/{case.name}")
        wait_for(
            f"claim {case.name} deleted", lambda c=case: kube.get_or_none(f"{claims}/{c.name}") is None, timeout=20
        )
    agreed = len(all_cases) - len(disagreements)
    print(
        f"\nCEL agreement: {agreed}/{len(all_cases)} ({allocatable_cases} allocatable, "
        f"{len(all_cases) - allocatable_cases} not)"
    )
    assert not disagreements, "\n".join(disagreements)
    # Both outcomes must be exercised, or agreement proves little.
    assert 10 <= allocatable_cases <= len(all_cases) - 10


def test_stored_conformance_answers_are_the_go_libraries_answers() -> None:
    """tests/conformance/answers.json is what tools/cel-conformance (k8s.io/dynamic-resource-allocation and
    k8s.io/apiserver v0.37.2) answers today for tests/conformance/cases.json."""
    root = Path(__file__).resolve().parents[2]
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    binary = subprocess.run(
        [str(root / "tools" / "cel-conformance" / "build")], check=True, capture_output=True, text=True
    ).stdout.strip()
    cases = (root / "tests" / "conformance" / "cases.json").read_text()
    fresh = json.loads(subprocess.run([binary], input=cases, check=True, capture_output=True, text=True).stdout)
    stored = json.loads((root / "tests" / "conformance" / "answers.json").read_text())
    assert [(a["id"], a["verdict"]) for a in fresh] == [(a["id"], a["verdict"]) for a in stored]
