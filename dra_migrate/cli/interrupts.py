"""Handing Ctrl-C, SIGTERM and SIGHUP to the command once the tool has started (cli/entry.py installs the
start-up handler for Ctrl-C; before that point the others' default, ending the process, is right: nothing
is held yet)."""

from __future__ import annotations

import signal
from types import FrameType

# The signals that stop a command as Ctrl-C does, and the word its one line says.
STOPPING = {signal.SIGTERM: "terminated"}
if hasattr(signal, "SIGHUP"):  # not on Windows
    STOPPING[signal.SIGHUP] = "hung up"


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that every path that
    stops cleanly on Ctrl-C stops so on them too: apply's lanes stopped, the run closed in its journal, the
    lock's Lease deleted, rehearse's twin torn down. Kubernetes sends SIGTERM to a pod it deletes or evicts
    (then SIGKILL after `terminationGracePeriodSeconds`; kubernetes.io "Pod Lifecycle", Termination of Pods),
    as do `timeout`, systemd and CI runners cancelling a job; a terminal that goes away (an SSH session that
    drops under an apply run from a laptop) sends SIGHUP. Killed by the default action instead, apply left
    its Lease held for the next run to wait out (another host: a replacement pod) and its open steps
    unrecorded. The CLI exits 128 + the signal's number, as a shell reports it."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(STOPPING.get(signal.Signals(signum), "terminated"))
        self.signum = int(signum)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # One is enough: another (`timeout` and a CI runner may both send one, a lost terminal SIGHUP and then
    # SIGTERM) must not cut the clean-up short. What ends a clean-up that hangs is a SIGKILL.
    for each in STOPPING:
        signal.signal(each, signal.SIG_IGN)
    raise Terminated(signum)


_terminate.dra_migrate_terminate = True  # type: ignore[attr-defined]  # what cli/entry.py replaces at the end


def graceful_interrupts() -> None:
    """From here on a Ctrl-C raises KeyboardInterrupt (Python's default), SIGTERM and SIGHUP `Terminated`, for
    the command to handle: the CLI's handler prints one line and exits 130 (143, 129); apply and rehearse
    release what they hold first. A handler someone else installed (a program embedding the CLI, `nohup`'s
    ignored SIGHUP) is kept."""
    if getattr(signal.getsignal(signal.SIGINT), "dra_migrate_startup", False):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for each in STOPPING:
        if signal.getsignal(each) == signal.SIG_DFL:
            signal.signal(each, _terminate)
