"""What the runner checks of a wave's pool before the wave's first step, from the executor's watched copy:
someone else's cordon on a node of the wave (`someone_elses_cordon`), a node that does not hold the values its
inverses restore (the same check's `_restores_differ`), and the pool's disruption budget: the wave
and the pool's nodes already out within maxUnavailable (`before_wave`).

The plan cuts a pool into waves of at most `maxUnavailable` nodes (plan/build.py, plan/consistency.py
`_wave_sizes`), but that bounds only what the migration takes out. An apply runs for hours: a node of the pool
that goes NotReady, is cordoned by someone else or is being deleted meanwhile is out as well, and a wave on top
of it took the pool past its budget (a pool of 10, budget 2, 2 nodes NotReady: 4 out). The budgets the cluster
already knows count what is out whoever took it out:
- a PodDisruptionBudget counts only Ready pods not being deleted as healthy, and allows
  `currentHealthy - desiredHealthy` more disruptions (k8s.io/kubernetes@v1.37.2
  pkg/controller/disruption/disruption.go `countHealthyPods`, `disruptionsAllowed := currentHealthy -
  desiredHealthy`), so an unhealthy pod uses up the budget as an evicted one does;
- Karpenter counts a NodePool's nodes whose Ready condition is not True or that are marked for deletion as
  disrupting, and allows the budget less those (sigs.k8s.io/karpenter@v1.8.0
  pkg/controllers/disruption/helpers.go `BuildDisruptionBudgetMapping`).
(`kubectl drain` has no budget of its own: it is told which node.)

So before a wave the runner counts the pool's other nodes that are out now (not Ready, cordoned since the
plan, being deleted) and that this migration did not take out (the nodes the journal shows it touched, and the ones this
run touched: its own disruption, inside the waves it ran). When those and the wave's nodes exceed the pool's
budget, it waits for them to come back, up to `BUDGET_WAIT_S`, and otherwise stops before the wave.

The pool's nodes are the ones the plan lists for it (every stage of that pool), and the nodes that joined it
since the plan (a scale-up, a replacement: a node now in the pool, by the plan's pool labels (`pool_of`), that
the plan's fingerprint does not record with that uid): Karpenter counts every initialized node of the NodePool,
a PodDisruptionBudget every pod it selects, not the ones someone listed. A joined node still coming up is not
counted: one Karpenter launched that it has not initialized (`karpenter.sh/initialized`; Karpenter skips
`!node.Initialized()` nodes, the same function, and pkg/controllers/state/statenode.go `Initialized`), or one
whose kubelet has posted no Ready condition yet. The budget itself is the plan's, from
`parameters.maxUnavailable` over the plan's count, as the plan sized the waves (a scale-up does not widen it).
Nodes of the pool the fingerprint records that the plan does not list (already on DRA, left out) are not read:
one may have been out when the plan was made, for the reason it was left out. A node that no longer exists is
not counted: the pool is smaller, and the node's own wave meets it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import cast

from dra_migrate.errors import InputError, MigrateError
from dra_migrate.execute.contract import Cancel, Clock, Ops, is_transient
from dra_migrate.execute.lifecycle import gone_from_wave
from dra_migrate.execute.units import Unit
from dra_migrate.inventory.fleet import pool_of
from dra_migrate.inventory.operator_activity import operator_busy
from dra_migrate.plan.model import Action, Plan
from dra_migrate.plan.params import PlanParams


def someone_elses_cordon(
    ops: Ops, unit: Unit, done: Collection[str], touched_nodes: Collection[str], uids: Mapping[str, str] | None = None
) -> str | None:
    """The failure when a node of the wave is gone or replaced since the plan (execute/lifecycle.py
    `gone_from_wave`, with `uids`, the plan's recorded uids), when a node of the wave the plan recorded
    schedulable was cordoned since by someone else (a GPU fault, maintenance, a remediation), or when it does
    not hold the values its inverses restore (`_restores_differ`), else None. Its uncordon step sets the value
    the plan recorded, and its rollback the same: either would put back into service a node its owner took out.
    The run's start refuses nodes cordoned before it began (drift); this covers the hours a run lasts. A node
    the journal shows this migration touched before may hold its own cordon (written before a crash could
    record it): not judged."""
    seen: dict[str, Mapping[str, object]] = {}  # each node read once for both checks
    gone = gone_from_wave(ops, unit, done, uids, seen) if uids is not None else None
    if gone is not None:
        return gone
    for ps in unit.steps:
        if ps.step.action != Action.CORDON or ps.id in done or ps.node is None or ps.node in touched_nodes:
            continue
        planned = (ps.step.inverse.restore if ps.step.inverse else {}).get("unschedulable")
        try:
            state = seen.get(ps.node) or ops.node_state(ps.node, watched=True)  # the watched copy: no GET per node
        except MigrateError:
            continue  # unreadable now: the node's own steps meet it and say why
        if planned is False and state.get("exists") and state.get("unschedulable"):
            return (
                f"node {ps.node} was cordoned since the plan, by someone else: migrating it would uncordon it "
                "(nothing of the wave was touched; if the cordon is not needed, uncordon the node and resume "
                "with apply; if it is, leave its pool out: plan --exclude-pools, or wait for its owner)"
            )
        differ = _restores_differ(ps.node, state, unit) if state.get("exists") else None
        if differ is not None:
            return differ
    return None


def _restores_differ(node: str, state: Mapping[str, object], unit: Unit) -> str | None:
    """The failure when a node, untouched so far, does not hold the values its inverses restore (the plan's
    recorded `original` labels and cordon), else None. Rollback and the uncordon step write those values back: a
    record edited by hand (`plan --rebase` without `--against` cannot compare it) or a node changed since the run
    began would have rollback switch the device plugin off, or leave the node cordoned. The run's start refuses
    drift from the fingerprint; this compares the values themselves, before any of the wave's steps."""
    labels = state.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    if operator_busy(labels):
        return None  # the GPU Operator paused its labels for a while: the node's first step refuses it, saying so
    for ps in unit.steps:
        inverse = ps.step.inverse
        if ps.node != node or inverse is None:
            continue
        if ps.step.action == Action.SET_LABEL and "key" in inverse.restore:
            key, want = inverse.restore["key"], inverse.restore.get("value")
            if labels.get(key) != want:
                return (
                    f"node {node}: label {key} is {_shown(labels.get(key))}, but the plan records {_shown(want)} as "
                    "its original, which rollback would restore (nothing of the wave was touched; the plan's record "
                    "was edited or the node changed: make a new plan)"
                )
        recorded_cordon = ps.step.action == Action.CORDON and inverse.restore.get("unschedulable") is True
        if recorded_cordon and not state.get("unschedulable"):
            return (
                f"node {node} is schedulable, but the plan records it cordoned, which the uncordon step and "
                "rollback would restore (nothing of the wave was touched; the plan's record was edited or the "
                "node changed: make a new plan)"
            )
    return None


def _shown(value: object) -> str:
    return "absent" if value is None else repr(value)


# How long a wave waits for the pool's other nodes to come back before apply stops (documented in
# docs/apply.md): long enough for a kubelet restart or a node reboot, short enough that a node down for good
# stops the run in minutes. The watched copy is re-read every BUDGET_POLL_S (no request to the API server).
BUDGET_WAIT_S = 600.0
BUDGET_POLL_S = 10.0
_TELL_EVERY_S = 60.0


@dataclass(frozen=True)
class PoolBudget:
    pool: str
    max_unavailable: str  # the plan's parameter, as written ("2", "10%")
    limit: int  # nodes of the pool out at once
    members: tuple[str, ...]  # the pool's nodes the plan lists, in plan order
    # Nodes the plan recorded cordoned: out before the migration began, and reviewed so. Not counted as out for
    # their cordon (it is no one's action during the run): a pool of 100 with one node cordoned for a GPU fault
    # would otherwise hold every wave of 10 for the whole wait and stop. Karpenter, too, counts a cordoned node
    # only when it is also NotReady or deleting (`BuildDisruptionBudgetMapping`); NotReady still counts here.
    cordoned_at_plan: frozenset[str] = frozenset()
    pool_labels: tuple[str, ...] = ()  # the plan's --pool-label keys (`pool_of`)
    recorded: frozenset[tuple[str, str]] = frozenset()  # (node, uid) of every GPU node the plan's fingerprint read


# Karpenter's label on a node it has initialized (sigs.k8s.io/karpenter@v1.8.0 pkg/apis/v1/labels.go
# `NodeInitializedLabelKey`), on the nodes of a NodePool (`karpenter.sh/nodepool`).
KARPENTER_INITIALIZED = "karpenter.sh/initialized"
KARPENTER_NODEPOOL = "karpenter.sh/nodepool"


def pool_budgets(plan: Plan) -> dict[str, PoolBudget]:
    """Each pool stage's name -> its pool's budget (a pool may have several stages: one per switch group, or a
    replace-pool's). None for a plan whose maxUnavailable does not parse (the plan's own checks refuse it; no
    budget is enforced rather than a guessed one)."""
    members: dict[str, list[str]] = {}
    cordoned: set[str] = set()
    for stage, _wave, entry in plan.nodes():
        members.setdefault(stage.pool, []).append(entry.node)
        if entry.original.get("unschedulable") is True:
            cordoned.add(entry.node)
    text = str(plan.parameters.get("maxUnavailable", PlanParams.max_unavailable))
    labels = tuple(str(k) for k in plan.parameters.get("poolLabels") or [])
    recorded = frozenset(plan.node_uids().items())
    out = {}
    for pool, nodes in members.items():
        try:
            limit = PlanParams(max_unavailable=text).wave_size(len(nodes))
        except InputError:
            continue
        at_plan = frozenset(cordoned.intersection(nodes))
        out[pool] = PoolBudget(pool, text, limit, tuple(nodes), at_plan, labels, recorded)
    return {stage.name: out[stage.pool] for stage in plan.pool_stages() if stage.pool in out}


def out_of_service(state: Mapping[str, object]) -> str | None:
    """Why a node (`Ops.node_state`) is out of service, or None. Not Ready as Karpenter counts it (a Ready
    condition that is not True, or none), cordoned, or being deleted; a node that is gone is not counted."""
    if not state.get("exists"):
        return None
    if state.get("deleting"):
        return "being deleted"
    if state.get("ready") is False:
        posted = state.get("notReady")
        return f"NotReady (Ready={posted})" if posted else "NotReady (no Ready condition)"
    if state.get("unschedulable"):
        return "cordoned"
    return None


Read = Callable[[str], Mapping[str, object]]
ReadAll = Callable[[], Mapping[str, Mapping[str, object]]]
JOINED = "joined the pool since the plan"
_ALL = "\0every node"  # a dry run's memo: the one list of every node, beside its reads of one node


def joined_out(budget: PoolBudget, states: Mapping[str, Mapping[str, object]]) -> dict[str, str]:
    """The nodes of `states` (`Ops.node_states`) that joined the pool since the plan and are out: node -> why.
    A node still coming up (Karpenter's, not initialized; no Ready condition posted yet) is not counted."""
    members = set(budget.members)
    out = {}
    for node, state in states.items():
        if node in members or (node, str(state.get("uid", ""))) in budget.recorded:
            continue  # a node recorded with another uid was replaced since the plan: it joined too
        labels = state.get("labels")
        labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
        if pool_of(labels, budget.pool_labels, state.get("annotations")) != budget.pool:
            continue
        if KARPENTER_NODEPOOL in labels and labels.get(KARPENTER_INITIALIZED) != "true":
            continue
        if state.get("ready") is False and not state.get("notReady") and not state.get("deleting"):
            continue  # no kubelet has reported yet
        why = out_of_service(state)
        if why is not None:
            out[node] = f"{why}, {JOINED}"
    return out


def others_out(
    read: Read, budget: PoolBudget, wave: Collection[str], ours: Collection[str], read_all: ReadAll | None = None
) -> dict[str, str]:
    """The pool's nodes outside the wave, not taken out by this migration, that are out now: node -> why.
    `read`: a node's state (`Ops.node_state` on the watched copy); a node that cannot be read is not counted.
    `read_all`: every node's (`Ops.node_states`), for the nodes that joined the pool since the plan."""
    out = {}
    for node in budget.members:
        if node in wave or node in ours:
            continue
        try:
            why = out_of_service(read(node))
        except MigrateError:
            continue
        if why is not None and not (why == "cordoned" and node in budget.cordoned_at_plan):
            out[node] = why
    if read_all is not None:
        try:
            joined = joined_out(budget, read_all())
        except MigrateError:
            joined = {}  # unreadable now: the members are still counted
        out.update((n, why) for n, why in joined.items() if n not in ours)
    return out


def over_budget(
    read: Read, budget: PoolBudget, wave: Collection[str], ours: Collection[str], read_all: ReadAll | None = None
) -> dict[str, str]:
    """`others_out` when they and the wave exceed the budget, else {}."""
    out = others_out(read, budget, wave, ours, read_all)
    return out if out and len(out) + len(wave) > budget.limit else {}


def describe(budget: PoolBudget, wave: Collection[str], out: Mapping[str, str]) -> str:
    names = ", ".join(f"{n} ({why})" for n, why in list(out.items())[:10])
    more = f" and {len(out) - 10} more" if len(out) > 10 else ""
    return (
        f"{len(out)} other node(s) of pool {budget.pool} are out of service, not by this migration: {names}{more}; "
        f"with the wave's {len(wave)} that is {len(out) + len(wave)}, more than maxUnavailable "
        f"{budget.max_unavailable} allows ({budget.limit} of the plan's {len(budget.members)})"
    )


def wait_within_budget(
    ops: Ops,
    clock: Clock,
    cancel: Cancel,
    budget: PoolBudget,
    wave: Collection[str],
    ours: Callable[[], Collection[str]],
    log: Callable[[str], None],
    where: str,
    wait_s: float = BUDGET_WAIT_S,
) -> dict[str, str]:
    """Wait until the pool's other out-of-service nodes and the wave fit the budget: {} when they do, else what
    is still out after `wait_s`. Progress on `log`: when the wait begins, when what is out changes, and every
    minute. Raises what `cancel` raises when the run is stopped meanwhile (Cancelled, LockLost)."""

    def read(node: str) -> Mapping[str, object]:
        return ops.node_state(node, watched=True)  # the watched copy: no GET per node and poll

    def read_all() -> Mapping[str, Mapping[str, object]]:
        return ops.node_states(watched=True)

    out = over_budget(read, budget, wave, ours(), read_all)
    if not out:
        return {}
    start = clock.monotonic()
    log(f"{where}: waiting up to {wait_s:.0f}s before the wave: {describe(budget, wave, out)}")
    told, told_at = out, start
    while clock.monotonic() - start < wait_s:
        clock.sleep(min(BUDGET_POLL_S, wait_s - (clock.monotonic() - start)), cancel)
        out = over_budget(read, budget, wave, ours(), read_all)
        if not out:
            log(f"{where}: the pool is within its budget again after {clock.monotonic() - start:.0f}s")
            return {}
        now = clock.monotonic()
        left = wait_s - (now - start)
        if left > 0 and (out != told or now - told_at >= _TELL_EVERY_S):
            log(f"{where}: still waiting ({left:.0f}s left): {', '.join(f'{n} ({w})' for n, w in out.items())}")
            told, told_at = out, now
    return out


def before_wave(
    ops: Ops,
    clock: Clock,
    cancel: Cancel,
    budget: PoolBudget,
    wave: Collection[str],
    ours: Callable[[], Collection[str]],
    log: Callable[[str], None],
    where: str,
    *,
    dry_run: bool,
    wait_s: float,
    seen: dict[str, Mapping[str, object]] | None = None,
) -> tuple[str, str] | None:
    """None when the wave may start; else (outcome, failure): "failed" after the wait, "stopped" when the run
    was stopped during it (the lock lost: resume later). A dry run does not wait: it tells what apply would wait
    for, and goes on; it reads each node once into `seen` (it has no watches, and changes no node: a GET per pool
    node per wave would be a pool's square)."""
    if dry_run:
        memo = seen if seen is not None else {}

        def once(node: str) -> Mapping[str, object]:
            if node not in memo:
                memo[node] = ops.node_state(node, watched=True)
            return memo[node]

        def every() -> Mapping[str, Mapping[str, object]]:
            if _ALL not in memo:  # one list for the whole dry run
                memo[_ALL] = ops.node_states(watched=True)
            return cast(Mapping[str, Mapping[str, object]], memo[_ALL])

        out = over_budget(once, budget, wave, ours(), every)
        if out:
            log(f"{where}: apply would wait up to {wait_s:.0f}s before the wave, then stop: "
                f"{describe(budget, wave, out)}")  # fmt: skip
        return None
    try:
        out = wait_within_budget(ops, clock, cancel, budget, wave, ours, log, where, wait_s)
    except MigrateError as e:  # the lock lost, the run cancelled: stop, resume later
        if not is_transient(e):
            raise
        return "stopped", f"{where}: waiting for the pool's budget: {e} (nothing of the wave was touched)"
    if not out:
        return None
    return "failed", (
        f"{where}: {describe(budget, wave, out)}, still after {wait_s:.0f}s (nothing of the wave was touched; bring "
        "those nodes back (repair, uncordon) or let their owner finish, then resume with apply; to take the "
        "pool further down on purpose, plan again with a larger --max-unavailable)"
    )
