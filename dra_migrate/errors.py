"""Errors the tool reports to its user: one line that says what went wrong and what to do.

The CLI turns these into a message on stderr and exit code 1; anything else is a bug and gets a
traceback only with --debug.
"""

from __future__ import annotations


class MigrateError(Exception):
    """A failure the user can act on. `hint` says what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}: {self.hint}" if self.hint else self.message


class InputError(MigrateError):
    """A snapshot, plan or option that cannot be used as given."""


class ClusterError(MigrateError):
    """The cluster could not be read or written (unreachable, forbidden, rejected)."""
