"""ClusterState: the one model of what was read from a cluster, whatever the source.

Objects are kept as the plain dicts the API returns (JSON), grouped by kind key ("apps/Deployment").
Objects are pruned on the way in to what the tool reads, so a 100,000-pod fleet fits in memory
(see `prune`); everything downstream reads the state and never mutates it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from dra_migrate.cluster.configrefs import ConfigMapsInUse
from dra_migrate.cluster.identity import ClusterIdentity, cluster_object
from dra_migrate.cluster.kinds import KINDS_BY_KEY, kind_key
from dra_migrate.cluster.podmeta import KEPT_POD_ANNOTATIONS
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.cluster.validate import ObjectChecker, describe
from dra_migrate.errors import InputError

Obj = dict[str, Any]
T = TypeVar("T")
# Where an object was read: "file:line" (or the source's name), or an int from `StateBuilder.lines_of`.
Where = str | int
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceInfo:
    """Where the state came from."""

    kind: str  # "snapshot" or "live"
    location: str  # the snapshot path, or the API server URL
    context: str | None = None
    kubernetes_version: str | None = None  # gitVersion, e.g. "v1.37.2"
    taken_at: str | None = None  # RFC 3339, when a snapshot was taken
    # Group/versions the server serves ("resource.k8s.io/v1"); None when unknown (a plain kubectl dump).
    served_apis: tuple[str, ...] | None = None
    cluster_uid: str | None = None  # the kube-system Namespace's uid (cluster/identity.py)
    server: str | None = None  # the API server URL a snapshot was taken from (live: `location`)

    @property
    def identity(self) -> ClusterIdentity:
        server = self.location if self.kind == "live" else self.server
        return ClusterIdentity(self.cluster_uid, server, self.context)

    @property
    def name(self) -> str:
        """The cluster's short name: the context's last segment, else the snapshot file's stem (what a plan
        records as `cluster` and names its file after)."""
        if self.context:
            return self.context.rsplit("/", 1)[-1]
        return self.location.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0] or "cluster"


# The keys of the `cluster` object every JSON output carries (README "JSON contract"), in this order.
def source_cluster(src: SourceInfo, **extra: Any) -> dict[str, Any]:
    """The `cluster` object of a state that was read (a snapshot, or live)."""
    return cluster_object(src.name, src.kubernetes_version, src.kind, src.location, src.context, src.taken_at, **extra)


@dataclass
class ClusterState:
    source: SourceInfo
    objects: dict[str, list[Obj]] = field(default_factory=dict)
    # Kinds the tool does not read, counted (kind key -> count), so users see what was skipped.
    skipped: Counter[str] = field(default_factory=Counter)
    # Pods that use no devices (no container names an nvidia.com/ resource, no resourceClaims) are not
    # kept, only counted per node ("" when unbound): they consume no GPUs, and they are most of a fleet.
    # Only live (not Succeeded/Failed) pods are counted; this is what a drain of all pods would evict.
    other_pods: Counter[str] = field(default_factory=Counter)
    other_pods_read: int = 0  # all of them, any phase
    # Grafana dashboards (cluster/dashboards.py): ConfigMaps, but never a reader's of `of("ConfigMap")`, which
    # are the NVIDIA stack's configs only (a dashboard is no device-plugin config, and no plan depends on one).
    dashboard_configmaps: list[Obj] = field(default_factory=list)
    templates: TemplateTable = field(default_factory=TemplateTable.builtin)

    # Results of pure functions of this state, computed once (node devices are read by capacity,
    # matching and planning alike).
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        if key not in self._memo:
            self._memo[key] = compute()
        return cast(T, self._memo[key])

    def of(self, key: str) -> list[Obj]:
        return self.objects.get(key, [])

    def all_objects(self) -> Iterator[tuple[str, Obj]]:
        for key, items in self.objects.items():
            for obj in items:
                yield key, obj

    def count(self) -> int:
        """Objects read, including the pods only counted."""
        return sum(len(v) for v in self.objects.values()) + len(self.dashboard_configmaps) + self.other_pods_read


class StateBuilder:
    """Collects objects from any source into a ClusterState, checking and pruning each as it arrives.

    Every object is checked for the types of what the tool reads (`dra_migrate.cluster.validate`), and each
    object is taken once: a second copy of the same (kind, namespace, name) is refused, unless it is the
    very same object version (same uid and resourceVersion), which is dropped and said on stderr.
    """

    def __init__(self, source: SourceInfo, templates: TemplateTable | None = None) -> None:
        self.templates = templates or TemplateTable.builtin()
        self._state = ClusterState(source=source, templates=self.templates)
        self._configmaps = ConfigMapsInUse()
        self._known = set(KINDS_BY_KEY) | set(self.templates.kind_keys())
        self._pods = self._state.objects.setdefault("Pod", [])
        self._checker = ObjectChecker(self.templates)
        # (kind key, namespace, name) -> (uid, resourceVersion, where it was read)
        self._seen: dict[tuple[str, str, str], tuple[Any, Any, Where]] = {}
        self._files: list[str] = []  # of the `Where` ints a reader hands over
        self._namespaces: dict[str, str] = {}  # one string per namespace, not one per counted pod
        self.duplicates = 0

    def lines_of(self, path: str) -> int:
        """The `Where` of line 0 of `path`: line n is this plus n. A reader of a fleet's pods hands each
        one over with an int, not its "file:line" text, which `_seen` would hold for every pod (issue 29)."""
        self._files.append(path)
        return (len(self._files) - 1) << 40

    def _where(self, where: Where) -> str:
        return where if isinstance(where, str) else f"{self._files[where >> 40]}:{where & (1 << 40) - 1}"

    @property
    def state(self) -> ClusterState:
        """The state so far, with the ConfigMaps held back that a device plugin has since been seen to use."""
        for cm in self._configmaps.release():
            self._keep("ConfigMap", cm)
        return self._state

    def add(self, obj: Obj, *, may_request_gpus: bool = True, where: str = "") -> None:
        """Add one object. `may_request_gpus=False` is a reader's promise that the object's text names
        neither an nvidia.com/ resource nor resourceClaims, so a pod need not be looked into.
        `where` (file:line) names the object's origin in errors."""
        where = where or self._state.source.location
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if kind == "Pod" and api_version == "v1":  # the bulk of any fleet: skip the generic path
            if may_request_gpus and uses_devices(obj):
                self._checker.check("Pod", obj, where)
                if self._first_copy("Pod", obj, where):
                    self._pods.append(_prune_pod(obj))
            else:
                self._checker.light_pod(obj, where)
                if self._first_copy("Pod", obj, where):
                    self._count_other_pod(obj)
            return
        if not isinstance(api_version, str) or not isinstance(kind, str):
            self._state.skipped["(no apiVersion/kind)"] += 1
            return
        key = kind_key(api_version, kind)
        if key not in self._known:
            self._state.skipped[key] += 1
            return
        self._checker.check(key, obj, where)
        if not self._first_copy(key, obj, where):
            return
        self._configmaps.note(obj)
        if key == "ConfigMap" and not self._configmaps.offer(obj):
            return  # held until `state`: a DaemonSet or ClusterPolicy read later may use it
        self._keep(key, obj)

    def _keep(self, key: str, obj: Obj) -> None:
        pruned = prune(key, obj)
        if pruned is None:
            return
        if key == "ConfigMap" and not self._configmaps.nvidia_config(obj):
            self._state.dashboard_configmaps.append(pruned)
        else:
            self._state.objects.setdefault(key, []).append(pruned)

    def _first_copy(self, key: str, obj: Obj, where: Where) -> bool:
        """Whether this is the first copy of the object; a conflicting second copy is refused."""
        meta = obj["metadata"]  # checked: a map with a name
        ident = (key, meta.get("namespace") or "", meta["name"])
        return self._first_of(ident, meta.get("uid"), meta.get("resourceVersion"), where, lambda: describe(obj))

    def _first_of(
        self, ident: tuple[str, str, str], uid: Any, version: Any, where: Where, what: Callable[[], str]
    ) -> bool:
        seen = self._seen.get(ident)
        if seen is None:
            self._seen[ident] = (uid, version, where)
            return True
        if uid is not None and (uid, version) == seen[:2]:
            self.duplicates += 1
            here, there = self._where(where), self._where(seen[2])
            log.warning("%s: %s is also in %s (same uid and version): read once", here, what(), there)
            return False
        raise InputError(
            f"{self._where(where)}: {what()} is also in {self._where(seen[2])}"
            + (" with another uid (two clusters?)" if uid != seen[0] else " in another version"),
            "a snapshot holds each object once: export one cluster once, or remove one copy",
        )

    def _count_other_pod(self, obj: Obj) -> None:
        status = obj.get("status")
        spec = obj.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        self._count(node if isinstance(node, str) else "", isinstance(status, dict) and status.get("phase"))

    def _count(self, node: str, phase: Any) -> None:
        state = self._state
        state.other_pods_read += 1
        if phase in ("Succeeded", "Failed"):
            return
        counts = state.other_pods
        counts[node] = counts.get(node, 0) + 1

    def keep_pod(self, pod: Obj, where: Where) -> None:
        """A v1 pod that uses devices, already pruned by a reader that decoded only what `_prune_pod`
        keeps (cluster/sealed.py), and of the types `ObjectChecker.check` takes at a glance."""
        if self._first_copy("Pod", pod, where):
            self._pods.append(pod)

    def count_pod(
        self,
        name: str,
        namespace: str | None,
        uid: Any,
        version: Any,
        node: str | None,
        phase: str | None,
        where: Where,
    ) -> None:
        """A v1 pod that uses no devices, as a reader that decoded only these fields of it hands it over
        (cluster/sealed.py): it has passed the types `ObjectChecker.light_pod` checks, and is only counted."""
        ns = namespace or ""
        ident = ("Pod", self._namespaces.setdefault(ns, ns), name)
        if ident in self._seen:  # a repeat: read once (and said), or refused
            self._first_of(
                ident, uid, version, where, lambda: f"Pod {namespace}/{name}" if namespace else f"Pod {name}"
            )
            return
        self._seen[ident] = (uid, version, where)
        self._count(node or "", phase)

    def add_all(self, objs: Iterable[Obj]) -> None:
        for obj in objs:
            self.add(obj)


def prune(key: str, obj: Obj) -> Obj | None:
    """Drop what the tool never reads. Returns None for objects to discard entirely."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        obj = {**obj, "metadata": meta}
    if key == "Pod":
        return _prune_pod(obj)
    return obj


_GPU_PREFIX = "nvidia.com/"


def uses_devices(pod: Obj) -> bool:
    """Whether the pod claims DRA devices or any container requests or limits an nvidia.com/ resource."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return False
    if spec.get("resourceClaims"):
        return True
    for key in ("containers", "initContainers"):
        cs = spec.get(key)
        for c in cs if isinstance(cs, list) else ():  # a malformed value is refused by the checker
            res = c.get("resources") if isinstance(c, dict) else None
            if not isinstance(res, dict):
                continue
            for part in (res.get("limits"), res.get("requests")):
                if isinstance(part, dict) and any(isinstance(k, str) and k.startswith(_GPU_PREFIX) for k in part):
                    return True
    return False


def _prune_container(c: Any) -> Any:
    """Name, restartPolicy, and the nvidia.com/ entries of requests and limits: all a GPU pod's container
    is read for (the per-pod rule in dra_migrate/inventory/resources.py)."""
    if not isinstance(c, dict):
        return c
    out: dict[str, Any] = {"name": c.get("name")}
    res = c.get("resources")
    if isinstance(res, dict):
        kept = {}
        for part in ("limits", "requests"):
            values = res.get(part)
            if isinstance(values, dict):
                gpu = {k: v for k, v in values.items() if isinstance(k, str) and k.startswith(_GPU_PREFIX)}
                if gpu:
                    kept[part] = gpu
        out["resources"] = kept
    if "restartPolicy" in c:
        out["restartPolicy"] = c["restartPolicy"]
    return out


# schedulingGroup: the 1.37 PodGroup a pod belongs to (k8s.io/api@v0.37.2 core/v1 PodSpec.SchedulingGroup).
POD_SPEC_KEYS = (
    "nodeName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "resourceClaims",
    "priorityClassName",
    "schedulingGroup",
    "terminationGracePeriodSeconds",  # how long its drain takes (dra_migrate/plan/estimate.py)
    "schedulerName",  # a scheduler other than kube-scheduler must handle DRA itself (checks/rules_dependents.py)
)
POD_META_KEYS = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "labels", "deletionTimestamp")
POD_STATUS_KEYS = ("phase", "extendedResourceClaimStatus")
# cluster/sealed.py decodes these fields of a pod the tool wrote (`PodKept`): a key added here needs its field
# there (tests/unit/test_snapshot_sealed.py holds the two together).


def _pick(d: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(d, dict):
        return {}
    return {k: d[k] for k in keys if k in d}


def kept_annotations(annotations: Any) -> dict[str, Any] | None:
    """Of a pod's annotations, those a check reads (`KEPT_POD_ANNOTATIONS`: the mirror mark `drain_skips`
    reads, marks asking that the pod not be interrupted); None when it has none of them. The rest are not
    kept: a pod's annotations may be large (a tool's copy of the object) and a fleet has many pods."""
    if not isinstance(annotations, dict):
        return None
    kept = {k: annotations[k] for k in KEPT_POD_ANNOTATIONS if k in annotations}
    return kept or None


def _prune_pod(obj: Obj) -> Obj:
    """A GPU pod as kept: identity, owners, labels, the annotations a check reads, placement and resources."""
    spec = obj.get("spec")
    new_spec = _pick(spec, POD_SPEC_KEYS)
    if isinstance(spec, dict):
        for ckey in ("containers", "initContainers"):
            cs = spec.get(ckey)
            if isinstance(cs, list):
                new_spec[ckey] = [_prune_container(c) for c in cs]
    meta = obj.get("metadata")
    metadata = _pick(meta, POD_META_KEYS)
    annotations = kept_annotations(meta.get("annotations")) if isinstance(meta, dict) else None
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": "Pod",
        "metadata": metadata,
        "spec": new_spec,
        "status": _pick(obj.get("status"), POD_STATUS_KEYS),
    }
