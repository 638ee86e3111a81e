"""Before `rollback` writes anything: the node fields it restores still hold what the migration left there.

Apply refuses a plan the cluster drifted from (`session.refuse_if_stale`); rollback writes the values the
plan recorded before the migration, so a field someone changed since the migration wrote it would be
overwritten: a node an operator cordoned after the apply (a GPU fault, maintenance) put back into service by
the undo of its cordon, a label set by hand switched again. The migration's last value of each field is
the newest step still to undo that writes it: certain when the journal records that step done, either its
value or its inverse's when it is half-done (a crash, a failed or interrupted undo: the write may or may not
have landed). A node that is not the plan's any more (deleted, or another uid) is not judged: its undos
write nothing (`actions._not_the_planned_node`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.execute.contract import Ops
from dra_migrate.execute.units import PlannedStep
from dra_migrate.plan.model import Action

Field = tuple[str, str]  # ("unschedulable", "") | ("label", key) | ("annotation", key)


def _writes(ps: PlannedStep) -> tuple[Field, Any, Any] | None:
    """The node field a step writes, the value it writes, and the value its inverse restores."""
    step, restore = ps.step, (ps.step.inverse.restore if ps.step.inverse else {})
    if step.action in (Action.CORDON, Action.UNCORDON):
        return ("unschedulable", ""), bool(step.params.get("unschedulable")), bool(restore.get("unschedulable"))
    if step.action in (Action.SET_LABEL, Action.SET_ANNOTATION):
        kind = "label" if step.action == Action.SET_LABEL else "annotation"
        return (kind, str(step.params.get("key"))), step.params.get("value"), restore.get("value")
    return None


def _now(state: Mapping[str, Any], field: Field) -> tuple[bool, Any]:
    kind, key = field
    if kind == "unschedulable":
        return True, bool(state.get("unschedulable"))
    values = state.get("labels" if kind == "label" else "annotations")
    return (True, values.get(key)) if isinstance(values, Mapping) else (False, None)


def _shown(value: Any) -> str:
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)


def _name(field: Field) -> str:
    kind, key = field
    return "unschedulable" if kind == "unschedulable" else f"{kind} {key}"


def changed_since(
    steps: Iterable[PlannedStep], to_undo: set[str], applied: set[str], node_uids: Mapping[str, str], ops: Ops
) -> list[str]:
    """One line per node field that no longer holds what the migration left there (empty: none)."""
    left: dict[str, dict[Field, tuple[Any, set[Any]]]] = {}  # node -> field -> (its value, what may be there)
    for ps in steps:  # the plan's order: a later step's write is the newer
        writes = _writes(ps) if ps.node is not None and ps.id in to_undo else None
        if writes is None or ps.node is None:
            continue
        field, value, restored = writes
        left.setdefault(ps.node, {})[field] = (value, {value} if ps.id in applied else {value, restored})
    out = []
    for node, fields in left.items():
        state = ops.node_state(node, watched=True)  # the watches' copy when they run: no GET a node
        uid = node_uids.get(node)
        if not state.get("exists") or (uid and state.get("uid") != uid):
            continue
        for field, (value, allowed) in fields.items():
            known, now = _now(state, field)
            if known and now not in allowed:
                out.append(f"node {node}: {_name(field)} is {_shown(now)}, the migration left it {_shown(value)}")
    return out


def refuse_if_changed(
    steps: Iterable[PlannedStep], to_undo: set[str], applied: set[str], node_uids: Mapping[str, str], ops: Ops
) -> None:
    """An InputError (rollback refused, nothing written) naming the first field `changed_since` finds."""
    changed = changed_since(steps, to_undo, applied, node_uids, ops)
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise InputError(
            f"rollback refused, nothing changed: {changed[0]}{more}; someone changed it since, and rollback would "
            "overwrite it",
            "set it back as the migration left it, then run rollback again (it restores the pre-migration values; "
            "cordon a node again afterwards if it must stay out of service)",
        )
