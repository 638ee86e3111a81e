"""What an edited plan must still agree with itself on, for `plan --rebase` (issue 28).

`validate` checks each part of a plan for what it may hold; an edit can still leave two parts saying two
things: `parameters.soak: 10m` while the waves still soak 5m, `drainTimeout: 20m` while the drain steps
still give up after 10m, a wave grown past `maxUnavailable`. Longer soaks and timeouts than the parameters
(one pool given more patience) agree with them; shorter ones and larger waves do not. The plan's
parameters are what a reviewer reads first, so a rebase that would make them untrue is refused with the
place that contradicts them.

Kept apart from validate.py as one function it can call: `contradictions(plan)`, on the typed plan (the
model has read every field, so a duration here is one `parse_duration` accepts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.plan.actions import TIMEOUT_PARAMETERS, Action
from dra_migrate.plan.model import Plan, PoolStage, PrepareStage
from dra_migrate.plan.params import PlanParams, parse_duration
from dra_migrate.plan.problems import Problem

# Node step action -> the parameter its timeout is: the action registry's (plan/actions.py).
_STEP_TIMEOUTS = TIMEOUT_PARAMETERS


def contradictions(plan: Mapping[str, Any] | Plan) -> list[Problem]:
    """Problems where the stages contradict the parameters (soak, timeouts, wave sizes); [] when the
    parameters, or the plan, cannot be read (validate reports that). A mapping (rebase's, which validate
    has passed) is read by the codec first."""
    try:
        plan = plan if isinstance(plan, Plan) else Plan.from_dict(plan)
        params = PlanParams.from_dict(plan.parameters)
        soak = parse_duration(params.soak)
    except (InputError, TypeError, ValueError):
        return []
    out: list[Problem] = []
    for i, stage in enumerate(plan.stages):
        if not isinstance(stage, PoolStage) or not stage.pool:
            continue
        where: tuple[Any, ...] = ("stages", i)
        out += _soaks(stage, where, soak, params.soak)
        out += _timeouts(stage, where, plan.parameters)
        out += _wave_sizes(stage, where, params)
    return out


def _soaks(stage: PoolStage, where: tuple[Any, ...], soak: int, text: str) -> list[Problem]:
    """Every wave but a stage's last soaks at least `parameters.soak` (a longer soak is more caution)."""
    return [
        Problem(
            (*where, "waves", k, "soakAfter"),
            f"soaks {wave.soak_after}, less than parameters.soak {text}",
            "edit the waves' soakAfter with parameters.soak, or plan again with --soak",
        )
        for k, wave in enumerate(stage.waves[:-1])
        if wave.soak_s < soak
    ]


def _timeouts(stage: PoolStage, where: tuple[Any, ...], parameters: dict[str, Any]) -> list[Problem]:
    out = []
    for k, step in enumerate(stage.node_steps):
        key = _STEP_TIMEOUTS.get(Action(step.action)) if step.action in _STEP_TIMEOUTS else None
        if key is None:
            continue
        want = parameters.get(key)
        try:
            shorter = want is not None and step.timeout_s < parse_duration(str(want))
        except (InputError, ValueError):
            continue
        if shorter:  # a pool given more patience than the default is fine; less than promised is not
            out.append(
                Problem(
                    (*where, "nodeSteps", k, "timeout"),
                    f"step {step.id} times out after {step.timeout}, shorter than parameters.{key} {want}",
                    f"edit parameters.{key} with it, or plan again with the timeout you want",
                )
            )
    return out


def _wave_sizes(stage: PoolStage, where: tuple[Any, ...], params: PlanParams) -> list[Problem]:
    nodes = sum(len(w.nodes) for w in stage.waves)
    try:
        limit = params.wave_size(nodes)
    except InputError:
        return []
    return [
        Problem(
            (*where, "waves", k, "nodes"),
            f"{len(w.nodes)} nodes in one wave, more than parameters.maxUnavailable "
            f"{params.max_unavailable} allows ({limit} of the stage's {nodes})",
            "move nodes to another wave, or raise maxUnavailable with them",
        )
        for k, w in enumerate(stage.waves)
        if len(w.nodes) > limit
    ]


def originals_changed(original: Mapping[str, Any] | Plan, edited: Mapping[str, Any] | Plan) -> list[Problem]:
    """Where an edit changed what a node's inverses restore: its recorded `original` values (labels, cordon,
    annotations) or its uid, compared with the plan the edit started from, node by node. They are read from
    the cluster, not chosen: rollback and the uncordon step write them back, so an edited one would switch the
    device plugin off or leave the node cordoned on rollback. [] when either plan cannot be read."""
    try:
        before = original if isinstance(original, Plan) else Plan.from_dict(original)
        after = edited if isinstance(edited, Plan) else Plan.from_dict(edited)
    except (InputError, TypeError, ValueError):
        return []
    recorded = {n.node: n.original for _s, _w, n in before.nodes()}
    uids = before.node_uids()
    out: list[Problem] = []
    for i, stage in enumerate(after.stages):
        for k, wave in enumerate(stage.waves):
            for m, entry in enumerate(wave.nodes):
                was = recorded.get(entry.node)
                if was is None:
                    continue  # a node the original did not plan: validate checks it against the fingerprint
                at = ("stages", i, "waves", k, "nodes", m, "original")
                for field, now_value, old_value in _original_fields(entry.original, was):
                    out.append(
                        Problem(
                            (*at, *field),
                            f"node {entry.node}'s recorded original {'.'.join(map(str, field))} was "
                            f"{_shown(old_value)}, the edit makes it {_shown(now_value)}: rollback restores it",
                            "undo that change (the original values are read from the cluster); if the node "
                            "changed, make a new plan",
                        )
                    )
    if uids != after.node_uids():
        out.append(Problem(("fingerprint",), "the edit changed the nodes' recorded uids", "undo that change"))
    return out


def _original_fields(now: Mapping[str, Any], was: Mapping[str, Any]) -> list[tuple[tuple[str, ...], Any, Any]]:
    out: list[tuple[tuple[str, ...], Any, Any]] = []
    if now.get("unschedulable") != was.get("unschedulable"):
        out.append((("unschedulable",), now.get("unschedulable"), was.get("unschedulable")))
    for part in ("labels", "annotations"):
        new, old = now.get(part) or {}, was.get(part) or {}
        for key in sorted(set(new) & set(old)):  # a key added or dropped is validate's (the steps decide them)
            if new[key] != old[key]:
                out.append(((part, key), new[key], old[key]))
    return out


def _shown(value: Any) -> str:
    return "absent" if value is None else repr(value)


def deviceclasses_dropped(original: Mapping[str, Any] | Plan, edited: Mapping[str, Any] | Plan) -> list[Problem]:
    """Where an edit deleted the creation of a DeviceClass that a planned node's resource needs. The builder
    creates one only where no DeviceClass in the cluster maps the resource (`extendedResourceName`,
    dra/deviceclasses.py): without it, once a node's device plugin is off, no pod requesting the resource there
    (the canary first) can be scheduled. [] when either plan cannot be read."""
    try:
        before = original if isinstance(original, Plan) else Plan.from_dict(original)
        after = edited if isinstance(edited, Plan) else Plan.from_dict(edited)
    except (InputError, TypeError, ValueError):
        return []
    kept = {s.id for st in after.stages if isinstance(st, PrepareStage) for s in st.steps}
    needed: dict[str, str] = {}  # resource -> a stage whose nodes request it
    for stage, _wave, entry in after.nodes():
        for resource in (entry.canary_resource, *entry.resources):
            needed.setdefault(resource, stage.name)
    out: list[Problem] = []
    for st in before.stages:
        if not isinstance(st, PrepareStage):
            continue
        for step in st.steps:
            if step.action != Action.CREATE_DEVICECLASS or step.id in kept:
                continue
            spec = (step.params.get("manifest") or {}).get("spec") or {}
            mapped = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
            if isinstance(mapped, str) and mapped in needed:
                name = step.target.removeprefix("DeviceClass ")
                out.append(
                    Problem(
                        ("stages", 0, "steps"),
                        f"the edit deletes the creation of DeviceClass {name}, which maps {mapped} for the nodes "
                        f"of {needed[mapped]}: once their device plugin is off, no pod requesting it can be "
                        "scheduled there",
                        "put the step back (or leave out the stages that need it); if a DeviceClass now maps "
                        f"{mapped} in the cluster, make a new plan",
                    )
                )
    return out
