"""The apply journal as the report shows it: each run and step start-to-end (`timeline`), and the final
verification (`verification`): the last run's result and, per planned node, whether it was verified.
Part of the report's model (report/model.py), which re-exports these."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dra_migrate.cluster.state import ClusterState
from dra_migrate.execute.actions import verifying_actions
from dra_migrate.execute.journal import DONE, FAILED, ROLLED_BACK, STARTED, Progress, Record, StepStatus
from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.inventory.platform import REPLACE_POOL
from dra_migrate.plan.model import Plan
from dra_migrate.plan.strategies import verifying_steps
from dra_migrate.secrets import scrub


@dataclass
class Run:
    phase: str
    started: str | None
    actor: str | None
    dry_run: bool = False
    ended: str | None = None
    result: str | None = None  # None: the run never ended (a crash, or still running)
    error: str | None = None


@dataclass
class Entry:
    step_id: str
    action: str | None
    target: str | None
    stage: str | None
    wave: str | None
    started: str | None
    actor: str | None
    ended: str | None = None
    result: str | None = None  # None: started, never ended
    error: str | None = None
    note: str | None = None  # an undo of a node deleted or replaced since: nothing was undone


@dataclass(frozen=True)
class Gate:
    time: str | None
    stage: str | None
    wave: str | None
    result: str | None
    pending: list[str]


@dataclass(frozen=True)
class Timeline:
    journal: str
    runs: list[Run]
    apply: list[Entry]
    rollback: list[Entry]
    gates: list[Gate]


@dataclass(frozen=True)
class NodeVerification:
    node: str
    stage: str
    wave: str
    wait_dra_ready: str
    canary: str


@dataclass(frozen=True)
class NodeSince:
    """A node the journal verified that the cluster read for the report no longer shows migrated."""

    node: str
    stage: str
    now: str  # what the read shows instead


@dataclass(frozen=True)
class Verification:
    last_run: Run | None
    verdict: str
    nodes: list[NodeVerification]
    # With a cluster read (--snapshot, --kubeconfig): the verified nodes that no longer hold the migration.
    # None: no cluster was read, so nothing is known of since.
    changed_since: list[NodeSince] | None = None


def timeline(records: list[Record], journal: str) -> Timeline:
    """Runs, and each step's start and end paired (apply and rollback apart), in journal order."""
    runs: list[Run] = []
    entries: dict[str, list[Entry]] = {"apply": [], "rollback": []}
    open_: dict[tuple[str, str], Entry] = {}
    gates: list[Gate] = []
    for r in records:
        event = r.get("event")
        phase = "rollback" if r.get("phase") == "rollback" else "apply"
        if event == "run-start":
            runs.append(Run(phase, r.get("time"), r.get("actor"), dry_run=bool(r.get("dryRun"))))
        elif event == "run-end":
            run = next((x for x in reversed(runs) if x.phase == phase and x.result is None), None)
            if run is None:  # its run-start is missing (a journal cut short at the front): keep the end
                run = Run(phase, None, r.get("actor"))
                runs.append(run)
            run.ended, run.result, run.error = r.get("time"), r.get("result"), scrub(r.get("error"))
        elif event == "gate":
            gates.append(
                Gate(r.get("time"), r.get("stage"), r.get("wave"), r.get("result"), list(r.get("pending") or []))
            )
        elif event in ("start", "end") and r.get("stepId"):
            step_id = str(r["stepId"])
            entry = open_.get((phase, step_id)) if event == "end" else None
            if entry is None:
                entry = Entry(
                    step_id,
                    r.get("action"),
                    r.get("target"),
                    r.get("stage"),
                    r.get("wave"),
                    r.get("time") if event == "start" else None,
                    r.get("actor"),
                )
                entries[phase].append(entry)
                if event == "start":
                    open_[(phase, step_id)] = entry
            if event == "end":
                open_.pop((phase, step_id), None)
                entry.ended, entry.result, entry.error = r.get("time"), r.get("result"), scrub(r.get("error"))
                gone = _node_gone(r) if phase == "rollback" else None
                if gone is not None and entry.result == "ok":
                    # Journaled ok with the node's fate as its state (execute/actions.py _not_the_planned_node):
                    # what the tool wrote went with the old Node object, and nothing was restored.
                    entry.result, entry.note = "skipped", f"nothing to undo: node {gone}"
    return Timeline(journal, runs, entries["apply"], entries["rollback"], gates)


def _node_gone(r: Record) -> str | None:
    """Why an undo found its node gone (deleted or replaced), from its end record's `{node: why}` state."""
    after = r.get("after")
    if isinstance(after, dict) and list(after) == ["node"] and isinstance(after["node"], str):
        return after["node"]
    return None


_NODE_STATE = {DONE: "ok", FAILED: "failed", STARTED: "interrupted", ROLLED_BACK: "rolled-back"}


def verification(plan: Plan, records: list[Record]) -> Verification:
    """The last run's result, and per planned node whether its DRA readiness and canary ended ok (and
    were not rolled back since)."""
    progress = Progress.from_records(records)
    last: Run | None = None
    for r in records:
        if r.get("event") == "run-start":
            last = Run("rollback" if r.get("phase") == "rollback" else "apply", r.get("time"), r.get("actor"))
            last.dry_run = bool(r.get("dryRun"))
        elif r.get("event") == "run-end" and last is not None:
            last.ended, last.result, last.error = r.get("time"), r.get("result"), scrub(r.get("error"))
    nodes = []
    for stage, wave, n in plan.nodes():
        found = [progress.steps.get(i) for i in verifying_steps(stage, n.node, verifying_actions())]
        states = [_node_state(s) for s in found]  # ready, canary
        if stage.strategy == REPLACE_POOL:
            # The new pool's proof verifies a replaced node only once the node itself is out of use: its own
            # steps (cordon, drain) done. Until then it is as its first unfinished step says (not-run, ...).
            own = [progress.steps.get(x.id) for x in stage.steps_for(n)]
            unfinished = [s for s in own if not _ok(s)]
            if unfinished:
                states = [_node_state(unfinished[0])] * 2
        nodes.append(NodeVerification(n.node, stage.name, wave.name, states[0], states[1]))
    return Verification(last, _verdict(last, nodes), nodes)


def _ok(s: StepStatus | None) -> bool:
    return s is not None and s.status == DONE and s.phase == "apply"


def _node_state(s: StepStatus | None) -> str:
    return _NODE_STATE.get(s.status, s.status) if s else "not-run"


def _verdict(last: Run | None, nodes: list[NodeVerification]) -> str:
    if last is None:
        return "not-run"
    if last.phase == "rollback":
        # Only a rollback that ended ok restored what it undid; one that failed or never ended left steps
        # half undone (the journal's rollback-incomplete), which `rollback` resumes.
        return {"ok": "rolled-back", None: "incomplete"}.get(last.result, "failed")
    if last.result == "failed" or any("failed" in (n.wait_dra_ready, n.canary) for n in nodes):
        return "failed"
    if last.result == "ok" and all(n.wait_dra_ready == n.canary == "ok" for n in nodes):
        return "verified"
    return "incomplete"


def with_cluster(v: Verification, plan: Plan, state: ClusterState, gpu_nodes: list[GpuNode]) -> Verification:
    """`v` with `changed_since` from the cluster as read now. A node verified at the time can be undone since
    without a step of ours: deleted, or replaced by its node group (a scale-up, repair or upgrade makes the new
    node from the group's template, which the in-place switch never changed: `in-place-pool-template`), its
    device plugin turned back on (the GPU Operator re-adds a missing `nvidia.com/gpu.deploy.*` label as
    "true": `dual-advertising`), its DRA plugin off, or its slices gone. The journal alone cannot see any of
    it; a report after the migration is where an operator looks. A replace-pool stage's nodes are retired,
    their pool's new nodes are not the plan's: not judged."""
    uids = plan.node_uids()
    nodes = {str((o.get("metadata") or {}).get("name")): o for o in state.of("Node")}
    gpus = {n.name: n for n in gpu_nodes}
    retired = {s.name for s in plan.pool_stages() if s.strategy == REPLACE_POOL}
    driver = str(plan.parameters.get("draDriver") or "gpu.nvidia.com")
    out = []
    for n in v.nodes:
        if n.stage in retired or not n.wait_dra_ready == n.canary == "ok":
            continue
        obj = nodes.get(n.node)
        if obj is None:
            out.append(NodeSince(n.node, n.stage, "deleted"))
            continue
        now = _not_migrated(gpus.get(n.node), driver)
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if uids.get(n.node) and uid != uids[n.node]:
            now = "replaced by a new node of the same name" + (f": {now}" if now else "")
        if now:
            out.append(NodeSince(n.node, n.stage, now))
    return replace(v, changed_since=out)


def _not_migrated(g: GpuNode | None, driver: str) -> str | None:
    if g is None:
        return "no longer read as a GPU node (no GPU labels, capacity or slices)"
    if g.device_plugin_enabled and g.dra_plugin_enabled:
        return "its device plugin is back beside the DRA plugin (dual-advertising)"
    if g.device_plugin_enabled:
        return "on the device plugin (its DRA plugin is off)"
    if not g.dra_plugin_enabled:
        return "its DRA plugin is off"
    if not g.dra_devices.get(driver):
        return f"it publishes no {driver} devices"
    return None
