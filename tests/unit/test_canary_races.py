"""The canary's two races with the control plane, each found by a 2,000-node rehearsal failing a wave
whose nodes were fine.

1. The scheduler's view of a node lags its status: wait-dra-ready reads allocatable 0 from the API
   server, the scheduler has not received it yet and places the canary by the device plugin (a temporary
   error: make the canary again). An API server fake binds the first canaries without
   extendedResourceClaimStatus while the node's allocatable is already 0.
2. The canary finishes before its claim is read: the resourceclaim controller deletes a terminal pod's
   generated claim at once, so the allocation is gone (judge by the node's published devices).
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.execute import ops_canary
from dra_migrate.execute.canary import seen_published
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops import CANARY_ATTEMPTS, LiveOps

NODE, GPU, NS = "gpu-1", "nvidia.com/gpu", "default"


def slice_of(generation: int, *devices: tuple[str, str]) -> dict[str, Any]:
    return {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": n, "attributes": {"uuid": {"string": u}}} for n, u in devices],
        }
    }


SLICE = slice_of(2, ("gpu-0", "GPU-aaaa"), ("gpu-1", "GPU-bbbb"))


class LaggingScheduler:
    """Pods, a node and one claim. The first `stale` canaries are bound as the device plugin would have
    them; later ones get a DRA claim and succeed naming its device."""

    def __init__(self, stale: int, allocatable: str = "0", claim_gone: bool = False, saw: str = "GPU 0: gpu-0") -> None:
        self.stale = stale
        self.allocatable = allocatable
        self.claim_gone = claim_gone
        self.saw = saw
        self.slices = [SLICE]
        self.created: list[str] = []
        self.pods: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []

    def create(self, path: str, body: dict[str, Any], query: Any = ()) -> dict[str, Any]:
        name = f"{body['metadata']['generateName']}{len(self.created)}"
        self.created.append(name)
        saw = self.saw
        by_dra = len(self.created) > self.stale
        status: dict[str, Any] = {"phase": "Pending"}
        if by_dra:
            status = {
                "phase": "Succeeded",
                "extendedResourceClaimStatus": {"resourceClaimName": f"{name}-gpu"},
                "containerStatuses": [{"name": "canary", "state": {"terminated": {"exitCode": 0, "message": saw}}}],
            }
        self.pods[name] = {
            **body,
            "metadata": {**body["metadata"], "name": name, "uid": f"uid-{name}"},
            "spec": {**body["spec"], "nodeName": NODE},
            "status": status,
        }
        return self.pods[name]

    def get(self, path: str) -> dict[str, Any]:
        found = self.get_or_none(path)
        assert found is not None, path
        return found

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        if path == f"/api/v1/nodes/{NODE}":
            return {"metadata": {"name": NODE, "labels": {}}, "status": {"allocatable": {GPU: self.allocatable}}}
        name = path.rsplit("/", 1)[-1]
        if "/resourceclaims/" in path:
            if self.claim_gone:
                return None
            devices = {"results": [{"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0", "request": "r"}]}
            return {"status": {"allocation": {"devices": devices}}}
        return self.pods.get(name)

    def list_all(self, path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        if path.endswith("/pods"):
            return [p for n, p in self.pods.items() if n not in self.deleted], "1"
        if path.endswith("/resourceslices"):
            return self.slices, "1"
        return [], "1"

    def delete(self, path: str, body: Any = None) -> None:
        self.deleted.append(path.rsplit("/", 1)[-1])


def ops_on(fake: LaggingScheduler) -> LiveOps:
    ops = LiveOps(None, poll_s=0.001, poll_cap_s=0.001)
    ops.kube = fake  # type: ignore[assignment]
    return ops


def test_a_canary_placed_from_a_stale_view_is_made_again_and_passes() -> None:
    fake = LaggingScheduler(stale=CANARY_ATTEMPTS - 1, saw="GPU 0: NVIDIA A100 (UUID: GPU-aaaa)")
    change = ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert change.after["devices"] == [{"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}]
    assert len(fake.created) == CANARY_ATTEMPTS
    assert set(fake.deleted) >= set(fake.created), "every canary deleted, the stale ones too"


def test_a_scheduler_that_stays_behind_fails_the_step_and_says_so() -> None:
    fake = LaggingScheduler(stale=99)
    with pytest.raises(StepFailed, match=f"{CANARY_ATTEMPTS} time.*allocatable nvidia.com/gpu is 0") as err:
        ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert "scheduler" in err.value.hint
    assert len(fake.created) == CANARY_ATTEMPTS and set(fake.deleted) >= set(fake.created)


def test_a_node_that_still_offers_the_resource_fails_at_once() -> None:
    """Allocatable above 0: the device plugin really serves it — permanent, no second canary."""
    fake = LaggingScheduler(stale=99, allocatable="8")
    with pytest.raises(StepFailed, match=r"served by the device plugin, not DRA \(no extendedResourceClaimStatus"):
        ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert len(fake.created) == 1


# -- the claim gone before it was read -----------------------------------------------------------


def test_a_canary_whose_claim_is_gone_is_judged_by_the_nodes_published_devices() -> None:
    fake = LaggingScheduler(stale=0, claim_gone=True, saw="GPU 0: NVIDIA H100 (UUID: GPU-bbbb)")
    change = ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert change.after["claimGone"] is True
    assert change.after["devices"] == [{"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-1"}]
    assert change.after["expected"] == ["GPU-bbbb"]


def test_a_canary_whose_claim_is_gone_and_saw_no_device_of_the_node_fails() -> None:
    fake = LaggingScheduler(stale=0, claim_gone=True, saw="GPU 0: NVIDIA H100 (UUID: GPU-elsewhere)")
    with pytest.raises(StepFailed, match=r"claim was gone.*none of node gpu-1's published devices.*GPU-elsewhere"):
        ops_on(fake).canary(NODE, GPU, "pause", 10)


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    old = slice_of(1, ("gpu-0", "GPU-old"))
    assert seen_published("GPU-old", [old, SLICE]) == []
    assert seen_published("GPU-aaaa GPU-bbbb", [old, SLICE]) == [
        {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0", "id": "GPU-aaaa"},
        {"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-1", "id": "GPU-bbbb"},
    ]


# -- light on the API server ---------------------------------------------------------------------


class SlowKubelet(LaggingScheduler):
    """A canary bound at once that runs only after `polls` reads of it; counts the lists it is asked for."""

    def __init__(self, polls: int, warning: str = "") -> None:
        super().__init__(stale=0, saw="GPU 0: NVIDIA A100 (UUID: GPU-aaaa)")
        self.polls, self.warning = polls, warning
        self.reads = 0
        self.queries: list[tuple[str, str]] = []
        # Another node's slice of the same driver: the canary never needs it.
        other = slice_of(1, ("gpu-0", "GPU-other"))
        other["spec"]["nodeName"] = other["spec"]["pool"]["name"] = "gpu-2"
        self.slices = [SLICE, other]

    def get(self, path: str) -> dict[str, Any]:
        pod = super().get(path)
        if "/pods/" not in path or "status" not in pod:
            return pod
        self.reads += 1
        if self.reads <= self.polls:
            return {**pod, "status": {**pod["status"], "phase": "Pending", "containerStatuses": []}}
        return pod

    def list_all(self, path: str, query: Any = ()) -> tuple[list[dict[str, Any]], str]:
        selector = dict(query).get("fieldSelector", "")
        self.queries.append((path.rsplit("/", 1)[-1], selector))
        if path.endswith("/events"):
            if not self.warning:
                return [], "1"
            return [{"type": "Warning", "reason": self.warning, "message": "prepare failed", "count": 1}], "1"
        if path.endswith("/resourceslices"):
            wanted = dict(term.split("=", 1) for term in selector.split(",") if "=" in term)
            return [s for s in self.slices if all(
                s["spec"].get("nodeName" if k == "spec.nodeName" else "driver") == v for k, v in wanted.items()
            )], "1"  # fmt: skip
        return super().list_all(path, query)


def test_a_pending_canary_reads_its_events_seldom_and_only_its_nodes_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2,000-node rehearsal: every poll of 60 canaries listed the namespace's events (not indexed: 2 s
    each on the loaded twin) and every canary listed all 2,000 slices of the driver; the API server fell
    behind and the scheduler's binds with it."""
    fake = SlowKubelet(polls=200)
    monkeypatch.setattr(ops_canary, "EVENTS_FIRST_S", 0.0)  # read at the first pending sighting, as before
    change = ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert change.after["expected"] == ["GPU-aaaa"]
    events = [q for q in fake.queries if q[0] == "events"]
    assert fake.reads > 200 and 1 <= len(events) <= 2, (fake.reads, len(events))
    slices = [sel for kind, sel in fake.queries if kind == "resourceslices"]
    assert slices == [f"spec.driver=gpu.nvidia.com,spec.nodeName={NODE}"]


def test_a_failed_prepare_still_fails_the_canary_at_its_first_events_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops_canary, "EVENTS_FIRST_S", 0.05)
    fake = SlowKubelet(polls=10_000, warning="FailedPrepareDynamicResources")
    with pytest.raises(StepFailed, match="FailedPrepareDynamicResources"):
        ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert [q for q in fake.queries if q[0] == "events"] == [("events", "involvedObject.uid=uid-dra-migrate-canary-0")]


def test_a_canary_that_ends_soon_after_binding_lists_no_events() -> None:
    """At its binding the kubelet has not yet tried to prepare the device: listing the namespace's events
    then (a scan: they are not indexed by object) found nothing, once per migrated node."""
    fake = SlowKubelet(polls=20)  # some 20 ms of pending reads at the test's 1 ms poll
    assert ops_on(fake).canary(NODE, GPU, "pause", 10).after["expected"] == ["GPU-aaaa"]
    assert [q for q in fake.queries if q[0] == "events"] == []


def test_a_device_outside_the_nodes_slices_is_looked_up_in_the_drivers() -> None:
    fake = SlowKubelet(polls=0)
    fake.slices = [slice_of(2, ("gpu-0", "GPU-aaaa"))]
    fake.slices[0]["spec"]["nodeName"] = "elsewhere"  # a pool published by another node or none
    change = ops_on(fake).canary(NODE, GPU, "pause", 10)
    assert change.after["expected"] == ["GPU-aaaa"]
    slices = [sel for kind, sel in fake.queries if kind == "resourceslices"]
    assert slices == [f"spec.driver=gpu.nvidia.com,spec.nodeName={NODE}", "spec.driver=gpu.nvidia.com"]


def _names_the_scheduler_narrows_to(pod: dict[str, Any]) -> set[str] | None:
    """The nodes the scheduler's NodeAffinity PreFilter narrows a cycle to, or None for every node: a set
    only when every required term has a `metadata.name In` field requirement (k8s.io/kubernetes@v1.37.2
    pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go, PreFilter)."""
    affinity = pod["spec"].get("affinity", {}).get("nodeAffinity", {})
    terms = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    names: set[str] = set()
    for term in terms:
        fields = [r for r in term.get("matchFields", []) if r["key"] == "metadata.name" and r["operator"] == "In"]
        if not fields:
            return None
        names |= set.intersection(*(set(r["values"]) for r in fields))
    return names if terms else None


def test_a_canary_is_placed_by_its_nodes_name_so_the_scheduler_filters_one_node_not_the_fleet() -> None:
    """A 2,000-node rehearsal: canaries placed by the hostname label took 2.2 s (median) from creation to
    binding, each scheduling cycle filtering every node of the fleet (DRA's allocator among the filters)
    while a wave's 60-80 canaries queued behind one another."""
    fake = LaggingScheduler(stale=0, saw="GPU 0: NVIDIA A100 (UUID: GPU-aaaa)")
    sent: list[dict[str, Any]] = []
    create, read = fake.create, fake.get_or_none
    fake.create = lambda path, body, query=(): sent.append(body) or create(path, body, query)  # type: ignore[method-assign]

    def node_with_its_own_hostname(path: str) -> dict[str, Any] | None:
        found = read(path)
        if found is not None and path.endswith(f"/nodes/{NODE}"):
            found["metadata"]["labels"] = {"kubernetes.io/hostname": "host-17.example"}
        return found

    fake.get_or_none = node_with_its_own_hostname  # type: ignore[method-assign]
    ops_on(fake).canary(NODE, GPU, "pause", 10)
    (pod,) = sent
    assert _names_the_scheduler_narrows_to(pod) == {NODE}
    (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    # The placement every plan records (plan/steps.py): the hostname label, as read from the node.
    assert term["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["host-17.example"]}
    ]
    assert "nodeName" not in pod["spec"], "the scheduler, not the manifest, binds it (it allocates the device)"
