"""What a plan means, checked: the rules every plan apply runs must keep, whoever wrote it.

`validate` lists every problem (an empty list: the plan is one apply can carry out as it says);
`recompute` rewrites what follows from the rest — `applicable` from the findings, each wave's
`evictedPods` and the `summary` from the stages — so a hand edit cannot make them lie. Both take the
plan as `io.load` returns it (plain dicts) and never raise on a malformed one: the codec reads it into the
typed model first (`Plan.from_dict`, which refuses a field of the wrong shape with its path: a
`PlanFieldError`, reported here as a `Problem` at that path), and the rules below run on the model.

The rules, and where they come from:
* the stage `prepare` first and once (apply would otherwise cut nodes over before their DeviceClasses
  exist), then pool stages `pool-<pool>`, each pool once, each node in one wave of one stage;
* every pool stage's `nodeSteps` are what `dra_migrate.plan.steps.node_steps` makes of the plan's
  `parameters` — the protocol's order (cordon, drain, device plugin off, DRA on, wait-dra-ready, canary,
  uncordon), its inverses (each restoring the node's recorded `original` values), the parameters' label
  keys and values, drain scope and canary image — but for `timeout` (any valid one: a pool may need a
  longer drain, a rehearsal scales them) and the free text `precondition`;
* every node records the `original` of exactly the labels its steps switch, as valid label values;
* durations as apply parses them (`params.checked_duration`), label keys and values as Kubernetes
  validates them (`params.label_key_problem`), counts as non-negative integers, known fields only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dra_migrate.checks.model import Severity
from dra_migrate.dra.devices import NVIDIA_DRIVER
from dra_migrate.errors import InputError
from dra_migrate.plan import steps as build_steps
from dra_migrate.plan.actions import Action
from dra_migrate.plan.dependents import set_quota_problems
from dra_migrate.plan.derived import (
    evicted_in,
    recomputed_summary,
    with_evicted_recomputed,
)
from dra_migrate.plan.estimate import MAX_PODS_PER_NODE
from dra_migrate.plan.fields import PlanFieldError
from dra_migrate.plan.filechecks import _applicable, _derived
from dra_migrate.plan.model import NodeEntry, Plan, PoolStage, PrepareStage, Stage, Step
from dra_migrate.plan.params import (
    PlanParams,
    label_key_problem,
    label_value_problem,
)
from dra_migrate.plan.problems import Path, Problem, _Checker, readable
from dra_migrate.plan.strategies import provision_problems, recorded_annotation_problems, replace_stage_problems

_FINDING_KEYS = frozenset({"id", "severity", "message", "objects", "remediation", "scope", "pools"})
_FINDING_REQUIRED = _FINDING_KEYS - {"scope", "pools"}  # plans made before blockers were scoped
_OBJECT_KEYS = frozenset({"kind", "group", "namespace", "name", "uid", "resourceVersion", "content"})
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_SEVERITIES = frozenset(s.value for s in Severity)
_PLACEHOLDER = re.compile(r"\{(node|original)\.[^{}]+\}")


def read(plan: Mapping[str, Any] | Plan) -> Plan | Problem:
    """The typed plan, or the first field the codec could not read, as a problem at its path."""
    if isinstance(plan, Plan):
        return plan
    try:
        return Plan.from_dict(plan)
    except PlanFieldError as e:
        return Problem(e.at, e.reason, e.hint)
    except InputError as e:  # a part read by its own type (clusterIdentity): no path of its own
        return Problem((), e.message, e.hint)


def validate(plan: Mapping[str, Any] | Plan, *, derived: bool = True) -> list[Problem]:
    """Every problem of meaning in a plan; `derived=False` skips the values `recompute` rewrites."""
    model = read(plan)
    return [model] if isinstance(model, Problem) else _meaning(model, derived=derived)


def _meaning(plan: Plan, *, derived: bool) -> list[Problem]:
    c = _Checker()
    _tool(c, plan.tool)
    params = _parameters(c, plan.parameters)
    _fingerprint(c, plan.fingerprint)
    _findings(c, plan.findings)
    edited = plan.edited
    if edited is not None and c.mapping(edited, ("edited",), frozenset({"previousDigests"})):
        c.strings(edited["previousDigests"], ("edited", "previousDigests"))
    stages_ok = _stages(c, plan.stages, params)
    _gangs(c, plan.summary, plan.stages)
    if derived and stages_ok and not c.problems:
        _derived(c, plan.applicable, plan.findings)
    return c.problems


def _tool(c: _Checker, tool: Any) -> None:
    if c.mapping(tool, ("tool",), frozenset({"name", "version"})):
        c.string(tool["name"], ("tool", "name"))
        c.string(tool["version"], ("tool", "version"))


def _parameters(c: _Checker, value: Any) -> PlanParams | None:
    try:
        return PlanParams.from_dict(value)
    except (InputError, TypeError) as e:
        c.add(("parameters",), e.message if isinstance(e, InputError) else str(e), "regenerate the plan")
        return None


def _fingerprint(c: _Checker, fp: Any) -> None:
    path: Path = ("fingerprint",)
    if not c.mapping(fp, path, frozenset({"kubernetesVersion", "digest", "objects"})):
        return
    if fp["kubernetesVersion"] is not None:
        c.string(fp["kubernetesVersion"], (*path, "kubernetesVersion"))
    c.string(fp["digest"], (*path, "digest"))
    objects = fp["objects"]
    if not isinstance(objects, list):
        c.add((*path, "objects"), "expected a list")
        return
    for i, o in enumerate(objects):
        where = (*path, "objects", i)
        if c.mapping(o, where, _OBJECT_KEYS, required=_OBJECT_KEYS - {"group"}):
            for k in _OBJECT_KEYS & set(o):
                c.string(o[k], (*where, k), empty_ok=k != "kind")


def _findings(c: _Checker, findings: Sequence[Any]) -> None:
    """Each finding's fields (the model keeps findings as the file's mappings, in a list it has read)."""
    for i, f in enumerate(findings):
        where: Path = ("findings", i)
        if not c.mapping(f, where, _FINDING_KEYS, required=_FINDING_REQUIRED):
            continue
        c.string(f["id"], (*where, "id"))
        if not isinstance(f["severity"], str) or f["severity"] not in _SEVERITIES:
            c.add((*where, "severity"), f"must be one of {', '.join(sorted(_SEVERITIES))}")
        c.string(f["message"], (*where, "message"), empty_ok=True)
        c.string(f["remediation"], (*where, "remediation"), empty_ok=True)
        if not isinstance(f["objects"], list) or not all(isinstance(o, str) for o in f["objects"]):
            c.add((*where, "objects"), "expected a list of strings")
        # scope decides which stages a blocker stops (plan/scope.py): cluster, or pool with its pools.
        scope, pools = f.get("scope", "cluster"), f.get("pools", [])
        if scope not in ("cluster", "pool"):
            c.add((*where, "scope"), "must be cluster or pool")
        elif not isinstance(pools, list) or not all(isinstance(p, str) and p for p in pools):
            c.add((*where, "pools"), "expected a list of pool names")
        elif (scope == "pool") != bool(pools):
            c.add((*where, "pools"), "a pool-scoped finding names its pools; a cluster-wide one none")


def _stages(c: _Checker, stages: tuple[Stage, ...], params: PlanParams | None) -> bool:
    before = len(c.problems)
    if not stages:
        c.add(("stages",), "expected a list of stages, `prepare` first")
        return False
    pools: set[str] = set()
    nodes: dict[str, Path] = {}
    for i, stage in enumerate(stages):
        where: Path = ("stages", i)
        _stage_position(c, stage.name, i, where)
        following = stages[i + 1] if i + 1 < len(stages) else None
        if isinstance(stage, PoolStage):
            if stage.name == "prepare" or stage.name.startswith("provision-"):
                c.add(where, f"stage {stage.name} holds exactly {{name, steps}}", "regenerate the plan")
            else:
                _pool_stage(c, stage, where, params, pools, nodes)
        elif stage.name == "prepare":
            _prepare(c, stage, where)
        elif stage.name.startswith("provision-"):
            for at, message, hint in provision_problems(stage, following):
                c.add((*where, *at), message, hint)  # a replace-pool's stage: its rules are plan/strategies.py's
        else:
            c.add((*where, "pool"), f"missing `pool`: stage {stage.name} is neither `prepare`, a provision stage "
                  "nor a pool stage", "regenerate the plan")  # fmt: skip
    return len(c.problems) == before


def _stage_position(c: _Checker, name: str, i: int, where: Path) -> None:
    """`prepare` first and once: apply creates the DeviceClasses before any node is cut over."""
    if i == 0 and name != "prepare":
        c.add(where, f"the first stage must be `prepare`, not {name!r}",
              "apply creates the DeviceClasses before any node is cut over: move `prepare` back first")  # fmt: skip
    elif i > 0 and name == "prepare":
        c.add(where, "`prepare` must be the first stage, and only once",
              "apply creates the DeviceClasses before any node is cut over")  # fmt: skip


def _step_names(c: _Checker, step: Step, where: Path) -> bool:
    """A step's id and target name something (the model has read their types)."""
    return all([c.string(step.id, (*where, "id")), c.string(step.target, (*where, "target"))])


def _inverse(step: Step) -> dict[str, Any] | None:
    """A step's inverse as the file writes it (what the rules compare and their messages show)."""
    return step.inverse.to_dict() if step.inverse is not None else None


def _prepare(c: _Checker, stage: PrepareStage, where: Path) -> None:
    ids: set[str] = set()
    confirms = 0
    for j, step in enumerate(stage.steps):
        at = (*where, "steps", j)
        if not _step_names(c, step, at):
            continue
        if step.id in ids:
            c.add((*at, "id"), f"step {step.id} appears twice")
        ids.add(step.id)
        c.duration(step.timeout, (*at, "timeout"))
        if step.action == Action.CREATE_DEVICECLASS:
            _create_deviceclass(c, step, at)
        elif step.action == Action.CONFIRM_DRA_DRIVER:
            confirms += 1
            if step.params != {"driver": NVIDIA_DRIVER} or step.inverse is not None:
                c.add(at, f"confirm-dra-driver takes params {{driver: {NVIDIA_DRIVER}}} and no inverse")
            if j != len(stage.steps) - 1:
                c.add(at, "confirm-dra-driver must be the last step of `prepare`")
        elif step.action == Action.SET_QUOTA:
            for field, problem in set_quota_problems(step.to_dict()):
                c.add((*at, field), problem)
        else:
            c.add((*at, "action"), f"unknown action {str(step.action)!r} in `prepare`",
                  "prepare creates DeviceClasses and confirms the DRA driver")  # fmt: skip
    if confirms != 1:
        c.add((*where, "steps"), "`prepare` must confirm the DRA driver once (confirm-dra-driver)")


def _create_deviceclass(c: _Checker, step: Step, at: Path) -> None:
    manifest = step.params.get("manifest")
    if set(step.params) != {"manifest"} or not isinstance(manifest, dict):
        c.add((*at, "params"), "create-deviceclass takes params {manifest: <DeviceClass>}")
        return
    meta = manifest.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if manifest.get("apiVersion") != "resource.k8s.io/v1" or manifest.get("kind") != "DeviceClass":
        c.add((*at, "params", "manifest"), "must be a resource.k8s.io/v1 DeviceClass")
    if not isinstance(name, str) or len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        c.add((*at, "params", "manifest"), f"DeviceClass name {name!r} is not a DNS subdomain")
        return
    if step.id != f"prepare/create-deviceclass/{name}" or step.target != f"DeviceClass {name}":
        c.add((*at, "id"), f"id and target must name DeviceClass {name}")
    if _inverse(step) != {"action": "delete-deviceclass", "restore": {"name": name}}:
        c.add((*at, "inverse"), f"the inverse must delete DeviceClass {name} (delete-deviceclass, restore.name)")


def _pool_stage(
    c: _Checker, stage: PoolStage, where: Path, params: PlanParams | None, pools: set[str], nodes: dict[str, Path]
) -> None:
    if not c.string(stage.pool, (*where, "pool")):
        return
    # A pool whose nodes need different labels switched has one stage per group (build._pool_stages):
    # pool-<pool>, pool-<pool>-2, ...
    if not re.fullmatch(rf"pool-{re.escape(stage.pool)}(-[2-9]|-[1-9][0-9]+)?", stage.name):
        c.add((*where, "name"), f"the stage of pool {stage.pool} is named pool-{stage.pool} (or pool-{stage.pool}-N)")
    if stage.name in pools:
        c.add((*where, "name"), f"stage {stage.name} appears twice")
    pools.add(stage.name)
    c.strings(list(stage.resources), (*where, "resources"))
    in_place = stage.strategy == "in-place"  # else its rules are plan/strategies.py's
    labels = _node_steps(c, stage.node_steps, (*where, "nodeSteps"), params) if in_place else frozenset()
    problems = (
        recorded_annotation_problems(stage) if in_place else replace_stage_problems(stage, params or PlanParams())
    )
    for at, message, hint in problems:
        c.add((*where, *at), message, hint)
    if not stage.waves:
        c.add((*where, "waves"), "expected a list of waves")
        return
    names: set[str] = set()
    for k, wave in enumerate(stage.waves):
        at = (*where, "waves", k)
        if c.string(wave.name, (*at, "name")):
            if wave.name in names:
                c.add((*at, "name"), f"wave {wave.name} appears twice in the stage")
            names.add(wave.name)
        c.duration(wave.soak_after, (*at, "soakAfter"), zero_ok=True)
        if not wave.nodes:
            c.add((*at, "nodes"), f"wave {wave.name} is left without nodes",
                  "delete the wave from the stage's `waves` (or put a node back in it)")  # fmt: skip
            continue
        for m, entry in enumerate(wave.nodes):
            _node(c, entry, (*at, "nodes", m), labels, nodes)


def _switch(steps: tuple[Step, ...], step_id: str) -> tuple[str, str] | None:
    """The (label, value) a stage's plugin switch sets, or None when the stage has no such step (the plugin
    needs no switching on its nodes, as the DaemonSets were installed)."""
    for s in steps:
        if s.id == step_id:
            key, value = s.params.get("key"), s.params.get("value")
            return (key, value) if isinstance(key, str) and isinstance(value, str) else ("", "")
    return None


def _expected_steps(params: PlanParams | None, steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The protocol: what the builder makes of these parameters and the stage's own plugin switches (its
    order, params and inverses). The switches' label syntax is `_label_step`'s to check."""
    dp, dra = _switch(steps, build_steps.DISABLE_DEVICE_PLUGIN), _switch(steps, build_steps.ENABLE_DRA_PLUGIN)
    protect = next((k for s in steps if s.id == "protect" and isinstance(k := s.params.get("key"), str)), None)
    return build_steps.node_steps(params or PlanParams(), dp, dra, protect)


def _node_steps(c: _Checker, steps: tuple[Step, ...], where: Path, params: PlanParams | None) -> frozenset[str] | None:
    """Check a stage's per-node steps against the protocol; the label keys they switch, when valid."""
    expected = _expected_steps(params, steps)
    found_ids = [s.id for s in steps]
    wanted_ids = [s.id for s in expected]
    if found_ids != wanted_ids:
        c.add(where, f"per-node steps must be {', '.join(wanted_ids)}, in this order; found "
              f"{', '.join(found_ids) or 'none'}",
              "the order is the protocol's (dra_migrate.plan.steps.node_steps): regenerate the plan")  # fmt: skip
        return None
    for j, (step, want) in enumerate(zip(steps, expected, strict=True)):
        _node_step(c, step, want, (*where, j))
    return frozenset(k for s in steps if s.action == Action.SET_LABEL and isinstance(k := s.params.get("key"), str))


def _node_step(c: _Checker, step: Step, want: Step, at: Path) -> None:
    """One per-node step against the protocol's: its action, target, inverse and params (not its timeout,
    which a pool may lengthen, nor its free-text precondition)."""
    if not _step_names(c, step, at):
        return
    if step.action != want.action:
        c.add((*at, "action"), f"must be {str(want.action)!r} (the protocol's), not {str(step.action)!r}")
    if step.target != want.target:
        c.add((*at, "target"), f"must be {want.target!r} (the protocol's), not {step.target!r}")
    if step.action == Action.SET_LABEL:
        _label_step(c, step, at)
    c.duration(step.timeout, (*at, "timeout"))
    if _inverse(step) != _inverse(want):
        c.add((*at, "inverse"), f"does not restore what the protocol restores: expected {_inverse(want)}",
              "each inverse restores the node's recorded `original` values: regenerate the plan")  # fmt: skip
    reported = any(p.path[: len(at)] == at for p in c.problems)
    if step.params != want.params and not reported:
        c.add((*at, "params"), f"{step.params!r} is not what the plan's parameters say ({want.params!r})",
              "change `parameters` and the per-node steps together, or regenerate the plan")  # fmt: skip


def _label_step(c: _Checker, step: Step, at: Path) -> None:
    p = step.params
    if set(p) != {"key", "value"}:
        c.add((*at, "params"), "set-label takes params {key, value}")
        return
    problem = label_key_problem(p["key"])
    if problem:
        c.add((*at, "params", "key"), f"{p['key']!r} is not a Kubernetes label key ({problem})")
        return
    problem = label_value_problem(p["value"])
    if problem:
        c.add((*at, "params", "value"), f"{p['value']!r} is not a label value apply can set ({problem})")
    restore = {"key": p["key"], "value": f"{{original.labels.{p['key']}}}"}
    if _inverse(step) != {"action": "restore-label", "restore": restore}:
        c.add((*at, "inverse"), f"must restore label {p['key']} to the node's original value "
              f"(restore-label, restore {restore})")  # fmt: skip


def _node(c: _Checker, entry: NodeEntry, at: Path, labels: frozenset[str] | None, nodes: dict[str, Path]) -> None:
    name = entry.node
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        c.add((*at, "node"), f"{name!r} is not a Kubernetes node name")
    elif name in nodes:
        c.add((*at, "node"), f"node {name} is planned twice (also at {readable(nodes[name])})")
    else:
        nodes[name] = at
    for key, count in (("gpuPods", entry.gpu_pods), ("otherPods", entry.other_pods)):
        if count > MAX_PODS_PER_NODE:
            c.add((*at, key), f"{count} pods on one node: more than any node runs (at most {MAX_PODS_PER_NODE})")
    c.strings(list(entry.resources), (*at, "resources"))
    if c.string(entry.canary_resource, (*at, "canaryResource")) and _PLACEHOLDER.search(entry.canary_resource):
        c.add((*at, "canaryResource"), "a placeholder where a resource name belongs")
    _original_labels(c, entry.original["labels"], (*at, "original", "labels"), labels)


def _original_labels(c: _Checker, recorded: dict[str, Any], at: Path, labels: frozenset[str] | None) -> None:
    """A node records the original value of exactly the labels its steps switch (their inverses restore
    them), each a valid label value or null (absent)."""
    if labels is not None and set(recorded) != labels:
        switched = ", ".join(sorted(labels))
        c.add(at, f"must record exactly the labels the steps switch ({switched})",
              "the inverses restore these values: regenerate the plan")  # fmt: skip
    for key, value in recorded.items():
        if value is not None and label_value_problem(value, empty_ok=True):
            c.add((*at, key), f"{value!r} is not a label value (null: the label was absent)")


# --- derived values --------------------------------------------------------------------------------


def _gangs(c: _Checker, summary: Mapping[str, Any], stages: tuple[Stage, ...]) -> None:
    """`summary.gangs` ([{gang, waves: ["<stage>/<wave>"]}]) names waves the plan has."""
    gangs = summary.get("gangs")
    if gangs is None:
        return
    waves = {f"{s.name}/{w.name}" for s in stages for w in s.waves}
    if not isinstance(gangs, list):
        c.add(("summary", "gangs"), "expected a list")
        return
    for i, g in enumerate(gangs):
        at: Path = ("summary", "gangs", i)
        if not c.mapping(g, at, frozenset({"gang", "waves"})):
            continue
        c.string(g["gang"], (*at, "gang"))
        if c.strings(g["waves"], (*at, "waves")):
            gone = [w for w in g["waves"] if w not in waves]
            if gone:
                c.add((*at, "waves"), f"wave {gone[0]} is not in the plan",
                      "the plan records a gang's waves, not its nodes: rebase with --against ORIGINAL (the plan "
                      "the edit started from), which follows them to their new waves")  # fmt: skip


def summary_problems(plan: Mapping[str, Any] | Plan) -> list[Problem]:
    """Where a plan's `evictedPods` and `summary` differ from what its stages say (none after rebase)."""
    model = read(plan)
    if isinstance(model, Problem):
        return [model]
    problems = _meaning(model, derived=True)
    if problems:
        return problems
    c = _Checker()
    for i, stage in enumerate(model.stages):
        for k, wave in enumerate(stage.waves):
            want = evicted_in(wave, stage) if isinstance(stage, PoolStage) else 0
            if wave.evicted_pods != want:
                c.add(("stages", i, "waves", k, "evictedPods"), f"is not the sum over its nodes ({want})")
    want_summary = recomputed_summary(model, model.stages)
    if model.summary != want_summary:
        c.add(("summary",), f"does not follow from the stages ({want_summary})", "dra-migrate plan --rebase")
    return c.problems


def recompute(body: dict[str, Any]) -> dict[str, Any]:
    """The plan with `applicable`, each wave's `evictedPods` and `summary` as its findings and stages
    say. A plan whose stages are malformed is returned as it is (validate names the problem)."""
    model = read(body)
    if isinstance(model, Problem) or _meaning(model, derived=False):
        return body
    stages = tuple(with_evicted_recomputed(s) for s in model.stages)
    summary = recomputed_summary(model, stages)
    return replace(model, applicable=_applicable(model.findings), stages=stages, summary=summary).to_dict()
