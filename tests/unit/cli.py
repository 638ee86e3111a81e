"""Drive the real CLI in-process (stdout and stderr kept apart)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from click.testing import CliRunner

from dra_migrate.cli.main import cli


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    # stdout as written: click's `stdout` turns CRLF into LF, so a diff of a CRLF file reads wrong
    stdout_bytes: bytes = b""


def runner() -> CliRunner:
    """A runner whose result has `stdout` and `stderr` apart, on every click the bounds allow (>= 8.1).

    click 8.2 keeps stderr apart always and removed the `mix_stderr` argument (passing it is a TypeError); 8.1
    mixes stderr into stdout unless given `mix_stderr=False` (click/testing.py CliRunner at 8.1.0 and 8.2.0).
    """
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg,unused-ignore]  # click < 8.2
    return CliRunner()


def run(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> Result:
    r = runner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)
    return Result(r.exit_code, r.stdout, r.stderr, r.stdout_bytes)
