"""What every rule may read: the state, its inventory, generated classes, capacity, declared gates."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from dra_migrate.cluster.podmeta import drain_skips, is_finished
from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.dra.capacity import PoolCapacity
from dra_migrate.dra.deviceclasses import Generation
from dra_migrate.errors import InputError
from dra_migrate.inventory.dra import NVIDIA_DRA_DRIVER
from dra_migrate.inventory.fleet import EXTENDED_RESOURCE_GATE, GpuNode, parse_version
from dra_migrate.inventory.model import Inventory

__all__ = [
    "GENERIC_WORKLOAD",
    "READ_GATES",
    "CheckContext",
    "parse_feature_gates",
    "parse_version",
    "pods_the_drain_evicts",
    "still_to_migrate",
    "switched_in_place",
    "unread_gates",
]

GENERIC_WORKLOAD = "GenericWorkload"
# Every gate a rule or the capacity model reads from --feature-gate; any other is ignored, and `unread_gates`
# says so (a misspelt gate would otherwise be a declaration the operator believes made).
READ_GATES = (EXTENDED_RESOURCE_GATE, GENERIC_WORKLOAD)


def still_to_migrate(n: GpuNode) -> bool:
    """A GPU node the migration has not finished: it still runs the device plugin, or not yet the DRA plugin."""
    return not n.migrated


def pods_the_drain_evicts(ctx: CheckContext) -> Iterator[tuple[str, Obj]]:
    """(pool, pod) for each pod of the state the drain will evict from a node still to migrate: not finished, not
    being deleted, not one the drain skips (a DaemonSet's, a mirror pod). The rules that judge these pods (which
    jobs fail, which pods asked not to be interrupted) narrow it further."""
    pool_of = {n.name: n.pool for n in ctx.inventory.nodes if still_to_migrate(n)}
    for pod in ctx.state.of("Pod"):
        spec, meta = pod.get("spec"), pod.get("metadata")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if node not in pool_of or is_finished(pod) or drain_skips(pod):
            continue
        if isinstance(meta, dict) and meta.get("deletionTimestamp"):
            continue
        yield pool_of[node], pod


def switched_in_place(ctx: CheckContext, n: GpuNode) -> bool:
    """A node still to migrate whose own plugins and kubelet the plan switches: not one of a pool the plan
    replaces (plan/strategies.py), whose nodes are only drained, the new pool's nodes serving DRA."""
    # Worked out once per context: `setdefault(key, {...})` built the set on every call (nodes x pools).
    replaced = ctx.__dict__.get("_replaced_pools")
    if replaced is None:
        replaced = ctx.__dict__["_replaced_pools"] = {
            p.name for p in ctx.inventory.pools if p.platform is not None and p.platform.strategy == "replace-pool"
        }
    return still_to_migrate(n) and n.pool not in replaced


def parse_feature_gates(values: tuple[str, ...]) -> dict[str, bool]:
    """--feature-gate Name=true|false (repeatable, or comma-separated as Kubernetes writes them)."""
    gates: dict[str, bool] = {}
    for value in values:
        for item in value.split(","):
            name, sep, raw = item.strip().partition("=")
            if not sep or raw.lower() not in ("true", "false") or not name:
                raise InputError(f"bad --feature-gate {item!r}", "write it as Name=true or Name=false")
            gates[name] = raw.lower() == "true"
    return gates


def unread_gates(gates: dict[str, bool]) -> list[str]:
    """A warning for each declared gate no check reads. Kubernetes has many gates and an operator may paste
    the cluster's whole --feature-gates list, so an unread gate is not refused (kube-apiserver refuses only
    gates it does not know, `k8s.io/component-base/featuregate` `Set`); a near miss of one we read is named."""
    warnings = []
    for name in sorted(set(gates) - set(READ_GATES)):
        close = difflib.get_close_matches(name, READ_GATES, n=1, cutoff=0.8)
        hint = f"did you mean {close[0]}? " if close else ""
        warnings.append(
            f"--feature-gate {name} is not one this tool reads ({', '.join(READ_GATES)}): ignored; {hint}".rstrip()
        )
    return warnings


@dataclass
class CheckContext:
    state: ClusterState
    inventory: Inventory
    generation: Generation
    capacity: list[PoolCapacity]
    feature_gates: dict[str, bool] = field(default_factory=dict)
    dra_driver: str = NVIDIA_DRA_DRIVER  # --dra-driver: the DRA driver whose slices serve the GPUs

    @property
    def version(self) -> tuple[int, int, int] | None:
        return parse_version(self.state.source.kubernetes_version)

    @cached_property
    def _pool_members(self) -> dict[str, list[GpuNode]]:
        nodes = {n.name: n for n in self.inventory.nodes}
        return {p.name: [nodes[name] for name in p.nodes if name in nodes] for p in self.inventory.pools}

    def pool_members(self, pool: str) -> list[GpuNode]:
        """A pool's GPU nodes, in its order. The index is built once: a check that runs per pool must not walk
        the whole fleet for each (2,000 pools of 5 nodes at 10,000 nodes: 7 s of `plan` once did)."""
        return self._pool_members.get(pool, [])
