"""What runs on an operator's macOS laptop: each test simulates macOS on this Linux machine (sys.platform,
attributes macOS's Python lacks or has) and fails on the code before its fix (docs/usage.md "Platforms")."""

from __future__ import annotations

import sys
import time

import pytest

from dra_migrate.execute import lock

# A clock id only for this test: what the code passes on to clock_gettime is what is checked.
DARWIN_CLOCK_MONOTONIC_RAW = 1004


def test_lease_deadline_clock_counts_a_macos_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """A laptop whose lid closed mid-apply must wake knowing its Lease expired while it slept. macOS has no
    CLOCK_BOOTTIME, and Python's time.monotonic() there is mach_absolute_time(), which stops while the
    machine sleeps (CPython Python/pytime.c; Apple's mach_absolute_time docs); CLOCK_MONOTONIC_RAW is
    mach_continuous_time(), which counts it (Apple's mach_continuous_time docs; clock_gettime(3))."""
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(time, "CLOCK_MONOTONIC_RAW", DARWIN_CLOCK_MONOTONIC_RAW, raising=False)
    slept = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # mach_absolute_time: nothing while asleep

    def clock_gettime(clock: int) -> float:
        assert clock == DARWIN_CLOCK_MONOTONIC_RAW
        return 1000.0 + slept[0]

    monkeypatch.setattr(time, "clock_gettime", clock_gettime)
    before = lock._elapsed()
    slept[0] = 3600.0  # an hour with the lid closed
    assert lock._elapsed() - before == pytest.approx(3600.0)


def test_lease_deadline_clock_on_linux_is_boottime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "CLOCK_BOOTTIME", 7, raising=False)
    asked: list[int] = []
    monkeypatch.setattr(time, "clock_gettime", lambda clock: asked.append(clock) or 5.0)
    assert lock._elapsed() == 5.0
    assert asked == [7]
