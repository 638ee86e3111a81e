"""The executor's waits read the watches, not the API server (execute/watched.py), and wake when what they
read changes rather than at their next poll.

On an in-memory API server (dra_migrate.testing.server: real list+watch requests, blocking watches) the
test plays the scheduler, the claim controller and the kubelet; it counts what the executor asked. Before,
the canary's two waits made a GET of the pod on every poll (10.9 GET pods per migrated node on the
2,000-node twin) and a GET of the node for its hostname label; a wait slept out its poll after the
change it waited for had arrived.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dra_migrate.execute.contract import Cancel, StepFailed
from dra_migrate.execute.ops import LiveOps
from dra_migrate.testing.server import FakeServer

NODE, GPU, NS = "gpu-1", "nvidia.com/gpu", "default"
NODES, SLICES = "/api/v1/nodes", "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
PODS = f"/api/v1/namespaces/{NS}/pods"


def _node(allocatable: str) -> dict[str, Any]:
    return {
        "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
        "status": {"allocatable": {GPU: allocatable}},
    }


def _slice() -> dict[str, Any]:
    return {
        "metadata": {"name": f"{NODE}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": NODE,
            "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"uuid": {"string": "GPU-aaaa"}}}],
        },
    }


@pytest.fixture
def server() -> FakeServer:
    s = FakeServer()
    s.put(f"{NODES}/{NODE}", _node("0"))
    s.put(f"{SLICES}/{NODE}-gpu.nvidia.com", _slice())
    return s


@pytest.fixture
def ops(server: FakeServer) -> Iterator[LiveOps]:
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    live.watch()
    yield live
    live.unwatch()


def _play_canary(
    server: FakeServer,
    step_s: float,
    saw: str = "GPU 0: H100 (UUID: GPU-aaaa)",
    first: Callable[[dict[str, Any]], bool] = lambda _pod: True,
) -> threading.Thread:
    """The scheduler (claim allocated, pod bound with its extendedResourceClaimStatus) and the kubelet
    (the pod runs and Succeeds, naming its device), `step_s` apart, for the first canary created."""

    def play() -> None:
        deadline = time.monotonic() + 10
        while not [p for p in server.objects("/api/v1/pods") if first(p)] and time.monotonic() < deadline:
            time.sleep(0.005)
        pod = next(p for p in server.objects("/api/v1/pods") if first(p))
        name = pod["metadata"]["name"]
        time.sleep(step_s)
        results = [{"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0", "request": "r"}]
        claim = {"metadata": {"name": f"{name}-gpu"}, "status": {"allocation": {"devices": {"results": results}}}}
        server.put(f"{CLAIMS}/{name}-gpu", claim)
        pod["spec"]["nodeName"] = NODE
        pod["status"] = {"phase": "Pending", "extendedResourceClaimStatus": {"resourceClaimName": f"{name}-gpu"}}
        server.put(f"{PODS}/{name}", pod)
        time.sleep(step_s)
        terminated = {"exitCode": 0, "message": saw}
        pod["status"] = {**pod["status"], "phase": "Succeeded",
                         "containerStatuses": [{"name": "canary", "state": {"terminated": terminated}}]}  # fmt: skip
        server.put(f"{PODS}/{name}", pod)

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread


def test_the_canary_reads_its_pod_node_claim_and_slices_from_the_watches(server: FakeServer, ops: LiveOps) -> None:
    before = len(server.client.calls)
    player = _play_canary(server, step_s=0.3)  # 0.6 s of waiting: some 30 polls at 0.01-0.05 s
    change = ops.canary(NODE, GPU, "pause", 10)
    player.join(5)
    assert change.after["devices"] == [{"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0"}]
    assert change.after["expected"] == ["GPU-aaaa"]
    name = change.after["pod"].split("/", 1)[1]
    assert server.calls("GET", f"{PODS}/{name}", before) == 0, "the canary pod is read from the pods watch"
    assert server.calls("GET", f"{NODES}/{NODE}", before) == 0, "the node's hostname label from the nodes watch"
    assert server.calls("GET", SLICES, before) == 0, "its devices' UUIDs from the slices watch"
    assert server.calls("GET", PODS, before) == 0, "no list: the cleanup finds its pods in the pods watch"
    assert server.calls("GET", f"/api/v1/namespaces/{NS}/events", before) == 0, "no events: it ran within 1 s"
    asked = [(c.method, c.path) for c in server.client.calls[before:] if "watch" not in c.query]
    # What is left is the canary's own writes and the reads that precede them: its namespace once (its uid
    # range), the create, the cleanup's delete, and the claim at most once: its watch is a separate stream
    # from the pod's, so on a loaded machine the pod's binding can arrive before the claim's allocation (the
    # project's CI saw it) and the allocation is then read with one GET.
    ns_reads = [a for a in asked if a == ("GET", f"/api/v1/namespaces/{NS}")]
    claim_reads = [a for a in asked if a == ("GET", f"{CLAIMS}/{name}-gpu")]
    assert len(ns_reads) <= 1 and len(claim_reads) <= 1, asked
    rest = [a for a in asked if a not in ns_reads + claim_reads]
    assert rest == [("POST", PODS), ("DELETE", f"{PODS}/{name}")], asked
    assert not server.objects("/api/v1/pods"), "the canary was deleted"


def test_a_duplicate_a_retried_create_made_is_deleted_with_the_canary(server: FakeServer, ops: LiveOps) -> None:
    """A POST retried after the server took it makes a second pod of the same token: the pods watch shows it
    before the canary's end (one stream, in order), so the cleanup deletes it without a list."""

    def duplicate() -> None:
        deadline = time.monotonic() + 5
        while not server.objects("/api/v1/pods") and time.monotonic() < deadline:
            time.sleep(0.005)
        [pod] = server.objects("/api/v1/pods")
        twin = {"metadata": {"name": "dra-migrate-canary-dup", "labels": dict(pod["metadata"]["labels"])},
                "spec": dict(pod["spec"])}  # fmt: skip
        server.put(f"{PODS}/dra-migrate-canary-dup", twin)

    threading.Thread(target=duplicate, daemon=True).start()
    before = len(server.client.calls)
    player = _play_canary(server, step_s=0.2, first=lambda p: p["metadata"]["name"] != "dra-migrate-canary-dup")
    ops.canary(NODE, GPU, "pause", 10)
    player.join(5)
    assert not server.objects("/api/v1/pods"), "both pods of the token deleted"
    assert server.calls("GET", PODS, before) == 0


def test_without_the_watch_showing_its_end_the_cleanup_lists(server: FakeServer) -> None:
    """Not watching, the copy cannot vouch for duplicates: the cleanup lists the token's pods, as before."""
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    before = len(server.client.calls)
    player = _play_canary(server, step_s=0.1)
    live.canary(NODE, GPU, "pause", 10)
    player.join(5)
    assert server.calls("GET", PODS, before) >= 1
    assert not server.objects("/api/v1/pods")


def test_a_canary_left_by_an_interrupted_run_is_found_in_the_watch_and_deleted(server: FakeServer) -> None:
    leftover = {
        "metadata": {"name": "dra-migrate-canary-old", "labels": {"dra-migrate.io/canary": "0123456789ab"},
                     "annotations": {"dra-migrate.io/canary-node": NODE}},
        "spec": {"nodeName": NODE},
        "status": {"phase": "Running"},
    }  # fmt: skip
    server.put(f"{PODS}/dra-migrate-canary-old", leftover)
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    live.watch()
    try:
        player = _play_canary(server, step_s=0.2, first=lambda p: p["metadata"]["name"] != "dra-migrate-canary-old")
        live.canary(NODE, GPU, "pause", 10)
        player.join(5)
    finally:
        live.unwatch()
    assert server.get(f"{PODS}/dra-migrate-canary-old") is None
    assert not server.objects("/api/v1/pods")


def test_the_canary_wait_ignores_a_stale_copy_until_the_watch_shows_the_end(server: FakeServer, ops: LiveOps) -> None:
    """Bound and still Pending in the copy: not judged; a Succeeded pod naming another device: failed."""
    player = _play_canary(server, step_s=0.2, saw="GPU 0: H100 (UUID: GPU-elsewhere)")
    with pytest.raises(StepFailed, match="did not see GPU-aaaa"):
        ops.canary(NODE, GPU, "pause", 10)
    player.join(5)
    assert not server.objects("/api/v1/pods"), "the failed canary was deleted"


def test_a_wait_wakes_on_the_watched_change_not_at_its_next_poll(server: FakeServer) -> None:
    """wait-dra-ready with a 30 s poll: the node's allocatable turns 0 after 0.2 s and the wait returns
    at once. Polling, it slept its first poll (min(30 s, the 20 s timeout)) before reading again."""
    server.put(f"{NODES}/{NODE}", _node("8"))
    live = LiveOps(server.client, poll_s=30, poll_cap_s=30)
    live.watch()
    try:
        threading.Timer(0.2, lambda: server.put(f"{NODES}/{NODE}", _node("0"))).start()
        start = time.monotonic()
        change = live.wait_dra_ready(NODE, [GPU], 1, 20)
        assert time.monotonic() - start < 5
        assert change.after["devices"] == 1
        assert server.calls("GET", f"{NODES}/{NODE}") == 0
    finally:
        live.unwatch()


def test_a_cancel_wakes_a_wait_on_the_watches_at_once(server: FakeServer) -> None:
    server.put(f"{NODES}/{NODE}", _node("8"))
    live = LiveOps(server.client, poll_s=30, poll_cap_s=30)
    live.watch()
    cancel = Cancel()
    try:
        threading.Timer(0.2, lambda: cancel.cancel("another node failed")).start()
        start = time.monotonic()
        with pytest.raises(Exception, match="another node failed"):
            live.wait_dra_ready(NODE, [GPU], 1, 20, cancel=cancel)
        assert time.monotonic() - start < 5
    finally:
        live.unwatch()


def test_cancel_wait_or_returns_on_either_event() -> None:
    cancel, changed = Cancel(), threading.Event()
    threading.Timer(0.05, changed.set).start()
    assert cancel.wait_or(changed, 10) is False and changed.is_set()
    threading.Timer(0.05, lambda: cancel.cancel("stop")).start()
    assert cancel.wait_or(threading.Event(), 10) is True


def test_the_cordon_reads_its_node_once_for_its_precondition_and_the_value_it_changes(server: FakeServer) -> None:
    """The cordon checks the node is the plan's (its uid) and records the unschedulable it replaces, for the
    inverse: one GET serves both (it made two, back to back, on every node of every wave)."""
    from dra_migrate.execute.actions import StepContext, run_step
    from dra_migrate.plan.model import Action, Step

    server.put(f"{NODES}/{NODE}", {**_node("1"), "metadata": {**_node("1")["metadata"], "uid": "u-1"}})
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    step = Step("pool/gpu-1/cordon", Action.CORDON, f"Node {NODE}", {}, "", "1m", None)
    change = run_step(StepContext(live, step, NODE, 60, node_uid="u-1"))
    assert change is not None and change.before == {"unschedulable": False} and change.after == {"unschedulable": True}
    assert server.calls("GET", f"{NODES}/{NODE}") == 1
    assert server.calls("PATCH", f"{NODES}/{NODE}") == 1
    with pytest.raises(StepFailed, match="replaced since the plan"):
        run_step(StepContext(live, step, NODE, 60, node_uid="u-other"))
