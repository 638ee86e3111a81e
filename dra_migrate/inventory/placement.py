"""Which nodes a pod template can land on: nodeSelector, required node affinity and taints.

Used to count a DaemonSet's pods ("the number of nodes it selects"), the way the DaemonSet controller
decides (kubernetes pkg/controller/daemon/daemon_controller.go `NodeShouldRunDaemonPod`): the node
must match the selector and affinity, and every NoSchedule/NoExecute taint must be tolerated. The
controller adds tolerations for the node-condition taints itself (pkg/controller/daemon/util
`AddOrUpdateDaemonPodTolerations`), so those never exclude a node.
"""

from __future__ import annotations

from typing import Any

# Tolerations the DaemonSet controller adds to every daemon pod (the twin's jq placement uses the same set:
# sim/placement.py).
DAEMON_TOLERATED = frozenset(
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


def selector_labels(node: dict[str, Any]) -> dict[str, str]:
    """The node's labels as `node_selects` reads them: made once per node where many pod specs are tested
    against the same nodes (each made them again: half of `node_selects`' time)."""
    return {k: str(v) for k, v in ((node.get("metadata") or {}).get("labels") or {}).items()}


def node_selects(
    pod_spec: dict[str, Any], node: dict[str, Any], *, daemon: bool = False, labels: dict[str, str] | None = None
) -> bool:
    """`labels`: the node's `selector_labels`, when the caller has them."""
    meta = node.get("metadata") or {}
    if labels is None:
        labels = selector_labels(node)
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
        if daemon and taint.get("key") in DAEMON_TOLERATED:
            continue
        if not _tolerates(tolerations, taint):
            return False
    return True


def count_selected_nodes(pod_spec: dict[str, Any], nodes: list[dict[str, Any]]) -> int:
    return sum(1 for n in nodes if node_selects(pod_spec, n, daemon=True))


# ---------------------------------------------------------------------------------------------------
# Label selectors (metav1.LabelSelector), as PodDisruptionBudgets use them


def label_selector_matches(selector: Any, labels: dict[str, str] | Any) -> bool:
    """metav1.LabelSelector against a pod's labels, with policy/v1's reading of a missing selector.

    policy/v1 PodDisruptionBudgetSpec.selector: "A null selector selects no pods. An empty selector ({})
    also selects no pods ... [in policy/v1beta1]; in policy/v1 an empty selector will select all pods in
    the namespace" (k8s.io/api policy/v1 types.go; the disruption controller and the eviction registry
    convert it with metav1.LabelSelectorAsSelector, which maps nil to labels.Nothing() and {} to
    labels.Everything(): apimachinery pkg/apis/meta/v1/helpers.go). Only In/NotIn/Exists/DoesNotExist
    are label-selector operators; anything else makes the selector invalid, and an invalid selector
    selects nothing here (the API server refuses to store one).
    """
    if not isinstance(selector, dict):
        return False
    lbl = {str(k): str(v) for k, v in (labels or {}).items()}
    for k, v in (selector.get("matchLabels") or {}).items():
        if lbl.get(str(k)) != str(v):
            return False
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict) or expr.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
        if not _match_expression(expr, lbl):
            return False
    return True


def pdb_selects(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Whether a policy/v1 PodDisruptionBudget covers a pod: same namespace, and its selector (null: no
    pod; {}: every pod) matches the pod's labels. The one meaning `check` and the drain both use."""
    pmeta, bmeta = pod.get("metadata") or {}, pdb.get("metadata") or {}
    if pmeta.get("namespace") != bmeta.get("namespace"):
        return False
    return label_selector_matches((pdb.get("spec") or {}).get("selector"), pmeta.get("labels") or {})


# ---------------------------------------------------------------------------------------------------
# Which node label switches a DaemonSet on or off for one node

# Labels other controllers own and rewrite: setting them by hand does not stick, so they are never a
# switch. NFD (feature.node.kubernetes.io/*, kubernetes-sigs/node-feature-discovery), GPU Feature
# Discovery and the GPU Operator's node labelling (nvidia.com/gpu.*, cuda.*, mig.*, gfd.*; except the
# operator's nvidia.com/gpu.deploy.<operand>, which it keeps once set: gpu-operator
# controllers/state_manager.go `addGPUStateLabels`; but for the keys it deletes under a ClusterPolicy, which
# the caller passes as `swept`: operator_activity.py), and the kubelet's / cloud providers' own (kubernetes.io, k8s.io).
_MANAGED_PREFIXES = (
    "feature.node.kubernetes.io/",
    "nvidia.com/gpu.",
    "nvidia.com/cuda.",
    "nvidia.com/mig.",
    "nvidia.com/mig-",
    "nvidia.com/gfd.",
    "nvidia.com/vgpu.",
)
_MANAGED_DOMAINS = ("kubernetes.io", "k8s.io")
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."


def settable_label(key: str) -> bool:
    """A label an operator can set on a node and have it stay (see _MANAGED_PREFIXES)."""
    if key.startswith(DEPLOY_PREFIX):
        return True
    if any(key.startswith(p) for p in _MANAGED_PREFIXES):
        return False
    domain = key.split("/", 1)[0] if "/" in key else ""
    return not any(domain == d or domain.endswith("." + d) for d in _MANAGED_DOMAINS)


def node_labels(node: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((node.get("metadata") or {}).get("labels") or {}).items()}


def _with_label(node: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    meta = dict(node.get("metadata") or {})
    meta["labels"] = {**node_labels(node), key: value}
    return {**node, "metadata": meta}


def _candidates_on(pod_spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, value) pairs that could make a node match: the nodeSelector's entries, and per affinity term
    the value an In names or "true" for an Exists."""
    out: list[tuple[str, str]] = [(str(k), str(v)) for k, v in (pod_spec.get("nodeSelector") or {}).items()]
    for term in _required_terms(pod_spec):
        for e in term.get("matchExpressions") or []:
            if e.get("operator") == "In" and e.get("values"):
                out.append((str(e.get("key")), str(e["values"][0])))
            elif e.get("operator") == "Exists":
                out.append((str(e.get("key")), "true"))
    return list(dict.fromkeys(out))


def _candidates_off(pod_spec: dict[str, Any], preferred: tuple[str, str] | None) -> list[tuple[str, str]]:
    """(key, value) pairs that could make a node stop matching: a nodeSelector key set to another value;
    per affinity term, a key of an In set outside its values, a key of a NotIn set inside them, a key of a
    DoesNotExist set at all."""
    out: list[tuple[str, str]] = [preferred] if preferred else []
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        out.append((str(k), "false" if str(v) != "false" else "true"))
    for term in _required_terms(pod_spec):
        for e in term.get("matchExpressions") or []:
            values = [str(x) for x in e.get("values") or []]
            op, key = e.get("operator"), str(e.get("key"))
            if op == "In":
                out.append((key, "false" if "false" not in values else "disabled"))
            elif op == "NotIn" and values:
                out.append((key, values[0]))
            elif op == "DoesNotExist":
                out.append((key, "true"))
    return list(dict.fromkeys(out))


def _required_terms(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return [t for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)]


# A switch may add a label or flip a flag-like one; it never rewrites a label that carries other meaning
# (a custom zone or team label the node already has).
_FLAG_VALUES = frozenset({"", "true", "false", "enabled", "disabled", "on", "off", "yes", "no"})


def _may_set(node: dict[str, Any], key: str, swept: frozenset[str] = frozenset()) -> bool:
    current = node_labels(node).get(key)
    return settable_label(key) and key not in swept and (current is None or current.lower() in _FLAG_VALUES)


def label_to_select(
    pod_spec: dict[str, Any], node: dict[str, Any], swept: frozenset[str] = frozenset()
) -> tuple[str, str] | None:
    """One settable node label that makes the DaemonSet controller run this pod spec on the node, or None
    when none does (a taint it does not tolerate, matchFields, Gt/Lt, a managed label, two labels needed).
    `swept`: keys a controller of this cluster deletes (inventory/operator.py `CLUSTER_POLICY_SWEPT`)."""
    for key, value in _candidates_on(pod_spec):
        if _may_set(node, key, swept) and node_selects(pod_spec, _with_label(node, key, value), daemon=True):
            return key, value
    return None


def label_to_deselect(
    pod_spec: dict[str, Any],
    node: dict[str, Any],
    preferred: tuple[str, str] | None = None,
    swept: frozenset[str] = frozenset(),
) -> tuple[str, str] | None:
    """One settable node label that makes the DaemonSet controller stop running this pod spec on the node
    (it deletes the pod once the node no longer matches: pkg/controller/daemon/daemon_controller.go), or
    None when no label can (no selector and no affinity: it runs on every node)."""
    for key, value in _candidates_off(pod_spec, preferred):
        if _may_set(node, key, swept) and not node_selects(pod_spec, _with_label(node, key, value), daemon=True):
            return key, value
    return None


def node_inputs(pod_spec: dict[str, Any]) -> tuple[set[str], bool]:
    """What of a node `node_selects`, `label_to_select` and `label_to_deselect` can read for this pod spec,
    besides its taints: the label keys its nodeSelector and required affinity name (every candidate label a
    switch may set is one of them), and whether a term's matchFields reads the node's name."""
    keys = {str(k) for k in pod_spec.get("nodeSelector") or {}}
    by_name = False
    for term in _required_terms(pod_spec):
        keys.update(str(e.get("key", "")) for e in term.get("matchExpressions") or [] if isinstance(e, dict))
        by_name = by_name or bool(term.get("matchFields"))
    return keys, by_name
