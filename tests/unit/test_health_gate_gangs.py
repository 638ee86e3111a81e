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


def _labelled(name: str, labels: dict[str, str], owner: tuple[str, str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "labels": labels}
    if owner:
        api, kind, owner_name = owner
        meta["ownerReferences"] = [
            {"apiVersion": api, "kind": kind, "name": owner_name, "controller": True, "uid": "u"}
        ]
    return {"metadata": meta, "spec": {}}


def test_gangs_whose_pods_their_job_does_not_own_directly_are_one_failure_each() -> None:
    pods = [
        # JobSet: pods of the Jobs it owns, labelled with its name (jobset v0.8.0 api/jobset/v1alpha2/jobset_types.go).
        *(
            _labelled(f"ds-w-{i}", {"jobset.sigs.k8s.io/jobset-name": "ds"}, ("batch/v1", "Job", f"ds-w-{i // 2}"))
            for i in range(4)
        ),
        # LeaderWorkerSet: StatefulSets' pods; one gang per group (lws v0.5.0 GroupIndexLabelKey).
        *(
            _labelled(
                f"infer-{g}-{w}",
                {"leaderworkerset.sigs.k8s.io/name": "infer", "leaderworkerset.sigs.k8s.io/group-index": str(g)},
                ("apps/v1", "StatefulSet", f"infer-{g}"),
            )
            for g in range(2)
            for w in range(2)
        ),
        # Volcano Job: owned by a batch.volcano.sh Job, not a batch/v1 one.
        *(_labelled(f"vj-w-{i}", {}, ("batch.volcano.sh/v1alpha1", "Job", "vj")) for i in range(3)),
        # MPIJob: the workers are its pods, the launcher the pod of a batch/v1 Job it owns, both labelled
        # (mpi-operator v0.6.0 pkg/controller/mpi_job_controller.go defaultLabels).
        _labelled("pi-worker-0", {}, ("kubeflow.org/v2beta1", "MPIJob", "pi")),
        _labelled(
            "pi-launcher-x",
            {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/operator-name": "mpi-operator"},
            ("batch/v1", "Job", "pi-launcher"),
        ),
        # Kueue plain pod group (kueue v0.17.0 pkg/controller/jobs/pod/constants/constants.go).
        *(_labelled(f"pg-{i}", {"kueue.x-k8s.io/pod-group-name": "grp"}) for i in range(2)),
        # A plain Job's pods stay by name.
        _labelled("etl-1", {}, ("batch/v1", "Job", "etl")),
    ]
    assert group_pending(pods) == [
        "Job ml/vj (3 pods Pending)",
        "JobSet ml/ds (4 pods Pending)",
        "KueuePodGroup ml/grp (2 pods Pending)",
        "LeaderWorkerSet ml/infer/0 (2 pods Pending)",
        "LeaderWorkerSet ml/infer/1 (2 pods Pending)",
        "MPIJob ml/pi (2 pods Pending)",
        "ml/etl-1",
    ]
