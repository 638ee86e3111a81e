"""Handing Ctrl-C and SIGTERM to the command once the tool has started (cli/entry.py installs the start-up
handler for Ctrl-C; before that point SIGTERM's default, ending the process, is right: nothing is held yet)."""

from __future__ import annotations

import signal
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that every path that stops
    cleanly on Ctrl-C stops so on it too: apply's lanes stopped, the run closed in its journal, the lock's
    Lease deleted, rehearse's twin torn down. Kubernetes sends SIGTERM to a pod it deletes or evicts (then
    SIGKILL after `terminationGracePeriodSeconds`; kubernetes.io "Pod Lifecycle", Termination of Pods), as
    do `timeout`, systemd and CI runners cancelling a job. Killed by the default action instead, an
    in-cluster apply left its Lease held for a replacement pod (another host) to wait out."""


def _terminate(_signum: int, _frame: FrameType | None) -> None:
    # One is enough: a second (`timeout` and a CI runner may both send one) must not cut the clean-up short.
    # What ends a clean-up that hangs is the SIGKILL that follows at the grace period's end.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


_terminate.dra_migrate_terminate = True  # type: ignore[attr-defined]  # what cli/entry.py replaces at the end


def graceful_interrupts() -> None:
    """From here on a Ctrl-C raises KeyboardInterrupt (Python's default) and SIGTERM `Terminated`, for the
    command to handle: the CLI's handler prints one line and exits 130 (143); apply and rehearse release
    what they hold first. A SIGTERM handler someone else installed (a program embedding the CLI) is kept."""
    if getattr(signal.getsignal(signal.SIGINT), "dra_migrate_startup", False):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
