"""The runner: applies a typed plan stage by stage and wave by wave, journaled, resumable, reversible.

A wave is one window of disruption, at most `maxUnavailable` nodes wide, and its nodes progress at once:
each node is a lane that runs its steps in order (cordon, drain, labels, wait, canary, uncordon) in its
own thread, bounded by `ApplyOptions.parallelism`. Every step is journaled when it starts and when it
ends (the journal serialises concurrent writers; `seq` totally orders the records). The `prepare` stage
is one lane. The next wave starts when every lane of this one has finished and the health gate passed.

Failures come in two kinds (`contract.is_transient`):
- permanent (a drain blocked past its timeout, a canary that failed, a node replaced, a request the
  server refused): the other lanes stop at their next step boundary — their waits are cancelled at
  once — and the whole wave is rolled back, lanes concurrently, newest step first (unless
  `auto_rollback` is off);
- transient (the API server unreachable, 5xx or 429 after the client's retries, the lock lost): the
  lanes stop the same way and apply stops with nothing rolled back: a re-run resumes.
A rollback that fails is journaled (`rollback-incomplete`, with the steps left to undo); `run-end`
closes the run in the journal whatever happened.

Resume: running apply again skips steps the journal records as done; a step that started but never
ended (a crash), or ended interrupted or failed, runs again — every operation re-checks the cluster
first, so repeating one is harmless.

The runner is a pure orchestrator over `Ops` with an injected `Clock`: `dra_migrate.testing.execute`
(FakeOps, FakeClock) drives it in milliseconds in the unit tests; `LiveOps` against the real control plane
in the integration tests.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.identity import ClusterIdentity
from dra_migrate.errors import InputError, MigrateError
from dra_migrate.execute.actions import DEFAULT_DRAIN_S, StepContext, admit_canary, dra_gone_of, run_step, undo_step
from dra_migrate.execute.backlog import Backlog
from dra_migrate.execute.budget import BUDGET_WAIT_S, before_wave, pool_budgets, someone_elses_cordon
from dra_migrate.execute.contract import (
    SYSTEM_CLOCK,
    Cancel,
    Cancelled,
    Change,
    Clock,
    Ops,
    StepFailed,
    StepRefused,
    is_transient,
)
from dra_migrate.execute.journal import REFUSED
from dra_migrate.execute.rollback_check import refuse_if_changed
from dra_migrate.execute.units import PlannedStep as PlannedStep
from dra_migrate.execute.units import Unit as Unit
from dra_migrate.execute.units import nodes_touched as nodes_touched
from dra_migrate.execute.units import planned_step_ids as planned_step_ids
from dra_migrate.execute.units import planned_steps as planned_steps
from dra_migrate.execute.units import stage_steps, units
from dra_migrate.execute.wave_inputs import WaveInputs
from dra_migrate.kube import thread_request_seconds
from dra_migrate.plan.model import Action, Plan
from dra_migrate.secrets import scrub, scrub_failure

Log = Callable[[str], None]

OK, FAILED, STOPPED = "ok", "failed", "stopped"
RESUME_HINT = "re-run apply to resume"


@dataclass(frozen=True)
class ApplyOptions:
    stage: str | None = None  # only this stage
    until: str | None = None  # every stage up to and including this one
    dry_run: bool = False
    auto_rollback: bool = True
    # Health gate after each wave: GPU pods Pending longer than this stop the stage.
    pending_threshold_s: float = 120.0
    soak_override_s: float | None = None  # tests; the plan's soak otherwise
    parallelism: int | None = None  # nodes of a wave at once; None: the whole wave
    timeouts: Mapping[str, float] = field(default_factory=dict)  # per action, over the plan's (--drain-timeout)
    # --delete-unowned-pods: drains may evict pods no controller owns that the plan did not record
    delete_unowned_pods: bool = False
    budget_wait_s: float = BUDGET_WAIT_S  # a wave's wait for its pool's other nodes out of service (budget.py)

    def lanes_at_once(self, lanes: int) -> int:
        return max(1, min(lanes, self.parallelism or lanes))


@dataclass
class RunResult:
    ok: bool
    outcome: str = OK  # "ok" | "failed" (a step or the gate failed) | "stopped" (transient: resume later)
    steps_run: int = 0
    steps_skipped: int = 0
    rolled_back: list[str] = field(default_factory=list)  # step ids undone
    rollback_left: list[str] = field(default_factory=list)  # step ids a failed rollback could not undo
    failure: str | None = None
    changes: list[Change] = field(default_factory=list)  # what a dry run would change


class _Tally:
    """Counters and collections the lanes of a wave update concurrently."""

    def __init__(self, total: int, progress: Callable[[int, int, str], None]) -> None:
        self._mutex = threading.Lock()
        self.total = total
        self.finished = 0
        self._progress = progress

    def step_done(self, result: RunResult, ps: PlannedStep, change: Change | None, dry: bool, skipped: bool) -> None:
        with self._mutex:
            self.finished += 1
            if skipped:
                result.steps_skipped += 1
                return
            result.steps_run += 1
            if change is not None and dry:
                result.changes.append(change)
            self._progress(self.finished, self.total, ps.id)


class Runner:
    def __init__(
        self,
        plan: Plan,
        ops: Ops,
        journal: Any,
        *,
        actor: str,
        log: Log | None = None,
        guard: Callable[[], None] | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        overrides: Mapping[str, Any] | None = None,
        cluster: ClusterIdentity | None = None,
        backlog: Backlog | None = None,
        touched_nodes: frozenset[str] = frozenset(),
        applied: frozenset[str] | None = None,
    ) -> None:
        self.plan = plan
        # Steps the journal records done while applying: `rollback` first checks the node fields they wrote
        # still hold those values (execute/rollback_check.py). None: not known, not checked.
        self.applied = applied
        # Nodes the journal shows steps on before this run (a resumed one): a cordon found on one of them may
        # be the migration's own, written before a crash could record it (execute/actions.py `_cordon`).
        self.touched_nodes = touched_nodes
        # The GPU pods Pending before the migration began (None: not read yet; the first real run reads it).
        self.backlog = backlog
        # The cluster this run talks to, as read before it (journalled in run-start; `status` checks it).
        self.cluster = cluster
        # Told (steps finished, steps selected, step id) after each step: the CLI draws progress from it.
        self.progress = progress or (lambda _done, _total, _step: None)
        # Asked at every step boundary and every wait: raises when the run must not go on (the lock lost).
        self.cancel = Cancel(guard=guard)
        self.ops = ops
        self.journal = journal  # dra_migrate.execute.journal.Journal (None for a dry run)
        self.actor = actor
        self.clock = clock
        self.overrides = dict(overrides or {})  # recorded in run-start (--drain-timeout, --parallelism, ...)
        sink = log or (lambda _msg: None)
        self.log: Callable[[str], None] = lambda msg: sink(scrub(msg) or "")  # failures quote API errors: scrubbed
        self.node_uids = plan.node_uids()
        # What its drains may take: pods no controller owns, pods marked not to be interrupted (the plan showed them).
        self.reviewed_pods, self.marked_named = plan.reviewed_pods(), plan.marked_pods_named()
        # Each pool stage's drain timeout: an undone plugin switch drains the node again (execute/actions.py);
        # and its DRA readiness wait: an undone DRA switch waits, with its driver and timeout, for the slices to go.
        self.drain_timeouts = {name: s.timeout_s for name, s in stage_steps(plan, Action.DRAIN).items()}
        self.dra_waits = stage_steps(plan, Action.WAIT_DRA_READY)
        self._done_mutex = threading.Lock()
        self.budgets = pool_budgets(plan)  # per stage: its pool's maxUnavailable, checked before each wave
        self._ran_on: set[str] = set()  # nodes this run started a step on: what it takes out is its own
        self.inputs = WaveInputs(plan)  # the planned nodes' GPU labels at the first wave, compared before each
        self._dry_seen: dict[str, Any] = {}  # a dry run's node reads for the budget: one per node
        self._admitted: set[tuple[str, str, str]] = set()  # canary pods the API server admitted (dry run)

    # ----------------------------------------------------------------------------------------- apply
    def _cluster_field(self) -> dict[str, Any]:
        cluster = self.cluster or self.plan.cluster_identity
        return {"cluster": cluster.to_dict()} if cluster is not None and cluster.uid else {}

    def apply(self, opts: ApplyOptions, done: set[str]) -> RunResult:
        """Run the selected stages. `done`: step ids the journal records as done (skipped on resume;
        updated as steps finish and are rolled back)."""
        stages = self.selected_stages(opts, done)
        result = RunResult(ok=True)
        if self.backlog is None and not opts.dry_run:
            self.backlog = Backlog(*self.ops.pending_gpu_backlog())
            if self.backlog.pods:
                self.log(f"{self.backlog.pods} GPU pod(s) were Pending before the migration: the health gate leaves "
                         "them to their queue")  # fmt: skip
        self._record(
            "run-start",
            phase="apply",
            stages=stages,
            dryRun=opts.dry_run,
            overrides=self.overrides or None,
            pendingBacklog=self.backlog.to_dict() if self.backlog is not None and not opts.dry_run else None,
            **self._cluster_field(),
        )
        selected = [u for u in units(self.plan) if u.stage in stages]
        tally = _Tally(sum(len(lane) for u in selected for lane in u.lanes), self.progress)
        try:
            for unit in selected:
                if not self._run_unit(unit, opts, done, result, tally):
                    break
        except BaseException as e:  # a bug, or Ctrl-C: the run is still closed in the journal
            result.ok, result.outcome = False, FAILED
            result.failure = result.failure or f"interrupted: {e!r}"
            raise
        finally:
            self._record(
                "run-end",
                phase="apply",
                result=result.outcome,
                error=result.failure,
                rollbackLeft=result.rollback_left or None,
            )
        return result

    def selected_stages(self, opts: ApplyOptions, done: set[str]) -> list[str]:
        names = self.plan.stage_names
        for name in (opts.stage, opts.until):
            if name is not None and name not in names:
                raise InputError(f"the plan has no stage {name!r}", f"stages: {', '.join(names)}")
        if opts.stage is not None and opts.until is not None:
            raise InputError("--stage and --until exclude each other", "pass one")
        if opts.stage is not None:
            earlier = names[: names.index(opts.stage)]
            unfinished = [s for s in earlier if not self._stage_done(s, done)]
            if unfinished and not opts.dry_run:
                raise InputError(
                    f"stage {opts.stage} comes after unfinished stage(s) {', '.join(unfinished)}",
                    f"apply them first (--until {unfinished[-1]}) or run without --stage",
                )
            return [opts.stage]
        if opts.until is not None:
            return names[: names.index(opts.until) + 1]
        return names

    def _stage_done(self, stage: str, done: set[str]) -> bool:
        return all(p.id in done for u in units(self.plan) if u.stage == stage for p in u.steps)

    def _run_unit(self, unit: Unit, opts: ApplyOptions, done: set[str], result: RunResult, tally: _Tally) -> bool:
        """One wave (or the prepare stage). False when the run must stop here."""
        if all(p.id in done for p in unit.steps):
            for p in unit.steps:
                tally.step_done(result, p, None, opts.dry_run, skipped=True)
            return True
        cancel = Cancel(parent=self.cancel)
        if not (self._cordons_are_ours(unit, done, result) and self._within_budget(unit, opts, result, cancel)
                and self._cordons_are_ours(unit, done, result, None if opts.dry_run else opts)  # again: budget waited
                and self._canaries_admitted(unit, opts, done, result, cancel)):  # fmt: skip
            return False
        failures: list[tuple[PlannedStep, BaseException]] = []
        touched: set[str] = set()  # steps started in this run (done, failed or interrupted)
        mutex = threading.Lock()

        def lane(steps: tuple[PlannedStep, ...]) -> None:
            for ps in steps:
                if ps.id in done:
                    tally.step_done(result, ps, None, opts.dry_run, skipped=True)
                    continue
                try:
                    cancel.check()  # a step boundary: stop here when another lane failed
                except MigrateError as e:
                    if not isinstance(e, Cancelled):
                        with mutex:
                            failures.append((ps, e))
                        cancel.cancel(str(e))
                    return
                with mutex:
                    touched.add(ps.id)
                    self._ran_on.update([ps.node] if ps.node and not opts.dry_run else [])
                try:
                    change = self._run_step(ps, opts, cancel)
                except Cancelled:
                    return
                except BaseException as e:
                    with mutex:
                        failures.append((ps, e))
                        if isinstance(e, StepRefused):
                            touched.discard(ps.id)  # it changed nothing: the wave's rollback leaves it
                    cancel.cancel(f"{ps.id} failed")
                    return
                if not opts.dry_run:
                    with self._done_mutex:
                        done.add(ps.id)
                tally.step_done(result, ps, change, opts.dry_run, skipped=False)

        self._in_lanes(unit.lanes, opts, lane, cancel)
        if not failures and self.cancel.cancelled:  # stopped from outside (the lock's loss woke the waits)
            failures.append((next(unit.steps), Cancelled(self.cancel.reason)))
        if not failures:
            return self._after_wave(unit, opts, result, done)
        bugs = [e for _, e in failures if not isinstance(e, MigrateError)]
        if bugs:
            raise bugs[0]
        ps, error = _first(failures)
        result.ok = False
        result.failure = f"{ps.id}: {error}"
        if any(is_transient(e) for _, e in failures):
            result.outcome = STOPPED
            result.failure = f"{ps.id}: {error} ({RESUME_HINT}; nothing was rolled back)"
            self.log(f"STOPPED {result.failure}")
            return False
        result.outcome = FAILED
        self.log(f"FAILED {ps.id}: {error}")
        self._fail_wave(unit, touched, opts, result, done)
        return False

    def _cordons_are_ours(self, unit: Unit, done: set[str], result: RunResult, run: ApplyOptions | None = None) -> bool:
        """Before a wave's first step: no node cordoned by someone else, nor (a real `run`) changed: wave_inputs.py."""
        failure = someone_elses_cordon(self.ops, unit, done, self.touched_nodes, self.node_uids)
        if failure is None and run is not None:
            reviewed = None if run.delete_unowned_pods else self.reviewed_pods
            failure = self.inputs.changed(self.ops, unit, done, self.touched_nodes | self._ran_on, reviewed)
        if failure is not None:
            result.ok, result.outcome, result.failure = False, FAILED, failure
            self.log(f"{result.outcome.upper()} {result.failure}")
        return failure is None

    def _within_budget(self, unit: Unit, opts: ApplyOptions, result: RunResult, cancel: Cancel) -> bool:
        """Before a wave's first step: its pool's nodes out of service, not by this migration, and the wave fit the
        plan's maxUnavailable, or come to within `budget_wait_s` (execute/budget.py). False: the run stops."""
        budget, wave = self.budgets.get(unit.stage), unit.wave
        if budget is None or wave is None:
            return True
        stop = before_wave(self.ops, self.clock, cancel, budget, {n.node for n in wave.nodes},
                           lambda: self.touched_nodes | self._ran_on, self.log, f"{unit.stage}/{wave.name}",
                           dry_run=opts.dry_run, wait_s=opts.budget_wait_s, seen=self._dry_seen)  # fmt: skip
        if stop is not None:
            result.ok, (result.outcome, result.failure) = False, stop
            self.log(f"{result.outcome.upper()} {result.failure}")
        return stop is None

    def _canaries_admitted(
        self, unit: Unit, opts: ApplyOptions, done: set[str], result: RunResult, cancel: Cancel
    ) -> bool:
        """Before a wave's first step: the API server admits its canary pod (`admit_canary`, a dry run; once
        per resource, image and command in a run). False (the run stops, nothing of the wave touched) when it
        refuses it, or cannot be asked now (transient: resume later)."""
        for ps in unit.steps:
            key = (str(ps.step.params.get("resource")), str(ps.step.params.get("image")),
                   repr(ps.step.params.get("command")))  # fmt: skip
            if ps.step.action != Action.CANARY or ps.id in done or key in self._admitted:
                continue
            try:
                admit_canary(self._context(ps, opts, cancel))
            except StepFailed:
                continue  # the node's own problem (gone since the plan): its lane meets it; ask on the next node
            except MigrateError as e:
                result.ok = False
                if is_transient(e):
                    result.outcome = STOPPED
                    result.failure = f"{ps.id}: admitting its canary pod: {e} ({RESUME_HINT}; nothing was changed)"
                else:
                    result.outcome = FAILED
                    result.failure = (
                        f"{ps.id}: its canary pod cannot run in the canary's namespace, so every node's canary "
                        f"would fail: {e} (nothing of the wave was touched; let the pod in: the namespace's Pod "
                        "Security level, quotas and admission policies, or plan --canary-namespace another)"
                    )
                self.log(f"{result.outcome.upper()} {result.failure}")
                return False
            self._admitted.add(key)
        return True

    def _in_lanes(
        self, lanes: tuple[tuple[PlannedStep, ...], ...], opts: ApplyOptions, fn: Callable[[Any], None], cancel: Cancel
    ) -> None:
        """Run `fn` on every lane, at most `parallelism` at once; return when all have finished. Interrupted
        (Ctrl-C), the lanes are cancelled and stop at their next boundary before this returns."""
        if len(lanes) == 1:
            fn(lanes[0])
            return
        pool = ThreadPoolExecutor(max_workers=opts.lanes_at_once(len(lanes)), thread_name_prefix="lane")
        futures = []
        try:
            futures = [pool.submit(fn, lane) for lane in lanes]
            for f in futures:
                f.result()
        except BaseException:
            cancel.cancel("interrupted")  # before waiting for the lanes: their waits end at once
            self._until_lanes_end(futures)
            raise
        finally:
            pool.shutdown(wait=True)

    def _until_lanes_end(self, futures: list[Any]) -> None:
        """Wait for the cancelled lanes to finish the request in flight and journal their step, through
        further Ctrl-Cs: cut short, the run would be closed, the journal closed and the Lease deleted while a
        lane still wrote to the cluster, its step's end then lost. (A SIGTERM's repeats are ignored already,
        cli/interrupts.py; what ends a stop that hangs is SIGKILL, after which resume re-runs the open steps.)"""
        told = False
        while True:
            try:
                left = [f for f in futures if not f.done()]
                if not left:
                    return
                if not told:
                    told = True
                    self.log(f"stopping: waiting for {len(left)} node(s) to finish the request in flight and "
                             "journal it")  # fmt: skip
                concurrent.futures.wait(left, timeout=1.0)
            except KeyboardInterrupt:
                continue

    def _after_wave(self, unit: Unit, opts: ApplyOptions, result: RunResult, done: set[str]) -> bool:
        """The soak and the health gate after a wave. False stops the run (the wave was rolled back)."""
        if unit.wave is None or opts.dry_run:
            return True
        cancel = Cancel(parent=self.cancel)
        try:
            soak = opts.soak_override_s if opts.soak_override_s is not None else unit.wave.soak_s
            if soak:
                self.log(f"{unit.stage}/{unit.wave.name}: soaking {soak:.0f}s")
                self.clock.sleep(soak, cancel)
            before = self.backlog.created_up_to if self.backlog is not None else None
            pending = self.ops.pending_gpu_pods(opts.pending_threshold_s, created_after=before)
        except MigrateError as e:
            if not is_transient(e):
                raise
            result.ok, result.outcome = False, STOPPED
            result.failure = f"health gate after {unit.stage}/{unit.wave.name}: {e} ({RESUME_HINT})"
            self.log(f"STOPPED {result.failure}")
            return False
        self._record("gate", stage=unit.stage, wave=unit.wave.name, result="ok" if not pending else "failed",
                     pending=pending)  # fmt: skip
        if not pending:
            return True
        result.ok, result.outcome = False, FAILED
        result.failure = f"health gate after {unit.stage}/{unit.wave.name}: GPU pods Pending: {', '.join(pending[:5])}"
        self.log(result.failure)
        self._fail_wave(unit, set(), opts, result, done)
        return False

    def _fail_wave(self, unit: Unit, touched: set[str], opts: ApplyOptions, result: RunResult, done: set[str]) -> None:
        """Undo the wave's done steps and its half-done ones, each lane newest first (unless --no-auto-rollback)."""
        if opts.dry_run:
            return
        if not opts.auto_rollback:
            self.log("--no-auto-rollback: the wave is left as it is for inspection")
            return
        lanes = tuple(tuple(reversed([p for p in lane if p.id in done or p.id in touched])) for lane in unit.lanes)
        lanes = tuple(lane for lane in lanes if lane)
        self.log(f"rolling back {sum(len(lane) for lane in lanes)} step(s) of the failed wave")
        undone, left, error = self._undo_lanes(lanes, opts)
        result.rolled_back.extend(undone)
        with self._done_mutex:
            done.difference_update(undone)
        if left:
            result.rollback_left.extend(left)
            result.failure = f"{result.failure}; and the rollback failed ({error}), left to undo: {', '.join(left)}"

    # ------------------------------------------------------------------------------------- rollback
    def rollback(self, to_undo: list[str], opts: ApplyOptions | None = None) -> RunResult:
        """Undo these step ids (the journal's done and half-done ones), wave by wave from the newest, the
        nodes of a wave concurrently, each node's steps newest first."""
        opts = opts or ApplyOptions()
        by_id = {p.id: p for p in planned_steps(self.plan)}
        unknown = [s for s in to_undo if s not in by_id]
        if unknown:
            raise InputError(f"the journal names steps the plan does not have: {unknown[0]}", "is this the right plan?")
        wanted = set(to_undo)
        if self.applied is not None:  # before anything is written: no field someone changed since is overwritten
            refuse_if_changed(planned_steps(self.plan), wanted, set(self.applied), self.node_uids, self.ops)
        result = RunResult(ok=True)
        self._record(
            "run-start", phase="rollback", steps=len(to_undo), overrides=self.overrides or None, **self._cluster_field()
        )
        try:
            for unit in reversed(list(units(self.plan))):
                lanes = tuple(tuple(reversed([p for p in lane if p.id in wanted])) for lane in unit.lanes)
                lanes = tuple(lane for lane in lanes if lane)
                if not lanes:
                    continue
                undone, left, error = self._undo_lanes(lanes, opts, result.changes)
                result.rolled_back.extend(undone)
                if left:
                    # The waves before this one stay as they are: undoing them under a half-restored wave
                    # would widen the disruption. What is left is in the journal; rollback resumes.
                    result.ok, result.outcome = False, FAILED
                    result.rollback_left = [s for s in to_undo if s not in set(result.rolled_back)]
                    result.failure = f"rollback failed ({error}); left to undo: {len(result.rollback_left)} step(s)"
                    break
        finally:
            self._record("run-end", phase="rollback", result=result.outcome, error=result.failure,
                         rollbackLeft=result.rollback_left or None)  # fmt: skip
        return result

    def _undo_lanes(
        self, lanes: tuple[tuple[PlannedStep, ...], ...], opts: ApplyOptions, changes: list[Change] | None = None
    ) -> tuple[list[str], list[str], str | None]:
        """Undo each lane's steps in order, lanes concurrently. (undone, left, first error). A dry run's
        changes (what each undo would send) go to `changes`."""
        undone: list[str] = []
        left: list[str] = []
        errors: list[str] = []
        mutex = threading.Lock()
        cancel = Cancel(guard=self.cancel.check)  # a lost lock stops a rollback too; a failed wave does not

        def lane(steps: tuple[PlannedStep, ...]) -> None:
            for i, ps in enumerate(steps):
                try:
                    cancel.check()
                    change = self._undo_step(ps, opts, cancel)
                except MigrateError as e:
                    with mutex:
                        left.extend(p.id for p in steps[i:])
                        errors.append(f"{ps.id}: {e}")
                    return
                with mutex:
                    undone.append(ps.id)
                    if changes is not None and change is not None and opts.dry_run:
                        changes.append(change)

        self._in_lanes(lanes, opts, lane, cancel)
        if left:
            self._record("rollback-incomplete", phase="rollback", left=left, error=errors[0])
        return undone, left, errors[0] if errors else None

    def _undo_step(self, ps: PlannedStep, opts: ApplyOptions, cancel: Cancel) -> Change | None:
        inverse = ps.step.inverse
        self._record("start", phase="rollback", stepId=ps.id, action=inverse.action if inverse else None,
                     target=ps.step.target, node=ps.node)  # fmt: skip
        try:
            # No step's own timeout override: the run's drain timeout and its --delete-unowned-pods are
            # what an undone plugin switch's drain uses. A dry run only from `rollback --dry-run` (a failed
            # wave of `apply --dry-run` is never undone: `_fail_wave`).
            undo_opts = ApplyOptions(
                timeouts=opts.timeouts, delete_unowned_pods=opts.delete_unowned_pods, dry_run=opts.dry_run
            )
            change = undo_step(self._context(ps, undo_opts, cancel))
        except MigrateError as e:
            self._record("end", phase="rollback", stepId=ps.id, result="failed", error=str(e))
            raise
        except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM, SIGHUP (see `_run_step`): the next rollback redoes it
            self._record("end", phase="rollback", stepId=ps.id, result="interrupted",
                         error=f"interrupted: {e or 'Ctrl-C'}")  # fmt: skip
            raise
        self._record("end", phase="rollback", stepId=ps.id, result="ok" if change else "skipped",
                     before=change.before if change else None, after=change.after if change else None)  # fmt: skip
        self.log(f"{'would undo' if opts.dry_run else 'undone'} {ps.id}")
        return change

    # ----------------------------------------------------------------------------------------- steps
    def _context(self, ps: PlannedStep, opts: ApplyOptions, cancel: Cancel) -> StepContext:
        timeout = opts.timeouts.get(str(ps.step.action), ps.step.timeout_s)
        uid = self.node_uids.get(ps.node) if ps.node else None
        reviewed = None if opts.delete_unowned_pods else self.reviewed_pods
        drain_s = opts.timeouts.get(str(Action.DRAIN), self.drain_timeouts.get(ps.stage, DEFAULT_DRAIN_S))
        rest = (reviewed, drain_s, dra_gone_of(self.dra_waits.get(ps.stage), opts.timeouts), self.marked_named)
        return StepContext(self.ops, ps.step, ps.node, timeout, opts.dry_run, cancel, uid, *rest)

    def _run_step(self, ps: PlannedStep, opts: ApplyOptions, cancel: Cancel) -> Change | None:
        step = ps.step
        self._record("start", phase="apply", stage=ps.stage, wave=ps.wave, node=ps.node, stepId=ps.id,
                     action=str(step.action), target=step.target)  # fmt: skip
        started = self.clock.monotonic()
        # The step's own API round trips on this thread (a rehearsal counts them at their real length).
        requests_before = thread_request_seconds()
        try:
            change = run_step(self._context(ps, opts, cancel))
        except MigrateError as e:
            permanent = not is_transient(e)
            details = e.details if isinstance(e, StepFailed) else None
            outcome = REFUSED if isinstance(e, StepRefused) else "failed" if permanent else "interrupted"
            self._record("end", phase="apply", stepId=ps.id, result=outcome,
                         error=str(e), details=details or None,
                         requestSeconds=round(thread_request_seconds() - requests_before, 3))  # fmt: skip
            raise
        except KeyboardInterrupt as e:
            # Ctrl-C, or SIGTERM/SIGHUP (cli/interrupts.py `Terminated`): lands on the main thread, which runs
            # the step of a one-lane unit (the prepare stage, a one-node wave). Stopped, not failed: resume runs
            # it again, as a step whose wait the interrupt cancelled in a wider wave.
            self._record(
                "end", phase="apply", stepId=ps.id, result="interrupted", error=f"interrupted: {e or 'Ctrl-C'}"
            )
            raise
        except BaseException as e:
            self._record("end", phase="apply", stepId=ps.id, result="failed", error=f"internal error: {e!r}")
            raise
        result = "dry-run" if opts.dry_run else "ok"
        self._record("end", phase="apply", stepId=ps.id, result=result,
                     before=change.before if change else None, after=change.after if change else None,
                     requestSeconds=round(thread_request_seconds() - requests_before, 3))  # fmt: skip
        self.log(f"{'would ' if opts.dry_run else ''}{ps.id}: ok ({self.clock.monotonic() - started:.3f}s)")
        return change

    def _record(self, event: str, **fields: Any) -> None:
        if self.journal is not None:  # a failure's error and details are scrubbed first (`secrets.scrub_failure`)
            self.journal.record(event, actor=self.actor, planDigest=self.plan.digest, **scrub_failure(fields))


def _first(failures: list[tuple[PlannedStep, BaseException]]) -> tuple[PlannedStep, BaseException]:
    """The failure to report: a real one before a cancellation it caused."""
    real = [f for f in failures if not isinstance(f[1], Cancelled)]
    return (real or failures)[0]
