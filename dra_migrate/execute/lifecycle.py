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
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dra_migrate.errors import MigrateError
from dra_migrate.execute.contract import Ops
from dra_migrate.execute.units import Unit

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
