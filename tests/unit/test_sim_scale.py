"""What lets the twin keep up beside the executor at thousands of nodes (issue 16, "scale").

Each of these failed a 2,000-node rehearsal before it was fixed: one thread running every delayed call (the
canary's timers, sim/kwok.py), and the executor's scaled polls starving the twin.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from dra_migrate.execute.ops import POLL_CAP_S
from dra_migrate.rehearse.run import (
    GRACE_PER_HEARTBEAT,
    MAX_RENEWALS_PER_S,
    POLL_BUDGET_PER_S,
    scaled_polls,
    twin_heartbeat_s,
)
from dra_migrate.sim.timing import Timers

# -- the timers' workers ---------------------------------------------------------------------------


def _run_timers_until(timers: Timers, workers: int, done: Callable[[], bool]) -> threading.Thread:
    """Run `timers` on `workers` until `done()` (at most 5 s), then stop them; the stopped runner's thread."""
    stop = threading.Event()
    t = threading.Thread(target=timers.run, args=(stop,), kwargs={"idle_s": 0.05, "workers": workers}, daemon=True)
    t.start()
    deadline = time.monotonic() + 5
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    timers.wake()
    t.join(5)
    return t


def test_timer_workers_run_calls_due_together_at_once() -> None:
    """Three calls that can only finish together (a barrier of three) finish on three workers."""
    errors: list[BaseException] = []
    timers = Timers(on_error=errors.append)
    barrier = threading.Barrier(3, timeout=5)
    done: list[int] = []

    def meet(i: int) -> None:
        barrier.wait()
        done.append(i)

    for i in range(3):
        timers.call_later(0, lambda i=i: meet(i))  # type: ignore[misc]
    _run_timers_until(timers, 3, lambda: len(done) == 3)
    assert sorted(done) == [0, 1, 2] and not errors


def test_one_timer_thread_runs_them_one_after_the_other() -> None:
    """The contrast: with one worker the same three calls cannot meet (the barrier breaks)."""
    errors: list[BaseException] = []
    timers = Timers(on_error=errors.append)
    barrier = threading.Barrier(3, timeout=0.2)

    def meet() -> None:
        barrier.wait()

    for _ in range(3):
        timers.call_later(0, meet)
    _run_timers_until(timers, 1, lambda: len(errors) == 3)
    assert len(errors) == 3 and all(isinstance(e, threading.BrokenBarrierError) for e in errors)


def test_a_failing_call_on_a_worker_is_reported_and_the_others_run() -> None:
    errors: list[BaseException] = []
    timers = Timers(on_error=errors.append)
    ran = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    timers.call_later(0, boom)
    timers.call_later(0.05, ran.set)
    t = _run_timers_until(timers, 4, ran.is_set)
    assert ran.is_set() and [str(e) for e in errors] == ["boom"]
    assert not t.is_alive(), "stop ends the workers too"


# -- the twin's rates --------------------------------------------------------------------------------


@pytest.mark.parametrize("lanes", [1, 8, 80, 400])
@pytest.mark.parametrize("scale", [0.01, 0.05, 0.1, 1.0])
def test_all_lanes_together_poll_the_twin_within_the_budget(lanes: int, scale: float) -> None:
    first, cap = scaled_polls(0.5, scale, lanes)
    assert lanes / cap <= POLL_BUDGET_PER_S + 1e-9, "steady polls of every lane within the budget"
    assert 0 < first <= cap
    assert cap <= max(0.1, POLL_CAP_S * scale, lanes / POLL_BUDGET_PER_S) + 1e-9, "no slower than needed"


def test_a_small_wave_keeps_the_scaled_polls() -> None:
    """Where the budget does not bind, polls are the executor's own, scaled (the rehearsed duration's grain)."""
    assert scaled_polls(0.5, 0.05, 8) == (0.025, 0.1)
    assert scaled_polls(0.5, 1.0, 8) == (0.5, POLL_CAP_S)


@pytest.mark.parametrize(("nodes", "heartbeat"), [(3, 10.0), (100, 10.0), (200, 20.0), (2000, 200.0), (10000, 1000.0)])
def test_a_big_twin_beats_slower_within_the_renewal_budget(nodes: int, heartbeat: float) -> None:
    assert twin_heartbeat_s(nodes) == heartbeat
    assert nodes / heartbeat <= max(MAX_RENEWALS_PER_S, nodes / 10)  # kubelet's 10 s for a small twin
    # The controller's grace keeps kubelet's ratio (10 s renewals, 50 s grace).
    assert heartbeat * GRACE_PER_HEARTBEAT >= 50
