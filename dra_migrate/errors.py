"""Errors the tool reports to its user: one line that says what went wrong and what to do.

The CLI turns these into a message on stderr and exit code 1; anything else is a bug and gets a
traceback only with --debug.
"""

from __future__ import annotations

# Control characters (C0, DEL, C1) and Unicode's line and paragraph separators, written as escapes: an error is
# one line whatever data it quotes (a node named "\n" in a hand-made snapshot broke it in two; hypothesis found it).
_ONE_LINE = {i: f"\\x{i:02x}" for i in (*range(0x20), *range(0x7F, 0xA0))} | {
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


class MigrateError(Exception):
    """A failure the user can act on. `hint` says what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        message, hint = message.translate(_ONE_LINE), hint.translate(_ONE_LINE)
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}: {self.hint}" if self.hint else self.message


class InputError(MigrateError):
    """A snapshot, plan or option that cannot be used as given."""


class ClusterError(MigrateError):
    """The cluster could not be read or written (unreachable, forbidden, rejected)."""
