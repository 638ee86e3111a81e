"""`apply`, `rollback`, `status` and `unlock`: running a reviewed plan against a live cluster."""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import (
    SourceOptions,
    check_given_kubeconfig,
    duration,
    finite,
    journal_state_option,
    load_state,
    namespace_name,
    output_option,
    plan_argument,
    print_data,
    read_plan,
    source_options,
)
from dra_migrate.errors import ClusterError, InputError
from dra_migrate.execute.journals import (
    FILE,
    IN_CLUSTER,
    ClusterStore,
    FileStore,
    JournalStore,
    read_checked,
    resolve_state,
)
from dra_migrate.execute.lock import break_lock, read_lock, user_name
from dra_migrate.execute.ops import live_ops
from dra_migrate.execute.progress import progress_of
from dra_migrate.execute.runner import RESUME_HINT, STOPPED, ApplyOptions
from dra_migrate.execute.session import ApplySession, crashed_here
from dra_migrate.kube import DEFAULT_BURST, DEFAULT_QPS, RateLimit
from dra_migrate.plan.model import Action, Plan
from dra_migrate.plan.outline import outline_of
from dra_migrate.plan.params import parse_duration
from dra_migrate.render import emit, terminal_safe, to_json
from dra_migrate.render.plan import plan_document
from dra_migrate.secrets import scrub

_PLAN = plan_argument(only_reads=False)
_LOCK_NS = click.option(
    "--lock-namespace",
    default="kube-system",
    show_default=True,
    callback=namespace_name,
    help="Namespace of the lock Lease (and of the journal's ConfigMaps with --state in-cluster).",
)
_STATE = journal_state_option


def journal_store(state: str, plan_file: Path, api_client: Any, namespace: str) -> JournalStore:
    return ClusterStore(api_client, namespace) if state == IN_CLUSTER else FileStore(plan_file)


_TTY = sys.stderr.isatty()


def _log(msg: str) -> None:
    if _TTY:
        click.echo("\r\033[K", nl=False, err=True)  # clear the progress bar's line first
    # A failure's text quotes API errors and webhooks' denials; click lines pass no logging filter: scrubbed of
    # credentials, and its control characters written out, never acted on by the terminal.
    click.echo(terminal_safe(scrub(msg) or ""), err=True)


def _bar(done: int, total: int, step: str) -> None:
    """A progress bar on stderr when it is a terminal; the log lines say the same otherwise."""
    if not _TTY or not total:
        return
    width = 30
    filled = width * done // total
    click.echo(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {step}"[:150], nl=False, err=True)


def _actor() -> str:
    return f"{user_name()}@{socket.gethostname()}/{os.getpid()}"


def _confirm(plan: Plan, yes: bool, what: str) -> None:
    if yes:
        return
    click.echo(plan_document(outline_of(plan)).render("table").split("\nStage ", 1)[0], err=True)
    if not sys.stdin.isatty():
        raise InputError(f"{what} needs confirmation", "review the plan with dra-migrate show, then pass --yes")
    if not click.confirm(f"{what}?", err=True):
        raise click.Abort()


def _load(plan_file: Path) -> Plan:
    return Plan.from_dict(read_plan(plan_file))


def _check_live_source(source: SourceOptions) -> None:
    """Every input of a command that changes a live cluster, judged before it decides there is nothing to do
    (rollback with no journal) and before it connects: no snapshot (it would go to $KUBECONFIG's cluster
    instead), a --kubeconfig that is there and is a kubeconfig, a --templates file that reads."""
    if source.snapshot:
        raise InputError("apply and rollback change a live cluster", "drop --snapshot; pass --kubeconfig/--context")
    if source.kubeconfig is not None:
        check_given_kubeconfig(source.kubeconfig, source.context)
    source.template_table()


_PARALLELISM = click.option(
    "--parallelism", type=click.IntRange(min=1), help="At most N nodes of a wave at once (default: the whole wave)."
)
_QPS = click.option(
    "--qps",
    type=float,
    default=DEFAULT_QPS,
    show_default=True,
    callback=finite,
    help="Client-side rate limit (negative: none).",
)
_BURST = click.option("--burst", type=click.IntRange(min=1), default=DEFAULT_BURST, show_default=True)
_DRAIN_TIMEOUT = click.option(
    "--drain-timeout", callback=duration(), help="Override the plan's drain timeout (e.g. 10m)."
)
_DELETE_UNOWNED = click.option(
    "--delete-unowned-pods",
    is_flag=True,
    help="Let drains evict pods no controller owns that the plan did not record (kubectl drain --force): they are "
    "deleted for good.",
)


def _session(
    plan: Plan, plan_file: Path, source: SourceOptions, lock_namespace: str, parallelism: int | None,
    qps: float, burst: int, overrides: dict[str, Any], state: str = FILE,
) -> ApplySession:  # fmt: skip
    """The session; the journal is read and validated here, before anything contacts the cluster."""
    _check_live_source(source)
    if not math.isfinite(qps):
        raise InputError(f"--qps {qps} is not a rate", "give requests per second, e.g. --qps 50 (negative: no limit)")
    limit = RateLimit(qps, burst)
    widest = max((len(w.nodes) for s in plan.stages for w in s.waves), default=1)
    lanes = min(parallelism or widest, widest)
    ops = live_ops(source.kubeconfig, source.context, parallelism=lanes, rate_limit=limit)
    recorded = {**overrides, **({"parallelism": parallelism} if parallelism else {})}
    if (qps, burst) != (DEFAULT_QPS, DEFAULT_BURST):
        recorded.update(qps=qps, burst=burst)
    return ApplySession(
        plan, plan_file, ops=ops, lock_api=ops.api, actor=_actor(), log=_log, progress=_bar,
        lock_namespace=lock_namespace, overrides=recorded,
        store=journal_store(state, plan_file, ops.api, lock_namespace),
    )  # fmt: skip


@click.command()
@_PLAN
@source_options
@click.option("--stage", help="Run only this stage.")
@click.option("--until", help="Run every stage up to and including this one.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Send every write as a server-side dry run; change nothing.")
@click.option("--no-auto-rollback", is_flag=True, help="On a failed step or health gate, leave the wave as it is.")
@_DRAIN_TIMEOUT
@_DELETE_UNOWNED
@click.option(
    "--pending-threshold",
    default="2m",
    show_default=True,
    callback=duration(),
    help="Health gate: GPU pods Pending longer.",
)
@_PARALLELISM
@_QPS
@_BURST
@_LOCK_NS
@_STATE
def apply(
    plan_file: Path,
    source: SourceOptions,
    stage: str | None,
    until: str | None,
    yes: bool,
    dry_run: bool,
    no_auto_rollback: bool,
    drain_timeout: str | None,
    delete_unowned_pods: bool,
    pending_threshold: str,
    parallelism: int | None,
    qps: float,
    burst: int,
    lock_namespace: str,
    state: str,
) -> None:
    """Apply a plan: stage by stage, wave by wave (a wave's nodes at once); resumes from its journal.

    \b
    Examples:
      dra-migrate apply plans/x.yaml --dry-run          # server-side dry run, changes nothing
      dra-migrate apply plans/x.yaml --stage pool-h100 --yes
      dra-migrate apply plans/x.yaml --parallelism 20 --qps 100   # after a crash: the same command resumes
    """
    state = resolve_state(state, source.kubeconfig, plan_file)
    if stage and until:
        raise InputError("--stage and --until exclude each other", "pass one")
    plan = _load(plan_file)
    timeouts = _drain_timeout(drain_timeout)
    opts = ApplyOptions(
        stage=stage,
        until=until,
        dry_run=dry_run,
        auto_rollback=not no_auto_rollback,
        pending_threshold_s=float(parse_duration(pending_threshold)),
        parallelism=parallelism,
        timeouts=timeouts,
        delete_unowned_pods=delete_unowned_pods,
    )
    overrides = _overrides(drain_timeout, delete_unowned_pods)
    session = _session(plan, plan_file, source, lock_namespace, parallelism, qps, burst, overrides, state)
    # A wrong --stage/--until before the cluster; with one, only the stages it selects must be applicable.
    selected = session.runner(None).selected_stages(opts, session.done)
    session.refuse_if_not_applicable(selected if stage or until else None)
    if dry_run:
        session.refuse_if_stale(lambda: load_state(source))
        result = session.dry_run(opts)
        emit(to_json({"dryRun": True, "changes": [c.__dict__ for c in result.changes], "ok": result.ok}))
        sys.exit(exitcodes.OK if result.ok else exitcodes.FAILED)
    _confirm(plan, yes, f"apply {plan_file}" + (" (resuming)" if session.resuming else ""))
    with _journal_write_fails(session, "apply"):
        result = session.apply(opts, read_state=lambda: load_state(source))  # staleness under the lock
    if result.ok:
        _log(f"applied: {result.steps_run} step(s) run, {result.steps_skipped} already done")
        return
    if result.outcome == STOPPED:
        raise ClusterError(f"apply stopped: {result.failure}", f"{RESUME_HINT} once the cluster answers")
    extra = f"; rolled back {len(result.rolled_back)} step(s) of the wave" if result.rolled_back else ""
    raise InputError(f"apply stopped: {result.failure}{extra}", f"see dra-migrate status {plan_file}")


@contextlib.contextmanager
def _journal_write_fails(session: ApplySession, what: str) -> Iterator[None]:
    """A journal that cannot be written (a full disk, a read-only filesystem): the run stopped before acting
    on anything it could not record (execute/journal.py); say which file, why, and how to go on."""
    path = str(getattr(session.store, "path", ""))
    try:
        yield
    except OSError as e:
        if not path or e.filename != path:
            raise
        raise ClusterError(
            f"{what} stopped: cannot write its journal {path}: {e.strerror}",
            f"free space or make it writable, then re-run {what} to resume (a step whose end was not recorded "
            "runs again: each re-reads the cluster first)",
        ) from e


def _drain_timeout(drain_timeout: str | None) -> dict[str, float]:
    """--drain-timeout as ApplyOptions.timeouts."""
    timeouts = {str(Action.DRAIN): float(parse_duration(drain_timeout))} if drain_timeout else {}
    if timeouts.get(str(Action.DRAIN)) == 0:
        raise InputError("--drain-timeout 0s leaves no time to drain", "give a duration such as 10m")
    return timeouts


def _overrides(drain_timeout: str | None, delete_unowned_pods: bool) -> dict[str, Any]:
    """The run's overrides of the plan, for the journal's run-start (and `status`)."""
    overrides: dict[str, Any] = {"drainTimeout": drain_timeout} if drain_timeout else {}
    if delete_unowned_pods:
        overrides["deleteUnownedPods"] = True  # who let which run delete them
    return overrides


@click.command()
@_PLAN
@source_options
@click.option("--stage", help="Undo only this stage.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Send every undo as a server-side dry run; change nothing.")
@_DRAIN_TIMEOUT
@_DELETE_UNOWNED
@_PARALLELISM
@_QPS
@_BURST
@_LOCK_NS
@_STATE
def rollback(
    plan_file: Path,
    source: SourceOptions,
    stage: str | None,
    yes: bool,
    dry_run: bool,
    drain_timeout: str | None,
    delete_unowned_pods: bool,
    parallelism: int | None,
    qps: float,
    burst: int,
    lock_namespace: str,
    state: str,
) -> None:
    """Undo completed and half-done steps in reverse order, restoring the recorded original values.

    Before a node's plugins are switched back, its GPU pods are drained again: they hold its devices through
    DRA, which the device plugin would hand out a second time.

    \b
    Examples:
      dra-migrate rollback plans/x.yaml --dry-run        # what each undo would send, changes nothing
      dra-migrate rollback plans/x.yaml --yes
      dra-migrate rollback plans/x.yaml --stage pool-h100 --yes
    """
    state = resolve_state(state, source.kubeconfig, plan_file)
    timeouts = _drain_timeout(drain_timeout)
    plan = _load(plan_file)
    _check_live_source(source)
    if stage is not None and stage not in plan.stage_names:  # as the session says it, before "nothing to undo"
        raise InputError(f"the plan has no stage {stage!r}", f"stages: {', '.join(plan.stage_names)}")
    if state == FILE and not FileStore(plan_file).path.exists():
        # Nothing was applied, so nothing is to undo: done, exit 0 (docs/exit-codes.md), as with an empty journal.
        _log(f"nothing to roll back: no journal beside {plan_file} (nothing was applied)")
        return
    overrides = _overrides(drain_timeout, delete_unowned_pods)
    session = _session(plan, plan_file, source, lock_namespace, parallelism, qps, burst, overrides, state)
    to_undo = session.to_undo(stage)
    if not to_undo:
        _log("nothing to roll back")
        return
    opts = ApplyOptions(parallelism=parallelism, timeouts=timeouts, delete_unowned_pods=delete_unowned_pods)
    notice = session.rollback_notice(to_undo)
    if notice:
        _log(notice)  # before the question, and before a dry run's output: what the drains will do
    if dry_run:
        result = session.dry_rollback(to_undo, opts)
        emit(to_json({"dryRun": True, "changes": [c.__dict__ for c in result.changes], "ok": result.ok}))
        if not result.ok:
            _log(f"the rollback would stop: {result.failure}")
        sys.exit(exitcodes.OK if result.ok else exitcodes.FAILED)
    _confirm(plan, yes, f"roll back {len(to_undo)} step(s) of {plan_file}")
    with _journal_write_fails(session, "rollback"):
        result = session.rollback(to_undo, opts)
    if not result.ok:
        raise ClusterError(f"{result.failure}", f"see dra-migrate status {plan_file}; run rollback again")
    _log(f"rolled back {len(result.rolled_back)} step(s)")


@click.command()
@_PLAN
@output_option(names="the remaining step ids")
@_STATE
@click.option("--kubeconfig", type=click.Path(path_type=Path), help="With --state in-cluster (default: as kubectl).")
@click.option("--context", help="The kubeconfig context to use (with --state in-cluster).")
@_LOCK_NS
def status(
    plan_file: Path, output: str, state: str, kubeconfig: Path | None, context: str | None, lock_namespace: str
) -> None:
    """Done, current and remaining steps per stage and node, from the plan's journal.

    \b
    Examples:
      dra-migrate status plans/x.yaml
      dra-migrate status plans/x.yaml -o json
      dra-migrate status plans/x.yaml --state in-cluster --lock-namespace dra-migrate   # an in-cluster Job's
    """
    from dra_migrate.plan.view import plan_cluster
    from dra_migrate.render.status import STATUS_FORMAT_VERSION, remaining_steps, status_document

    plan = _load(plan_file)
    state = resolve_state(state, kubeconfig, plan_file)
    store = journal_store(state, plan_file, _reader(state, kubeconfig, context), lock_namespace)
    records = read_checked(store, plan_digest=str(plan.digest), cluster=plan.cluster_identity)
    progress = progress_of(plan, records)
    report = {"formatVersion": STATUS_FORMAT_VERSION, "cluster": plan_cluster(plan), **progress.to_dict()}
    print_data(output, report, lambda: status_document(report), lambda: remaining_steps(report))


def _reader(state: str, kubeconfig: Path | None, context: str | None) -> Any:
    """The API client that reads an in-cluster journal (None for a file: nothing to connect to)."""
    if state != IN_CLUSTER:
        return None
    from dra_migrate.cluster.kubeconfig import checked_api_client

    return checked_api_client(kubeconfig, context)


@click.command()
@_PLAN
@click.option("--kubeconfig", type=click.Path(path_type=Path), help="The cluster to unlock (default: as kubectl).")
@click.option("--context", help="The kubeconfig context to use.")
@click.option("--lock-id", required=True, help="The lock id that apply's refusal names.")
@click.option("--force", is_flag=True, help="Break it even though its holder renewed it within its duration.")
@_LOCK_NS
def unlock(
    plan_file: Path, kubeconfig: Path | None, context: str | None, lock_id: str, force: bool, lock_namespace: str
) -> None:
    """Break the cluster lock (only when you know its holder is gone).

    A lock its holder still renews is refused without --force, naming the holder: its run may be acting on
    the cluster. A crashed run's lock expires by itself (60 s), and one that crashed on this machine is
    broken at once.

    \b
    Examples:
      dra-migrate apply plans/x.yaml --yes          # refused: names the holder and its lock id
      dra-migrate unlock plans/x.yaml --lock-id ID
    """
    _load(plan_file)
    if kubeconfig is not None:
        check_given_kubeconfig(kubeconfig, context)
    ops = live_ops(kubeconfig, context)
    held = read_lock(ops.api, namespace=lock_namespace)
    gone = held is not None and held.lock_id == lock_id and crashed_here(held)  # this machine's crashed run
    broken = break_lock(ops.api, lock_id, namespace=lock_namespace, force=force or gone)
    if broken is None:
        _log("no cluster lock to break")
        return
    _log(f"lock {lock_id} broken: it was held by {broken.holder or '(nobody)'} (plan {broken.plan_digest or '?'})")
