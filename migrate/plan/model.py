"""The Plan model: stages of waves of per-node steps, each with its precondition, timeout and inverse.

Plain frozen dataclasses; `to_dict` gives the file's shape (README "Plan files"). Everything in a plan
is a function of the cluster state and the parameters: no wall-clock time, so the same input always
gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Inverse:
    """How to undo a step: the action and the original values it restores."""

    action: str
    restore: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "restore": self.restore}


@dataclass(frozen=True)
class Step:
    id: str  # stable: "<stage>/<node>/<action>" or "prepare/<action>/<target>"
    action: str
    target: str  # "Node <name>", "DeviceClass <name>", "Driver gpu.nvidia.com"
    params: dict[str, Any]
    precondition: str
    timeout: str  # a duration, e.g. "10m"
    inverse: Inverse | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "target": self.target,
            "params": self.params,
            "precondition": self.precondition,
            "timeout": self.timeout,
            "inverse": self.inverse.to_dict() if self.inverse else None,
        }


@dataclass(frozen=True)
class NodeEntry:
    """One node of a wave: what is known of it, and the original values its steps' inverses restore."""

    node: str
    gpu_pods: int  # pods a `--drain gpu` evicts
    other_pods: int  # further pods a `--drain all` evicts
    expected_devices: int  # gpu.nvidia.com devices its slices must hold
    resources: tuple[str, ...]  # the device-plugin resources it advertises today (must go to 0)
    canary_resource: str
    original: dict[str, Any]  # {"unschedulable": bool, "labels": {key: value or None}}
    placement: dict[str, Any] = field(default_factory=dict)  # what switching each plugin means here, and why

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpuPods": self.gpu_pods,
            "otherPods": self.other_pods,
            "expectedDevices": self.expected_devices,
            "resources": list(self.resources),
            "canaryResource": self.canary_resource,
            "original": self.original,
            **({"placement": self.placement} if self.placement else {}),
        }


@dataclass(frozen=True)
class Wave:
    name: str
    nodes: tuple[NodeEntry, ...]
    evicted_pods: int
    soak_after: str  # soak before the next wave ("0s" for the last)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "evictedPods": self.evicted_pods,
            "soakAfter": self.soak_after,
            "nodes": [n.to_dict() for n in self.nodes],
        }


@dataclass(frozen=True)
class Stage:
    """`prepare` has concrete steps; a pool stage has the step list every one of its nodes runs, in order,
    written once (with `{node.*}` and `{original.*}` standing for each node's values, see `expand`)."""

    name: str
    pool: str | None  # None for `prepare`
    resources: tuple[str, ...]  # GPU resource names the pool's nodes serve
    steps: tuple[Step, ...]
    waves: tuple[Wave, ...]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.pool is not None:
            out["pool"] = self.pool
            out["resources"] = list(self.resources)
            out["nodeSteps"] = [s.to_dict() for s in self.steps]
            out["waves"] = [w.to_dict() for w in self.waves]
        else:
            out["steps"] = [s.to_dict() for s in self.steps]
        return out


def _fill(value: Any, node: dict[str, Any]) -> Any:
    """Replace "{node.x}" / "{original.x}" / "{original.labels.<key>}" placeholders with the node's values."""
    if isinstance(value, dict):
        return {k: _fill(v, node) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, node) for v in value]
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        path = value[1:-1]
        if path.startswith("original.labels."):
            return (node.get("original") or {}).get("labels", {}).get(path[len("original.labels.") :])
        if path.startswith("original."):
            return (node.get("original") or {}).get(path[len("original.") :])
        if path.startswith("node."):
            return node.get(path[len("node.") :])
    return value


def expand(stage: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The concrete steps of one node of a pool stage (file shapes in, file shapes out)."""
    steps = []
    for template in stage.get("nodeSteps") or []:
        step = _fill(template, node)
        step["id"] = f"{stage['name']}/{node['node']}/{template['id']}"
        step["target"] = f"Node {node['node']}"
        steps.append(step)
    return steps
