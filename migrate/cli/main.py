"""`dra-migrate`: the command group, logging and error handling shared by every verb."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from migrate import __version__
from migrate.cli import exitcodes
from migrate.errors import MigrateError
from migrate.secrets import scrub, scrub_logs

log = logging.getLogger("migrate")


class Group(click.Group):
    """Turns errors into one line on stderr and an exit code; a traceback only with --debug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MigrateError as e:
            _fail(ctx, str(e), e)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            sys.exit(130)
        except Exception as e:  # a bug: say so plainly, keep the details for --debug
            _fail(ctx, f"internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)", e)


def _fail(ctx: click.Context, message: str, exc: BaseException) -> None:
    if ctx.find_root().params.get("debug"):
        traceback.print_exception(exc)
    click.echo(f"error: {scrub(message)}", err=True)
    sys.exit(exitcodes.FAILED)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dra-migrate")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.option("-v", "--verbose", is_flag=True, help="More log lines on stderr.")
def cli(debug: bool, verbose: bool) -> None:
    """Migrate Kubernetes GPU fleets from the NVIDIA device plugin to DRA."""
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(message)s", stream=sys.stderr)
    scrub_logs()  # no credential an API error quotes reaches a log line
    if not debug:
        logging.getLogger("kubernetes").setLevel(logging.WARNING)
        logging.getLogger("urllib3").setLevel(logging.ERROR)


def _register() -> None:
    from migrate.cli import (
        apply,
        check,
        convert,
        diff,
        generate,
        inventory,
        match,
        plan,
        probe,
        rehearse,
        report,
        show,
        snapshot,
    )

    cli.add_command(inventory.inventory)
    cli.add_command(snapshot.snapshot)
    cli.add_command(check.check)
    cli.add_command(generate.generate)
    cli.add_command(match.match)
    cli.add_command(plan.plan)
    cli.add_command(diff.diff)
    cli.add_command(show.show)
    cli.add_command(apply.apply)
    cli.add_command(apply.rollback)
    cli.add_command(apply.status)
    cli.add_command(probe.probe)
    cli.add_command(apply.unlock)
    cli.add_command(report.report)
    cli.add_command(convert.convert)
    cli.add_command(rehearse.rehearse)
    cli.add_command(rehearse.twin)


_register()


def main(argv: Sequence[str] | None = None) -> None:
    cli.main(args=list(argv) if argv is not None else None, prog_name="dra-migrate")
