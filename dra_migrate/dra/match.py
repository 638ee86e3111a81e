"""Offline matching: which devices of which nodes and pools each DeviceClass selects.

Existing classes and the ones `generate deviceclasses` would create are evaluated with the same CEL
semantics as kube-scheduler (dra_migrate.dra.cel) against each GPU node's devices: the ResourceSlices it
publishes, or, before its DRA plugin runs, the devices the NVIDIA DRA driver would publish
(dra_migrate.dra.devices).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.capacity import ClassSelectors
from dra_migrate.dra.cel import SelectorEvaluationError
from dra_migrate.dra.devices import NVIDIA_DRIVER, NodeDevices, node_devices
from dra_migrate.inventory.model import Inventory


@dataclass
class NodeMatch:
    node: str
    source: str
    devices: list[str]


@dataclass
class ClassMatch:
    cls: ClassSelectors
    pools: dict[str, list[NodeMatch]] = field(default_factory=dict)
    # Devices whose evaluation failed (a missing attribute): the scheduler cannot allocate from them
    # with this class, so they are shown, not silently dropped. Count and first message.
    errors: int = 0
    first_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.cls.name,
            "extendedResourceName": self.cls.extended_resource_name,
            "proposed": self.cls.proposed,
            "selectors": [s.expression for s in self.cls.selectors],
            "devices": sum(len(n.devices) for ns in self.pools.values() for n in ns),
            "evaluationErrors": self.errors,
            "firstEvaluationError": self.first_error,
            "pools": [
                {
                    "pool": pool,
                    "devices": sum(len(n.devices) for n in nodes),
                    "nodes": [{"node": n.node, "source": n.source, "devices": n.devices} for n in nodes],
                }
                for pool, nodes in sorted(self.pools.items())
            ],
        }


def match_classes(
    state: ClusterState, inv: Inventory, classes: list[ClassSelectors], driver: str = NVIDIA_DRIVER
) -> list[ClassMatch]:
    devices = node_devices(state, driver)
    pool_of = {n.name: n.pool for n in inv.nodes}
    out = []
    for cls in sorted(classes, key=lambda c: (c.proposed, c.name)):
        m = ClassMatch(cls)
        for node in sorted(devices):
            matched = _match_node(m, devices[node], driver)
            if matched:
                m.pools.setdefault(pool_of.get(node, "(unpooled)"), []).append(
                    NodeMatch(node, devices[node].source, matched)
                )
        out.append(m)
    return out


def _match_node(m: ClassMatch, nd: NodeDevices, driver: str) -> list[str]:
    matched = []
    for d in nd.devices:
        try:
            if all(s.matches(d, driver) for s in m.cls.selectors):
                matched.append(str(d.get("name")))
        except SelectorEvaluationError as e:
            m.errors += 1
            m.first_error = m.first_error or f"{nd.node}/{d.get('name')}: {e}"
    return matched
