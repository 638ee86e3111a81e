"""What every rule may read: the state, its inventory, generated classes, capacity, declared gates."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from migrate.cluster.state import ClusterState
from migrate.dra.capacity import PoolCapacity
from migrate.dra.deviceclasses import Generation
from migrate.errors import InputError
from migrate.inventory.model import Inventory

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """v1.34.2, 1.34.2-gke.1000, v1.35.0+k3s1 -> (1, 34, 2); None when unparseable."""
    m = _VERSION_RE.match(text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


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


@dataclass
class CheckContext:
    state: ClusterState
    inventory: Inventory
    generation: Generation
    capacity: list[PoolCapacity]
    feature_gates: dict[str, bool] = field(default_factory=dict)

    @property
    def version(self) -> tuple[int, int, int] | None:
        return parse_version(self.state.source.kubernetes_version)
