"""The runner: applies a plan stage by stage and wave by wave, journaled, resumable, reversible.

Within a wave each step runs for every node of the wave before the next step starts (all of a wave's
nodes are cordoned, then drained, ...): a wave is one window of disruption, at most `max_unavailable`
nodes wide. Every step is journaled when it starts and when it ends, with the state before and after.

Resume: running apply again skips steps the journal records as done; a step that started but never
ended (a crash) runs again — every operation re-checks the cluster first, so repeating one is harmless.
Rollback: the inverses of done and half-done steps, newest first, restoring the values the plan recorded
(labels, cordon state) — also run by itself for the current wave when a step or the health gate fails.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from migrate.errors import ClusterError, InputError
from migrate.execute.contract import Change, Ops, StepFailed
from migrate.plan.model import expand
from migrate.plan.params import parse_duration

Log = Callable[[str], None]


@dataclass(frozen=True)
class ApplyOptions:
    stage: str | None = None  # only this stage
    until: str | None = None  # every stage up to and including this one
    dry_run: bool = False
    auto_rollback: bool = True
    # Health gate after each wave: GPU pods Pending longer than this stop the stage.
    pending_threshold_s: float = 120.0
    soak_override_s: float | None = None  # tests; the plan's soak otherwise


@dataclass
class RunResult:
    ok: bool
    steps_run: int = 0
    steps_skipped: int = 0
    rolled_back: list[str] = field(default_factory=list)  # step ids undone
    failure: str | None = None
    changes: list[Change] = field(default_factory=list)  # what a dry run would change


@dataclass(frozen=True)
class PlannedStep:
    stage: str
    wave: str | None
    node: str | None
    step: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.step["id"])


def planned_steps(plan: dict[str, Any]) -> Iterator[PlannedStep]:
    """Every concrete step of the plan in execution order (waves: step by step across their nodes)."""
    for stage in plan["stages"]:
        if "steps" in stage:
            for s in stage["steps"]:
                yield PlannedStep(stage["name"], None, None, s)
            continue
        for wave in stage.get("waves") or []:
            per_node = [(n["node"], expand(stage, n)) for n in wave["nodes"]]
            for i in range(len(stage.get("nodeSteps") or [])):
                for node, steps in per_node:
                    yield PlannedStep(stage["name"], wave["name"], node, steps[i])


def _waves(steps: list[PlannedStep]) -> list[tuple[tuple[str, str | None], list[PlannedStep]]]:
    """Consecutive steps grouped by (stage, wave): the unit of the health gate and of auto-rollback."""
    groups: list[tuple[tuple[str, str | None], list[PlannedStep]]] = []
    for ps in steps:
        key = (ps.stage, ps.wave)
        if not groups or groups[-1][0] != key:
            groups.append((key, []))
        groups[-1][1].append(ps)
    return groups


class Runner:
    def __init__(
        self,
        plan: dict[str, Any],
        ops: Ops,
        journal: Any,
        *,
        actor: str,
        log: Log | None = None,
        guard: Callable[[], None] | None = None,
        progress: Callable[[int, int, str], None] | None = None,
    ) -> None:
        self.plan = plan
        # Told (steps finished, steps selected, step id) after each step: the CLI draws progress from it.
        self.progress = progress or (lambda _done, _total, _step: None)
        # Called before every step: raises when the run must not go on (the cluster lock was lost).
        self.guard = guard or (lambda: None)
        self.ops = ops
        self.journal = journal  # migrate.execute.journal.Journal (None for a dry run)
        self.actor = actor
        self.log = log or (lambda _msg: None)
        self.node_uids = {
            o["name"]: o["uid"] for o in plan["fingerprint"]["objects"] if o["kind"] == "Node" and o.get("uid")
        }

    # ----------------------------------------------------------------------------------------- apply
    def apply(self, opts: ApplyOptions, done: set[str]) -> RunResult:
        """Run the selected stages. `done`: step ids the journal records as done (skipped on resume)."""
        stages = self._selected_stages(opts, done)
        result = RunResult(ok=True)
        self._record("run-start", phase="apply", stages=stages, dryRun=opts.dry_run)
        selected = [p for p in planned_steps(self.plan) if p.stage in stages]
        groups = _waves(selected)
        finished = 0
        for key, group in groups:
            ran = False
            for ps in group:
                finished += 1
                if ps.id in done:
                    result.steps_skipped += 1
                    continue
                try:
                    change = self._run_step(ps, opts.dry_run)
                except (StepFailed, ClusterError) as e:
                    result.ok = False
                    result.failure = f"{ps.id}: {e}"
                    self.log(f"FAILED {ps.id}: {e}")
                    self._fail_wave(group, ps, opts, result, done)
                    return self._end(result)
                ran = True
                result.steps_run += 1
                self.progress(finished, len(selected), ps.id)
                if change is not None and opts.dry_run:
                    result.changes.append(change)
                if not opts.dry_run:
                    done.add(ps.id)
            if key[1] is not None and ran and not self._after_wave(key, opts, result):
                self._fail_wave(group, None, opts, result, done)
                return self._end(result)
        return self._end(result)

    def _end(self, result: RunResult) -> RunResult:
        self._record("run-end", phase="apply", result="ok" if result.ok else "failed", error=result.failure)
        return result

    def _selected_stages(self, opts: ApplyOptions, done: set[str]) -> list[str]:
        names = [s["name"] for s in self.plan["stages"]]
        for name in (opts.stage, opts.until):
            if name is not None and name not in names:
                raise InputError(f"the plan has no stage {name!r}", f"stages: {', '.join(names)}")
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
        return all(p.id in done for p in planned_steps(self.plan) if p.stage == stage)

    def _after_wave(self, key: tuple[str, str | None], opts: ApplyOptions, result: RunResult) -> bool:
        """The soak and the health gate after a wave. False stops the stage."""
        stage = next(s for s in self.plan["stages"] if s["name"] == key[0])
        wave = next((w for w in stage.get("waves") or [] if w["name"] == key[1]), None)
        if wave is None or opts.dry_run:
            return True
        soak = opts.soak_override_s if opts.soak_override_s is not None else parse_duration(wave["soakAfter"])
        if soak:
            self.log(f"{key[0]}/{key[1]}: soaking {soak:.0f}s")
            time.sleep(soak)
        pending = self.ops.pending_gpu_pods(opts.pending_threshold_s)
        self._record("gate", stage=key[0], wave=key[1], result="ok" if not pending else "failed", pending=pending)
        if pending:
            result.ok = False
            result.failure = f"health gate after {key[0]}/{key[1]}: GPU pods Pending: {', '.join(pending[:5])}"
            self.log(result.failure)
            return False
        return True

    def _fail_wave(
        self, wave: list[PlannedStep], failed: PlannedStep | None, opts: ApplyOptions, result: RunResult, done: set[str]
    ) -> None:
        """Undo the wave's done steps and the half-done one, newest first (unless --no-auto-rollback)."""
        if opts.dry_run:
            return
        if not opts.auto_rollback:
            self.log("--no-auto-rollback: the wave is left as it is for inspection")
            return
        undo = [p for p in wave if p.id in done or p is failed]
        self.log(f"rolling back {len(undo)} step(s) of the failed wave")
        result.rolled_back.extend(self._undo(list(reversed(undo))))
        done.difference_update(result.rolled_back)

    # ------------------------------------------------------------------------------------- rollback
    def rollback(self, to_undo: list[str]) -> list[str]:
        """Undo these step ids (the journal's done and half-done ones), newest first."""
        by_id = {p.id: p for p in planned_steps(self.plan)}
        unknown = [s for s in to_undo if s not in by_id]
        if unknown:
            raise InputError(f"the journal names steps the plan does not have: {unknown[0]}", "is this the right plan?")
        self._record("run-start", phase="rollback", steps=len(to_undo))
        undone = self._undo([by_id[s] for s in to_undo])
        self._record("run-end", phase="rollback", result="ok")
        return undone

    def _undo(self, steps: list[PlannedStep]) -> list[str]:
        undone = []
        for ps in steps:
            self.guard()
            inverse = ps.step.get("inverse")
            self._record("start", phase="rollback", stepId=ps.id, action=(inverse or {}).get("action"),
                         target=ps.step.get("target"))  # fmt: skip
            try:
                change = self._run_inverse(ps, inverse)
            except (StepFailed, ClusterError) as e:
                self._record("end", phase="rollback", stepId=ps.id, result="failed", error=str(e))
                raise
            self._record("end", phase="rollback", stepId=ps.id, result="ok" if change else "skipped",
                         before=change.before if change else None, after=change.after if change else None)  # fmt: skip
            self.log(f"undone {ps.id}")
            undone.append(ps.id)
        return undone

    def _run_inverse(self, ps: PlannedStep, inverse: dict[str, Any] | None) -> Change | None:
        if not inverse:
            return None
        action, restore = inverse["action"], inverse.get("restore") or {}
        if action == "set-unschedulable":
            return self.ops.set_unschedulable(str(ps.node), bool(restore["unschedulable"]))
        if action == "restore-label":
            return self.ops.set_label(str(ps.node), restore["key"], restore.get("value"))
        if action == "delete-deviceclass":
            return self.ops.delete_device_class(restore["name"])
        return None  # "none", "delete-pod": nothing persists to undo

    # ----------------------------------------------------------------------------------------- steps
    def _run_step(self, ps: PlannedStep, dry_run: bool) -> Change | None:
        self.guard()
        step = ps.step
        self._record("start", phase="apply", stage=ps.stage, wave=ps.wave, stepId=ps.id, action=step["action"],
                     target=step.get("target"))  # fmt: skip
        started = time.monotonic()
        try:
            change = self._dispatch(ps, dry_run)
        except (StepFailed, ClusterError) as e:
            details = getattr(e, "details", None)
            self._record("end", phase="apply", stepId=ps.id, result="failed", error=str(e), details=details)
            raise
        result = "dry-run" if dry_run else "ok"
        self._record("end", phase="apply", stepId=ps.id, result=result,
                     before=change.before if change else None, after=change.after if change else None)  # fmt: skip
        self.log(f"{'would ' if dry_run else ''}{ps.id}: ok ({time.monotonic() - started:.3f}s)")
        return change

    def _dispatch(self, ps: PlannedStep, dry_run: bool) -> Change | None:
        step, params, node = ps.step, ps.step.get("params") or {}, str(ps.node)
        action = step["action"]
        timeout = float(parse_duration(step["timeout"]))
        if action == "create-deviceclass":
            return self.ops.create_device_class(params["manifest"], dry_run=dry_run)
        if action == "confirm-dra-driver":
            if not self.ops.dra_driver_installed(params.get("driver", "gpu.nvidia.com")):
                raise StepFailed(
                    "the NVIDIA DRA kubelet plugin is not installed",
                    "install the dra-driver-nvidia-gpu chart "
                    "(kubeletPlugin.nodeSelector nvidia.com/dra-kubelet-plugin=true)",
                )
            return None
        if action == "cordon":
            self._check_node(node)
            return self.ops.set_unschedulable(node, True, dry_run=dry_run)
        if action == "uncordon":
            return self.ops.set_unschedulable(node, bool(params["unschedulable"]), dry_run=dry_run)
        if action == "drain":
            return self.ops.drain(node, params["scope"], timeout, dry_run=dry_run)
        if action == "set-label":
            return self.ops.set_label(node, params["key"], params["value"], dry_run=dry_run)
        if action == "wait-dra-ready":
            if dry_run:
                return None  # nothing was really switched: there is nothing to wait for
            return self.ops.wait_dra_ready(node, list(params["allocatableZero"]), int(params["devices"]), timeout,
                                           driver=params.get("driver", "gpu.nvidia.com"))  # fmt: skip
        if action == "canary":
            if dry_run:
                return None
            return self.ops.canary(node, params["resource"], params["image"], timeout, command=params.get("command"))
        raise InputError(f"unknown step action {action!r} in {ps.id}", "regenerate the plan with this version")

    def _check_node(self, node: str) -> None:
        """The precondition of a node's first step: it exists and is the node the plan was made for."""
        state = self.ops.node_state(node)
        if not state.get("exists"):
            raise StepFailed(f"node {node} no longer exists", "make a new plan: dra-migrate plan")
        planned = self.node_uids.get(node)
        if planned and state.get("uid") != planned:
            raise StepFailed(f"node {node} was replaced since the plan (uid changed)", "make a new plan")

    def _record(self, event: str, **fields: Any) -> None:
        if self.journal is not None:
            self.journal.record(event, actor=self.actor, planDigest=self.plan.get("digest"), **fields)
            _crash_point(event, fields.get("stepId"))


def _crash_point(event: str, step_id: Any) -> None:
    """Fault injection for the crash tests: DRA_MIGRATE_CRASH_AT="<stepId>:<start|end>" kills the process
    with SIGKILL right after that journal record is on disk, as a crash at that step boundary would."""
    at = os.environ.get("DRA_MIGRATE_CRASH_AT")
    if at and at == f"{step_id}:{event}":
        os.kill(os.getpid(), signal.SIGKILL)
