"""`show PLAN`: summary first (pools, nodes, waves, disruption, duration, what can be applied), then the
stages with each step's parameters in words (never a raw `{original.…}` placeholder)."""

from __future__ import annotations

import json
from typing import Any

from dra_migrate.plan.actions import Action, InverseAction
from dra_migrate.plan.outline import PlanOutline, StageOutline
from dra_migrate.plan.phases import estimate_text
from dra_migrate.plan.scope import blockers_by_stage, stage_blockers
from dra_migrate.render import Document, styled, verdict
from dra_migrate.render.disruption import WaveRow, gangs_table, waves_table

# Parameters that say how, not what: `-o wide` and `-o json` show them.
_QUIET_PARAMS = (
    "skip", "via", "image", "placement", "expect", "driver", "manifest", "command", "sources", "provisioner", "check",
)  # fmt: skip

# What a per-node placeholder stands for, said as a reviewer reads it (plan/model.py `expand` fills them).
_PLACEHOLDERS = {
    "node.resources": "the node's GPU resources",
    "node.expectedDevices": "the node's expected device count",
    "node.canaryResource": "the node's canary resource",
    "original.unschedulable": "the node's original value",
}


def param_value(value: Any) -> str:
    """A step parameter for a table cell: placeholders in words, lists and maps as text, no reprs."""
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        path = value[1:-1]
        if path.startswith(("original.labels.", "original.annotations.")):
            return "its original value (removed if it had none)"
        return _PLACEHOLDERS.get(path, path.replace(".", " "))
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(unset)"
    if isinstance(value, list | tuple):
        return ", ".join(param_value(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={param_value(v)}" for k, v in value.items()) or "-"
    return str(value)


def subject_of(action: str) -> str:
    """What a step's `key`/`value` name on the node: an annotation for `set-annotation`, else a label."""
    return "annotation" if action == Action.SET_ANNOTATION else "label"


def step_params(params: dict[str, Any], quiet: bool = True, what: str = "label") -> str:
    """`key=value, ...`; a label step reads `label nvidia.com/...=false` (`what`: "annotation" for those)."""
    shown = {k: v for k, v in params.items() if not (quiet and k in _QUIET_PARAMS)}
    if set(shown) >= {"key", "value"}:
        rest = {k: v for k, v in shown.items() if k not in ("key", "value")}
        head = f"{what} {shown['key']}={param_value(shown['value'])}"
        return ", ".join([head] + [f"{k}={param_value(v)}" for k, v in rest.items()])
    return ", ".join(f"{k}={param_value(v)}" for k, v in shown.items()) or "-"


def undo_text(inverse: dict[str, Any] | None) -> str:
    if not inverse:
        return "-"
    restore = inverse.get("restore") or {}
    if inverse.get("action") == "none":
        return f"none ({restore.get('why', 'nothing to undo')})" if restore.get("why") else "none"
    what = "annotation" if inverse.get("action") == InverseAction.RESTORE_ANNOTATION else "label"
    detail = step_params({k: v for k, v in restore.items() if k != "why"}, quiet=False, what=what)
    return str(inverse.get("action")) + (f": {detail}" if detail != "-" else "")


def _platform_command(doc: Document, params: dict[str, Any]) -> None:
    """What the operator runs on the platform for a replace-pool (the tool calls no cloud API), in full."""
    doc.line(f"     run on the platform ({params.get('platform')}): {params.get('command')}")
    if params.get("manifest"):
        # JSON is YAML: kubectl applies it as it is.
        for line in json.dumps(params["manifest"], indent=2).splitlines():
            doc.line(f"       {line}")
        doc.line("       EOF")
    for check in params.get("check") or []:
        doc.line(f"     check first: {check}")
    if params.get("retire"):
        # The old nodes stay cordoned and shielded from their autoscaler: only this removes them.
        doc.line(f"     afterwards, once the migration is proven: {params['retire']}")
    for source in params.get("sources") or []:
        doc.line(f"     source: {source}")


def stage_verdict(stage: StageOutline, plan: PlanOutline) -> str:
    blocked = stage_blockers(plan.findings, stage.pool)
    if not blocked:
        return verdict(True, "applicable")
    return verdict(False, no=f"blocked by {', '.join(blocked)}")


def plan_document(plan: PlanOutline) -> Document:
    """`show`'s document: the summary, then each stage (`outline_of` for a plan in memory; `show` streams
    the outline of a file: plan/stream.py)."""
    doc = Document()
    s = plan.summary
    doc.heading("Plan")
    state = (
        verdict(True, "applicable")
        if plan.applicable
        else verdict(False, no="NOT applicable as a whole: see the blockers and the stages below")
    )
    doc.line(
        f"cluster {plan.cluster} · Kubernetes {plan.kubernetes_version or '?'} · "
        + state
        + (" · edited and rebased" if plan.edited else "")
    )
    doc.line(
        f"{len(s['pools'])} pool(s), {s['nodes']} node(s), {s['waves']} wave(s), {s['evictedPods']} pod(s) evicted, "
        f"estimated {estimate_text(s, 'soaks included', _wave_sizes(plan))}"
    )
    p = plan.parameters
    doc.line(
        f"waves of at most {p['maxUnavailable']} of a pool · soak {p['soak']} · drain {p['drain']} pods · "
        f"device plugin off: {p['devicePluginLabel']}={p['devicePluginOff']} · DRA on: {p['draLabel']}={p['draOn']} "
        "(where no DaemonSet was read; each node's `placement` says what its steps switch)"
    )
    _left_out(doc, plan)
    blockers = [f for f in plan.findings if f["severity"] == "blocker"]
    if blockers:
        doc.heading(f"Blockers ({len(blockers)})")
        for f in blockers:
            where = "cluster-wide" if f.get("scope", "cluster") == "cluster" else "pool " + ", ".join(f["pools"])
            doc.line(styled(f"{f['id']} ({where}): {f['message']}", "bad"))

    doc.heading("Stages")
    blocked_by = blockers_by_stage(plan.findings)  # read once: per stage it was stages x findings
    doc.table(
        ["stage", "pool", "nodes", "waves", "pods evicted", "can apply", "blocked by"],
        [
            [
                st.name,
                st.pool or "-",
                sum(len(w.nodes) for w in st.waves),
                len(st.waves),
                sum(w.evicted_pods for w in st.waves),
                verdict(not blocked_by(st.pool)),
                ", ".join(blocked_by(st.pool)) or "-",
            ]
            for st in plan.stages
        ],
        wide=["pool"],
    )

    doc.heading("Disruption per wave")
    doc.add(waves_table(_wave_view(plan)))

    gangs = s.get("gangs") or []
    if gangs:
        doc.heading("Disruption per gang")
        doc.add(gangs_table(gangs))

    for st in plan.stages:
        _stage(doc, st, plan)
    return doc


def _left_out(doc: Document, plan: PlanOutline) -> None:
    excluded = plan.summary.get("excludedNodes") or []
    if excluded:
        doc.heading(f"Left out ({len(excluded)})")
        for e in excluded:
            doc.line(f"{e['node']} ({e['pool']}): {e['reason']}")
    for x in plan.review.get("excludedPools") or []:
        about = [f"{f['id']} ({f['severity']})" for f in x.get("findings") or []]
        doc.line(
            f"left out: pool {x['pool']}: {x['reason']}" + (f"; its findings: {', '.join(about)}" if about else "")
        )


def _wave_sizes(plan: PlanOutline) -> list[int]:
    """The nodes of each pool stage's wave, in order (the estimate's sync-phase range)."""
    return [len(w.nodes) for st in plan.stages if st.pool is not None for w in st.waves]


def _wave_view(plan: PlanOutline) -> list[WaveRow]:
    """The pool stages' waves as `waves_table` draws them (the report's rows are the same type)."""
    return [
        WaveRow(st.name, w.name, list(w.nodes), w.evicted_pods, w.soak_after)
        for st in plan.stages
        if st.pool is not None
        for w in st.waves
    ]


def _stage(doc: Document, st: StageOutline, plan: PlanOutline) -> None:
    doc.heading(f"Stage {st.name}")
    doc.line(stage_verdict(st, plan))
    if st.pool is not None:
        doc.line(f"pool {st.pool} · resources {', '.join(st.resources)} · every node, in order:")
    # One line per step (wrapped, never cut): the parameters are what a reviewer must read.
    for i, x in enumerate(st.steps, 1):
        name = x.id if st.pool is not None else f"{x.action} {x.target}"
        params = step_params(x.params, what=subject_of(x.action))
        what = f"{name}: {params}" if params != "-" else name
        undo = undo_text(x.inverse.to_dict() if x.inverse else None)
        doc.line(f"  {i}. {what} · timeout {x.timeout} · undo: {undo}")
        if x.action == Action.AWAIT_POOL:
            _platform_command(doc, x.params)
    if st.pool is None:
        return
    doc.table(
        ["wave", "node", "gpu pods", "other pods", "devices expected", "canary requests"],
        st.nodes,  # each NodeLine is its row (plan/outline.py)
        wide=["other pods", "canary requests"],
    )
