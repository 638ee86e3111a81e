"""Progress on stderr while the tool waits: reading a large cluster, a soak between waves, steps.

Drawn only when stderr is a terminal (one line, redrawn in place); otherwise silent, so logs and CI
output stay clean. The core never prints: the runner and the readers are handed these callbacks.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

_CLEAR = "\r\033[K"


class TerminalProgress:
    """One redrawn status line on a terminal; `done()` clears it before normal output continues."""

    def __init__(
        self, stream: TextIO | None = None, *, every_s: float = 0.1, clock: Callable[[], float] = time.monotonic
    ):
        self.stream = stream or sys.stderr
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every_s = every_s
        self.clock = clock
        self._last = float("-inf")
        self._shown = False

    def _draw(self, text: str, force: bool = False) -> None:
        if not self.live:
            return
        now = self.clock()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        self.stream.write(_CLEAR + text[:150])
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self.live and self._shown:
            self.stream.write(_CLEAR)
            self.stream.flush()
            self._shown = False

    # --- what callers report

    def listing(self, count: int, kind: str) -> None:
        """A live read: objects read so far, and the kind being listed."""
        self._draw(f"reading the cluster: {count:,} objects ({kind})")

    def soak(self, label: str, remaining_s: float, total_s: float) -> None:
        """A countdown during a soak: `label` is the wave (e.g. pool-h100/wave-1)."""
        self._draw(f"{label}: soaking, {format_left(remaining_s)} left of {format_left(total_s)}", force=True)

    def steps(self, done: int, total: int, step: str) -> None:
        if not total:
            return
        width = 30
        filled = width * done // total
        self._draw(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {step}", force=True)


def format_left(seconds: float) -> str:
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def soak_ticks(total_s: float, tick_s: float = 1.0) -> Iterator[tuple[float, float]]:
    """(remaining, sleep) pairs that add up to `total_s`: the runner sleeps each `sleep` (through its
    clock, cancellably) and reports `remaining` to `TerminalProgress.soak` before it."""
    remaining = float(total_s)
    while remaining > 0:
        step = min(tick_s, remaining)
        yield remaining, step
        remaining -= step


def counted(objects: Iterator[dict[str, Any]], progress: TerminalProgress) -> Iterator[dict[str, Any]]:
    """Pass objects through, telling `progress` how many have been read and of which kind."""
    n = 0
    try:
        for obj in objects:
            n += 1
            progress.listing(n, str(obj.get("kind") or "?"))
            yield obj
    finally:
        progress.done()
