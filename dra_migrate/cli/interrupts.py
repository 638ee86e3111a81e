"""Handing Ctrl-C back to Python once the tool has started (cli/entry.py installs the start-up handler)."""

from __future__ import annotations

import signal


def graceful_interrupts() -> None:
    """From here on a Ctrl-C raises KeyboardInterrupt (Python's default), for the command to handle: the
    CLI's handler prints one line and exits 130; apply and rehearse release what they hold first."""
    if getattr(signal.getsignal(signal.SIGINT), "dra_migrate_startup", False):
        signal.signal(signal.SIGINT, signal.default_int_handler)
