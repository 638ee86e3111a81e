"""The health gate names a gang whose pods are Pending as one failure (execute/ops.group_pending)."""

from __future__ import annotations

from typing import Any

from dra_migrate.execute.ops import group_pending


def _pod(name: str, *, group: str | None = None, owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True, "uid": "u"}]
    spec: dict[str, Any] = {"schedulingGroup": {"podGroupName": group}} if group else {}
    return {"metadata": meta, "spec": spec}


def test_a_gangs_pending_pods_are_one_failure_and_others_stay_by_name() -> None:
    pods = [
        *(_pod(f"w-{i}", group="train") for i in range(8)),
        _pod("llama-worker-0", owner=("PyTorchJob", "llama")),
        _pod("llama-worker-1", owner=("PyTorchJob", "llama")),
        _pod("web-abc", owner=("ReplicaSet", "web")),
        _pod("bare"),
    ]
    assert group_pending(pods) == [
        "PodGroup ml/train (8 pods Pending)",
        "PyTorchJob ml/llama (2 pods Pending)",
        "ml/bare",
        "ml/web-abc",
    ]


def test_no_pending_pods_no_failures() -> None:
    assert group_pending([]) == []
