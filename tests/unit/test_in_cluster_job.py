"""The apply Job of deploy/in-cluster against the migration it runs: where its pod may land, who may evict it,
and what the Job controller does when it is evicted.

The Job cordons and drains GPU nodes. Its pod must not be on one (a `--drain all` evicts every pod there but
DaemonSet and mirror pods, as kubectl drain does: k8s.io/kubectl v0.37.2 pkg/drain/filters.go), must not be
taken away by a cluster autoscaler or Karpenter consolidating its node, nor preempted by the pods its own
drains send looking for room; and an eviction that does happen must bring a new pod that resumes, not a
failed Job (batch/v1 Job semantics, k8s.io/kubernetes v1.37.2 pkg/controller/job).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_migrate.execute.ops import LiveOps
from dra_migrate.inventory.fleet import GPU_LABELS
from tests.unit.test_drain_late_pods import NODE, NS, LateBinder, gpu_pod

ROOT = Path(__file__).resolve().parents[2]
IN_CLUSTER = ROOT / "deploy/in-cluster"


def _docs() -> list[dict[str, Any]]:
    return [d for f in sorted(IN_CLUSTER.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def _job() -> dict[str, Any]:
    return next(d for d in _docs() if d["kind"] == "Job")


def _pod() -> dict[str, Any]:
    template: dict[str, Any] = _job()["spec"]["template"]
    return template


def _term_matches(term: dict[str, Any], labels: dict[str, str]) -> bool:
    """A nodeSelectorTerm's matchExpressions, ANDed (k8s.io/component-helpers scheduling/corev1/nodeaffinity)."""
    for e in term.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
            "In": labels.get(key) in values,
            "NotIn": key not in labels or labels[key] not in values,
        }[op]
        if not ok:
            return False
    return True


def _schedulable_on(labels: dict[str, str]) -> bool:
    """Whether the pod's required node affinity admits a node with these labels (terms are ORed)."""
    required = _pod()["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return any(_term_matches(t, labels) for t in required["nodeSelectorTerms"])


@pytest.mark.parametrize(
    "label", [*GPU_LABELS, "feature.node.kubernetes.io/pci-10de.present", "cloud.google.com/gke-accelerator"]
)
def test_the_pod_stays_off_every_node_inventory_counts_as_a_gpu_node_by_its_labels(label: str) -> None:
    """The affinity excluded only nvidia.com/gpu.present (the GPU Operator's NFD label): a node that GFD labels
    with its product or count but nothing set gpu.present on, and that the plan cordons and drains as a GPU node
    (inventory/fleet.py GPU_LABELS), took the Job's pod, and `--drain all` evicted it mid-wave."""
    assert _schedulable_on({"kubernetes.io/os": "linux"})
    assert not _schedulable_on({label: "true"}), f"the apply pod may land on a GPU node labelled {label}"


def test_the_pod_is_not_consolidated_away_by_an_autoscaler() -> None:
    """Cluster Autoscaler evicts a Job's pod to remove its node unless the pod says safe-to-evict "false"
    (cluster-autoscaler FAQ, "What types of pods can prevent CA from removing a node?"); Karpenter disrupts
    a node for consolidation or drift unless a pod on it says karpenter.sh/do-not-disrupt "true"
    (karpenter.sh docs, concepts/disruption)."""
    annotations = _pod()["metadata"].get("annotations") or {}
    assert annotations.get("cluster-autoscaler.kubernetes.io/safe-to-evict") == "false"
    assert annotations.get("karpenter.sh/do-not-disrupt") == "true"


def test_the_pod_is_not_preempted_by_the_workloads_its_drains_reschedule() -> None:
    """Without a PriorityClass the pod has priority 0: under `--drain all` the evicted CPU pods go looking for
    room on the non-GPU nodes, and any of them with a higher priority preempts the apply. Its own class, shipped
    beside it, ranks it above workloads and is preemptionPolicy Never: it waits for room, it takes none."""
    name = _pod()["spec"].get("priorityClassName")
    assert name, "the apply pod names no PriorityClass"
    classes = {d["metadata"]["name"]: d for d in _docs() if d["kind"] == "PriorityClass"}
    assert name in classes, f"PriorityClass {name} is not shipped in deploy/in-cluster"
    pc = classes[name]
    # HighestUserDefinablePriority (k8s.io/kubernetes v1.37.2 pkg/apis/scheduling/types.go): above it only
    # the system- classes, which the API server refuses to a user-made class.
    assert 1_000_000 <= pc["value"] <= 1_000_000_000
    assert pc.get("preemptionPolicy") == "Never" and not pc.get("globalDefault")


def test_an_evicted_pod_is_replaced_and_a_failed_apply_is_not() -> None:
    """backoffLimit 0 alone failed the Job on any pod failure, an eviction included: a drain, a node-pressure
    eviction or a preemption stopped a multi-hour apply until someone noticed. A pod failure with the
    DisruptionTarget condition (set by the Eviction API, the scheduler's preemption, the kubelet's node-pressure
    eviction and the pod GC: k8s.io/api v0.37.2 core/v1 types.go) is ignored and the pod replaced; only once the
    old one has finished (podReplacementPolicy defaults to Failed with a podFailurePolicy: pkg/apis/batch/v1
    defaults.go), so its SIGTERM handler has released the Lease first. Any other failure still fails the Job."""
    spec = _job()["spec"]
    assert spec["backoffLimit"] == 0
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # required by podFailurePolicy
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]} in rules
    assert spec.get("podReplacementPolicy", "Failed") == "Failed"
    # No deadline: the Job controller would kill a multi-hour migration at it (pkg/controller/job,
    # DeadlineExceeded), and nothing retries a Job that failed.
    assert "activeDeadlineSeconds" not in spec


def test_the_pod_tells_the_tool_its_own_uid() -> None:
    """The drain skips the tool's own pod by uid (below); the downward API gives it (metadata.uid)."""
    env = {e["name"]: e for e in _pod()["spec"]["containers"][0].get("env") or []}
    assert env["DRA_MIGRATE_POD_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"


def _tool_pod(uid: str, name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "dra-migrate",
            "uid": uid,
            "ownerReferences": [{"kind": "Job", "name": "dra-migrate-apply", "controller": True}],
        },
        "spec": {"nodeName": NODE, "containers": [{"name": "apply"}]},
        "status": {"phase": "Running"},
    }


def test_a_drain_all_does_not_evict_the_tool_s_own_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod that landed on a node of the plan anyway (a GPU node with no label at all, only the device plugin's
    capacity, which no affinity can select on): `--drain all` evicted the apply itself, mid-wave. It is skipped
    as kubectl drain skips the pods evicting would not empty the node of (DaemonSet and mirror pods)."""
    monkeypatch.setenv("DRA_MIGRATE_POD_UID", "uid-self")
    fake = LateBinder(
        [gpu_pod("a"), _tool_pod("uid-self", "dra-migrate-apply-x1"), _tool_pod("uid-other", "other")], []
    )
    ops = LiveOps(None, poll_s=0.001, poll_cap_s=0.001)
    ops.kube = fake  # type: ignore[assignment]
    change = ops.drain(NODE, "all", 10)
    assert sorted(fake.evicted) == ["a", "other"], "the drain evicted the tool's own pod"
    assert list(fake.pods) == ["uid-self"]
    assert change.before == {"pods": sorted([f"{NS}/a", "dra-migrate/other"])}
