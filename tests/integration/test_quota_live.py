"""Quota continuity on the real API server (docs/dependents.md "Quotas"): the plan's set-quota step, run
through the action registry and LiveOps, adds the DRA device limit beside the GPU limit; the real quota
admission then refuses a ResourceClaim over it and admits one within it (no window of unlimited DRA use);
the inverse removes only what it added; a GitOps-owned quota is never patched."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import controlplane
import pytest
from conftest import wait_for

from dra_migrate.execute.actions import StepContext, run_step, undo_step
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops import LiveOps, live_ops
from dra_migrate.inventory.dependents import device_quota_key
from dra_migrate.plan.model import Inverse, Step
from dra_migrate.rehearse.continuity import ContinuityWatch
from dra_migrate.sim.kube import ApiError, Kube, path_of

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
CLASS = f"quota-gpu-{RUN}"  # no extendedResourceName: test_premise wants no class mapping nvidia.com/gpu
OLD = "requests.nvidia.com/gpu"
NEW = device_quota_key(CLASS)


@pytest.fixture
def ops(control_plane: controlplane.ControlPlane) -> Iterator[LiveOps]:
    built = live_ops(control_plane.kubeconfig, None)
    yield LiveOps(built.api, poll_s=0.2)
    built.api.close()


@pytest.fixture
def device_class(kube: Kube) -> Iterator[str]:
    path = "/apis/resource.k8s.io/v1/deviceclasses"
    kube.create(path, {"metadata": {"name": CLASS}, "spec": {"selectors": [{"cel": {"expression": "true"}}]}})
    yield CLASS
    kube.delete(f"{path}/{CLASS}")


def quota(kube: Kube, namespace: str, **annotations: str) -> dict[str, Any]:
    return kube.create(
        path_of("v1", "resourcequotas", namespace=namespace),
        {"metadata": {"name": "gpu", "annotations": annotations}, "spec": {"hard": {OLD: "2", "requests.cpu": "4"}}},
    )


def set_quota_step(namespace: str, expect: str = "2") -> Step:
    return Step(
        id=f"prepare/set-quota/{namespace}/gpu",
        action="set-quota",
        target=f"ResourceQuota {namespace}/gpu",
        params={"namespace": namespace, "name": "gpu", "set": {NEW: "2"}, "continues": {OLD: expect}},
        precondition="",
        timeout="30s",
        inverse=Inverse("restore-quota", {"namespace": namespace, "name": "gpu", "hard": {NEW: None}}),
    )


def claim(kube: Kube, namespace: str, name: str, count: int) -> dict[str, Any]:
    return kube.create(
        path_of("resource.k8s.io/v1", "resourceclaims", namespace=namespace),
        {
            "metadata": {"name": name},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": count},
                        }
                    ]
                }
            },
        },
    )


def status_hard(kube: Kube, namespace: str) -> dict[str, str]:
    return dict((kube.get(path_of("v1", "resourcequotas", "gpu", namespace)).get("status") or {}).get("hard") or {})


def test_set_quota_limits_claims_at_once_and_rolls_back(
    kube: Kube, ops: LiveOps, namespace: str, device_class: str
) -> None:
    quota(kube, namespace)
    step = set_quota_step(namespace)
    dry = run_step(StepContext(ops, step, None, 30.0, dry_run=True))
    assert dry is not None and NEW not in kube.get(path_of("v1", "resourcequotas", "gpu", namespace))["spec"]["hard"]
    change = run_step(StepContext(ops, step, None, 30.0))
    assert change is not None and change.before == {"hard": {NEW: None}} and change.after == {"hard": {NEW: "2"}}
    hard = kube.get(path_of("v1", "resourcequotas", "gpu", namespace))["spec"]["hard"]
    assert hard == {OLD: "2", "requests.cpu": "4", NEW: "2"}  # the GPU limit stays beside the new one
    # The quota controller publishes the limit; from then on quota admission counts claims' devices.
    wait_for("the device limit in the quota's status", lambda: NEW in status_hard(kube, namespace), timeout=30)
    with pytest.raises(ApiError) as over:
        claim(kube, namespace, "too-many", 3)
    assert over.value.status == 403 and "exceeded quota" in over.value.api_message
    claim(kube, namespace, "within", 2)
    used = wait_for(
        "the claim counted",
        lambda: (
            (kube.get(path_of("v1", "resourcequotas", "gpu", namespace)).get("status") or {}).get("used") or {}
        ).get(NEW),
        timeout=30,
    )
    assert used == "2"
    with pytest.raises(ApiError):
        claim(kube, namespace, "one-more", 1)  # full: nothing beyond the old GPU limit's 2 devices
    # Repeating the step (a resumed run) changes nothing; the inverse removes only the key it added.
    again = run_step(StepContext(ops, step, None, 30.0))
    assert again is not None and again.before == again.after
    undo_step(StepContext(ops, step, None, 30.0))
    assert kube.get(path_of("v1", "resourcequotas", "gpu", namespace))["spec"]["hard"] == {
        OLD: "2",
        "requests.cpu": "4",
    }
    # A plan made when the GPU limit was 1 stops rather than set a limit that no longer continues it.
    with pytest.raises(StepFailed, match="changed since the plan"):
        run_step(StepContext(ops, set_quota_step(namespace, expect="1"), None, 30.0))
    assert NEW not in kube.get(path_of("v1", "resourcequotas", "gpu", namespace))["spec"]["hard"]


def test_a_gitops_owned_quota_is_never_patched(kube: Kube, ops: LiveOps, namespace: str) -> None:
    quota(kube, namespace, **{"argocd.argoproj.io/tracking-id": f"quotas:/ResourceQuota:{namespace}/gpu"})
    with pytest.raises(StepFailed, match="owned by argocd Application quotas"):
        run_step(StepContext(ops, set_quota_step(namespace), None, 30.0))
    assert NEW not in kube.get(path_of("v1", "resourcequotas", "gpu", namespace))["spec"]["hard"]


def test_the_continuity_watch_sees_a_window_between_two_writes(kube: Kube, namespace: str) -> None:
    """The rehearsal's quota continuity check (rehearse/continuity.py) on the real API server's watch: a GPU
    limit removed and its replacement written right after (closer than any poll) is a window in which the
    namespace's pods were unlimited, and is flagged with the write that opened it; adding the new limit
    before anything is removed (the plan's order) is not."""
    quota(kube, namespace)
    path = path_of("v1", "resourcequotas", "gpu", namespace)
    watch = ContinuityWatch(kube, {"nvidia.com/gpu": {CLASS}}, kueue=False)
    watch.start()
    try:
        kube.merge_patch(path, {"spec": {"hard": {NEW: "2"}}})  # the plan's order: the new limit first
        kube.merge_patch(path, {"spec": {"hard": {NEW: "2", OLD: None}}})  # hostile: then the old one removed
        last = kube.merge_patch(path, {"spec": {"hard": {OLD: "2"}}})  # ... and put back at once
        version = int(last["metadata"]["resourceVersion"])  # etcd's revision: the quota controller's status
        # update after it is later still

        def seen_version() -> int:
            return int(
                ((watch.seen("ResourceQuota", f"{namespace}/gpu") or {}).get("metadata") or {}).get("resourceVersion")
                or 0
            )

        wait_for("the watch to see the last write", lambda: seen_version() >= version, timeout=30)
    finally:
        checked = watch.stop()
    mine = [v for v in checked.violations.values() if f" {namespace} " in v.subject]
    assert [(v.path, v.kind, v.cause, v.before) for v in mine] == [
        ("old", "unlimited", f"MODIFIED ResourceQuota {namespace}/gpu", "2")
    ]
    assert checked.failure() is not None
