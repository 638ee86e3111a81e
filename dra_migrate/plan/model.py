"""The Plan model, typed end to end: Plan → PrepareStage | PoolStage → Wave → NodeEntry → Step (+ Inverse).

Plain frozen dataclasses. `to_dict` gives the file's shape (README "Plan files") with its keys in the
file's order, and `from_dict` reads that shape back strictly: a missing field, an unknown one, or a
value of the wrong type is an `InputError` naming its path (`stages[2].waves[0].nodes[1].gpuPods`).
Reading and writing the YAML, and the digests, are `plan/io.py`'s; a plan file goes load → `from_dict`
→ `to_dict` → dump byte-identically (tests/unit/test_plan_model.py proves it for every golden plan).

Everything in a plan is a function of the cluster state and the parameters: no wall-clock time, so the
same input always gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.identity import ClusterIdentity
from dra_migrate.plan.actions import Action as Action  # the registry's (plan/actions.py), re-exported
from dra_migrate.plan.actions import InverseAction as InverseAction
from dra_migrate.plan.fields import (
    _bool,
    _count,
    _duration,
    _each,
    _fail,
    _fields,
    _finite,
    _int,
    _list,
    _mapping,
    _str,
    _strs,
)
from dra_migrate.plan.step import Inverse as Inverse  # a step and its inverse: plan/step.py, re-exported
from dra_migrate.plan.step import Step as Step

FORMAT_VERSION = 2  # what `build_plan` makes; the file's form of each version is `plan/wire.py`'s
READ_VERSIONS = (1, 2)  # the model is the same for both: format 2 only writes it more compactly
# The finding whose objects are the marked pods the review saw (checks/rules_workloads.py): apply's drains evict
# those and refuse other marked pods (`Plan.marked_pods_named`).
MARKED_PODS_FINDING = "pods-marked-do-not-disrupt"


@dataclass(frozen=True)
class NodeEntry:
    """One node of a wave: what is known of it, and the original values its steps' inverses restore."""

    node: str
    gpu_pods: int  # pods a `--drain gpu` evicts
    other_pods: int  # further pods a `--drain all` evicts
    expected_devices: int  # gpu.nvidia.com devices its slices must hold
    resources: tuple[str, ...]  # the device-plugin resources it advertises today (must go to 0)
    canary_resource: str
    # {"unschedulable": bool, "labels": {key: value or None}[, "annotations": {key: value or None}]}
    original: dict[str, Any]
    placement: dict[str, Any] = field(default_factory=dict)  # what switching each plugin means here, and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpuPods": self.gpu_pods,
            "otherPods": self.other_pods,
            "expectedDevices": self.expected_devices,
            "resources": list(self.resources),
            "canaryResource": self.canary_resource,
            "original": self.original,
            **({"placement": self.placement} if self.placement else {}),
        }

    @classmethod
    def from_dict(cls, value: Any, path: str) -> NodeEntry:
        keys = ("node", "gpuPods", "otherPods", "expectedDevices", "resources", "canaryResource", "original")
        doc = _fields(value, path, keys, ("placement",))
        original = _fields(doc["original"], f"{path}.original", ("unschedulable", "labels"), ("annotations",))
        _bool(original["unschedulable"], f"{path}.original.unschedulable")
        for part in ("labels", "annotations"):
            for key, value in _mapping(original.get(part, {}), f"{path}.original.{part}").items():
                if value is not None:
                    _str(value, f"{path}.original.{part}.{key}")
        name = _str(doc["node"], f"{path}.node")
        if not name:
            raise _fail(f"{path}.node", "empty node name")
        return cls(
            node=name,
            gpu_pods=_count(doc["gpuPods"], f"{path}.gpuPods"),
            other_pods=_count(doc["otherPods"], f"{path}.otherPods"),
            expected_devices=_count(doc["expectedDevices"], f"{path}.expectedDevices"),
            resources=_strs(doc["resources"], f"{path}.resources"),
            canary_resource=_str(doc["canaryResource"], f"{path}.canaryResource"),
            original={
                "unschedulable": original["unschedulable"],
                "labels": dict(original["labels"]),
                **({"annotations": dict(original["annotations"])} if "annotations" in original else {}),
            },
            placement=dict(_mapping(doc["placement"], f"{path}.placement")) if "placement" in doc else {},
        )


@dataclass(frozen=True)
class Wave:
    name: str
    nodes: tuple[NodeEntry, ...]
    evicted_pods: int
    soak_after: str  # soak before the next wave ("0s" for the last)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "evictedPods": self.evicted_pods,
            "soakAfter": self.soak_after,
            "nodes": [n.to_dict() for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, value: Any, path: str) -> Wave:
        doc = _fields(value, path, ("name", "evictedPods", "soakAfter", "nodes"))
        nodes = tuple(NodeEntry.from_dict(n, at) for n, at in _each(doc, "nodes", path))
        return cls(
            name=_str(doc["name"], f"{path}.name"),
            nodes=nodes,
            evicted_pods=_count(doc["evictedPods"], f"{path}.evictedPods"),
            soak_after=_duration(doc["soakAfter"], f"{path}.soakAfter"),
        )

    @property
    def soak_s(self) -> float:
        from dra_migrate.plan.params import parse_duration

        return float(parse_duration(self.soak_after))


@dataclass(frozen=True)
class PrepareStage:
    """The cluster-wide steps before any node is touched (DeviceClasses, the DRA driver), in order."""

    name: str
    steps: tuple[Step, ...]

    # The shape a pool stage has, so code over both reads alike.
    pool: None = None
    resources: tuple[str, ...] = ()
    waves: tuple[Wave, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, value: Any, path: str) -> PrepareStage:
        doc = _fields(value, path, ("name", "steps"))
        steps = tuple(Step.from_dict(s, at) for s, at in _each(doc, "steps", path))
        return cls(_str(doc["name"], f"{path}.name"), steps)


@dataclass(frozen=True)
class PoolStage:
    """A pool's nodes in waves. `node_steps` is the step list every node runs, in order, written once
    (with `{node.*}` and `{original.*}` standing for each node's values: `steps_for`)."""

    name: str
    pool: str
    resources: tuple[str, ...]  # GPU resource names the pool's nodes serve
    node_steps: tuple[Step, ...]
    waves: tuple[Wave, ...]
    # How the pool is cut over (plan/strategies.py): "in-place" (its nodes switched) is not written, so
    # plans of in-place pools keep their bytes; "replace-pool" (drained across to a new pool).
    strategy: str = "in-place"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pool": self.pool,
            **({"strategy": self.strategy} if self.strategy != "in-place" else {}),
            "resources": list(self.resources),
            "nodeSteps": [s.to_dict() for s in self.node_steps],
            "waves": [w.to_dict() for w in self.waves],
        }

    @classmethod
    def from_dict(cls, value: Any, path: str) -> PoolStage:
        doc = _fields(value, path, ("name", "pool", "resources", "nodeSteps", "waves"), ("strategy",))
        strategy = _str(doc.get("strategy", "in-place"), f"{path}.strategy")
        if strategy not in ("in-place", "replace-pool"):
            raise _fail(f"{path}.strategy", f"unknown strategy {strategy!r} (known: in-place, replace-pool)")
        steps = tuple(Step.from_dict(s, at) for s, at in _each(doc, "nodeSteps", path))
        waves = tuple(Wave.from_dict(w, at) for w, at in _each(doc, "waves", path))
        return cls(
            name=_str(doc["name"], f"{path}.name"),
            pool=_str(doc["pool"], f"{path}.pool"),
            resources=_strs(doc["resources"], f"{path}.resources"),
            node_steps=steps,
            waves=waves,
            strategy=strategy,
        )

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.node_steps

    def steps_for(self, node: NodeEntry) -> tuple[Step, ...]:
        """The concrete steps of one node: placeholders filled, ids `<stage>/<node>/<id>`."""
        values = node.to_dict()
        return tuple(
            Step(
                id=f"{self.name}/{node.node}/{s.id}",
                action=s.action,
                target=f"Node {node.node}",
                params=_fill(s.params, values),
                precondition=s.precondition,
                timeout=s.timeout,
                inverse=Inverse(s.inverse.action, _fill(s.inverse.restore, values)) if s.inverse else None,
            )
            for s in self.node_steps
        )


Stage = PrepareStage | PoolStage


def stage_from_dict(value: Any, path: str) -> Stage:
    doc = _mapping(value, path)
    return PoolStage.from_dict(doc, path) if "pool" in doc else PrepareStage.from_dict(doc, path)


_PLAN_REQUIRED = (
    "formatVersion", "tool", "cluster", "parameters", "fingerprint", "applicable", "findings", "summary", "stages",
)  # fmt: skip
_PLAN_OPTIONAL = ("clusterIdentity", "review", "edited", "digests", "digest")


@dataclass(frozen=True)
class Plan:
    """A whole plan. The sections apply does not act on (tool, parameters, fingerprint, findings,
    summary, edited) are kept as the mappings the file holds; stages are typed."""

    format_version: int
    tool: dict[str, Any]
    cluster: str
    parameters: dict[str, Any]
    fingerprint: dict[str, Any]
    applicable: bool
    findings: tuple[dict[str, Any], ...]
    summary: dict[str, Any]
    stages: tuple[Stage, ...]
    edited: dict[str, Any] | None = None
    digests: dict[str, str] | None = None
    review: dict[str, Any] | None = None  # what review needs at planning time (report PLAN stands alone)
    digest: str | None = None
    # Which cluster it was made from (cluster/identity.py); None in plans made before it was recorded.
    cluster_identity: ClusterIdentity | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "formatVersion": self.format_version,
            "tool": self.tool,
            "cluster": self.cluster,
            **({"clusterIdentity": self.cluster_identity.to_dict()} if self.cluster_identity is not None else {}),
            "parameters": self.parameters,
            "fingerprint": self.fingerprint,
            "applicable": self.applicable,
            "findings": list(self.findings),
            "summary": self.summary,
            **({"review": self.review} if self.review is not None else {}),
            "stages": [s.to_dict() for s in self.stages],
        }
        if self.edited is not None:
            out["edited"] = self.edited
        if self.digests is not None:
            out["digests"] = self.digests
        if self.digest is not None:
            out["digest"] = self.digest
        return out

    @classmethod
    def from_dict(cls, value: Any, *, read: bool = False) -> Plan:
        """`read`: `value` is what `io.load` read from a file, whose readers refused NaN and infinities
        already (`fastyaml`, `lined.check_values`): not walked again (a walk of every value, ~1/4 of
        `diff`'s own work at 2,000 nodes, which issue 29 holds to 2x loading both plans)."""
        doc = _fields(value, "", _PLAN_REQUIRED, _PLAN_OPTIONAL)
        if not read:
            _finite(doc, "")
        version = _int(doc["formatVersion"], "formatVersion")
        if version not in READ_VERSIONS:
            raise _fail("formatVersion", f"plan format {version}, this tool reads {READ_VERSIONS}")
        stages = tuple(stage_from_dict(s, f"stages[{i}]") for i, s in enumerate(_list(doc["stages"], "stages")))
        names = [s.name for s in stages]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise _fail("stages", f"stage {dup} appears twice")
        _unique_nodes_and_steps(stages)
        findings = tuple(dict(_mapping(f, f"findings[{i}]")) for i, f in enumerate(_list(doc["findings"], "findings")))
        edited = doc.get("edited")
        review = doc.get("review")
        digests = doc.get("digests")
        digest = doc.get("digest")
        return cls(
            format_version=version,
            tool=dict(_mapping(doc["tool"], "tool")),
            cluster=_str(doc["cluster"], "cluster"),
            parameters=dict(_mapping(doc["parameters"], "parameters")),
            fingerprint=dict(_mapping(doc["fingerprint"], "fingerprint")),
            applicable=_bool(doc["applicable"], "applicable"),
            findings=findings,
            summary=dict(_mapping(doc["summary"], "summary")),
            stages=stages,
            review=None if review is None else dict(_mapping(review, "review")),
            edited=None if edited is None else dict(_mapping(edited, "edited")),
            digests=None if digests is None else _digests(digests),
            digest=None if digest is None else _str(digest, "digest"),
            cluster_identity=ClusterIdentity.from_dict(_mapping(doc["clusterIdentity"], "clusterIdentity"))
            if "clusterIdentity" in doc else None,
        )  # fmt: skip

    # -- what apply asks of a plan

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]

    @property
    def blockers(self) -> list[str]:
        return [str(f.get("id")) for f in self.findings if f.get("severity") == "blocker"]

    def node_uids(self) -> dict[str, str]:
        """Node name → uid as the fingerprint recorded them (a node replaced since has another uid)."""
        out = {}
        for o in self.fingerprint.get("objects") or []:
            if isinstance(o, Mapping) and o.get("kind") == "Node" and o.get("uid") and isinstance(o.get("name"), str):
                out[o["name"]] = str(o["uid"])
        return out

    def reviewed_pods(self) -> frozenset[str]:
        """Uids of the pods the fingerprint recorded. It lists a pod only as a GPU consumer of its own (no
        controller read) or as a running pod no controller owns (`fingerprint._unowned_pods`): the pods
        no controller brings back that the plan showed for review, which its drains may delete for good."""
        return frozenset(
            str(o["uid"])
            for o in self.fingerprint.get("objects") or []
            if isinstance(o, Mapping) and o.get("kind") == "Pod" and not o.get("group") and o.get("uid")
        )

    def marked_pods_named(self) -> frozenset[str]:
        """ "namespace/name" of the pods the plan's review named as marked not to be interrupted (finding
        `pods-marked-do-not-disrupt`; accepted in the ignore file, it is kept under review.acceptedRisks, seen all
        the same). The finding names every such pod in its objects (its message shows a few), by name only: a pod
        of that name is the one the review saw, whichever of the marks it carries now. Its drain evicts these as
        planned and refuses any other marked pod (execute/ops_drain.py `_marked_unnamed`)."""
        accepted = (self.review or {}).get("acceptedRisks")
        found = [*self.findings, *(accepted if isinstance(accepted, list) else [])]
        return frozenset(
            text.partition(" ")[2]
            for f in found
            if isinstance(f, Mapping) and f.get("id") == MARKED_PODS_FINDING
            for text in f.get("objects") or []
            if isinstance(text, str) and text.startswith("Pod ")
        )

    def pool_stages(self) -> tuple[PoolStage, ...]:
        return tuple(s for s in self.stages if isinstance(s, PoolStage))

    def nodes(self) -> Iterator[tuple[PoolStage, Wave, NodeEntry]]:
        for s in self.stages:
            if isinstance(s, PoolStage):
                for w in s.waves:
                    for n in w.nodes:
                        yield s, w, n


def plan_identity(plan: Mapping[str, Any] | Plan) -> ClusterIdentity | None:
    """The cluster a plan (typed, or as `io.load` returns it) was made from, when it records it."""
    if isinstance(plan, Plan):
        return plan.cluster_identity
    return ClusterIdentity.from_dict(plan.get("clusterIdentity"))


def _unique_nodes_and_steps(stages: tuple[Stage, ...]) -> None:
    """A node in two waves (or stages), or two steps with one id, would share journal records: refused."""
    seen: dict[str, str] = {}
    for i, stage in enumerate(stages):
        ids = [s.id for s in stage.steps]
        dup = next((x for x in ids if ids.count(x) > 1), None)
        if dup is not None:
            raise _fail(f"stages[{i}]", f"step id {dup} appears twice")
        for w, wave in enumerate(stage.waves):
            for n, node in enumerate(wave.nodes):
                where = f"stages[{i}].waves[{w}].nodes[{n}]"
                if node.node in seen:
                    raise _fail(where, f"node {node.node} is planned twice (already planned at {seen[node.node]})")
                seen[node.node] = where


def _digests(value: Any) -> dict[str, str]:
    return {k: _str(v, f"digests.{k}") for k, v in _mapping(value, "digests").items()}


def _fill(value: Any, node: Mapping[str, Any]) -> Any:
    """Replace "{node.x}" / "{original.x}" / "{original.labels.<key>}" placeholders with the node's values
    (`node` in its file shape, NodeEntry.to_dict())."""
    if isinstance(value, dict):
        return {k: _fill(v, node) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, node) for v in value]
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        path = value[1:-1]
        if path.startswith("original.labels."):
            return (node.get("original") or {}).get("labels", {}).get(path[len("original.labels.") :])
        if path.startswith("original.annotations."):
            return (node.get("original") or {}).get("annotations", {}).get(path[len("original.annotations.") :])
        if path.startswith("original."):
            return (node.get("original") or {}).get(path[len("original.") :])
        if path.startswith("node."):
            return node.get(path[len("node.") :])
    return value


def expand(stage: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The concrete steps of one node of a pool stage, on file shapes (for code still on dicts)."""
    steps = []
    for template in stage.get("nodeSteps") or []:
        step = _fill(template, node)
        step["id"] = f"{stage['name']}/{node['node']}/{template['id']}"
        step["target"] = f"Node {node['node']}"
        steps.append(step)
    return steps
