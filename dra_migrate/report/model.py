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
    findings [{id, severity, message, objects [{kind, namespace, name}], remediation, scope: cluster|pool, pools}]
             (the plan's; with the cluster, then each blocker it shows now that the plan did not record, its
             message led by "Since planning (the cluster read for this report): "),
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
        entry: {stepId, action, target, stage, wave, started, ended, actor, result, error, note}
        (an undo whose node was deleted or replaced since: result skipped, note says why; nothing restored)
    verification {lastRun (a run) | null, verdict: verified|incomplete|failed|rolled-back|not-run,
                  nodes [{node, stage, wave, waitDraReady, canary}],
                  changedSince [{node, stage, now}] | null (verified nodes the cluster read no longer shows
                  migrated: deleted, replaced, device plugin back, DRA plugin off; null without a cluster)} | null
        node step states: ok | failed | interrupted | rolled-back | not-run
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from dra_migrate.checks.model import Severity, finding_json, objects_text
from dra_migrate.checks.run import Readiness
from dra_migrate.cluster.identity import cluster_object
from dra_migrate.execute.journal import Record
from dra_migrate.plan.actions import Action
from dra_migrate.plan.model import Plan, PrepareStage
from dra_migrate.plan.model import Stage as PlanStage
from dra_migrate.plan.scope import blockers_by_stage
from dra_migrate.plan.view import excluded_pools_json, plan_cluster
from dra_migrate.report.execution import (
    Entry,
    Gate,
    NodeVerification,
    Run,
    Timeline,
    Verification,
    timeline,
    verification,
    with_cluster,
)
from dra_migrate.secrets import scrub

__all__ = ["Entry", "Gate", "NodeVerification", "Run", "Timeline", "Verification", "scrub", "timeline", "verification"]

FORMAT_VERSION = 1
_FINDING_KEYS = ("id", "severity", "message", "objects", "remediation", "scope", "pools")  # what a report keeps
# Leads the message of a blocker the cluster read for the report shows and the plan did not record.
SINCE_PLANNING = "Since planning (the cluster read for this report): "


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
        findings=[finding_json({k: f[k] for k in _FINDING_KEYS if k in f}) for f in plan.findings]
        + (_blockers_since_planning(plan.findings, review, readiness) if readiness is not None else []),
        device_classes=_device_classes(plan),
        capacity=_capacity(readiness) if readiness is not None else planned,
        capacity_source=cluster["source"] if readiness is not None else ("plan" if planned is not None else None),
        capacity_changes=_capacity_changes(planned, _capacity(readiness)) if readiness and planned else None,
        excluded_pools=excluded_pools_json(review.get("excludedPools") or []),
        accepted_risks=[finding_json(a) for a in review.get("acceptedRisks") or []],
        strategies=[dict(x) for x in review.get("strategies") or [] if isinstance(x, dict)],
        summary=dict(plan.summary),
        stages=_stages(plan),
        diff=diff,
        timeline=timeline(records, journal) if journal is not None and records is not None else None,
        verification=_verified(plan, records, readiness),
        rehearsal=rehearsal,
    )


def _verified(plan: Plan, records: list[Record] | None, readiness: Readiness | None) -> Verification | None:
    if records is None:
        return None
    v = verification(plan, records)
    if readiness is None:
        return v
    return with_cluster(v, plan, readiness.inventory.state, readiness.inventory.nodes)


def _blockers_since_planning(
    planned: Sequence[Mapping[str, Any]], review: Mapping[str, Any], readiness: Readiness
) -> list[dict[str, Any]]:
    """Blockers the cluster read for this report shows that the plan neither recorded nor accepted, their message
    led by SINCE_PLANNING: what a report after `apply` must not hide, such as a migrated node whose device plugin
    came back beside the DRA plugin (`dual-advertising`). Warnings and infos stay `check`'s."""

    def key(f: Mapping[str, Any]) -> tuple[Any, ...]:
        return (f.get("id"), f.get("severity"), tuple(str(o) for o in objects_text(f.get("objects") or [])))

    known = {key(f) for f in planned} | {key(a) for a in review.get("acceptedRisks") or [] if isinstance(a, Mapping)}
    out = []
    for f in readiness.findings:
        record = {**f.to_dict(), **readiness.scope_of(f)}
        if f.severity is Severity.BLOCKER and key(record) not in known:
            out.append({**record, "message": SINCE_PLANNING + f.message})
    return out


def _inventory(r: Readiness) -> InventorySection:
    # Consumers per pool counted in one pass (a pool at a time over every consumer was pools x consumers).
    placed = Counter(pool for c in r.inventory.consumers for pool in set(c.pools))
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
                placed[p.name],
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


def _stages(plan: Plan) -> list[Stage]:
    blockers = blockers_by_stage(plan.findings)  # the findings read once, not once per stage
    return [_stage(s, blockers(s.pool)) for s in plan.stages]


def _stage(s: PlanStage, blocked_by: list[str]) -> Stage:
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
        blocked_by=blocked_by,
        applicable=not blocked_by,
    )
