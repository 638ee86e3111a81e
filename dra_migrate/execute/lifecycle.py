"""A node of a wave that the pool's lifecycle removed or replaced since the plan, found before the wave's first
step (`gone_from_wave`).

An apply runs for hours while autoscalers and node lifecycle change the pool:
- the cluster autoscaler removes a node unneeded for `scale-down-unneeded-time`; it spares a node being deleted
  and one annotated `cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`, not a cordoned one
  (kubernetes/autoscaler cluster-autoscaler/core/scaledown/eligibility/eligibility.go
  `unremovableReasonAndNodeUtilization`). The plan's `protect` step annotates a node only when its own lane
  starts, so the nodes of later waves are unprotected (plan/steps.py);
- Karpenter consolidates or replaces a drifted node, a spot reclaim deletes one, GKE auto-repair recreates one
  under the same name: the API server gives the new Node object another uid (k8s.io/apimachinery ObjectMeta.UID,
  "unique in time and space").

The node's own first step refuses it (actions.py `_check_node`), but the wave's other lanes start beside it: a
healthy node of the wave was protected and cordoned (drained, with a slower refusal) for nothing, then rolled
back, and again on every resume. So the check before a wave stops the run first, nothing of the wave touched. A
new plan lists the pool as it is now, and the nodes migrated so far as on DRA.

And at the run's end, the nodes that joined an in-place pool since the plan and run the device plugin
(`joined_on_the_device_plugin`): the pool's stage is done, but its node group's template still makes nodes
on the device plugin.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dra_migrate.errors import MigrateError
from dra_migrate.execute.contract import Ops
from dra_migrate.execute.units import Unit
from dra_migrate.inventory.fleet import pool_of
from dra_migrate.inventory.platform import REPLACE_POOL
from dra_migrate.plan.model import Action, Plan, PoolStage
from dra_migrate.plan.steps import ENABLE_DRA_PLUGIN

_REPLAN = "make a new plan (dra-migrate plan): it lists the pool as it is now, the nodes migrated so far as on DRA"


def gone_from_wave(
    ops: Ops, unit: Unit, done: Collection[str], uids: Mapping[str, str], seen: dict[str, Mapping[str, object]]
) -> str | None:
    """The failure when a node of the wave with steps still to run no longer exists, or exists under another
    uid than the plan's fingerprint recorded, else None. Read from the watched copy (no GET per node), each
    node's state kept in `seen` for the other checks before the wave; a node that cannot be read now is left
    to its own steps."""
    nodes = dict.fromkeys(ps.node for ps in unit.steps if ps.node is not None and ps.id not in done)
    for node in nodes:
        try:
            state = seen[node] = ops.node_state(node, watched=True)
        except MigrateError:
            continue
        if not state.get("exists"):
            why = "no longer exists (deleted since the plan: a scale-down, a spot reclaim, a consolidation)"
        elif uids.get(node) and state.get("uid") != uids[node]:
            why = "was replaced since the plan (the same name, another uid: a repair or a replacement)"
        else:
            continue
        return f"node {node} of {unit.stage}/{_wave(unit)} {why}; nothing of the wave was touched; {_REPLAN}"
    return None


def _wave(unit: Unit) -> str:
    return unit.wave.name if unit.wave is not None else "prepare"


def joined_on_the_device_plugin(
    plan: Plan, states: Mapping[str, Mapping[str, object]], done: Collection[str]
) -> list[str]:
    """One line per in-place pool whose stages are all done, naming the nodes that joined it since the plan (not
    recorded by its fingerprint with their uid) without the stage's DRA switch label: a scale-up or a repair makes
    a node from the node group's template, which the in-place switch never changed, so it runs the device
    plugin (`plan`'s `in-place-pool-template` warned of the template). `states`: `Ops.node_states`."""
    pools: dict[str, list[PoolStage]] = {}
    for stage in plan.pool_stages():
        pools.setdefault(stage.pool, []).append(stage)
    joined = _joined_by_pool(plan, states)  # once: per pool it would be pools x nodes
    out = []
    for pool, stages in pools.items():
        switches = [_dra_switch(s) for s in stages]
        if any(s.strategy == REPLACE_POOL for s in stages) or None in switches:
            continue  # a replace-pool's old pool is retired; its new pool is not the plan's
        if not all(step.id in done for s in stages for w in s.waves for e in w.nodes for step in s.steps_for(e)):
            continue  # the pool is not migrated yet (or its run stopped): its end says so
        planned = {e.node for s in stages for w in s.waves for e in w.nodes}
        left = [
            node
            for node, labels in joined.get(pool, [])
            if node not in planned and not any(sw is not None and labels.get(sw[0]) == sw[1] for sw in switches)
        ]
        if left:
            names = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
            out.append(
                f"pool {pool}: {len(left)} node(s) joined since the plan and run the device plugin, not DRA: {names} "
                "(its node group's template lacks the switch labels: in-place-pool-template); add them to the "
                "template, then make a new plan (dra-migrate plan) to migrate these nodes"
            )
    return out


def _joined_by_pool(
    plan: Plan, states: Mapping[str, Mapping[str, object]]
) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """The nodes of `states` the plan's fingerprint does not record with their uid, by pool, with their labels."""
    recorded = set(plan.node_uids().items())
    labels_keys = tuple(str(k) for k in plan.parameters.get("poolLabels") or [])
    out: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for node, state in sorted(states.items()):
        if (node, str(state.get("uid", ""))) in recorded:
            continue
        raw = state.get("labels")
        labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
        out.setdefault(pool_of(labels, labels_keys, state.get("annotations")), []).append((node, labels))
    return out


def _dra_switch(stage: PoolStage) -> tuple[str, str] | None:
    """(label, value) the stage's enable-dra-plugin step sets, or None (no such step: not switched in place)."""
    for step in stage.node_steps:
        if step.id == ENABLE_DRA_PLUGIN and step.action == Action.SET_LABEL:
            key, value = step.params.get("key"), step.params.get("value")
            if isinstance(key, str) and isinstance(value, str):
                return key, value
    return None
