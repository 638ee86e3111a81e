"""GPU consumers: every workload whose pods request a device-plugin GPU resource, counted once.

A consumer is the top owner of its pods (Pod -> ReplicaSet -> Deployment, Pod -> Job -> CronJob,
Pod -> a CRD), found by following controller ownerReferences through the objects that were read.
Its templates say what it asks for (per pod, times its replicas); its live pods say where it runs.
Pods that request GPUs their owner's template does not (a mutating webhook, an owner kind the
template table does not know) still make a consumer, counted from the pods and marked as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.cluster.templates import ResolvedTemplate, get_path
from dra_migrate.inventory.fanout import Count, FanOut, state_lookup
from dra_migrate.inventory.placement import count_selected_nodes
from dra_migrate.inventory.resources import GpuNames, container_requests, pod_requests

TERMINAL_PHASES = ("Succeeded", "Failed")
# kube-scheduler's profile name, which the API server writes into a pod spec that names none
# (k8s.io/api@v0.37.2 core/v1/types.go PodSpec.SchedulerName; pkg/apis/core/v1/defaults.go).
DEFAULT_SCHEDULER = "default-scheduler"


# "namespace/name" of every pod read -> (its spec.nodeName, its effective GPU requests): worked out once, when
# the consumers are found, for every later reader (gangs, gang capacity) rather than once per reader. Pods
# with the same containers share one requests map (`_RequestsOf`): read it, never change it.
PodRequests = dict[str, tuple[Any, dict[str, int]]]


@dataclass
class TemplateUse:
    path: str
    replicas: int
    resources: dict[str, int]  # per pod
    # The template's spec.schedulerName when it is not kube-scheduler's: the scheduler its pods will get,
    # whether or not any pod runs now (a CronJob between runs, a Deployment scaled to 0).
    scheduler: str | None = None
    # The most one container (app or init) asks for, per name: what the device plugin allocates at once and
    # aligns (inventory/topology.py). Not in the JSON of the template; the inventory's `topology` says it.
    largest_container: dict[str, int] = field(default_factory=dict)
    # what its replica count could not know (an Argo withParam, Spark's unbounded maxExecutors): the consumer's notes
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "replicas": self.replicas, "resources": self.resources}


@dataclass
class Consumer:
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    templates: list[TemplateUse] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    pools: set[str] = field(default_factory=set)
    pods: int = 0
    source: str = "template"  # "template": counted from templates; "pods": from live pods only
    notes: list[str] = field(default_factory=list)
    # schedulerNames other than kube-scheduler's, from its GPU templates and its GPU pods
    schedulers: set[str] = field(default_factory=set)
    # pods of its templates that ask for no GPU (a TFJob's parameter servers, an MPI launcher, a Ray head):
    # not in `templates`, but a gang's minimum counts them (inventory/gangs.py)
    other_pods: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "namespace": self.namespace,
            "name": self.name,
            "templates": [t.to_dict() for t in self.templates],
            "totals": dict(sorted(self.totals.items())),
            "pools": sorted(self.pools),
            "pods": self.pods,
            "source": self.source,
            "notes": self.notes,
            "schedulerNames": sorted(self.schedulers),
        }


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _meta(obj: Obj) -> dict[str, Any]:
    return _dict(obj.get("metadata"))


def pod_ref(pod: Obj) -> str:
    """A pod's "namespace/name" (the key of `PodRequests`, and of `Gang.pod_names`)."""
    m = _meta(pod)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def _controller_ref(obj: Obj) -> dict[str, Any] | None:
    refs = [r for r in _meta(obj).get("ownerReferences") or [] if isinstance(r, dict)]
    for r in refs:
        if r.get("controller"):
            return r
    return refs[0] if refs else None


class OwnerIndex:
    """uid -> object, to walk controller ownerReferences up to the top owner. Each object's top owner is
    walked to once: consumers and gangs both ask it of every pod, and a Deployment's pods all share their
    ReplicaSet's walk (one index serves one inventory: `build_inventory` makes it)."""

    def __init__(self, state: ClusterState) -> None:
        self._state = state
        self.by_uid: dict[str, tuple[str, Obj]] = {}
        self._pods: dict[str, tuple[str, Obj]] | None = None  # uid -> pod, made on the first pod owner
        # id(object) -> its top; the objects are the state's, alive as long as the index
        self._tops: dict[int, tuple[str, Obj, dict[str, Any] | None]] = {}
        for key, obj in state.all_objects():
            if key == "Pod":
                continue  # pods own nothing; they are most of the objects
            uid = _meta(obj).get("uid")
            if isinstance(uid, str):
                self.by_uid[uid] = (key, obj)

    def top(self, key: str, obj: Obj) -> tuple[str, Obj, dict[str, Any] | None]:
        """(top key, top object, the ownerReference that could not be followed, if any)."""
        seen: list[int] = []
        while id(obj) not in seen:
            known = self._tops.get(id(obj))
            if known is not None:
                return self._remember(seen, known)
            seen.append(id(obj))
            ref = _controller_ref(obj)
            if ref is None:
                return self._remember(seen, (key, obj, None))
            owner = self.by_uid.get(str(ref.get("uid")))
            if owner is None and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
                owner = self._pod(str(ref.get("uid")))
            if owner is None:
                return self._remember(seen, (key, obj, ref))
            key, obj = owner
        return key, obj, None  # a cycle: its answer depends on where the walk began, so it is not kept

    def _pod(self, uid: str) -> tuple[str, Obj] | None:
        """A pod that controls an object: LeaderWorkerSet's leader pod controls its group's worker
        StatefulSet (lws v0.5.0 pkg/controllers/pod_controller.go:148), whose pods are then the LWS's."""
        if self._pods is None:
            self._pods = {}
            for pod in self._state.of("Pod"):
                pod_uid = _meta(pod).get("uid")
                if isinstance(pod_uid, str):
                    self._pods[pod_uid] = ("Pod", pod)
        return self._pods.get(uid)

    def _remember(
        self, walked: list[int], found: tuple[str, Obj, dict[str, Any] | None]
    ) -> tuple[str, Obj, dict[str, Any] | None]:
        """A walk that ended (no owner, or one not read): every object on it has that same top."""
        for i in walked:
            self._tops[i] = found
        return found


def _replicas(t: ResolvedTemplate, nodes: list[Obj], fan: FanOut | None = None) -> int:
    return _replicas_noted(t, nodes, fan or FanOut())[0]


def _replicas_noted(t: ResolvedTemplate, nodes: list[Obj], fan: FanOut) -> tuple[int, str | None]:
    n, note = 1, None
    for f in t.role.replicas:
        if f.selected_nodes:
            n *= count_selected_nodes(t.pod_spec(), nodes)
            continue
        if f.value is not None:
            n *= f.value
            continue
        raw = None
        if f.path:
            raw = get_path(t.root, f.path[2:]) if f.path.startswith("$.") else get_path(t.item, f.path)
        if f.counter:
            count = fan(f.counter, raw, t.item, t.root)
            n, note = n * count.pods, note or count.note
            continue
        value = raw if isinstance(raw, int) and not isinstance(raw, bool) else f.default
        n *= max(0, value + f.add)
    return n, note


def template_uses(
    state: ClusterState, key: str, obj: Obj, names: GpuNames, *, consumers_only: bool = False
) -> list[TemplateUse]:
    """The object's pod templates, what each pod asks for and how many pods each makes. `consumers_only`:
    none for an object none of whose templates asks for GPUs (it is no consumer), for a caller that keeps
    only consumers: a DaemonSet's pods are counted over every node it selects, and a cluster runs many
    DaemonSets that ask for no GPU (a CNI, a log shipper, an exporter), each counted over the fleet for nothing."""
    fan = FanOut(state_lookup(state))
    table = state.templates.resolve(key, obj)
    # an Argo workflow's templates in other objects (templateRef), with their pods: counted as its own
    found: list[tuple[ResolvedTemplate, Count | None]] = [(t, None) for t in table]
    found += fan.beyond(table)
    resolved = []
    for t, count in found:
        containers, init = t.containers(), t.init_containers()
        resolved.append((t, count, containers + init, pod_requests(containers, init, names)))
    if consumers_only and not any(req for _, _, _, req in resolved):
        return []
    nodes = state.of("Node")
    out = []
    for t, count, cs, req in resolved:
        n, note = _replicas_noted(t, nodes, fan) if count is None else (count.pods, count.note)
        out.append(TemplateUse(t.path, n, req, other_scheduler(t.pod_spec()), _largest_container(cs, names), note))
    return out


def _largest_container(containers: list[Any], names: GpuNames) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in containers:
        if isinstance(c, dict):
            for k, v in container_requests(c, names).items():
                out[k] = max(out.get(k, 0), v)
    return out


def other_scheduler(pod_spec: Obj) -> str | None:
    """The pod spec's schedulerName when it names a scheduler other than kube-scheduler's."""
    name = pod_spec.get("schedulerName")
    return name if isinstance(name, str) and name and name != DEFAULT_SCHEDULER else None


def _new_consumer(key: str, obj: Obj) -> Consumer:
    m = _meta(obj)
    return Consumer(
        kind=str(obj.get("kind", key.rpartition("/")[2])),
        api_version=str(obj.get("apiVersion", "")),
        namespace=str(m.get("namespace", "")),
        name=str(m.get("name", "")),
        uid=str(m.get("uid", "")),
    )


def _totals(uses: list[TemplateUse]) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in uses:
        for k, v in u.resources.items():
            out[k] = out.get(k, 0) + v * u.replicas
    return out


def find_consumers(
    state: ClusterState, names: GpuNames, node_pools: dict[str, str], index: OwnerIndex | None = None
) -> tuple[list[Consumer], dict[str, dict[str, int]], PodRequests]:
    """The consumers, the GPU requests of live pods per node (for pool totals), and every pod's requests."""
    index = index or OwnerIndex(state)
    consumers: dict[tuple[str, str, str, str], Consumer] = {}

    def cid(key: str, obj: Obj) -> tuple[str, str, str, str]:
        m = _meta(obj)
        return (key, str(m.get("namespace", "")), str(m.get("name", "")), str(m.get("uid", "")))

    for key in state.templates.kind_keys():
        if key == "Pod" or state.templates.is_blueprint(key):
            continue  # pods are handled below, with their owners; blueprints are nobody's demand
        for obj in state.of(key):
            if index.top(key, obj)[1] is not obj:
                continue  # owned: counted at its top owner
            uses = template_uses(state, key, obj, names, consumers_only=True)
            if any(u.resources for u in uses):
                consumer = _new_consumer(key, obj)
                consumer.templates = [u for u in uses if u.resources]
                consumer.other_pods = sum(u.replicas for u in uses if not u.resources)
                consumer.totals = _totals(consumer.templates)
                consumer.schedulers = {u.scheduler for u in consumer.templates if u.scheduler}
                consumer.notes.extend(dict.fromkeys(u.note for u in consumer.templates if u.note))
                consumers[cid(key, obj)] = consumer

    node_requests: dict[str, dict[str, int]] = {}
    by_pod: PodRequests = {}
    requests = _RequestsOf(names)
    of_top: dict[int, Consumer] = {}  # id(top owner) -> its consumer: a workload's pods find it once
    for pod in state.of("Pod"):
        spec = _dict(pod.get("spec"))
        req = requests(spec)
        node = spec.get("nodeName")
        by_pod[pod_ref(pod)] = (node, req)
        live = _dict(pod.get("status")).get("phase") not in TERMINAL_PHASES
        if node and live and req:
            per_node = node_requests.setdefault(str(node), {})
            for k, v in req.items():
                per_node[k] = per_node.get(k, 0) + v
        if not req:
            # A pod without GPU requests tells nothing about where GPU demand runs (e.g. an old
            # ReplicaSet's pods mid-rollout), and skipping it keeps the owner walk to GPU pods only.
            continue
        top_key, top, missing = index.top("Pod", pod)
        c: Consumer | None = of_top.get(id(top))
        if c is None:
            c = consumers.get(cid(top_key, top))
            if c is None and missing is not None and top is pod:
                c = _consumer_for_missing_owner(consumers, pod, missing)
            if c is None:
                c = _pod_consumer(state, top_key, top, req, names)
                consumers[cid(top_key, top)] = c
            if top is not pod:  # a bare pod, or one whose owner was not read, is its own top: no reuse
                of_top[id(top)] = c
        sched = other_scheduler(spec)
        if sched:
            c.schedulers.add(sched)
        if c.source == "pods" and live:
            for k, v in req.items():
                c.totals[k] = c.totals.get(k, 0) + v
        if live:
            c.pods += 1
            if node:
                c.pools.add(node_pools.get(str(node), f"(node {node} not found)"))
    return sorted(consumers.values(), key=lambda c: (c.namespace, c.kind, c.name)), node_requests, by_pod


_NONE: tuple[Any, ...] = ()  # no list: one object, so that pods without init containers share their entry


class _RequestsOf:
    """A pod spec's GPU requests (`pod_requests`), worked out once per container list: a snapshot the tool
    wrote gives a workload's pods one shared list (cluster/sealed.py), so 100,000 pods cost as many
    workloads. Keyed by the lists' identity; each entry holds its lists, so no id is reused while it lives."""

    def __init__(self, names: GpuNames) -> None:
        self._names = names
        self._known: dict[tuple[int, int], tuple[dict[str, int], Sequence[Any], Sequence[Any]]] = {}

    def __call__(self, spec: dict[str, Any]) -> dict[str, int]:
        app, init = spec.get("containers"), spec.get("initContainers")
        app, init = app if isinstance(app, list) else _NONE, init if isinstance(init, list) else _NONE
        key = (id(app), id(init))
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = (pod_requests(app, init, self._names), app, init)
        return known[0]


def _pod_consumer(state: ClusterState, key: str, top: Obj, req: dict[str, int], names: GpuNames) -> Consumer:
    """A consumer whose GPU requests show only on its pods (or a bare pod)."""
    c = _new_consumer(key, top)
    if key == "Pod":
        c.templates = template_uses(state, key, top, names)
        c.totals = _totals(c.templates)
        c.schedulers = {u.scheduler for u in c.templates if u.scheduler}
        c.pods = 0
        return c
    c.source = "pods"
    c.notes.append("its pods request GPUs that its template does not show: counted from live pods")
    return c


def _consumer_for_missing_owner(
    consumers: dict[tuple[str, str, str, str], Consumer], pod: Obj, ref: dict[str, Any]
) -> Consumer:
    """Pods whose owner was not read (a kind outside the template table): the owner is the consumer."""
    ns = str(_meta(pod).get("namespace", ""))
    key = ("owner:" + str(ref.get("kind")), ns, str(ref.get("name")), str(ref.get("uid")))
    c = consumers.get(key)
    if c is None:
        c = Consumer(
            kind=str(ref.get("kind", "")),
            api_version=str(ref.get("apiVersion", "")),
            namespace=ns,
            name=str(ref.get("name", "")),
            uid=str(ref.get("uid", "")),
            source="pods",
            notes=[f"owner {ref.get('kind')} was not read (add it with --templates): counted from live pods"],
        )
        consumers[key] = c
    return c
