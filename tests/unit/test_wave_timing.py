"""Where a wave's wall time goes (issue 25: a 2,000-node rehearsal's waves, measured before cutting them):
each canary's own points in its journal record, and per wave when its last lane ended each step, its gate,
and its canaries' points (`waves[].timing` of the rehearsal's JSON; the bench prints their medians)."""

from __future__ import annotations

from dra_migrate.rehearse.model import _waves_of, wave_timing
from tests.unit.test_canary_races import GPU, NODE, LaggingScheduler, ops_on
from tests.unit.test_rehearsal import NODE_A, NODE_B, at, step


def test_a_canary_records_when_it_was_created_bound_ended_and_deleted() -> None:
    fake = LaggingScheduler(stale=0, saw="GPU 0: NVIDIA A100 (UUID: GPU-aaaa)")
    change = ops_on(fake).canary(NODE, GPU, "pause", 10)
    timing = change.after["timing"]
    assert list(timing) == ["created", "bound", "ended", "deleted"]
    assert 0 <= timing["created"] <= timing["bound"] <= timing["ended"] <= timing["deleted"]
    assert "attempt" not in timing  # the first canary passed


def test_a_canary_made_again_says_which_attempt_passed() -> None:
    fake = LaggingScheduler(stale=1, saw="GPU 0: NVIDIA A100 (UUID: GPU-aaaa)")
    assert ops_on(fake).canary(NODE, GPU, "pause", 10).after["timing"]["attempt"] == 2


def canary_end(created: float, bound: float, ended: float, deleted: float) -> dict[str, object]:
    return {"after": {"timing": {"created": created, "bound": bound, "ended": ended, "deleted": deleted}}}


def test_a_waves_timing_is_its_slowest_lane_per_step_its_gate_and_its_canaries() -> None:
    records = [
        *step(10, 11, "pool-a", "wave-1", NODE_A, "drain"),
        *step(10, 12.5, "pool-a", "wave-1", NODE_B, "drain"),
        *step(11, 14, "pool-a", "wave-1", NODE_A, "canary", **canary_end(0.1, 1.0, 2.0, 2.2)),
        *step(12.5, 16, "pool-a", "wave-1", NODE_B, "canary", **canary_end(0.3, 2.0, 3.0, 3.4)),
        {"event": "gate", "stage": "pool-a", "wave": "wave-1", "result": "ok", "pending": [], "time": at(19)},
    ]
    timing = wave_timing(records)[("pool-a", "wave-1")]
    assert timing["steps"] == {"drain": 2.5, "canary": 6.0}
    assert timing["gate"] == 9.0
    assert timing["canary"]["bound"] == {"median": 1.5, "max": 2.0}
    assert timing["canary"]["deleted"] == {"median": 2.8, "max": 3.4}
    [wave] = _waves_of(records, 0.1, {}, real_s=0)
    assert wave.to_dict()["timing"] == timing
