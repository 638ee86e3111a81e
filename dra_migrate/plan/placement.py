"""What switching each plugin means on a node: the label that turns the device plugin off and the one
that turns the DRA plugin on, from the DaemonSets as installed (`inventory.operator.*_placement`), and the
groups of a pool's nodes that need the same labels switched (split out of plan/build.py, issue 29).
"""

from __future__ import annotations

from typing import Any

from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.plan.params import PlanParams

Switch = tuple[str, str] | None  # (label, value) to set, or None: nothing to switch on that node


def dp_switch(n: GpuNode, params: PlanParams) -> Switch:
    p = n.dp_placement
    if p is None or p.mode == "assumed":
        return params.device_plugin_label, params.device_plugin_off
    return (p.label, p.value) if p.mode == "label" and p.label and p.value is not None else None


def dra_switch(n: GpuNode, params: PlanParams) -> Switch:
    p = n.dra_placement
    if p is None or p.mode == "assumed":
        return params.dra_label, params.dra_on
    return (p.label, p.value) if p.mode == "label" and p.label and p.value is not None else None


def placement_record(n: GpuNode, params: PlanParams) -> dict[str, Any]:
    """What the plan does about each plugin on this node, and why (from the DaemonSets as installed)."""

    def one(p: Any, switch: Switch, default_why: str) -> dict[str, Any]:
        rec = p.to_dict() if p is not None else {"mode": "assumed", "daemonSet": None, "why": default_why}
        rec["label"], rec["value"] = (switch[0], switch[1]) if switch else (None, None)
        return rec

    return {
        "devicePlugin": one(n.dp_placement, dp_switch(n, params), "no DaemonSet was read"),
        "draPlugin": one(n.dra_placement, dra_switch(n, params), "no DaemonSet was read"),
    }


def switch_groups(nodes: list[GpuNode], params: PlanParams) -> list[tuple[Switch, Switch, list[GpuNode]]]:
    """Nodes grouped by the labels their switches need. A node with nothing to switch for a plugin (the
    DRA plugin already runs, the device plugin already does not) joins the largest group: setting that
    group's label on it changes nothing the DaemonSets act on."""
    need: dict[tuple[Switch, Switch], list[GpuNode]] = {}
    for n in nodes:
        need.setdefault((dp_switch(n, params), dra_switch(n, params)), []).append(n)
    keys = sorted(need, key=lambda k: (-len(need[k]), str(k)))
    merged: dict[tuple[Switch, Switch], list[GpuNode]] = {}
    for dp, dra in keys:
        target = next(
            (
                k
                for k in merged
                if (dp is None or k[0] is None or k[0] == dp) and (dra is None or k[1] is None or k[1] == dra)
            ),
            None,
        )
        if target is None:
            merged[(dp, dra)] = list(need[(dp, dra)])
            continue
        combined = (target[0] or dp, target[1] or dra)
        members = merged.pop(target) + need[(dp, dra)]
        merged[combined] = members
    return [(dp, dra, ns) for (dp, dra), ns in merged.items()]
