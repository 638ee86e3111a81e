"""The twin's health gate against its real-time scheduler: at a small time scale the gate's threshold is
shorter than the scheduler's backoff (`rehearse/twinops.py` SCHEDULER_RETRY_S), so a Pending pod is looked at
again once the scheduler has had its retry; only a pod still Pending then fails the wave."""

from __future__ import annotations

from typing import Any

from dra_migrate.rehearse.twinops import SCHEDULER_RETRY_S, WatchingOps


class _Kube:
    def get_or_none(self, path: str) -> dict[str, Any]:
        message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
        return {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "message": message}]}}


class _Cluster:
    """Pods created at a time and bound at a later one (None: never), on a clock the gate's sleep moves."""

    def __init__(self, pods: dict[str, tuple[float, float | None]]) -> None:
        self.pods = pods
        self.now = 0.0
        self.kube = _Kube()
        self.asked: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def pending_gpu_pods(self, older_than_s: float, *, created_after: str | None = None) -> list[str]:
        self.asked.append(older_than_s)
        return sorted(
            name
            for name, (created, bound) in self.pods.items()
            if self.now - created > older_than_s and (bound is None or bound > self.now)
        )


def _gate(cluster: _Cluster, threshold_s: float) -> tuple[list[str], dict[str, str]]:
    ops = WatchingOps(cluster, sleep=cluster.sleep)  # type: ignore[arg-type]
    return ops.pending_gpu_pods(threshold_s), ops.reasons


def test_a_pod_the_scheduler_places_after_its_backoff_does_not_fail_the_gate() -> None:
    # Evicted 2 s before the gate, bound 5 s after it (its backoff): at 0.01 the threshold is 1.2 s.
    cluster = _Cluster({"inference/llama-0": (-2.0, 5.0)})
    assert _gate(cluster, 1.2) == ([], {})
    assert cluster.asked == [1.2, SCHEDULER_RETRY_S]


def test_a_pod_that_cannot_be_placed_still_fails_the_gate_with_the_schedulers_reason() -> None:
    cluster = _Cluster({"inference/llama-0": (-2.0, 5.0), "inference/pinned-0": (-2.0, None)})
    pending, reasons = _gate(cluster, 1.2)
    assert pending == ["inference/pinned-0"]
    assert reasons == {"inference/pinned-0": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}
    # Waited no longer than the scheduler's retry.
    assert cluster.now == SCHEDULER_RETRY_S


def test_a_threshold_longer_than_the_schedulers_retry_is_the_gate_as_on_a_cluster() -> None:
    # --time-scale 0.1: 12 s, as long as the retry; the gate looks once, as apply does on a cluster.
    cluster = _Cluster({"inference/llama-0": (-20.0, 5.0)})
    assert _gate(cluster, 12.0)[0] == ["inference/llama-0"]
    assert cluster.asked == [12.0] and cluster.now == 0.0


def test_a_gate_that_finds_nothing_does_not_wait() -> None:
    cluster = _Cluster({"inference/llama-0": (-0.5, None)})
    assert _gate(cluster, 1.2) == ([], {})
    assert cluster.asked == [1.2] and cluster.now == 0.0
