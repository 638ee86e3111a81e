"""`dra-migrate`: the command group, logging, and the one place that turns outcomes into exit codes.

Commands are loaded lazily from `COMMANDS`, so `--version`, `--help` and shell completion import click
and this module only (bench/startup.py measures it). Every failure ends here: usage errors, input
errors, a closed stdout, Ctrl-C (the codes are in `exitcodes`).
"""

from __future__ import annotations

import errno
import functools
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from dra_migrate import __version__
from dra_migrate.cli import exitcodes
from dra_migrate.cli.interrupts import Terminated, graceful_interrupts
from dra_migrate.cli.streams import tolerate_narrow_encodings
from dra_migrate.errors import MigrateError
from dra_migrate.secrets import scrub, scrub_logs

log = logging.getLogger("dra_migrate")

# name -> (module, attribute, one-line help for the command list); in the order of the workflow.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "inventory": (
        "dra_migrate.cli.inventory",
        "inventory",
        "List GPU consumers, nodes and pools, the NVIDIA and DRA state.",
    ),
    "snapshot": ("dra_migrate.cli.snapshot", "snapshot", "Save a live cluster's state to a file, for offline use."),
    "check": ("dra_migrate.cli.check", "check", "Readiness findings and capacity before/after (exit 2: blockers)."),
    "explain": ("dra_migrate.cli.explain", "explain", "What a check rule means, why it matters, how to fix it."),
    "generate": ("dra_migrate.cli.generate", "generate", "Generate manifests (DeviceClasses)."),
    "match": ("dra_migrate.cli.match", "match", "Which devices on which pools each DeviceClass selects."),
    "plan": ("dra_migrate.cli.plan", "plan", "Write a migration plan to review and apply."),
    "show": ("dra_migrate.cli.show", "show", "Show what a plan will do."),
    "diff": (
        "dra_migrate.cli.diff",
        "diff",
        "Compare two plans, or a plan with the cluster now (exit 2: differences).",
    ),
    "policy": (
        "dra_migrate.cli.policy",
        "policy",
        "Check a plan against change-review policies with OPA (exit 2: denied).",
    ),
    "apply": ("dra_migrate.cli.apply", "apply", "Apply a plan to a live cluster, resumably."),
    "rollback": ("dra_migrate.cli.apply", "rollback", "Undo applied steps, restoring the recorded originals."),
    "status": ("dra_migrate.cli.apply", "status", "Progress of a plan, from its journal."),
    "unlock": ("dra_migrate.cli.apply", "unlock", "Break the cluster lock of a run that is gone."),
    "report": ("dra_migrate.cli.report", "report", "The audit report of a plan (Markdown, HTML, JSON)."),
    "convert": ("dra_migrate.cli.convert", "convert", "Rewrite manifests' GPU requests as ResourceClaimTemplates."),
    "probe": (
        "dra_migrate.cli.probe",
        "probe",
        "Test a node's DRA hardware contract on a live cluster (exit 2: broken).",
    ),
    "rehearse": ("dra_migrate.cli.rehearse", "rehearse", "Run a reviewed plan on a private twin of the cluster."),
    "twin": ("dra_migrate.cli.rehearse", "twin", "Build or inspect the twin rehearse runs on."),
    "demo": (
        "dra_migrate.cli.demo",
        "demo",
        "Run inventory, check, plan and report on a bundled demo fleet (offline).",
    ),
    "completion": ("dra_migrate.cli.completion", "completion", "Print the shell completion script (bash, zsh, fish)."),
}

# Accepted anywhere on the command line, as kubectl's global flags are.
GLOBAL_FLAGS = ("-v", "--verbose", "--debug", "--no-color")


def hoist_global_flags(args: Sequence[str]) -> list[str]:
    """Move `-v`/`--verbose`/`--debug`/`--no-color` given after the subcommand to the front (none after `--`)."""
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in GLOBAL_FLAGS]
    rest = [a for a in args[:end] if a not in GLOBAL_FLAGS]
    return flags + rest + args[end:]


def _input_paths(value: Any) -> list[str]:
    if isinstance(value, Path):
        return [str(value)]
    if isinstance(value, tuple | list):
        return [str(v) for v in value if isinstance(v, Path)]
    return []


def _remember_inputs(callback: Callable[..., Any]) -> Callable[..., Any]:
    """Record a command's file arguments so an input error caught here can name them."""

    @functools.wraps(callback)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        paths = [p for v in kwargs.values() for p in _input_paths(v)]
        click.get_current_context().meta["dra-migrate.inputs"] = paths
        return callback(*args, **kwargs)

    return wrapper


def _guard(cmd: click.Command) -> click.Command:
    if cmd.callback is not None and not getattr(cmd, "_inputs_guarded", False):
        cmd.callback = _remember_inputs(cmd.callback)
        setattr(cmd, "_inputs_guarded", True)  # noqa: B010 (a marker, not an attribute click knows)
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _guard(sub)
    return cmd


class Group(click.Group):
    """Loads commands on first use and decides every exit code (`exitcodes`): a one-line error on stderr,
    a traceback only with --debug."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS) + sorted(n for n in self.commands if n not in COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attr, _ = COMMANDS[cmd_name]
            self.commands[cmd_name] = getattr(importlib.import_module(module), attr)
        graceful_interrupts()  # imports done: a Ctrl-C is the command's to handle (cli/entry.py)
        cmd = self.commands.get(cmd_name)
        return _guard(cmd) if cmd is not None else None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # No command: the help on stderr and 1, on every click the bounds allow. click 8.1's Group.parse_args
        # echoes it on stdout and exits 0; 8.2's raises NoArgsIsHelpError (click/core.py at 8.1.0 and 8.2.0), a
        # UsageError that main() below would squash onto one `error:` line.
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), err=True, color=ctx.color)
            raise click.exceptions.Exit(exitcodes.FAILED)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        # Command names from the table: completing them imports no command module.
        names = [CompletionItem(n, help=h) for n, (_, _, h) in COMMANDS.items() if n.startswith(incomplete)]
        return names + click.Command.shell_complete(self, ctx, incomplete)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MigrateError as e:
            _fail(ctx, str(e), e)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt as e:
            _interrupted(e)
        except BrokenPipeError:
            _stdout_closed()
        except RecursionError as e:
            _fail(ctx, f"{_inputs(ctx)}: nested too deeply to read (a generated or corrupted file?)", e)
        except UnicodeDecodeError as e:
            _fail(ctx, f"{_inputs(ctx)}: not UTF-8 text ({e.reason} at byte {e.start})", e)
        except OSError as e:
            if e.errno == errno.EPIPE:
                _stdout_closed()
            if e.filename is None:
                raise
            _fail(ctx, f"cannot use {e.filename}: {e.strerror or e}: check the path and its permissions", e)
        except Exception as e:  # a bug: say so plainly, keep the details for --debug
            if (interrupt := _interrupt_behind(e)) is not None:
                _interrupted(interrupt)
            _fail(ctx, f"internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)", e)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = hoist_global_flags(sys.argv[1:] if args is None else args)
        try:
            code = super().main(argv, prog_name or "dra-migrate", complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            click.echo(f"error: {_usage_line(e)}", err=True)
            code = exitcodes.FAILED
        except click.ClickException as e:
            click.echo(f"error: {e.format_message()}", err=True)
            code = exitcodes.FAILED
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):
                _interrupted(e.__cause__)
            click.echo("error: aborted", err=True)
            code = exitcodes.FAILED
        except BrokenPipeError:
            _stdout_closed()
        code = code if isinstance(code, int) else exitcodes.OK
        if not standalone_mode:
            return code
        sys.exit(code)


def _usage_line(e: click.UsageError) -> str:
    """Click's message (it names the option or argument), and where to read more, on one line."""
    path = e.ctx.command_path if e.ctx is not None else "dra-migrate"
    message = " ".join(e.format_message().split()).rstrip(".")  # Click's Choice message spans lines
    return f"{message} (see {path} --help)"


def _inputs(ctx: click.Context) -> str:
    paths = ctx.meta.get("dra-migrate.inputs") or []
    return ", ".join(paths) if paths else "the input"


def _fail(ctx: click.Context, message: str, exc: BaseException) -> None:
    if ctx.find_root().params.get("debug"):
        # The traceback ends with the messages of the exception and its causes, which quote API errors.
        click.echo(_safe(scrub("".join(traceback.format_exception(exc))) or ""), nl=False, err=True)
    click.echo(f"error: {_safe(' '.join(str(scrub(message)).split()))}", err=True)
    sys.exit(exitcodes.FAILED)


def _safe(text: str) -> str:
    # Imported here: render loads orjson, and `--version` and `--help` should not.
    from dra_migrate.render import terminal_safe

    return terminal_safe(text)


class TerminalSafeFormatter(logging.Formatter):
    """Log lines quote API servers' and webhooks' messages: their control characters are written out
    (`render.terminal_safe`), never sent to the operator's terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return _safe(super().format(record))


def _interrupt_behind(e: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) this exception reports, if it reports one. Python 3.11 wraps one raised while
    a class is made (a dataclass field's `__set_name__`, as a module the command imports late is executed)
    in a RuntimeError: it read as an internal error, exit 1 (`test_ctrl_c_at_any_moment...`, 2 in 100 runs)."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__  # what wrapped it (not an error met while handling one: that is its own)
    return None


def _interrupted(e: KeyboardInterrupt) -> None:
    if isinstance(e, Terminated):
        click.echo(f"\nerror: {e}", err=True)
        sys.exit(exitcodes.BY_SIGNAL[e.signum])
    click.echo("\nerror: interrupted", err=True)
    sys.exit(exitcodes.INTERRUPTED)


def _stdout_closed() -> None:
    """`dra-migrate ... | head`: the reader has what it wanted; exit quietly, as cat does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (tests): nothing to flush into the pipe
        pass
    sys.exit(exitcodes.OK)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dra-migrate")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs (anywhere on the line).")
@click.option("-v", "--verbose", is_flag=True, help="More log lines on stderr (anywhere on the line).")
@click.option("--no-color", is_flag=True, help="No colour (as NO_COLOR=1 or TERM=dumb; anywhere on the line).")
def cli(debug: bool, verbose: bool, no_color: bool) -> None:
    """Migrate Kubernetes GPU fleets from the NVIDIA device plugin to DRA.

    \b
    The workflow:
      dra-migrate inventory --snapshot cluster.yaml
      dra-migrate check --snapshot cluster.yaml
      dra-migrate plan --snapshot cluster.yaml
      dra-migrate show plans/PLAN.yaml
      dra-migrate apply plans/PLAN.yaml --kubeconfig ~/.kube/config

    Exit codes: 0 ok, 1 error (usage errors too), 2 found something to act on
    (check: blockers; diff: differences; plan --detailed-exitcode: not applicable), 130 interrupted.
    """
    from dra_migrate.render import set_color_off

    set_color_off(no_color)
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalSafeFormatter("%(levelname)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    scrub_logs()  # no credential an API error quotes reaches a log line
    if not debug:
        logging.getLogger("kubernetes").setLevel(logging.WARNING)
        logging.getLogger("urllib3").setLevel(logging.ERROR)


def main(argv: Sequence[str] | None = None) -> None:
    tolerate_narrow_encodings()
    cli.main(args=list(argv) if argv is not None else None, prog_name="dra-migrate")


def kubectl_plugin(argv: Sequence[str] | None = None) -> None:
    """`kubectl dra-migrate ...`: kubectl runs `kubectl-dra_migrate` from PATH; usage lines say how it was called."""
    tolerate_narrow_encodings()
    cli.main(args=list(argv) if argv is not None else None, prog_name="kubectl dra-migrate")
