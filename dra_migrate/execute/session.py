"""One apply (or rollback) session: the policy around the runner, so the CLI only parses, confirms and renders.

In order, and before anything is written:
1. the journal beside the plan is read and validated (`journal.read_records`): one of another plan, or
   whose `seq` runs backwards or repeats, is refused before the cluster is contacted;
2. the plan must be applicable (no blockers);
3. staleness: a first run (or a failed attempt that changed nothing, or one fully rolled back) refuses
   a plan the cluster has drifted from, as Terraform refuses a stale plan; a resumed run checks drift
   for what is still ahead — the nodes it has not touched and the consumers — ignoring what its own
   steps changed (the nodes it cordoned and relabelled, the DeviceClasses it created);
4. the cluster lock, taking over one left by a crashed run of the same plan on this machine (a
   SIGKILLed apply cannot release its Lease; waiting for it to expire would make every resume wait);
5. the runner, with the runtime overrides (`--drain-timeout`, `--parallelism`, `--qps/--burst`)
   recorded in the journal's run-start, and the lock's loss cancelling every wait at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dra_migrate.cluster.identity import ClusterIdentity
from dra_migrate.errors import InputError, MigrateError
from dra_migrate.execute.actions import preflight
from dra_migrate.execute.backlog import Backlog
from dra_migrate.execute.contract import SYSTEM_CLOCK, Clock, Ops
from dra_migrate.execute.journals import FileStore, JournalStore, read_checked, refuse_if_rebased_mid_run
from dra_migrate.execute.lease import LockInfo
from dra_migrate.execute.lifecycle import joined_on_the_device_plugin
from dra_migrate.execute.lock import HELD_HERE, ClusterLock, break_lock, machine_id, read_lock
from dra_migrate.execute.ops import CANARY_PREFIX
from dra_migrate.execute.progress import progress_of
from dra_migrate.execute.runner import ApplyOptions, Runner, RunResult, nodes_touched, planned_steps
from dra_migrate.plan.model import Action, Plan, PrepareStage
from dra_migrate.plan.steps import PLUGIN_SWITCHES

Log = Callable[[str], None]


class ApplySession:
    """`plan` (typed, digest verified by `plan.io.load`) and the path it was read from (its journal is
    beside it). `ops` and `lock_api` talk to the cluster; nothing is sent before `apply`/`rollback`."""

    def __init__(
        self,
        plan: Plan,
        plan_path: Path,
        *,
        ops: Ops,
        lock_api: Any,
        actor: str,
        log: Log | None = None,
        progress: Callable[[int, int, str], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        lock_namespace: str = "kube-system",
        overrides: Mapping[str, Any] | None = None,
        lock_factory: Callable[..., Any] = ClusterLock,
        store: JournalStore | None = None,
    ) -> None:
        if not plan.digest:
            raise InputError(f"{plan_path}: the plan has no digest", "regenerate it with dra-migrate plan")
        self.plan = plan
        self.plan_path = plan_path
        # The journal: beside the plan (read before any cluster contact), or in the cluster (--state).
        self.store: JournalStore = store or FileStore(plan_path)
        refuse_if_rebased_mid_run(plan, plan_path, self.store)
        self.records = read_checked(self.store, plan_digest=plan.digest, cluster=plan.cluster_identity)
        preflight((p.step, p.node) for p in planned_steps(plan))
        self.state = progress_of(plan, self.records)
        self.ops = ops
        self.lock_api = lock_api
        self.actor = actor
        self.log = log or (lambda _msg: None)
        self.progress = progress
        self.clock = clock
        self.lock_namespace = lock_namespace
        self.overrides = dict(overrides or {})
        self.lock_factory = lock_factory
        self.cluster: ClusterIdentity | None = None  # known once the cluster is read (refuse_if_stale)

    # -- policy

    @property
    def done(self) -> set[str]:
        return self.state.done_steps("apply")

    @property
    def touched(self) -> set[str]:
        """Steps whose effects may be on the cluster now: done, half-done, failed, interrupted (not undone)."""
        return self.state.undoable()

    @property
    def resuming(self) -> bool:
        return bool(self.touched)

    def refuse_if_not_applicable(self, stages: list[str] | None = None) -> None:
        """The whole plan must be applicable, or (`stages`: what --stage/--until selects) every stage
        run: a pool's blocker stops only its own stage (dra_migrate/plan/scope.py)."""
        from dra_migrate.plan.scope import stage_blockers

        if stages is None or self.plan.applicable:
            if not self.plan.applicable:
                raise InputError(
                    f"{self.plan_path} is not applicable: blockers {', '.join(self.plan.blockers)}",
                    "resolve them, then make a new plan (dra-migrate check shows how)",
                )
            return
        pools = {s.name: s.pool for s in self.plan.stages}
        for name in stages:
            blocked = stage_blockers(self.plan.findings, pools.get(name))
            if blocked:
                raise InputError(
                    f"{self.plan_path}: stage {name} is not applicable: blockers {', '.join(blocked)}",
                    "apply the stages no blocker stops (dra-migrate show lists them), or resolve these and plan again",
                )

    def refuse_if_stale(self, read_state: Callable[[], Any]) -> None:
        """Terraform's rule: run only the plan that was reviewed, and not once the cluster moved on (for a
        resumed run: in what is still ahead of it)."""
        from dra_migrate.plan.drift import drift

        state = read_state()
        source = getattr(state, "source", None)  # refused by drift when it is not the plan's cluster
        self.cluster = source.identity if source is not None else None
        d = _without_left_out_pools(
            _without_new_pools(_without_canaries(drift(self.plan, state)), self.plan, state), self.plan, state
        )
        if self.resuming:
            d = self._ahead(d)
        if not d.holds:
            raise InputError(
                f"{self.plan_path} is stale: the cluster changed since it was made ({_drift_line(d)})"
                + (" in what is left to apply" if self.resuming else ""),
                f"see dra-migrate diff {self.plan_path} --kubeconfig ...; then make a new plan",
            )

    def _ahead(self, d: Any) -> Any:
        """The drift that matters to a resumed run: not on nodes its steps touched, not the DeviceClasses
        it created, not the bare pods its drains removed."""
        touched_nodes = nodes_touched(self.plan, self.touched)
        ours = set()
        for stage in self.plan.stages:
            if isinstance(stage, PrepareStage):
                for s in stage.steps:
                    if s.action == Action.CREATE_DEVICECLASS and s.id in self.touched:
                        ours.add(str((s.params.get("manifest") or {}).get("metadata", {}).get("name")))

        def keep(o: Any) -> bool:
            if o.kind == "Node":
                return bool(o.name not in touched_nodes)
            if o.kind == "DeviceClass":
                return bool(o.name not in ours)
            return bool(o.change != "removed")  # a consumer gone: our drains evict bare pods

        return dataclasses.replace(
            d,
            nodes_removed=[n for n in d.nodes_removed if n["node"] not in touched_nodes],
            nodes_moved=[n for n in d.nodes_moved if n["node"] not in touched_nodes],
            labels_changed=[n for n in d.labels_changed if n["node"] not in touched_nodes],
            unschedulable_changed=[n for n in d.unschedulable_changed if n["node"] not in touched_nodes],
            # A node this run switched: its plugins' placement moved with the labels the run set.
            placement_changed=[n for n in d.placement_changed if n["node"] not in touched_nodes],
            consumers_removed=[],
            objects=[o for o in d.objects if keep(o)],
        )

    # -- runs

    def runner(self, journal: Any, guard: Callable[[], None] | None = None) -> Runner:
        return Runner(
            self.plan,
            self.ops,
            journal,
            actor=self.actor,
            log=self.log,
            guard=guard,
            progress=self.progress,
            clock=self.clock,
            overrides=self.overrides,
            cluster=self.cluster,
            backlog=Backlog.of_journal(self.records),
            touched_nodes=nodes_touched(self.plan, self.touched),
            applied=frozenset(self.done),
        )

    def dry_run(self, opts: ApplyOptions) -> RunResult:
        return self.runner(None).apply(dataclasses.replace(opts, dry_run=True), set(self.done))

    def apply(self, opts: ApplyOptions, *, read_state: Callable[[], Any] | None = None) -> RunResult:
        """Run the plan under the cluster lock. With `read_state`, staleness is checked once the lock is
        held (Terraform's order: lock, then refresh), against the journal as it is then: a second apply
        started at the same moment is refused by the lock, never by the first one's changes."""
        with (
            self._locked() as lock,
            self.store.open(str(self.plan.digest)) as journal,
            self._watching(),
        ):
            if read_state is not None:
                self.records = read_checked(self.store, plan_digest=str(self.plan.digest))
                self.state = progress_of(self.plan, self.records)
                self.refuse_if_stale(read_state)
            runner = self.runner(journal, guard=lock.check)
            lock.on_lost(runner.cancel.cancel)  # wake every wait the moment the lock is gone
            done = set(self.done)
            result = runner.apply(opts, done)
            self._tell_joined(done)
            return result

    def _tell_joined(self, done: set[str]) -> None:
        """Name the nodes that joined a migrated in-place pool since the plan on the device plugin
        (execute/lifecycle.py `joined_on_the_device_plugin`): one list of the nodes (the watched copy)."""
        try:
            states = self.ops.node_states(watched=True)
        except MigrateError:
            return  # the run's outcome stands; `report` reads the cluster again
        for line in joined_on_the_device_plugin(self.plan, states, done):
            self.log(line)

    def to_undo(self, stage: str | None) -> list[str]:
        if stage is not None and stage not in self.plan.stage_names:
            raise InputError(f"the plan has no stage {stage!r}", f"stages: {', '.join(self.plan.stage_names)}")
        order = [p.id for p in planned_steps(self.plan) if stage is None or p.stage == stage]
        undoable = self.touched
        return [s for s in reversed(order) if s in undoable]

    def rollback_notice(self, steps: list[str]) -> str | None:
        """What `rollback` says before it asks (and before a dry run): the migrated nodes whose plugin switches
        it undoes, each drained again first. Pods placed there since hold the GPUs through DRA claims; left in
        place, the kubelet keeps their containers running but could not unprepare their claims once the DRA
        plugin is gone, and the device plugin would hand the same GPUs out again (execute/actions.py
        `_evict_before_switching_back`). None: no plugin switch to undo."""
        wanted = set(steps)
        nodes = sorted({p.node for p in planned_steps(self.plan)
                        if p.node and p.id in wanted and p.id.rpartition("/")[2] in PLUGIN_SWITCHES})  # fmt: skip
        if not nodes:
            return None
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        return (
            f"rollback drains {len(nodes)} migrated node(s) again before switching their plugins back ({shown}): "
            "their GPU pods, which hold the GPUs through DRA claims, are evicted (budgets honoured) and their "
            "controllers make them again; rollback --dry-run names the pods"
        )

    def dry_rollback(self, steps: list[str], opts: ApplyOptions) -> RunResult:
        """`rollback --dry-run`: every undo sent as a server-side dry run; no lock, no journal, as `dry_run`."""
        return self.runner(None).rollback(steps, dataclasses.replace(opts, dry_run=True))

    def rollback(self, steps: list[str], opts: ApplyOptions) -> RunResult:
        with (
            self._locked() as lock,
            self.store.open(str(self.plan.digest)) as journal,
            self._watching(),
        ):
            runner = self.runner(journal, guard=lock.check)
            lock.on_lost(runner.cancel.cancel)
            return runner.rollback(steps, opts)

    @contextlib.contextmanager
    def _watching(self) -> Iterator[None]:
        """The waits read watched copies of nodes, pods, slices and claims while the run lasts
        (execute/watched.py); ops without watches (the fakes) poll as before."""
        watch = getattr(self.ops, "watch", None)
        if watch is None:
            yield
            return
        watch()
        try:
            yield
        finally:
            self.ops.unwatch()  # type: ignore[attr-defined]

    def _locked(self) -> Any:
        """The cluster lock, taking over one left by a crashed run of this plan on this machine.
        Only a holder on this host whose process is gone, for the same plan, is taken over."""
        digest = str(self.plan.digest)
        if self.lock_api is not None:  # None: a lock that is not a Lease (tests)
            self._take_over_a_crashed_run(digest)
        probe = self.lock_factory(self.lock_api, namespace=self.lock_namespace, plan_digest=digest)
        probe.acquire()
        probe.release()
        return self.lock_factory(self.lock_api, namespace=self.lock_namespace, plan_digest=digest)

    def _take_over_a_crashed_run(self, digest: str) -> None:
        """Break the lock of this plan's run that crashed on this machine, at once: whether or not it looks
        expired, no wait makes it more certain that its process is gone (`ClusterLock.acquire` would watch
        an expired one for its duration, a holder elsewhere being unknowable)."""
        info = read_lock(self.lock_api, namespace=self.lock_namespace)
        if info is None or not info.holder or not crashed_here(info) or info.plan_digest != digest:
            return
        break_lock(self.lock_api, info.lock_id, namespace=self.lock_namespace, force=True)
        self.log(f"took over the lock of a crashed run ({info.holder})")


def crashed_here(info: LockInfo) -> bool:
    """The holder (`<user>@<host>/<pid>/<id>`) ran on this machine and its process no longer exists.

    This machine is the one the Lease's machine annotation names (`lock.machine_id`), not merely one of the
    same hostname: two laptops called `MacBook-Pro` applying one plan would each have taken the other's live
    lock for its own crashed run. A lock that does not name its machine is never taken over here: it expires."""
    if not info.machine or info.machine != machine_id():
        return False
    try:
        who, pid, _ = info.holder.rsplit("/", 2)
        host = who.split("@", 1)[1]
        if int(pid) == os.getpid():  # a container restarted in its pod: its process was PID 1 too, as we are
            return host == socket.gethostname() and info.lock_id not in HELD_HERE
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return host == socket.gethostname()
    except (ValueError, IndexError, PermissionError):
        return False
    return False


def _without_canaries(d: Any) -> Any:
    """Canary pods are ours (a crash can leave one behind; the node's next canary deletes it): not drift."""

    def canary(o: Any) -> bool:
        kind, name = (o["kind"], o["name"]) if isinstance(o, dict) else (o.kind, o.name)
        return bool(kind == "Pod" and str(name).startswith(CANARY_PREFIX))

    return dataclasses.replace(
        d,
        consumers_added=[c for c in d.consumers_added if not canary(c)],
        consumers_removed=[c for c in d.consumers_removed if not canary(c)],
        objects=[o for o in d.objects if not canary(o)],
    )


def new_pool_selectors(plan: Plan) -> list[dict[str, str]]:
    """The node labels of the pools a replace-pool plan brings up (its await-pool steps' selectors)."""
    return [
        {str(k): str(v) for k, v in (s.params.get("selector") or {}).items()}
        for stage in plan.stages
        if isinstance(stage, PrepareStage)
        for s in stage.steps
        if s.action == Action.AWAIT_POOL
    ]


def _without_new_pools(d: Any, plan: Plan, state: Any) -> Any:
    """The new pools' nodes are what a replace-pool plan asks the operator to create (before apply or during
    its await-pool step): nodes added there are the plan going as planned, not drift."""
    selectors = new_pool_selectors(plan)
    if not selectors:
        return d
    ours = set()
    for n in state.of("Node"):
        labels = (n.get("metadata") or {}).get("labels") or {}
        if any(all(labels.get(k) == v for k, v in sel.items()) for sel in selectors):
            ours.add(str((n.get("metadata") or {}).get("name")))
    return dataclasses.replace(
        d,
        nodes_added=[n for n in d.nodes_added if n["node"] not in ours],
        objects=[o for o in d.objects if not (o.kind == "Node" and o.change == "added" and o.name in ours)],
    )


def _without_left_out_pools(d: Any, plan: Plan, state: Any) -> Any:
    """Nodes of the pools the plan leaves out (`review.excludedPools`: not named by --pools, left out by
    --exclude-pools, already on DRA) are no step's: one an autoscaler added there, or whose labels or taints
    moved, changes nothing the plan does, and a partial plan on a fleet whose other pools scale was stale
    within minutes. Only nodes that are in such a pool now and that the plan does not list; a node removed
    (its pool unknown now) or added to a planned or new pool is still drift. `diff` reports them all."""
    from dra_migrate.inventory.fleet import node_pool

    review = plan.review if isinstance(plan.review, Mapping) else {}
    left_out = {str(x.get("pool")) for x in review.get("excludedPools") or [] if isinstance(x, dict)}
    if not left_out:
        return d
    labels = tuple(str(k) for k in plan.parameters.get("poolLabels") or [])
    planned = {e.node for _, _, e in plan.nodes()}
    theirs = {
        str((n.get("metadata") or {}).get("name")) for n in state.of("Node") if node_pool(n, labels) in left_out
    } - planned
    return dataclasses.replace(
        d,
        nodes_added=[n for n in d.nodes_added if n["node"] not in theirs],
        objects=[o for o in d.objects if not (o.kind == "Node" and o.change != "removed" and o.name in theirs)],
    )


def _drift_line(d: Any) -> str:
    summary = d.to_dict().get("summary") or {}
    parts = [f"{k}: {v}" for k, v in summary.items() if v and k not in ("statusOnly", "total")]
    first = next(iter(d.objects), None)
    named = f"; first: {first.change} {first.kind} {first.namespace}/{first.name}" if first else ""
    moved = next(iter(d.placement_changed), None)
    if moved is not None:  # a plugin DaemonSet is no fingerprint object: name it here
        named += f"; {_placement_line(moved)}"
    return (", ".join(parts[:4]) or "fingerprint mismatch") + named


def _placement_line(change: Mapping[str, Any]) -> str:
    """One plugin placement change on one node, as the staleness refusal names it."""

    def said(p: Mapping[str, Any]) -> str:
        ds = p.get("daemonSet") or "no DaemonSet"
        if p.get("mode") == "label":
            return f"label {p.get('label')}={p.get('value')} ({ds})"
        return f"{p.get('mode')} ({ds})"

    plugin = "the DRA plugin" if change.get("plugin") == "draPlugin" else "the device plugin"
    return (
        f"{plugin} on node {change.get('node')} was planned as {said(change.get('planned') or {})}, "
        f"now {said(change.get('now') or {})}"
    )
