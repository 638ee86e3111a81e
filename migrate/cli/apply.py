"""`apply`, `rollback`, `status` and `unlock`: running a reviewed plan against a live cluster."""

from __future__ import annotations

import getpass
import os
import socket
import sys
from pathlib import Path
from typing import Any

import click

from migrate.cli import exitcodes
from migrate.cli.options import SourceOptions, load_state, output_option, print_data, source_options
from migrate.errors import InputError
from migrate.execute.contract import LockHeld
from migrate.execute.journal import Journal, journal_path, read_journal
from migrate.execute.lock import ClusterLock, break_lock, read_lock
from migrate.execute.ops import live_ops
from migrate.execute.progress import progress_of
from migrate.execute.runner import ApplyOptions, Runner, planned_steps
from migrate.plan import io as plan_io
from migrate.plan.drift import drift
from migrate.render import emit, to_json
from migrate.render.plan import plan_document

_PLAN = click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
_LOCK_NS = click.option(
    "--lock-namespace", default="kube-system", show_default=True, help="Namespace of the lock Lease."
)


_TTY = sys.stderr.isatty()


def _log(msg: str) -> None:
    if _TTY:
        click.echo("\r\033[K", nl=False, err=True)  # clear the progress bar's line first
    click.echo(msg, err=True)


def _bar(done: int, total: int, step: str) -> None:
    """A progress bar on stderr when it is a terminal; the log lines say the same otherwise."""
    if not _TTY or not total:
        return
    width = 30
    filled = width * done // total
    click.echo(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {step}"[:150], nl=False, err=True)


def _actor() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}/{os.getpid()}"


def _lock(api: Any, namespace: str, digest: str) -> ClusterLock:
    """The cluster lock, taking over one left by a crashed run of this plan on this machine.

    A SIGKILLed apply cannot release its Lease; waiting for it to expire would make every resume wait.
    Only a holder on this host whose process is gone, for the same plan, is taken over."""
    lock = ClusterLock(api, namespace=namespace, plan_digest=digest)
    try:
        lock.acquire()
        lock.release()
    except LockHeld:
        info = read_lock(api, namespace=namespace)
        if info is None or not _crashed_here(info.holder) or info.plan_digest != digest:
            raise
        break_lock(api, info.lock_id, namespace=namespace)
        _log(f"took over the lock of a crashed run ({info.holder})")
    return ClusterLock(api, namespace=namespace, plan_digest=digest)


def _crashed_here(holder: str) -> bool:
    """holder is `<user>@<host>/<pid>/<id>`: on this host, and that process no longer exists."""
    try:
        who, pid, _ = holder.rsplit("/", 2)
        host = who.split("@", 1)[1]
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return host == socket.gethostname()
    except (ValueError, IndexError, PermissionError):
        return False
    return False


def _confirm(plan: dict[str, Any], yes: bool, what: str) -> None:
    if yes:
        return
    click.echo(plan_document(plan).render("table").split("\nStage ", 1)[0], err=True)
    if not sys.stdin.isatty():
        raise InputError(f"{what} needs confirmation", "review the plan with dra-migrate show, then pass --yes")
    if not click.confirm(f"{what}?", err=True):
        raise click.Abort()


def _refuse_if_not_applicable(plan: dict[str, Any], path: Path) -> None:
    if not plan["applicable"]:
        blockers = [f["id"] for f in plan["findings"] if f["severity"] == "blocker"]
        raise InputError(
            f"{path} is not applicable: blockers {', '.join(blockers)}",
            "resolve them, then make a new plan (dra-migrate check shows how)",
        )


def _refuse_if_stale(plan: dict[str, Any], source: SourceOptions, path: Path) -> None:
    """Terraform's rule: run only the plan that was reviewed, and not once the cluster moved on."""
    d = drift(plan, load_state(source))
    if not d.holds:
        first = d.to_dict()
        raise InputError(
            f"{path} is stale: the cluster changed since it was made ({_drift_line(first)})",
            f"see dra-migrate diff {path} --kubeconfig ...; then make a new plan",
        )


def _drift_line(d: dict[str, Any]) -> str:
    summary = d.get("summary") or {}
    parts = [f"{k}: {len(v) if isinstance(v, list) else v}" for k, v in summary.items() if v]
    return ", ".join(parts[:4]) or "fingerprint mismatch"


@click.command()
@_PLAN
@source_options
@click.option("--stage", help="Run only this stage.")
@click.option("--until", help="Run every stage up to and including this one.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Send every write as a server-side dry run; change nothing.")
@click.option("--no-auto-rollback", is_flag=True, help="On a failed step or health gate, leave the wave as it is.")
@click.option("--drain-timeout", help="Override the plan's drain timeout (e.g. 10m).")
@click.option("--pending-threshold", default="2m", show_default=True, help="Health gate: GPU pods Pending longer.")
@_LOCK_NS
def apply(
    plan_file: Path,
    source: SourceOptions,
    stage: str | None,
    until: str | None,
    yes: bool,
    dry_run: bool,
    no_auto_rollback: bool,
    drain_timeout: str | None,
    pending_threshold: str,
    lock_namespace: str,
) -> None:
    """Apply a plan: stage by stage, wave by wave; resumes from its journal after a crash."""
    from migrate.plan.params import parse_duration

    if source.snapshot:
        raise InputError("apply changes a live cluster", "drop --snapshot; pass --kubeconfig/--context")
    plan = plan_io.load(plan_file)
    _refuse_if_not_applicable(plan, plan_file)
    jpath = journal_path(plan_file)
    records = read_journal(jpath) if jpath.exists() else []
    done = progress_of(plan, records).done_steps("apply")
    if not records or dry_run:
        _refuse_if_stale(plan, source, plan_file)  # a resumed run has changed the cluster itself
    if stage and until:
        raise InputError("--stage and --until exclude each other", "pass one")
    if drain_timeout:
        parse_duration(drain_timeout)
        for st in plan["stages"]:
            for step in st.get("nodeSteps") or []:
                if step["action"] == "drain":
                    step["timeout"] = drain_timeout
    opts = ApplyOptions(
        stage=stage,
        until=until,
        dry_run=dry_run,
        auto_rollback=not no_auto_rollback,
        pending_threshold_s=float(parse_duration(pending_threshold)),
    )
    ops = live_ops(source.kubeconfig, source.context)
    if dry_run:
        result = Runner(plan, ops, None, actor=_actor(), log=_log).apply(opts, set(done))
        emit(to_json({"dryRun": True, "changes": [c.__dict__ for c in result.changes], "ok": result.ok}))
        sys.exit(exitcodes.OK if result.ok else exitcodes.FAILED)
    _confirm(plan, yes, f"apply {plan_file}" + (" (resuming)" if done else ""))
    lock = _lock(ops.api, lock_namespace, str(plan["digest"]))
    with lock, Journal.open(jpath, plan_digest=str(plan["digest"])) as journal:
        runner = Runner(plan, ops, journal, actor=_actor(), log=_log, guard=lock.check, progress=_bar)
        result = runner.apply(opts, set(done))
    if result.ok:
        _log(f"applied: {result.steps_run} step(s) run, {result.steps_skipped} already done")
        return
    extra = f"; rolled back {len(result.rolled_back)} step(s) of the wave" if result.rolled_back else ""
    raise InputError(f"apply stopped: {result.failure}{extra}", f"see dra-migrate status {plan_file}")


@click.command()
@_PLAN
@source_options
@click.option("--stage", help="Undo only this stage.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_LOCK_NS
def rollback(plan_file: Path, source: SourceOptions, stage: str | None, yes: bool, lock_namespace: str) -> None:
    """Undo completed and half-done steps in reverse order, restoring the recorded original values."""
    plan = plan_io.load(plan_file)
    jpath = journal_path(plan_file)
    if not jpath.exists():
        raise InputError(f"no journal beside {plan_file}: nothing was applied", "nothing to roll back")
    progress = progress_of(plan, read_journal(jpath))
    order = [p.id for p in planned_steps(plan) if stage is None or p.stage == stage]
    to_undo = [s for s in reversed(order) if s in progress.undoable()]
    if not to_undo:
        _log("nothing to roll back")
        return
    _confirm(plan, yes, f"roll back {len(to_undo)} step(s) of {plan_file}")
    ops = live_ops(source.kubeconfig, source.context)
    lock = _lock(ops.api, lock_namespace, str(plan["digest"]))
    with lock, Journal.open(jpath, plan_digest=str(plan["digest"])) as journal:
        undone = Runner(plan, ops, journal, actor=_actor(), log=_log, guard=lock.check).rollback(to_undo)
    _log(f"rolled back {len(undone)} step(s)")


@click.command()
@_PLAN
@output_option(names="the remaining step ids")
def status(plan_file: Path, output: str) -> None:
    """Done, current and remaining steps per stage and node, from the plan's journal."""
    from migrate.render.status import STATUS_FORMAT_VERSION, remaining_steps, status_document

    plan = plan_io.load(plan_file)
    jpath = journal_path(plan_file)
    progress = progress_of(plan, read_journal(jpath) if jpath.exists() else [])
    report = {"formatVersion": STATUS_FORMAT_VERSION, **progress.to_dict()}
    print_data(output, report, lambda: status_document(report), lambda: remaining_steps(report))


@click.command()
@_PLAN
@source_options
@click.option("--lock-id", required=True, help="The lock id that apply's refusal names.")
@_LOCK_NS
def unlock(plan_file: Path, source: SourceOptions, lock_id: str, lock_namespace: str) -> None:
    """Break the cluster lock (only when you know its holder is gone)."""
    plan_io.load(plan_file)
    ops = live_ops(source.kubeconfig, source.context)
    break_lock(ops.api, lock_id, namespace=lock_namespace)
    _log(f"lock {lock_id} broken")
