"""Drift: has the cluster changed since the plan was made, in a way that makes the plan wrong?

The plan's fingerprint is recomputed from the cluster as it is now (`fingerprint.dependencies`, with
the plan's own pool labels) and compared object by object: a changed uid is an object replaced, a
missing one removed, a changed content hash a change the plan depends on. A resourceVersion that moved
while uid and content stayed is reported as "status only" and is not drift: a Node's moves with every
heartbeat, a Deployment's with every pod restart (see `fingerprint`'s docstring).

On top of that comparison, what a reviewer needs named: GPU nodes added or removed (or moved to
another pool), the planned nodes' original values that the inverses would restore (the labels the plan
switches, whether the node was cordoned), what switching each plugin means on each planned node now
(the placement the plan recorded from the plugins' DaemonSets: a DRA DaemonSet removed, or upgraded to
select on another label, leaves the plan's label switch starting nothing), consumers whose specs
changed (their GPU requests or replicas; the plan holds only their content hash, so the current figures
are shown) or that are new, and the server version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.identity import refuse_other_cluster
from dra_migrate.cluster.state import ClusterState, source_cluster
from dra_migrate.errors import InputError
from dra_migrate.plan.fingerprint import dependencies, earlier_contents, identity
from dra_migrate.plan.model import Plan, plan_identity
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.placement import placement_record
from dra_migrate.plan.view import plan_cluster

FORMAT_VERSION = 1

# Fingerprint kinds that are not GPU consumers (every other kind in a fingerprint is one), by (kind, group):
# a CRD's kind may be spelt like one of these in another group and still be a consumer.
_NOT_CONSUMERS = frozenset(
    {("Node", ""), ("ConfigMap", ""), ("DeviceClass", "resource.k8s.io"), ("ClusterPolicy", "nvidia.com"),
     ("NVIDIADriver", "nvidia.com"), ("GPUCluster", "nvidia.com"), ("PodDisruptionBudget", "policy")}
)  # fmt: skip

Key = tuple[str, str, str, str]  # kind, API group ("" for core), namespace, name


@dataclass(frozen=True)
class ObjectChange:
    """A fingerprint object that differs: replaced (uid), removed, added, changed (content) or status only."""

    kind: str
    namespace: str
    name: str
    change: str
    planned: dict[str, str] | None  # {uid, resourceVersion, content} at planning time
    now: dict[str, str] | None
    group: str = ""  # the API group ("" for the core group): Job of batch and Job of batch.volcano.sh differ

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "group": self.group,
            "namespace": self.namespace,
            "name": self.name,
            "change": self.change,
            "planned": self.planned,
            "now": self.now,
        }


@dataclass
class Drift:
    plan: dict[str, Any]  # {"cluster" (as the plan recorded it: `view.plan_cluster`), "digest"}
    cluster: dict[str, Any] = field(default_factory=dict)  # the cluster read now (`cluster.state.source_cluster`)
    server_version: dict[str, str | None] | None = None  # {planned, now} when it changed
    nodes_added: list[dict[str, Any]] = field(default_factory=list)  # {node, pool}
    nodes_removed: list[dict[str, Any]] = field(default_factory=list)  # {node, pool, stage, wave, reason}
    nodes_moved: list[dict[str, Any]] = field(default_factory=list)  # {node, planned, now}: pools
    labels_changed: list[dict[str, Any]] = field(default_factory=list)  # {node, key, planned, now}
    unschedulable_changed: list[dict[str, Any]] = field(default_factory=list)  # {node, planned, now}
    placement_changed: list[dict[str, Any]] = field(default_factory=list)  # {node, plugin, planned, now}
    consumers_added: list[dict[str, Any]] = field(default_factory=list)  # {kind, namespace, name, gpu}
    consumers_removed: list[dict[str, Any]] = field(default_factory=list)
    consumers_changed: list[dict[str, Any]] = field(default_factory=list)  # ... plus change: changed|replaced
    objects: list[ObjectChange] = field(default_factory=list)  # every fingerprint mismatch
    status_only: list[ObjectChange] = field(default_factory=list)  # resourceVersion moved: not drift

    @property
    def holds(self) -> bool:
        return not self.counts()["total"]

    def counts(self) -> dict[str, int]:
        c = {
            "serverVersion": 1 if self.server_version else 0,
            "nodesAdded": len(self.nodes_added),
            "nodesRemoved": len(self.nodes_removed),
            "nodesMoved": len(self.nodes_moved),
            "labelsChanged": len(self.labels_changed),
            "unschedulableChanged": len(self.unschedulable_changed),
            "placementChanged": len(self.placement_changed),
            "consumersAdded": len(self.consumers_added),
            "consumersRemoved": len(self.consumers_removed),
            "consumersChanged": len(self.consumers_changed),
            "objects": len(self.objects),
        }
        return {**c, "total": sum(c.values())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "cluster": self.cluster,
            "plan": self.plan,
            "holds": self.holds,
            "summary": {**self.counts(), "statusOnly": len(self.status_only)},
            "serverVersion": self.server_version,
            "nodes": {"added": self.nodes_added, "removed": self.nodes_removed, "moved": self.nodes_moved},
            "labelsChanged": self.labels_changed,
            "unschedulableChanged": self.unschedulable_changed,
            "placementChanged": self.placement_changed,
            "consumers": {
                "added": self.consumers_added,
                "removed": self.consumers_removed,
                "changed": self.consumers_changed,
            },
            "objects": [o.to_dict() for o in self.objects],
            "statusOnly": [o.to_dict() for o in self.status_only],
        }


def drift(plan: Mapping[str, Any] | Plan, state: ClusterState, *, allow_other_cluster: bool = False) -> Drift:
    """Compare a plan (typed, or as `io.load` returns it: read by the codec) with the cluster state now.
    Another cluster than the plan's is refused, not reported as drift (everything would differ, and
    nothing would have drifted)."""
    plan = plan if isinstance(plan, Plan) else Plan.from_dict(plan)
    refuse_other_cluster(
        plan_identity(plan), "the plan", state.source.identity, "the cluster read", allow=allow_other_cluster
    )
    # Imported here: the checks pull in the CEL engine, needed only once a cluster state was read.
    from dra_migrate.checks.run import assess

    params = plan.parameters
    readiness = assess(
        state,
        pool_labels=tuple(str(k) for k in params.get("poolLabels") or []),
        dra_driver=str(params.get("draDriver") or "gpu.nvidia.com"),
    )
    fingerprint = plan.fingerprint
    planned = {_key(o): o for o in fingerprint.get("objects") or []}
    now = {_key(o): o for o in dependencies(state, readiness)}
    _as_recorded(planned, now, state)
    _redaction_only(planned, now, lambda: dependencies(state, readiness, redacted=True))
    out = Drift(plan={"cluster": plan_cluster(plan), "digest": plan.digest}, cluster=source_cluster(state.source))

    planned_version, now_version = fingerprint.get("kubernetesVersion"), state.source.kubernetes_version
    if planned_version != now_version:
        out.server_version = {"planned": planned_version, "now": now_version}

    _objects(planned, now, out)

    gpu_nodes = {n.name: n for n in readiness.inventory.nodes}
    nodes = {str((n.get("metadata") or {}).get("name")): n for n in state.of("Node")}
    entries = {entry.node: (stage, wave, entry) for stage, wave, entry in plan.nodes()}  # in plan order
    plan_params = _params(params)
    known = set(entries) | {k[3] for k in planned if k[:2] == ("Node", "")}
    out.nodes_added = [{"node": n, "pool": gpu_nodes[n].pool} for n in sorted(gpu_nodes) if n not in known]
    for name, (stage, wave, entry) in entries.items():
        if name not in gpu_nodes:
            reason = "no longer a GPU node" if name in nodes else "deleted"
            out.nodes_removed.append(
                {"node": name, "pool": stage.pool, "stage": stage.name, "wave": wave.name, "reason": reason}
            )
            continue
        if gpu_nodes[name].pool != stage.pool:
            out.nodes_moved.append({"node": name, "planned": stage.pool, "now": gpu_nodes[name].pool})
        _originals(name, entry.original, nodes[name], out)
        if entry.placement and plan_params is not None:
            _placement(name, entry.placement, placement_record(gpu_nodes[name], plan_params), out)

    totals = {
        identity({"kind": c.kind, "group": _group(c.api_version), "namespace": c.namespace, "name": c.name}):
        dict(sorted(c.totals.items()))
        for c in readiness.inventory.consumers
    }  # fmt: skip
    _consumers(planned, now, totals, out)
    return out


def _as_recorded(planned: dict[Key, dict[str, Any]], now: dict[Key, dict[str, Any]], state: ClusterState) -> None:
    """An object whose uid and resourceVersion are the plan's has not changed: the API server moves an
    object's resourceVersion with every write (k8s.io/apimachinery pkg/apis/meta/v1/types.go, ObjectMeta
    `ResourceVersion`: "change detection"). When its content hash differs all the same, the plan was made
    by a build that hashed less of it (`fingerprint.earlier_contents`): it is read with the plan's hash,
    so a plan of an earlier build is not refused as stale over what this build keeps more of."""
    for key, after in now.items():
        before = planned.get(key)
        if before is None or before.get("content") == after.get("content"):
            continue
        rv = str(after.get("resourceVersion") or "")
        if not rv or before.get("uid") != after.get("uid") or str(before.get("resourceVersion") or "") != rv:
            continue
        kind, group, namespace, name = key
        for obj in state.of(f"{group}/{kind}" if group else kind):
            meta = obj.get("metadata") or {}
            if (meta.get("namespace") or "") == namespace and meta.get("name") == name:
                if before.get("content") in earlier_contents(kind, obj):
                    now[key] = {**after, "content": before.get("content")}
                break


def _redaction_only(
    planned: dict[Key, dict[str, Any]], now: dict[Key, dict[str, Any]], redacted: Callable[[], list[dict[str, Any]]]
) -> None:
    """A plan made from a `dra-migrate snapshot` file hashed its consumers' specs as the snapshot holds them: env
    values, args and commands redacted (cluster/redact.py). A spec now that differs from the plan's only in those
    is the object the plan was made from, not drift: its redacted hash stands in for it. A plan made from the
    objects as they are (a live read, a kubectl export, `--keep-env`) matches them as before, as strictly."""
    differ = [k for k, o in now.items() if k in planned and planned[k].get("content") != o.get("content")]
    if not differ:
        return
    alt = {_key(o): o for o in redacted()}
    for key in differ:
        if key in alt and alt[key].get("content") == planned[key].get("content"):
            now[key] = alt[key]


def _key(o: dict[str, Any]) -> Key:
    return identity(o)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _recorded(o: dict[str, Any] | None) -> dict[str, str] | None:
    if o is None:
        return None
    return {k: str(o.get(k) or "") for k in ("uid", "resourceVersion", "content")}


def _objects(planned: dict[Key, dict[str, Any]], now: dict[Key, dict[str, Any]], out: Drift) -> None:
    for key in sorted(set(planned) | set(now)):
        before, after = planned.get(key), now.get(key)
        if before is None:
            change = "added"
        elif after is None:
            change = "removed"
        elif before.get("uid") != after.get("uid"):
            change = "replaced"
        elif before.get("content") != after.get("content"):
            change = "changed"
        elif before.get("resourceVersion") != after.get("resourceVersion"):
            out.status_only.append(_change(key, "status only", before, after))
            continue
        else:
            continue
        out.objects.append(_change(key, change, before, after))


def _change(key: Key, change: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> ObjectChange:
    kind, group, namespace, name = key
    return ObjectChange(kind, namespace, name, change, _recorded(before), _recorded(after), group=group)


def _originals(name: str, original: dict[str, Any], node: dict[str, Any], out: Drift) -> None:
    """The values the plan's inverses restore: if they moved, a rollback would restore stale ones."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (original.get("labels") or {}).items():
        if labels.get(key) != value:
            out.labels_changed.append({"node": name, "key": key, "planned": value, "now": labels.get(key)})
    if "unschedulable" in original:
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        if bool(original["unschedulable"]) != cordoned:
            out.unschedulable_changed.append(
                {"node": name, "planned": bool(original["unschedulable"]), "now": cordoned}
            )


# What a placement record says the plan does about a plugin on a node; its free-text `why` may be worded
# otherwise by another version of the tool and is not compared.
_PLACEMENT_KEYS = ("mode", "daemonSet", "label", "value")


def _params(params: Mapping[str, Any]) -> PlanParams | None:
    """The plan's parameters (None when they do not read: plan.io refuses such a plan before it gets here)."""
    try:
        return PlanParams.from_dict(dict(params))
    except InputError:
        return None


def _placement(name: str, planned: Mapping[str, Any], now: Mapping[str, Any], out: Drift) -> None:
    """What switching each plugin means on the node (plan/placement.py `placement_record`), as recorded and
    as the DaemonSets read now say: another DaemonSet, label, value or mode makes the plan's steps act through
    a label nothing selects (wait-dra-ready then times out on a drained node)."""
    for plugin in ("devicePlugin", "draPlugin"):
        before, after = planned.get(plugin), now.get(plugin)
        if not isinstance(before, Mapping) or not isinstance(after, Mapping):
            continue
        b = {k: before.get(k) for k in _PLACEMENT_KEYS}
        a = {k: after.get(k) for k in _PLACEMENT_KEYS}
        if a != b:
            out.placement_changed.append({"node": name, "plugin": plugin, "planned": b, "now": a})


def _consumers(
    planned: dict[Key, dict[str, Any]],
    now: dict[Key, dict[str, Any]],
    totals: dict[Key, dict[str, int]],
    out: Drift,
) -> None:
    def named(key: Key) -> dict[str, Any]:
        return {"kind": key[0], "group": key[1], "namespace": key[2], "name": key[3]}

    before = {k: v for k, v in planned.items() if k[:2] not in _NOT_CONSUMERS}
    after = {k: v for k, v in now.items() if k[:2] not in _NOT_CONSUMERS}
    for key in sorted(set(before) | set(after)):
        if key not in before:
            out.consumers_added.append({**named(key), "gpu": totals.get(key, {})})
        elif key not in after:
            out.consumers_removed.append(named(key))
        elif before[key].get("uid") != after[key].get("uid"):
            out.consumers_changed.append({**named(key), "change": "replaced", "gpu": totals.get(key, {})})
        elif before[key].get("content") != after[key].get("content"):
            out.consumers_changed.append({**named(key), "change": "changed", "gpu": totals.get(key, {})})
