"""How long the twin's components take: one profile table, which the KWOK Stages play
(`dra_migrate.sim.stages`) and the plan's estimate reads (`dra_migrate.plan.estimate`); and the timers of
the one component KWOK cannot play, the canary (`dra_migrate.sim.kwok`).

Stdlib only and free of I/O, so the planner can import it without pulling in the twin.

Every figure of the realistic profile comes from the upstream component it plays (file and version
in the comment beside it) or is marked *typical* where upstream gives only an upper bound; figures
measured on a real kubelet (README "A real node") replace the typical ones with their citation.

`--time-scale F` multiplies every duration (the pods' own grace periods included), so F=0.1 plays
the same sequence ten times faster. The `instant` profile is zeros but for the canary's run: a label
switch is played as soon as KWOK sees it (Stages without delay), so the integration tests stay
fast. A canary is never instant, on a real node or here: once its pod is terminal the
resourceclaim controller deletes its generated claim (k8s.io/kubernetes@v1.37.2
pkg/controller/resourceclaim/controller.go L1650-1668), so the allocation can only be read while the
pod is bound and not yet finished — a window a real canary's start and run give (a kubelet v1.37.2
with containerd 2.4 on this machine kind ran a pod to Succeeded ~2.6 s after its creation).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

# Kubernetes' default terminationGracePeriodSeconds (k8s.io/api@v0.37.2 core/v1/types.go L3987,
# DefaultTerminationGracePeriodSeconds = 30).
DEFAULT_GRACE_S = 30


@dataclass(frozen=True)
class TimingProfile:
    """Delays of the simulated kubelet and plugins, in seconds of the simulation's clock."""

    name: str
    # kubelet's nodeStatusUpdateFrequency, default 10s (k8s.io/kubernetes@v1.37.2
    # pkg/kubelet/apis/config/v1beta1/defaults.go L146-148): node status (allocatable, capacity) is
    # recomputed and posted on this tick only.
    node_status_sync_s: float
    # A plugin's DaemonSet pod, from the label switch to its process gone. The DaemonSet controller
    # deletes the pod as soon as the node stops matching (pkg/controller/daemon/daemon_controller.go
    # L957); both NVIDIA plugins stop their gRPC server on SIGTERM (NVIDIA/k8s-device-plugin v0.20.0
    # cmd/nvidia-device-plugin/main.go L280-342). The 30s grace is the upper bound; typical: 2s.
    plugin_exit_s: float
    # devicemanager endpointStopGracePeriod = 5m (pkg/kubelet/cm/devicemanager/types.go L121-125,
    # endpoint.go L80-84): capacity keeps the stopped plugin's devices this long, then reads 0.
    capacity_grace_s: float
    # The device plugin's pod starting again (rollback) until it has registered (measured: REALISTIC).
    device_plugin_start_s: float
    # The DRA kubelet plugin: label set → DaemonSet pod created, started, registered with kubelet and
    # its ResourceSlice published (k8s.io/dynamic-resource-allocation@v0.37.2 kubeletplugin; measured: REALISTIC).
    dra_plugin_start_s: float
    # kubelet wipes a driver's ResourceSlices this long after its last plugin endpoint went away
    # (pkg/kubelet/cm/dra/manager.go L75 defaultWipingDelay = 30s; dra_plugin_manager.go L151-180).
    slice_wipe_delay_s: float
    # A pod bound to the node until its containers run (sandbox, image present, start). *typical*
    container_start_s: float
    # A canary's container (`nvidia-smi -L`) from start to exit. *typical*
    canary_run_s: float
    # Multiplies a deleted pod's deletionGracePeriodSeconds: how long it stays Terminating. Kubelet
    # runs preStop, then SIGTERM, within that one grace and kills at its end
    # (k8s.io/kubernetes@v1.37.2 pkg/kubelet/kuberuntime/kuberuntime_container.go killContainer
    # L864-904); the simulated workloads use all of it, as a pod that checkpoints on SIGTERM does.
    # 0: gone at once.
    grace_factor: float

    def scaled(self, factor: float) -> TimingProfile:
        """Every duration times `factor` (> 0)."""
        if not factor > 0:
            raise ValueError(f"time scale must be > 0, not {factor}")
        if factor == 1:
            return self
        changes = {f.name: getattr(self, f.name) * factor for f in fields(self) if f.name != "name"}
        return replace(self, **changes)

    def termination_s(self, grace_seconds: float | None) -> float:
        """How long a pod deleted with this grace (None: the default 30s) stays Terminating."""
        grace = DEFAULT_GRACE_S if grace_seconds is None else max(float(grace_seconds), 0.0)
        return grace * self.grace_factor


INSTANT = TimingProfile(
    name="instant",
    node_status_sync_s=0,
    plugin_exit_s=0,
    capacity_grace_s=0,
    device_plugin_start_s=0,
    dra_plugin_start_s=0,
    slice_wipe_delay_s=0,
    container_start_s=0,
    canary_run_s=1,  # see the module's docstring
    grace_factor=0,
)

REALISTIC = TimingProfile(
    name="realistic",
    node_status_sync_s=10,
    plugin_exit_s=2,
    capacity_grace_s=300,
    # Measured on the nvidia tier (docs/nvidia-tier.md, tests/integration/test_nvidia.py, images present):
    # the real device plugin (k8s-device-plugin v0.18.0) serving again 3.4 s after `rollback` began; the real
    # DRA kubelet plugin (dra-driver-nvidia-gpu v0.4.1) publishing its slice 1.6-2.1 s after its label was set.
    device_plugin_start_s=3.5,
    dra_plugin_start_s=2,
    slice_wipe_delay_s=30,
    container_start_s=1,
    canary_run_s=0.5,
    grace_factor=1,
)

PROFILES = {p.name: p for p in (INSTANT, REALISTIC)}


def profile(name: str = "instant", time_scale: float = 1.0) -> TimingProfile:
    """A named profile, scaled. ValueError names the known ones."""
    try:
        base = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown timing profile {name!r}; known: {', '.join(PROFILES)}") from None
    return base.scaled(time_scale)


# ---------------------------------------------------------------------------------------------------
# Timers: what the simulated components do later, on one thread, with an injectable clock


@dataclass(order=True)
class _Entry:
    due: float
    seq: int
    fn: Callable[[], None] = None  # type: ignore[assignment]
    cancelled: bool = False


class Timer:
    """A handle to cancel one scheduled call."""

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry

    def cancel(self) -> None:
        self._entry.cancelled = True

    @property
    def due(self) -> float:
        return self._entry.due

    @property
    def pending(self) -> bool:
        return not self._entry.cancelled and self._entry.fn is not None


class Timers:
    """Calls scheduled at clock times. `run_due()` runs what is due (tests call it with a fake clock);
    `run(stop)` does so on a thread until `stop` is set. A callback that raises is reported to
    `on_error` and does not stop the others."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.clock = clock
        self.on_error = on_error or (lambda _e: None)
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()

    def call_at(self, due: float, fn: Callable[[], None]) -> Timer:
        entry = _Entry(due, next(self._seq), fn)
        with self._cond:
            heapq.heappush(self._heap, entry)
            self._cond.notify()
        return Timer(entry)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        return self.call_at(self.clock() + delay, fn)

    def __len__(self) -> int:
        with self._cond:
            return sum(1 for e in self._heap if not e.cancelled)

    def next_due(self) -> float | None:
        with self._cond:
            self._drop_cancelled()
            return self._heap[0].due if self._heap else None

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)

    def _pop_due(self, now: float) -> _Entry | None:
        with self._cond:
            self._drop_cancelled()
            if self._heap and self._heap[0].due <= now:
                return heapq.heappop(self._heap)
            return None

    def run_due(self) -> int:
        """Run every call due by the clock now, in due order (ties: scheduling order). Returns how many."""
        ran = 0
        while (entry := self._pop_due(self.clock())) is not None:
            ran += 1
            self._call(self._take(entry))
        return ran

    def run(self, stop: threading.Event, idle_s: float = 1.0, workers: int = 1) -> None:
        """Run calls as they fall due until `stop` is set (wake up on new calls and at least every idle_s).

        With `workers` > 1, due calls run on that many threads: most are API calls that wait on the server,
        and in a fleet of thousands of nodes one thread's queue of them outgrows a step's timeout (a wave of
        80 nodes switching plugins at once). Calls due together may then run in any order: callers that
        need an order keep it themselves (the fleet's calls check the node's state under its lock)."""
        if workers <= 1:
            while not stop.is_set():
                self.run_due()
                self._idle(idle_s)
            return
        # Imported here: the planner reads this module's profiles, and `show` must not pay for a pool.
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sim-timer")
        try:
            while not stop.is_set():
                while (entry := self._pop_due(self.clock())) is not None:
                    pool.submit(self._call, self._take(entry))
                self._idle(idle_s)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _take(entry: _Entry) -> Callable[[], None]:
        fn, entry.fn = entry.fn, None  # type: ignore[assignment]
        return fn

    def _call(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:
            self.on_error(e)

    def _idle(self, idle_s: float) -> None:
        with self._cond:
            self._drop_cancelled()
            wait = idle_s if not self._heap else min(max(self._heap[0].due - self.clock(), 0.0), idle_s)
            if wait > 0:
                self._cond.wait(wait)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
