"""Progress on stderr while the tool waits: reading a large cluster, a soak between waves, steps.

Drawn only when stderr is a terminal (one line, redrawn in place); otherwise silent, so logs and CI
output stay clean. The core never prints: the runner and the readers are handed these callbacks.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

_CLEAR = "\r\033[K"
AFTER_S = 2.0  # how long a piece of work runs before `Working` says what it is doing


def is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class TerminalProgress:
    """One redrawn status line on a terminal; `done()` clears it before normal output continues."""

    def __init__(
        self, stream: TextIO | None = None, *, every_s: float = 0.1, clock: Callable[[], float] = time.monotonic
    ):
        self.stream = stream or sys.stderr
        self.live = is_terminal(self.stream)
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


class Working:
    """`with Working("reading plans/x.yaml"):` around a plan command's work: if it is still running after
    `after_s` (`AFTER_S`, 2 s), a line on the terminal says what and for how long, redrawn until it ends
    (issue 29: a 10,000-node plan takes seconds to read, a 10,000-node snapshot tens of seconds). Silent when
    stderr is not a terminal."""

    def __init__(self, what: str, *, after_s: float | None = None, every_s: float = 0.5, stream: TextIO | None = None):
        self.progress = TerminalProgress(stream)
        self.what = what
        self.after_s = AFTER_S if after_s is None else after_s
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        started = time.monotonic()
        if self._stop.wait(self.after_s):
            return
        while not self._stop.is_set():
            self.progress._draw(f"{self.what}: {format_left(time.monotonic() - started)}", force=True)
            self._stop.wait(self.every_s)

    def __enter__(self) -> Working:
        if self.progress.live:
            self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.progress.done()
