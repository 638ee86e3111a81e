"""Gangs: groups of pods that are useful only when all of them (or at least `min_count`) run at once.

A training job that needs eight workers before it makes progress gains nothing from four placed ones: they
hold GPUs and do no work. Two sources make a gang:

- the 1.37 gang-scheduling API (KEP-4671, `scheduling.k8s.io/v1beta1`): a PodGroup with
  `spec.schedulingPolicy.gang.minCount`, and the pods that name it in `spec.schedulingGroup.podGroupName`
  (k8s.io/api@v0.37.2 scheduling/v1beta1/types.go, core/v1 PodSpec.SchedulingGroup). A Workload's
  `podGroupTemplates[].schedulingPolicy.gang` is the blueprint the workload controller stamps PodGroups
  from; a Workload whose PodGroups were not read is listed with no pods;
- the training frameworks, whose controllers (or the gang schedulers they are run with: Volcano,
  Kueue's all-or-nothing admission) place a job's workers together: Kubeflow's jobs, JobSet,
  LeaderWorkerSet (each group), RayCluster's worker groups with the head, Volcano Job `minAvailable`.

Each gang says what one of its pods asks for (per role) and how many pods must be placed together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.inventory.consumers import TERMINAL_PHASES, Consumer, OwnerIndex, PodRequests, pod_ref

PODGROUP = "scheduling.k8s.io/PodGroup"
WORKLOAD = "scheduling.k8s.io/Workload"

# Kinds whose workers a job needs all at once (Kubeflow training operator, JobSet, LWS, KubeRay).
FRAMEWORK_GANG_KINDS = frozenset(
    {"PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "JobSet", "LeaderWorkerSet", "RayCluster",
     "RayJob", "RayService", "TrainJob"}
)  # fmt: skip
VOLCANO_GROUP = "batch.volcano.sh"
LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_GROUP_INDEX = (
    "leaderworkerset.sigs.k8s.io/group-index"  # lws v0.5.0 api/leaderworkerset/v1/leaderworkerset_types.go
)
# Kueue's all-or-nothing admission (waitForPodsReady) works on the workload a queue-name label admits.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Kinds Kueue admits whole outside the frameworks: a Job's pods are one Workload, a StatefulSet's one pod group
# (kueue v0.17.0 pkg/controller/jobs/statefulset/statefulset_reconciler.go:94). A Deployment's are not: its
# webhook only copies the queue label to the pod template, and each pod is its own Workload
# (pkg/controller/jobs/deployment/deployment_webhook.go:91).
KUEUE_WHOLE = frozenset({("batch", "Job"), ("apps", "StatefulSet")})
KUEUE_POD_GROUP = "kueue.x-k8s.io/pod-group-name"


@dataclass(frozen=True)
class Role:
    """`count` pods of the gang that each ask for `resources` (GPU resource -> per pod)."""

    count: int
    resources: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "resources": dict(sorted(self.resources.items()))}


@dataclass
class Gang:
    kind: str  # "PodGroup", "Workload", or the framework's kind
    namespace: str
    name: str
    source: str  # "podgroup", "workload", "framework" or "kueue"
    min_count: int  # pods that must be placed together
    roles: list[Role] = field(default_factory=list)
    pools: set[str] = field(default_factory=set)
    live_pods: int = 0  # pods read that are not terminated (running or pending)
    pod_names: set[str] = field(default_factory=set)  # "namespace/name" of its live pods

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def pods(self) -> int:
        return sum(r.count for r in self.roles)

    def placement_set(self) -> list[dict[str, int]]:
        """The `min_count` pods whose placement decides whether the gang can run: the least demanding
        ones, as a gang scheduler would be satisfied by any `min_count` of them."""
        pods = [r.resources for r in self.roles for _ in range(r.count)]
        pods.sort(key=lambda p: (sum(p.values()), sorted(p.items())))
        return pods[: self.min_count]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "source": self.source,
            "minCount": self.min_count,
            "pods": self.pods,
            "roles": [r.to_dict() for r in self.roles],
            "pools": sorted(self.pools),
            "livePods": self.live_pods,
        }


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _int(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


def _meta(obj: Obj) -> dict[str, Any]:
    return _dict(obj.get("metadata"))


def _gang_min_count(policy: Any) -> int | None:
    """minCount of a `schedulingPolicy` that is a gang policy; None for `basic` or anything else."""
    gang = _dict(_dict(policy).get("gang"))
    count = gang.get("minCount")
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 1 else None


def _pod_roles(pods: list[Obj], requests: PodRequests) -> list[Role]:
    shapes: dict[tuple[tuple[str, int], ...], int] = {}
    for pod in pods:
        req = requests[pod_ref(pod)][1]
        key = tuple(sorted(req.items()))
        shapes[key] = shapes.get(key, 0) + 1
    return _merge_roles([Role(n, dict(k)) for k, n in shapes.items()])


def _merge_roles(roles: list[Role]) -> list[Role]:
    """Roles asking the same (a PyTorchJob's Master and Workers alike) as one."""
    counts: dict[tuple[tuple[str, int], ...], int] = {}
    for r in roles:
        key = tuple(sorted(r.resources.items()))
        counts[key] = counts.get(key, 0) + r.count
    return [Role(n, dict(k)) for k, n in sorted(counts.items())]


def _live(pod: Obj) -> bool:
    return _dict(pod.get("status")).get("phase") not in TERMINAL_PHASES


def _podgroup_gangs(state: ClusterState, requests: PodRequests, node_pools: dict[str, str]) -> list[Gang]:
    members: dict[tuple[str, str], list[Obj]] = {}
    for pod in state.of("Pod"):
        group = _dict(_dict(pod.get("spec")).get("schedulingGroup")).get("podGroupName")
        if isinstance(group, str) and _live(pod):
            members.setdefault((str(_meta(pod).get("namespace", "")), group), []).append(pod)
    gangs = []
    for pg in state.of(PODGROUP):
        m = _meta(pg)
        min_count = _gang_min_count(_dict(pg.get("spec")).get("schedulingPolicy"))
        if min_count is None:
            continue  # a `basic` PodGroup: no all-or-nothing
        ns, name = str(m.get("namespace", "")), str(m.get("name", ""))
        pods = members.get((ns, name), [])
        gang = Gang("PodGroup", ns, name, "podgroup", min_count, _pod_roles(pods, requests))
        _add_pods(gang, pods, node_pools)
        gangs.append(gang)
    named = {(g.namespace, g.name) for g in gangs}
    for wl in state.of(WORKLOAD):
        m = _meta(wl)
        ns, name = str(m.get("namespace", "")), str(m.get("name", ""))
        for tmpl in _list(_dict(wl.get("spec")).get("podGroupTemplates")):
            min_count = _gang_min_count(_dict(tmpl).get("schedulingPolicy"))
            if min_count is None:
                continue
            # The workload controller names PodGroups after the template; when one was read it stands for it.
            if any(n == ns and pg.startswith(f"{name}-") for n, pg in named):
                continue
            gangs.append(Gang("Workload", ns, f"{name}/{_dict(tmpl).get('name', '')}", "workload", min_count))
    return gangs


def _add_pods(gang: Gang, pods: list[Obj], node_pools: dict[str, str]) -> None:
    for pod in pods:
        gang.live_pods += 1
        gang.pod_names.add(pod_ref(pod))
        node = _dict(pod.get("spec")).get("nodeName")
        if isinstance(node, str) and node in node_pools:
            gang.pools.add(node_pools[node])


def _framework_min_count(objects: _Objects, c: Consumer, gpu_pods: int) -> int:
    """How many of the job's GPU pods must be placed together. Volcano's `spec.minAvailable`, the Kubeflow
    operator's `runPolicy.schedulingPolicy.minAvailable` and KubeRay's minimum members lower the PodGroup's
    minMember, otherwise every pod of the job (training-operator v1.9.0 pkg/controller.v1/common/job.go: minMember
    = totalReplicas unless minAvailable). minMember counts the pods that ask for no GPU too (parameter servers, an
    MPI launcher, a Ray head): a gang scheduler is satisfied by any minMember of them, so those can all be among
    them and the GPU pods it needs are minMember less them."""
    obj = objects.find(c)
    spec = _dict(obj.get("spec")) if obj else {}
    other = c.other_pods
    every = gpu_pods + other
    if c.api_version.startswith(f"{VOLCANO_GROUP}/"):
        members = _int(spec.get("minAvailable"), every)
    elif c.api_version.startswith("ray.io/"):
        members = _ray_min_members(spec, every)
    else:
        members = _int(_dict(_dict(spec.get("runPolicy")).get("schedulingPolicy")).get("minAvailable"), every)
    return max(1, min(gpu_pods, members - other))


# Where a RayJob and a RayService keep the RayCluster they make (ray.io/v1 types).
_RAY_CLUSTER_SPEC = {"rayClusterSpec", "rayClusterConfig"}


def _ray_min_members(spec: dict[str, Any], total: int) -> int:
    """A RayCluster's gang: with in-tree autoscaling, the head and each worker group's `minReplicas` x
    `numOfHosts` (suspended groups left out), what KubeRay gives a gang scheduler as the PodGroup's minMember
    (kuberay ray-operator v1.4.2 `batchscheduler/volcano/volcano_scheduler.go` `DoBatchSchedulingOnSubmission`,
    `utils.CalculateMinReplicas`); the autoscaler adds the rest as it needs them. Without it, every replica."""
    cluster = next((_dict(spec[k]) for k in _RAY_CLUSTER_SPEC if isinstance(spec.get(k), dict)), spec)
    if cluster.get("enableInTreeAutoscaling") is not True:
        return total
    workers = 0
    for group in _list(cluster.get("workerGroupSpecs")):
        g = _dict(group)
        if g.get("suspend") is not True:
            workers += _int(g.get("minReplicas"), 0) * _int(g.get("numOfHosts"), 1)
    return workers + 1


class _Objects:
    """A consumer's own object by (kind key, namespace, name), indexed once per kind on first use: looking
    each consumer up by a scan of its kind made `find_gangs` quadratic in the fleet (issue 29)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self._by_kind: dict[str, dict[tuple[str, str], Obj]] = {}

    def find(self, c: Consumer) -> Obj | None:
        group = c.api_version.rpartition("/")[0] if "/" in c.api_version else ""
        key = f"{group}/{c.kind}" if group else c.kind
        index = self._by_kind.get(key)
        if index is None:
            index = {}
            for obj in self._state.of(key):
                m = _meta(obj)
                index.setdefault((str(m.get("namespace", "")), str(m.get("name"))), obj)  # the first, as a scan
            self._by_kind[key] = index
        return index.get((c.namespace, c.name))


def _is_framework_gang(objects: _Objects, c: Consumer) -> bool:
    if c.kind in FRAMEWORK_GANG_KINDS or (c.kind == "Job" and c.api_version.startswith(f"{VOLCANO_GROUP}/")):
        return True
    if (c.api_version.rpartition("/")[0], c.kind) not in KUEUE_WHOLE:
        return False
    obj = objects.find(c)
    labels = _dict(_meta(obj).get("labels")) if obj else {}
    return KUEUE_QUEUE_LABEL in labels and sum(t.replicas for t in c.templates) > 1


def _kueue_pod_groups(
    state: ClusterState, requests: PodRequests, claimed: set[str], node_pools: dict[str, str]
) -> list[Gang]:
    """Kueue's plain pod groups: pods labelled with one `kueue.x-k8s.io/pod-group-name` are admitted together
    once all of them (`kueue.x-k8s.io/pod-group-total-count`) exist (kueue v0.17.0
    pkg/controller/jobs/pod/constants/constants.go, pod_controller.go). Pods a framework's gang already holds
    (a StatefulSet's or LeaderWorkerSet's, which Kueue groups the same way) are left to it."""
    groups: dict[tuple[str, str], list[Obj]] = {}
    for pod in state.of("Pod"):
        name = _dict(_meta(pod).get("labels")).get(KUEUE_POD_GROUP)
        if isinstance(name, str) and name and _live(pod) and pod_ref(pod) not in claimed:
            groups.setdefault((str(_meta(pod).get("namespace", "")), name), []).append(pod)
    gangs = []
    for (ns, name), pods in sorted(groups.items()):
        gpu = [p for p in pods if requests[pod_ref(p)][1]]
        if not gpu:
            continue
        # Its pods that ask for no GPU count towards the group, not towards what must fit on GPU nodes. The
        # total-count annotation is not kept of a pod (cluster/state.py POD_META_KEYS): a group is the pods read.
        needed = len(gpu)
        roles = _pod_roles(gpu, requests)
        if needed < 2:
            continue  # one pod is no gang
        gang = Gang("KueuePodGroup", ns, name, "kueue", needed, roles)
        _add_pods(gang, gpu, node_pools)
        gangs.append(gang)
    return gangs


def _lws_gangs(objects: _Objects, c: Consumer, pods: list[Obj], node_pools: dict[str, str]) -> list[Gang]:
    """A LeaderWorkerSet is `replicas` gangs, one per group of `size` pods: a group is restarted whole
    (RecreateGroupOnPodRestart: lws v0.5.0 pkg/controllers/pod_controller.go) and Kueue admits each group as
    one pod group of `size` (kueue v0.17.0 pkg/controller/jobs/leaderworkerset/leaderworkerset_pod_reconciler.go:146);
    two groups need not run at once. Pods say their group in `leaderworkerset.sigs.k8s.io/group-index`."""
    obj = objects.find(c)
    spec = _dict(obj.get("spec")) if obj else {}
    raw = spec.get("replicas")
    groups = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else 1
    if groups == 0:
        return []
    # The templates count every group's pods; one group is a `groups`-th of each.
    roles = _merge_roles(
        [Role(t.replicas // groups, dict(t.resources)) for t in c.templates if t.replicas >= groups and t.resources]
    )
    total = sum(r.count for r in roles)
    if total < 2:
        return []  # a group of one pod is no gang
    by_group: dict[str, list[Obj]] = {}
    for pod in pods:
        index = _dict(_meta(pod).get("labels")).get(LWS_GROUP_INDEX)
        by_group.setdefault(str(index) if isinstance(index, str) else "?", []).append(pod)
    names = [str(i) for i in range(groups)] + sorted(set(by_group) - {str(i) for i in range(groups)})
    gangs = []
    for index in names:
        gang = Gang(c.kind, c.namespace, f"{c.name}/{index}", "framework", total, roles)
        _add_pods(gang, by_group.get(index, []), node_pools)
        if not gang.pools and not gang.live_pods:
            gang.pools = set(c.pools)
        gangs.append(gang)
    return gangs


def find_gangs(
    state: ClusterState,
    requests: PodRequests,
    consumers: list[Consumer],
    node_pools: dict[str, str],
    index: OwnerIndex | None = None,
) -> list[Gang]:
    """Every gang whose pods ask for device-plugin GPUs, PodGroups first, then the frameworks' jobs.
    `requests`: every pod's GPU requests, as `find_consumers` worked them out."""
    podgroups = _podgroup_gangs(state, requests, node_pools)
    gangs = [g for g in podgroups if any(r.resources for r in g.roles) or not g.roles]
    in_podgroup = {p for g in gangs for p in g.pod_names}
    objects = _Objects(state)
    framework = {(c.kind, c.namespace, c.name): c for c in consumers if _is_framework_gang(objects, c)}
    pods_of: dict[tuple[str, str, str], list[Obj]] = {}
    index = index or OwnerIndex(state)
    key_of: dict[int, tuple[str, str, str]] = {}  # id(top owner) -> its key: a job's pods share one
    for pod in state.of("Pod") if framework else ():
        if not _live(pod) or (in_podgroup and pod_ref(pod) in in_podgroup):
            continue
        _, top, _ = index.top("Pod", pod)
        key = key_of.get(id(top))
        if key is None:
            m = _meta(top)
            key = key_of[id(top)] = (str(top.get("kind", "")), str(m.get("namespace", "")), str(m.get("name", "")))
        if key in framework:
            pods_of.setdefault(key, []).append(pod)
    for key, c in sorted(framework.items()):
        if c.kind == "LeaderWorkerSet" and c.api_version.startswith(f"{LWS_GROUP}/"):
            gangs += _lws_gangs(objects, c, pods_of.get(key, []), node_pools)
            continue
        roles = _merge_roles(
            [Role(t.replicas, dict(t.resources)) for t in c.templates if t.replicas > 0 and t.resources]
        )
        total = sum(r.count for r in roles)
        if total < 2:
            continue  # one pod is no gang
        gang = Gang(c.kind, c.namespace, c.name, "framework", _framework_min_count(objects, c, total), roles)
        _add_pods(gang, pods_of.get(key, []), node_pools)
        if not gang.pools:
            gang.pools = set(c.pools)
        gangs.append(gang)
    claimed = in_podgroup | {pod_ref(p) for pods in pods_of.values() for p in pods}
    return gangs + _kueue_pod_groups(state, requests, claimed, node_pools)
