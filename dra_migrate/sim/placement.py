"""Where the twin's NVIDIA plugins run: the placement rule of the cluster's own DaemonSets.

On a real node a plugin runs because the DaemonSet controller placed its pod there: the node matches the
pod template's nodeSelector and required node affinity, and every NoSchedule/NoExecute taint is tolerated
(k8s.io/kubernetes@v1.37.2 pkg/controller/daemon/daemon_controller.go `NodeShouldRunDaemonPod`, with the
node-condition tolerations of pkg/controller/daemon/util `AddOrUpdateDaemonPodTolerations`). The twin
follows the same rule: `PluginRules.from_state` reads the snapshot's device-plugin and DRA kubelet-plugin
DaemonSets (`inventory.operator`), and the KWOK Stages test a Node with the rule compiled to jq
(`jq_selects`), while registration tests it in Python (`inventory.placement.node_selects`), so both agree
(tests/unit/test_twin_placement.py runs the jq against the Python on the same nodes).

The upstream chart (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 deployments/helm values.yaml) places its
kubelet plugin by node affinity on `feature.node.kubernetes.io/pci-10de.present` and friends, no toggle
label: a plugin that already runs on every GPU node, which a label-only twin never started. Where the
snapshot holds no DaemonSet of a plugin, the toggle labels the plan switches are the rule (the operator's
`nvidia.com/gpu.deploy.device-plugin`, the DRA recipe's `nvidia.com/dra-kubelet-plugin` or the operator's
`nvidia.com/gpu.deploy.dra-driver`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.operator import device_plugin_daemonset_objects, dra_plugin_daemonset_objects
from dra_migrate.inventory.placement import DAEMON_TOLERATED, node_selects
from dra_migrate.sim.spec import (
    LABEL_DEVICE_PLUGIN,
    LABEL_DRA_DRIVER,
    LABEL_DRA_KUBELET_PLUGIN,
    device_plugin_enabled,
    dra_plugin_enabled,
)


def _lit(value: Any) -> str:
    return json.dumps(value)


def _label(key: str) -> str:
    return f".metadata.labels[{_lit(key)}]"


def _any(parts: Sequence[str]) -> str:
    return "(" + " or ".join(parts) + ")" if parts else "false"


def _all(parts: Sequence[str]) -> str:
    return "(" + " and ".join(parts) + ")" if parts else "true"


def _expression(expr: Mapping[str, Any], field: str) -> str:
    """One NodeSelectorRequirement on `field` (a jq path), as inventory.placement._match_expression reads it."""
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    present = f"({field} != null)"
    if op == "In":
        return _all([present, _any([f"{field} == {_lit(v)}" for v in values])])
    if op == "NotIn":
        return _any([f"({field} == null)", _all([f"{field} != {_lit(v)}" for v in values])])
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return f"({field} == null)"
    if op in ("Gt", "Lt") and values:
        try:
            bound = int(values[0])
        except ValueError:
            return "false"
        cmp = ">" if op == "Gt" else "<"
        integer = f'(({field} // "") | test("^[-+]?[0-9]+$"))'
        return _all([present, integer, f"(({field} | tonumber) {cmp} {bound})"])
    return "false"


def _term(term: Mapping[str, Any]) -> str:
    exprs = [e for e in term.get("matchExpressions") or [] if isinstance(e, Mapping)]
    fields = [f for f in term.get("matchFields") or [] if isinstance(f, Mapping)]
    if not exprs and not fields:
        return "false"  # an empty term matches nothing (core/v1 NodeSelectorTerm)
    parts = [_expression(e, _label(str(e.get("key", "")))) for e in exprs]
    # matchFields: only metadata.name is supported by the API (and by inventory.placement).
    parts += [_expression(f, ".metadata.name") if f.get("key") == "metadata.name" else "false" for f in fields]
    return _all(parts)


def _toleration(t: Mapping[str, Any]) -> str:
    """Whether one toleration tolerates the taint at `.` (inventory.placement._tolerates)."""
    parts = [f".effect == {_lit(t['effect'])}"] if t.get("effect") else []
    op = t.get("operator", "Equal")
    if not t.get("key") and op == "Exists":
        return _all(parts)
    parts.append(f".key == {_lit(t.get('key'))}")
    if op != "Exists":
        parts.append(f'(.value // "") == {_lit(str(t.get("value", "")))}')
    return _all(parts)


def jq_selects(pod_spec: Mapping[str, Any]) -> str:
    """A jq boolean over a Node: whether the DaemonSet controller runs a pod of this template there."""
    parts = [f"{_label(str(k))} == {_lit(str(v))}" for k, v in sorted((pod_spec.get("nodeSelector") or {}).items())]
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if terms:
        parts.append(_any([_term(t) for t in terms if isinstance(t, Mapping)]))
    tolerations = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, Mapping)]
    allowed = [
        '(.effect != "NoSchedule" and .effect != "NoExecute")',
        *(f".key == {_lit(k)}" for k in sorted(DAEMON_TOLERATED)),
        *(_toleration(t) for t in tolerations),
    ]
    parts.append(f"all((.spec.taints // [])[]; {_any(allowed)})")
    return _all(parts)


def _pod_spec(ds: Mapping[str, Any]) -> dict[str, Any]:
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec")
    return dict(spec) if isinstance(spec, Mapping) else {}


# The toggle labels, when no DaemonSet of a plugin was read (sim.spec: the same rule, in Python).
DRA_LABELS_ON = f'({_label(LABEL_DRA_KUBELET_PLUGIN)} == "true" or {_label(LABEL_DRA_DRIVER)} == "true")'
DEVICE_PLUGIN_LABEL_ON = f'({_label(LABEL_DEVICE_PLUGIN)} != "false")'


@dataclass(frozen=True)
class PluginRules:
    """Where each plugin runs: its DaemonSets' pod templates (any of them placing a pod is enough), or
    the toggle labels when there are none."""

    dra: tuple[dict[str, Any], ...] = ()
    device_plugin: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_state(cls, state: ClusterState) -> PluginRules:
        return cls(
            dra=tuple(_pod_spec(d) for d in dra_plugin_daemonset_objects(state)),
            device_plugin=tuple(_pod_spec(d) for d in device_plugin_daemonset_objects(state)),
        )

    def dra_on(self, node: Mapping[str, Any]) -> bool:
        if not self.dra:
            return dra_plugin_enabled(_labels(node))
        return any(node_selects(s, dict(node), daemon=True) for s in self.dra)

    def device_plugin_on(self, node: Mapping[str, Any]) -> bool:
        if not self.device_plugin:
            return device_plugin_enabled(_labels(node))
        return any(node_selects(s, dict(node), daemon=True) for s in self.device_plugin)

    def dra_on_jq(self) -> str:
        return _any([jq_selects(s) for s in self.dra]) if self.dra else DRA_LABELS_ON

    def device_plugin_on_jq(self) -> str:
        return _any([jq_selects(s) for s in self.device_plugin]) if self.device_plugin else DEVICE_PLUGIN_LABEL_ON


LABEL_RULES = PluginRules()


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((node.get("metadata") or {}).get("labels") or {}).items()}
