"""Drive the real CLI in-process (stdout and stderr kept apart)."""

from __future__ import annotations

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


def run(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> Result:
    r = CliRunner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)
    return Result(r.exit_code, r.stdout, r.stderr, r.stdout_bytes)
