"""A plan's step and its inverse, typed (the model's leaves; `model.py` re-exports them). Apart from the
model so that `show`'s outline of a plan (plan/outline.py) types its steps without importing the whole model:
a module is memory, and issue 29 holds `show`'s peak to 5x the plan file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_migrate.plan.actions import Action, InverseAction
from dra_migrate.plan.fields import _duration, _enum, _fields, _mapping, _str


@dataclass(frozen=True)
class Inverse:
    """How to undo a step: the action and the original values it restores."""

    action: str  # an InverseAction
    restore: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"action": str(self.action), "restore": self.restore}

    @classmethod
    def from_dict(cls, value: Any, path: str) -> Inverse:
        doc = _fields(value, path, ("action", "restore"))
        action = _enum(InverseAction, doc["action"], f"{path}.action")
        return cls(action, dict(_mapping(doc["restore"], f"{path}.restore")))


@dataclass(frozen=True)
class Step:
    id: str  # stable: "<stage>/<node>/<action>" or "prepare/<action>/<target>" ("<id>" in a pool's nodeSteps)
    action: str  # an Action
    target: str  # "Node <name>", "DeviceClass <name>", "Driver gpu.nvidia.com"
    params: dict[str, Any]
    precondition: str
    timeout: str  # a duration, e.g. "10m"
    inverse: Inverse | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": str(self.action),
            "target": self.target,
            "params": self.params,
            "precondition": self.precondition,
            "timeout": self.timeout,
            "inverse": self.inverse.to_dict() if self.inverse else None,
        }

    @classmethod
    def from_dict(cls, value: Any, path: str) -> Step:
        doc = _fields(value, path, ("id", "action", "target", "params", "precondition", "timeout", "inverse"))
        inverse = doc["inverse"]
        return cls(
            id=_str(doc["id"], f"{path}.id"),
            action=_enum(Action, doc["action"], f"{path}.action"),
            target=_str(doc["target"], f"{path}.target"),
            params=dict(_mapping(doc["params"], f"{path}.params")),
            precondition=_str(doc["precondition"], f"{path}.precondition"),
            timeout=_duration(doc["timeout"], f"{path}.timeout"),
            inverse=None if inverse is None else Inverse.from_dict(inverse, f"{path}.inverse"),
        )

    @property
    def timeout_s(self) -> float:
        from dra_migrate.plan.durations import parse_duration

        return float(parse_duration(self.timeout))
