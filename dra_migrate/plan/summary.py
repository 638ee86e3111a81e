"""What a plan says of itself for review: its `summary` (counts and the estimate) and its `review`
section (capacity, inventory per pool, the pools planned and left out), so `report PLAN` stands alone
(split out of plan/build.py, issue 29).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.plan import strategies
from dra_migrate.plan.estimate import drain_grace_by_node, drain_holds, summary_estimate
from dra_migrate.plan.model import Stage
from dra_migrate.plan.params import PlanParams

if TYPE_CHECKING:  # the checks pull in the CEL engine (see plan/steps.py)
    from dra_migrate.checks.run import Readiness


def review_section(readiness: Readiness, selected: list[str], excluded: list[dict[str, Any]]) -> dict[str, Any]:
    """What review needs at planning time, so `report PLAN` stands alone: capacity before/after per pool,
    the inventory summary per pool, the pools planned and those left out with why."""
    consumers: Counter[str] = Counter(p for c in readiness.inventory.consumers for p in c.pools)
    planned = set(selected)  # asked of every pool: a list was pools x pools
    return {
        "pools": selected,
        "strategies": [strategies.explain(p.name, p.platform) for p in readiness.inventory.pools if p.name in planned],
        "excludedPools": excluded,
        "capacity": [c.to_dict() for c in readiness.capacity],
        "inventory": {
            "consumers": len(readiness.inventory.consumers),
            "gpuNodes": len(readiness.inventory.nodes),
            "pools": [
                {
                    "name": p.name,
                    "nodes": len(p.nodes),
                    "allocatable": dict(sorted(p.allocatable.items())),
                    "requested": dict(sorted(p.requested.items())),
                    "consumers": consumers.get(p.name, 0),
                }
                for p in readiness.inventory.pools
            ],
        },
    }


def summary_section(stages: list[Stage], params: PlanParams, state: ClusterState) -> dict[str, Any]:
    pool_stages = [s for s in stages if s.pool is not None]
    gpu_pods = {n.node: n.gpu_pods for s in pool_stages for w in s.waves for n in w.nodes}
    # The estimate follows the executor's timing model (dra_migrate/plan/estimate.py); the pods' grace
    # periods it needs are recorded in the summary, so the plan alone gives it (plan/validate.py).
    drain_grace = drain_grace_by_node(state.of("Pod"), gpu_pods)
    # Budgets that can hold a wave's drains make the estimate a range (estimate.drain_holds).
    waves = [[n.node for n in w.nodes] for s in pool_stages for w in s.waves]
    holds = drain_holds(state.of("policy/PodDisruptionBudget"), state.of("Pod"), waves)
    return {
        "pools": [s.pool for s in pool_stages],
        "nodes": sum(len(w.nodes) for s in pool_stages for w in s.waves),
        "waves": sum(len(s.waves) for s in pool_stages),
        "evictedPods": sum(w.evicted_pods for s in pool_stages for w in s.waves),
        **summary_estimate(stages, drain_grace, holds),
    }
