"""Which nodes a pod template can land on: nodeSelector, required node affinity and taints.

Used to count a DaemonSet's pods ("the number of nodes it selects"), the way the DaemonSet controller
decides (kubernetes pkg/controller/daemon/daemon_controller.go `NodeShouldRunDaemonPod`): the node
must match the selector and affinity, and every NoSchedule/NoExecute taint must be tolerated. The
controller adds tolerations for the node-condition taints itself (pkg/controller/daemon/util
`AddOrUpdateDaemonPodTolerations`), so those never exclude a node.
"""

from __future__ import annotations

from typing import Any

# Tolerations the DaemonSet controller adds to every daemon pod.
_DAEMON_TOLERATED = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    }
)


def _match_expression(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key = expr.get("key", "")
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            a, b = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def _match_term(term: dict[str, Any], labels: dict[str, str], name: str) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing (core/v1 NodeSelectorTerm docs)
    if not all(_match_expression(e, labels) for e in exprs):
        return False
    return all(_match_expression(f, {"metadata.name": name}) for f in fields)


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        if not t.get("key") and op == "Exists":
            return True
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_selects(pod_spec: dict[str, Any], node: dict[str, Any], *, daemon: bool = False) -> bool:
    meta = node.get("metadata") or {}
    labels = {k: str(v) for k, v in (meta.get("labels") or {}).items()}
    name = str(meta.get("name", ""))
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(k) != str(v) for k, v in selector.items()):
        return False
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if terms and not any(_match_term(t, labels, name) for t in terms if isinstance(t, dict)):
        return False
    tolerations = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, dict)]
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if daemon and taint.get("key") in _DAEMON_TOLERATED:
            continue
        if not _tolerates(tolerations, taint):
            return False
    return True


def count_selected_nodes(pod_spec: dict[str, Any], nodes: list[dict[str, Any]]) -> int:
    return sum(1 for n in nodes if node_selects(pod_spec, n, daemon=True))
