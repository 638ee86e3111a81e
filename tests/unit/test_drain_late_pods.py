"""A drain against pods the scheduler binds to the node after the drain listed them.

The scheduler places pods from its informer cache, snapshotted at the start of each cycle
(k8s.io/kubernetes@v1.37.2 pkg/scheduler/schedule_one.go, UpdateSnapshot): a cycle that started before it
received the cordon still sees the node schedulable and binds there (the wave's own evictions make the
pending GPU pods it is placing). kubectl drain lists a node's pods once (k8s.io/kubectl v0.37.2
pkg/drain/drain.go, GetPodsForDeletion), which is enough for maintenance; here the device plugin is
switched off next, and a GPU pod bound after the list keeps a device-plugin GPU that the DRA driver then
publishes and allocates to another pod. So the drain re-lists the node once its evictions are done, and
drains what came since, until a list finds nothing left to evict.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops import LiveOps

NODE, NS, GPU = "gpu-1", "team", "nvidia.com/gpu"


def gpu_pod(name: str, *, owner: str | None = "ReplicaSet") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "rs", "controller": True, "apiVersion": "apps/v1"}]
    return {
        "metadata": meta,
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "resources": {"limits": {GPU: "1"}}}]},
        "status": {"phase": "Running"},
    }


class LateBinder:
    """The pods on one node. Each of the first `late` evictions is followed by the scheduler binding a pod
    it placed from a snapshot taken before the cordon."""

    def __init__(self, pods: list[dict[str, Any]], late: list[dict[str, Any]]) -> None:
        self.pods = {p["metadata"]["uid"]: p for p in pods}
        self.late = list(late)
        self.evicted: list[str] = []

    def list_all(self, path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        if path.endswith("/pods"):
            return list(self.pods.values()), "1"
        return [], "1"  # no PodDisruptionBudgets

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        assert method == "POST" and path.endswith("/eviction"), path
        if kwargs.get("query"):
            return {}  # a dry run: nothing goes
        uid = kwargs["body"]["deleteOptions"]["preconditions"]["uid"]
        pod = self.pods.pop(uid)
        self.evicted.append(pod["metadata"]["name"])
        if self.late:
            late = self.late.pop(0)
            self.pods[late["metadata"]["uid"]] = late
        return {}


def ops_on(fake: LateBinder) -> LiveOps:
    ops = LiveOps(None, poll_s=0.001, poll_cap_s=0.001)
    ops.kube = fake  # type: ignore[assignment]
    return ops


def test_a_gpu_pod_bound_after_the_drains_list_is_drained_too() -> None:
    fake = LateBinder([gpu_pod("a")], [gpu_pod("late")])
    change = ops_on(fake).drain(NODE, "gpu", 10)
    assert fake.evicted == ["a", "late"]
    assert not fake.pods, "no GPU pod left on the node whose device plugin goes off next"
    assert change.before == {"pods": [f"{NS}/a", f"{NS}/late"]} and change.after == {"pods": []}


def test_a_late_pod_nobody_owns_stops_the_drain_as_any_unreviewed_one() -> None:
    fake = LateBinder([gpu_pod("a")], [gpu_pod("notebook", owner=None)])
    with pytest.raises(StepFailed, match=f"{NS}/notebook") as err:
        ops_on(fake).drain(NODE, "gpu", 10, reviewed={"uid-a"})
    assert err.value.details["pods"] == [f"{NS}/notebook"]
    assert fake.evicted == ["a"]


def test_pods_that_keep_coming_fail_the_drain_at_its_deadline_naming_them() -> None:
    """A controller that binds pods itself (spec.nodeName, ignoring the cordon) refills the node for ever."""
    fake = LateBinder([gpu_pod("a")], [gpu_pod(f"again-{i}") for i in range(100_000)])
    with pytest.raises(StepFailed, match="again-") as err:
        ops_on(fake).drain(NODE, "gpu", 0.2)
    assert "bound" in str(err.value)


def test_a_dry_run_lists_once() -> None:
    fake = LateBinder([gpu_pod("a")], [gpu_pod("late")])
    fake.request = lambda method, path, **kw: {}  # type: ignore[method-assign]
    change = ops_on(fake).drain(NODE, "gpu", 10, dry_run=True)
    assert change.before == {"pods": [f"{NS}/a"]}
