"""The audit report of one plan: what a change review needs, as plain data (`Report.to_dict()`).

Built from what the other layers produced — the plan (fingerprint, findings, DeviceClasses, stages and
waves, and the capacity and inventory summary it recorded for review, so the plan alone is a complete
report), and when given: the cluster as read now (`Readiness`: every consumer, capacity before and after,
and what changed in capacity since planning), the identity that read it, an older plan (the semantic
diff) and the apply journal (timeline, verification). A section whose source was not given is None.

Nothing secret is copied in: consumers by kind, name, pools and GPU totals only (never pod specs, so no
container env values or args), the plan's DeviceClass manifests (which hold selectors, nothing else), and
journal records without their `before`/`after` object states; error messages pass through `scrub`, which
drops bearer tokens and JWTs should an API error ever quote one.

JSON (`-o json`), `formatVersion` 1; new keys may appear, an incompatible change bumps it:

    formatVersion, tool {name, version},
    cluster {name, kubernetesVersion, source: plan|snapshot|live, location, context, takenAt} (the cluster
             object of every command's JSON: name and version as the plan recorded them, the rest from the
             cluster read for this report, null from the plan alone),
    fingerprint {digest, objects [{kind, namespace, name, uid, content}]},
    identity {username, groups, via} | null (not recorded: only a live run asks the API server),
    plan {path, digest, edited, previousDigests, applicable, parameters},
    inventory {consumers [{kind, apiVersion, namespace, name, pools, totals, pods, source, templates}],
               pools [{name, nodes, allocatable, requested, consumers, draDevices}], source: plan|snapshot|live,
               consumerCount} | null (a plan made before `review` was recorded, and no cluster given),
    findings [{id, severity, message, objects [{kind, namespace, name}], remediation, scope: cluster|pool, pools}],
    deviceClasses [{name, resource, manifest}],
    capacity [{pool, resource, before, after, demand, fits, deviceClass, sharingReplicas, afterSource}] | null,
    capacitySource: plan (recorded at planning time) | snapshot | live | null,
    capacityChanges [{pool, resource, field, planned, now}] | null (since planning; needs the cluster),
    excludedPools [{pool, reason, findings}], strategies [{pool, strategy, platform, stackOwner, why, sources}],
    summary {pools, nodes, waves, evictedPods, estimatedDuration, ...},
    stages [{name, pool, resources, steps [{id, action, target, timeout, undo, params, restore}],
             waves [{name, nodes, evictedPods, soakAfter}], blockedBy, applicable}],
    diff (the `dra-migrate diff -o json` object) | null,
    timeline {journal, runs [{phase, started, ended, actor, result, error, dryRun}],
              apply [entry], rollback [entry], gates [{time, stage, wave, result, pending}]} | null,
        entry: {stepId, action, target, stage, wave, started, ended, actor, result, error}
    verification {lastRun (a run) | null, verdict: verified|incomplete|failed|rolled-back|not-run,
                  nodes [{node, stage, wave, waitDraReady, canary}]} | null
        node step states: ok | failed | interrupted | rolled-back | not-run
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from dra_migrate.checks.model import finding_json
from dra_migrate.checks.run import Readiness
from dra_migrate.cluster.identity import cluster_object
from dra_migrate.execute.actions import verifying_actions
from dra_migrate.execute.journal import DONE, FAILED, ROLLED_BACK, STARTED, Progress, Record, StepStatus
from dra_migrate.inventory.platform import REPLACE_POOL
from dra_migrate.plan.actions import Action
from dra_migrate.plan.model import Plan, PrepareStage
from dra_migrate.plan.model import Stage as PlanStage
from dra_migrate.plan.scope import stage_blockers
from dra_migrate.plan.strategies import verifying_steps
from dra_migrate.plan.view import excluded_pools_json, plan_cluster
from dra_migrate.secrets import scrub

FORMAT_VERSION = 1
_FINDING_KEYS = ("id", "severity", "message", "objects", "remediation", "scope", "pools")  # what a report keeps


@dataclass(frozen=True)
class FingerprintObject:
    kind: str
    namespace: str
    name: str
    uid: str
    content: str


@dataclass(frozen=True)
class Fingerprint:
    """What the plan depends on (the plan's `fingerprint`)."""

    digest: str | None
    objects: list[FingerprintObject]


@dataclass(frozen=True)
class Identity:
    username: str
    groups: list[str]
    via: str = "SelfSubjectReview"


@dataclass(frozen=True)
class PlanInfo:
    path: str
    digest: str | None
    edited: bool
    previous_digests: list[str]
    applicable: bool
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Consumer:
    kind: str
    api_version: str
    namespace: str
    name: str
    pools: list[str]
    totals: dict[str, int]
    pods: int
    source: str
    templates: list[dict[str, Any]] = field(default_factory=list)  # per pod, times replicas (inventory's form)


@dataclass(frozen=True)
class PoolSummary:
    name: str
    nodes: int
    allocatable: dict[str, int]
    requested: dict[str, int]
    consumers: int | None = None  # GPU consumers placed on the pool
    dra_devices: dict[str, int] | None = None  # devices already published through DRA (read now only)


@dataclass(frozen=True)
class InventorySection:
    consumers: list[Consumer]  # empty when read from the plan (it records counts, not workloads)
    pools: list[PoolSummary]
    source: str = "snapshot"  # "plan": as recorded at planning time; "snapshot" or "live": read now
    consumer_count: int = 0


@dataclass(frozen=True)
class DeviceClass:
    name: str
    resource: str | None
    manifest: dict[str, Any]


@dataclass(frozen=True)
class Capacity:
    pool: str
    resource: str
    before: int
    after: int | None
    demand: int
    fits: bool
    device_class: str | None
    sharing_replicas: int
    after_source: str


@dataclass(frozen=True)
class CapacityChange:
    """A capacity figure that moved between planning and now (`report PLAN --snapshot/--kubeconfig`)."""

    pool: str
    resource: str
    field: str  # before | after | demand | fits, or "pool" when the row appeared or went away
    planned: Any
    now: Any


@dataclass(frozen=True)
class StepInfo:
    id: str
    action: str
    target: str
    timeout: str
    undo: str | None
    params: dict[str, Any] = field(default_factory=dict)  # what the step sets (placeholders: per node)
    restore: dict[str, Any] = field(default_factory=dict)  # what its undo restores


@dataclass(frozen=True)
class Wave:
    name: str
    nodes: list[str]
    evicted_pods: int
    soak_after: str


@dataclass(frozen=True)
class Stage:
    name: str
    pool: str | None
    resources: list[str]
    steps: list[StepInfo]  # prepare: the steps; pool stage: the steps every node goes through
    waves: list[Wave]
    blocked_by: list[str] = field(default_factory=list)  # blockers that stop it (plan/scope.py)
    applicable: bool = True  # no blocker stops it: `apply --stage` may run it


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
class Verification:
    last_run: Run | None
    verdict: str
    nodes: list[NodeVerification]


@dataclass(frozen=True)
class Report:
    tool: dict[str, str]
    cluster: dict[str, Any]  # the cluster object (`cluster.state.cluster_object`)
    fingerprint: Fingerprint
    identity: Identity | None
    plan: PlanInfo
    inventory: InventorySection | None
    findings: list[dict[str, Any]]
    device_classes: list[DeviceClass]
    capacity: list[Capacity] | None
    summary: dict[str, Any]
    stages: list[Stage]
    capacity_source: str | None = None  # "plan" (recorded at planning time), "snapshot" or "live"
    capacity_changes: list[CapacityChange] | None = None  # since planning; None: nothing to compare
    excluded_pools: list[dict[str, Any]] = field(default_factory=list)  # left out of the plan, and why
    strategies: list[dict[str, Any]] = field(default_factory=list)  # per pool, and why (plan/strategies.py)
    diff: dict[str, Any] | None = None
    timeline: Timeline | None = None
    verification: Verification | None = None
    rehearsal: dict[str, Any] | None = None  # `rehearse -o json` of this plan (rehearse.model.load_rehearsal)
    accepted_risks: list[dict[str, Any]] = field(default_factory=list)  # the ignore file's (checks/ignore.py)
    format_version: int = field(default=FORMAT_VERSION)

    def to_dict(self) -> dict[str, Any]:
        out = _plain(self)
        return {"formatVersion": out.pop("formatVersion"), **out}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


_D = TypeVar("_D")


def unplain(cls: type[_D], doc: Mapping[str, Any]) -> _D:
    """A flat dataclass of this report back from its document (`_plain`'s inverse): the report's renderers
    read its sections typed, not by the document's keys."""
    return cls(**{f.name: doc[_camel(f.name)] for f in fields(cls)})  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    """Dataclasses to dicts with camelCase keys; the keys of plain dicts (resource names, the plan's
    own sections) are data and stay as they are."""
    if is_dataclass(value) and not isinstance(value, type):
        return {_camel(f.name): _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


# --- building ---------------------------------------------------------------------------------------


def build_report(
    plan: Plan,
    *,
    plan_path: str,
    readiness: Readiness | None = None,
    identity: Identity | None = None,
    diff: dict[str, Any] | None = None,
    journal: str | None = None,
    records: list[Record] | None = None,
    rehearsal: dict[str, Any] | None = None,
    tool_version: str,
) -> Report:
    """The report of `plan`; `readiness` from the cluster as read now, `records` from `journal`."""
    fp = plan.fingerprint
    cluster = plan_cluster(plan)  # the plan alone: its name and server version
    if readiness is not None:  # and where the cluster read for this report came from
        src = readiness.inventory.state.source
        cluster = cluster_object(cluster["name"], cluster["kubernetesVersion"], src.kind, src.location, src.context,
                                 src.taken_at)  # fmt: skip
    edited = plan.edited or {}
    # What the plan recorded for review at planning time (plans made before it have no `review`).
    review: dict[str, Any] = plan.review or {}
    planned = _recorded_capacity(review)
    return Report(
        tool={"name": "dra-migrate", "version": tool_version},
        cluster=cluster,
        fingerprint=Fingerprint(
            digest=fp.get("digest"),
            objects=[
                FingerprintObject(
                    str(o.get("kind")),
                    str(o.get("namespace") or ""),
                    str(o.get("name")),
                    str(o.get("uid")),
                    str(o.get("content")),
                )
                for o in fp.get("objects") or []
            ],
        ),
        identity=identity,
        plan=PlanInfo(
            path=plan_path,
            digest=plan.digest,
            edited=bool(plan.edited),
            previous_digests=[str(d) for d in edited.get("previousDigests") or []],
            applicable=plan.applicable,
            parameters=dict(plan.parameters),
        ),
        inventory=_inventory(readiness) if readiness is not None else _planned_inventory(review),
        findings=[finding_json({k: f[k] for k in _FINDING_KEYS if k in f}) for f in plan.findings],
        device_classes=_device_classes(plan),
        capacity=_capacity(readiness) if readiness is not None else planned,
        capacity_source=cluster["source"] if readiness is not None else ("plan" if planned is not None else None),
        capacity_changes=_capacity_changes(planned, _capacity(readiness)) if readiness and planned else None,
        excluded_pools=excluded_pools_json(review.get("excludedPools") or []),
        accepted_risks=[finding_json(a) for a in review.get("acceptedRisks") or []],
        strategies=[dict(x) for x in review.get("strategies") or [] if isinstance(x, dict)],
        summary=dict(plan.summary),
        stages=[_stage(s, plan.findings) for s in plan.stages],
        diff=diff,
        timeline=timeline(records, journal) if journal is not None and records is not None else None,
        verification=verification(plan, records) if records is not None else None,
        rehearsal=rehearsal,
    )


def _inventory(r: Readiness) -> InventorySection:
    return InventorySection(
        consumers=[
            Consumer(
                c.kind,
                c.api_version,
                c.namespace,
                c.name,
                sorted(c.pools),
                dict(sorted(c.totals.items())),
                c.pods,
                c.source,
                [t.to_dict() for t in c.templates],
            )
            for c in r.inventory.consumers
        ],
        pools=[
            PoolSummary(
                p.name,
                len(p.nodes),
                dict(sorted(p.allocatable.items())),
                dict(sorted(p.requested.items())),
                sum(1 for c in r.inventory.consumers if p.name in c.pools),
                dict(sorted(p.dra_devices.items())),
            )
            for p in r.inventory.pools
        ],
        source=r.inventory.state.source.kind,
        consumer_count=len(r.inventory.consumers),
    )


def _planned_inventory(review: dict[str, Any]) -> InventorySection | None:
    inv = review.get("inventory")
    if not isinstance(inv, dict):
        return None
    return InventorySection(
        consumers=[],
        pools=[
            PoolSummary(
                str(p.get("name")),
                int(p.get("nodes") or 0),
                dict(p.get("allocatable") or {}),
                dict(p.get("requested") or {}),
                int(p.get("consumers") or 0),
            )
            for p in inv.get("pools") or []
        ],
        source="plan",
        consumer_count=int(inv.get("consumers") or 0),
    )


def _recorded_capacity(review: dict[str, Any]) -> list[Capacity] | None:
    rows = review.get("capacity")
    if not isinstance(rows, list):
        return None
    return [
        Capacity(
            str(c.get("pool")),
            str(c.get("resource")),
            int(c.get("before") or 0),
            None if c.get("after") is None else int(c["after"]),
            int(c.get("demand") or 0),
            bool(c.get("fits")),
            c.get("deviceClass"),
            int(c.get("sharingReplicas") or 1),
            str(c.get("afterSource") or ""),
        )
        for c in rows
        if isinstance(c, dict)
    ]


def _capacity_changes(planned: list[Capacity], now: list[Capacity]) -> list[CapacityChange]:
    """Per pool and resource, each figure that differs between the plan's record and the cluster now."""
    was = {(c.pool, c.resource): c for c in planned}
    is_ = {(c.pool, c.resource): c for c in now}
    out = []
    for key in sorted(set(was) | set(is_)):
        a, b = was.get(key), is_.get(key)
        if a is None or b is None:
            out.append(CapacityChange(key[0], key[1], "pool", "planned" if a else "-", "present" if b else "gone"))
            continue
        for name in ("before", "after", "demand", "fits"):
            if getattr(a, name) != getattr(b, name):
                out.append(CapacityChange(key[0], key[1], name, getattr(a, name), getattr(b, name)))
    return out


def _capacity(r: Readiness) -> list[Capacity]:
    return [
        Capacity(
            c.pool,
            c.resource,
            c.before,
            c.after,
            c.demand,
            c.fits,
            c.device_class,
            c.replicas,
            c.after_source,
        )
        for c in r.capacity
    ]


def _device_classes(plan: Plan) -> list[DeviceClass]:
    out = []
    for stage in plan.stages:
        for step in stage.steps if isinstance(stage, PrepareStage) else ():
            manifest = step.params.get("manifest")
            if step.action == Action.CREATE_DEVICECLASS and isinstance(manifest, dict):
                meta = manifest.get("metadata") or {}
                spec = manifest.get("spec") or {}
                out.append(DeviceClass(str(meta.get("name")), spec.get("extendedResourceName"), manifest))
    return out


def _stage(s: PlanStage, findings: Sequence[Mapping[str, Any]]) -> Stage:
    return Stage(
        name=s.name,
        pool=s.pool,
        resources=list(s.resources),
        steps=[
            StepInfo(
                x.id,
                str(x.action),
                x.target,
                x.timeout,
                str(x.inverse.action) if x.inverse else None,
                # The manifest is shown whole under DeviceClasses; here, what the step sets.
                {k: v for k, v in x.params.items() if k != "manifest"},
                dict(x.inverse.restore) if x.inverse else {},
            )
            for x in s.steps
        ],
        waves=[Wave(w.name, [n.node for n in w.nodes], w.evicted_pods, w.soak_after) for w in s.waves],
        blocked_by=stage_blockers(findings, s.pool),
        applicable=not stage_blockers(findings, s.pool),
    )


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
    return Timeline(journal, runs, entries["apply"], entries["rollback"], gates)


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
