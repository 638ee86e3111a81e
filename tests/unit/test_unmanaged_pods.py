"""`unmanaged-gpu-pod`: GPU pods that the drain deletes for good, since no controller recreates them.

Found reading the drain: its docstring said "the plan lists them for review beforehand", and nothing did;
the demo fleet's `research/cuda-debug-jsmith` (a hand-made CUDA shell) would have been evicted with the
h100 pool's first wave, and the plan said "evicted pods are recreated by their controllers".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from tests.unit.cli import run
from tests.unit.helpers import container, node, pod, pod_spec
from tests.unit.test_checks import GPU, findings, gpu_node, make

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")
SHELL = pod_spec(container(limits={GPU: 1}))


def _with_owner(p: dict[str, Any], kind: str, controller: bool) -> dict[str, Any]:
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": kind, "name": "x", "uid": f"u-{kind}", "controller": controller}
    ]
    return p


def _flagged(*objects: dict[str, Any]) -> list[str]:
    found = findings(make(*objects), "unmanaged-gpu-pod")
    assert len(found) <= 1
    return [str(o) for o in found[0].objects] if found else []


def test_a_gpu_pod_without_a_controller_is_flagged_with_its_pool() -> None:
    (f,) = findings(make(gpu_node("gpu-1", pool="h100"), pod("shell", SHELL)), "unmanaged-gpu-pod")
    assert f.severity.value == "warning"
    assert [str(o) for o in f.objects] == ["Pod ml/shell"]
    assert "ml/shell (pool h100)" in f.message and "nothing recreates them" in f.message
    assert assess(make(gpu_node("gpu-1", pool="h100"), pod("shell", SHELL))).scope_of(f) == {
        "scope": "pool",
        "pools": ["h100"],
    }


@pytest.mark.parametrize(
    ("case", "make_pod"),
    [
        ("a ReplicaSet's", lambda: _with_owner(pod("rs-x", SHELL), "ReplicaSet", True)),
        ("a training job's", lambda: _with_owner(pod("job-x", SHELL), "PyTorchJob", True)),
        ("a mirror pod (its Node controls it)", lambda: _with_owner(pod("static", SHELL), "Node", True)),
        ("finished: Succeeded", lambda: pod("done", SHELL, phase="Succeeded")),
        ("finished: Failed", lambda: pod("failed", SHELL, phase="Failed")),
        ("no GPU (the drain's default scope leaves it)", lambda: pod("cpu", pod_spec(container()))),
        ("on a CPU node", lambda: pod("elsewhere", SHELL, node="cpu-1")),
        ("not bound to a node", lambda: pod("pending", SHELL, node=None, phase="Pending")),
    ],
)
def test_what_the_drain_does_not_lose_is_not_flagged(case: str, make_pod: Any) -> None:
    assert _flagged(gpu_node("gpu-1"), node("cpu-1"), make_pod()) == [], case


def test_an_owner_that_is_not_a_controller_recreates_nothing() -> None:
    """`ownerReferences` without `controller: true` (garbage collection only) bring nothing back."""
    shell = _with_owner(pod("gc-owned", SHELL), "ConfigMap", False)
    assert _flagged(gpu_node("gpu-1"), shell) == ["Pod ml/gc-owned"]


def test_a_pending_pod_bound_to_the_node_is_flagged_and_one_being_deleted_is_not() -> None:
    pending = pod("starting", SHELL, phase="Pending")
    going = pod("going", SHELL)
    going["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    assert _flagged(gpu_node("gpu-1"), pending, going) == ["Pod ml/starting"]


def test_a_node_already_migrated_is_not_drained_again() -> None:
    migrated = gpu_node(
        "gpu-1", **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    )
    migrated["status"]["allocatable"].pop(GPU)
    assert _flagged(migrated, pod("shell", SHELL)) == []


def test_the_message_names_three_and_counts_the_rest() -> None:
    pods = [pod(f"shell-{i}", SHELL) for i in range(5)]
    (f,) = findings(make(gpu_node("gpu-1"), *pods), "unmanaged-gpu-pod")
    assert "5 GPU pod(s)" in f.message and "and 2 more" in f.message and len(f.objects) == 5


def test_the_plan_carries_it_for_its_pool_only(tmp_path: Path) -> None:
    """The demo fleet's CUDA shell is on the h100 pool: a plan of that pool lists it, one without it does not."""
    with_pool = tmp_path / "with.yaml"
    without = tmp_path / "without.yaml"
    assert run("plan", "--snapshot", DEMO, "--out", str(with_pool)).code == 0
    assert run("plan", "--snapshot", DEMO, "--out", str(without), "--exclude-pools", "h100-pool").code == 0
    ids = {
        p: [f["id"] for f in json.loads(run("show", str(p), "-o", "json").stdout)["findings"]]
        for p in (with_pool, without)
    }
    assert "unmanaged-gpu-pod" in ids[with_pool] and "unmanaged-gpu-pod" not in ids[without]
