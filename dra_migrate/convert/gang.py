"""`convert --gang`: a PodGroup for a multi-pod training workload, and its pods wired to it.

Kubernetes 1.37 places a gang all or nothing when its pods name a PodGroup with
`schedulingPolicy.gang.minCount` in `spec.schedulingGroup.podGroupName` (KEP-4671; k8s.io/api@v0.37.2
scheduling/v1beta1 PodGroup, core/v1 PodSpec.SchedulingGroup; the object may be created before or after the
pods). The workload's controller copies the pod template into every pod, so setting the field in each
template wires all of them. `minCount` is every pod the workload starts at once: the template replicas
(Kubeflow replica specs, a JobSet's replicated jobs times parallelism, an indexed Job's parallelism).

Refused, with the reason, where the framework already runs its own gangs or its controller decides the pod
count: Volcano (its scheduler and PodGroups), RayCluster/RayJob/RayService (the autoscaler resizes worker
groups, a fixed minCount would strand it), a LeaderWorkerSet of several groups (each group is a gang, and its
controller names the groups' pods). Each worker keeps its own ResourceClaimTemplate claim; a claim shared by
the whole PodGroup (`DRAWorkloadResourceClaims`, beta and off by default in 1.37) is not written.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap

from dra_migrate.cluster.templates import ResolvedTemplate, get_path
from dra_migrate.inventory.consumers import _replicas as template_replicas

API_VERSION = "scheduling.k8s.io/v1beta1"
GANG_SUFFIX = "gang"
DNS_SUBDOMAIN_MAX = 253

_SUPPORTED = frozenset({"PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "JobSet", "Job",
                        "LeaderWorkerSet"})  # fmt: skip
_REFUSED = {
    "batch.volcano.sh/Job": "Volcano schedules its own PodGroups (scheduling.volcano.sh) with its own scheduler: "
    "set spec.minAvailable instead",
    "ray.io/RayCluster": "KubeRay's autoscaler resizes worker groups, so a fixed minCount would strand the cluster",
    "ray.io/RayJob": "KubeRay's autoscaler resizes worker groups, so a fixed minCount would strand the cluster",
    "ray.io/RayService": "KubeRay's autoscaler resizes worker groups, so a fixed minCount would strand the cluster",
}


def podgroup_name(workload: str) -> str:
    return f"{workload[: DNS_SUBDOMAIN_MAX - len(GANG_SUFFIX) - 1]}-{GANG_SUFFIX}"


def gang_problem(key: str, doc: dict[str, Any], resolved: list[ResolvedTemplate]) -> str | None:
    """Why this workload cannot be given a PodGroup, or None."""
    if key in _REFUSED:
        return _REFUSED[key]
    kind = key.rpartition("/")[2]
    if kind not in _SUPPORTED:
        return f"kind {key} is not a multi-pod training kind (a gang needs pods that start together)"
    if kind == "LeaderWorkerSet" and _int(get_path(doc, "spec.replicas"), 1) > 1:
        return "each LeaderWorkerSet group is a gang of its own, and its controller names the groups' pods"
    if kind == "Job" and _int(get_path(doc, "spec.parallelism"), 1) < 2:
        return "a Job with parallelism below 2 starts one pod at a time"
    if min_count(resolved) < 2:
        return "it starts fewer than two pods"
    return None


def min_count(resolved: list[ResolvedTemplate]) -> int:
    """Every pod the workload starts at once (a Job starts min(parallelism, completions))."""
    total = 0
    for r in resolved:
        n = template_replicas(r, [])
        if r.root.get("kind") == "Job" and str(r.root.get("apiVersion", "")).startswith("batch/"):
            n = min(n, _int(get_path(r.root, "spec.completions"), n))
        total += n
    return total


def plan(
    key: str, doc: dict[str, Any], resolved: list[ResolvedTemplate], workload: str, *, shared_claim: bool
) -> tuple[str | None, CommentedMap | None]:
    """(why not, None) or (None, the PodGroup to write before the workload)."""
    if shared_claim:
        return (
            "--shared-claim with --gang would need a PodGroup-level claim (DRAWorkloadResourceClaims, beta and "
            "off by default in 1.37): convert without --shared-claim",
            None,
        )
    problem = gang_problem(key, doc, resolved)
    if problem:
        return problem, None
    meta = doc.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) and isinstance(meta.get("namespace"), str) else None
    return None, podgroup_document(podgroup_name(workload), namespace, min_count(resolved))


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def wire(resolved: list[ResolvedTemplate], group: str) -> None:
    """Each template's pods name the PodGroup (immutable on a pod: set before the pods exist)."""
    for r in resolved:
        spec = r.pod_spec()
        spec["schedulingGroup"] = CommentedMap([("podGroupName", group)])


def _gang_policy(count: int) -> CommentedMap:
    return CommentedMap([("gang", CommentedMap([("minCount", count)]))])


def podgroup_document(group: str, namespace: str | None, count: int) -> CommentedMap:
    meta = CommentedMap([("name", group)])
    if namespace:
        meta["namespace"] = namespace
    return CommentedMap(
        [
            ("apiVersion", API_VERSION),
            ("kind", "PodGroup"),
            ("metadata", meta),
            (
                "spec",
                CommentedMap([("schedulingPolicy", CommentedMap([("gang", CommentedMap([("minCount", count)]))]))]),
            ),
        ]
    )
