"""Assemble everything a check needs from one ClusterState, then run the rules."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from dra_migrate.checks.catalog import run_checks
from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, Severity
from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.capacity import ClassSelectors, PoolCapacity, compile_classes, pool_capacity
from dra_migrate.dra.deviceclasses import Generation, generate
from dra_migrate.inventory.dra import NVIDIA_DRA_DRIVER
from dra_migrate.inventory.model import Inventory, build_inventory

FORMAT_VERSION = 1


@dataclass
class Readiness:
    inventory: Inventory
    generation: Generation
    classes: list[ClassSelectors]
    capacity: list[PoolCapacity]
    findings: list[Finding]

    @property
    def blockers(self) -> int:
        return sum(1 for f in self.findings if f.severity is Severity.BLOCKER)

    def scope_of(self, finding: Finding) -> dict[str, Any]:
        """`scope: pool` with its `pools` when the finding is about pools or their nodes only (it blocks
        only those pools' stages); `scope: cluster` otherwise (it blocks the whole plan). `check` and the
        plan record the same scope, so `check`'s table and the report's Findings agree.

        Objects are `ObjectRef`s (checks/model.py)."""
        if finding.pools:
            return {"scope": "pool", "pools": sorted(set(finding.pools))}
        node_pool = self._node_pool
        pools: set[str] = set()
        for obj in finding.objects:
            if obj.kind == "Pool":
                pools.add(obj.name)
            elif obj.kind == "Node" and obj.name in node_pool:
                pools.add(node_pool[obj.name])
            else:
                return {"scope": "cluster", "pools": []}
        return {"scope": "pool", "pools": sorted(pools)} if pools else {"scope": "cluster", "pools": []}

    @cached_property
    def _node_pool(self) -> dict[str, str]:
        """Each node's pool: made once, not per finding (a fleet of many pools has a finding or more per pool)."""
        return {n.name: n.pool for n in self.inventory.nodes}

    def to_dict(self) -> dict[str, object]:
        return {
            "formatVersion": FORMAT_VERSION,
            "kubernetesVersion": self.inventory.state.source.kubernetes_version,
            "summary": {s.value: sum(1 for f in self.findings if f.severity is s) for s in Severity},
            "findings": [{**f.to_dict(), **self.scope_of(f)} for f in self.findings],
            "capacity": [c.to_dict() for c in self.capacity],
        }


def assess(
    state: ClusterState,
    *,
    pool_labels: tuple[str, ...] = (),
    feature_gates: dict[str, bool] | None = None,
    dra_driver: str = NVIDIA_DRA_DRIVER,
) -> Readiness:
    inv = build_inventory(state, pool_labels, dra_driver)
    gen = generate(state, inv, dra_driver)
    classes = compile_classes(state, [(p.name, p.extended_resource_name, p.selector) for p in gen.proposals])
    capacity = pool_capacity(state, inv, classes, feature_gates=feature_gates, driver=dra_driver)
    ctx = CheckContext(state, inv, gen, capacity, feature_gates or {}, dra_driver)
    return Readiness(inv, gen, classes, capacity, run_checks(ctx))
