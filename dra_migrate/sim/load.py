"""Recreate a snapshot's workloads on a live (simulated) cluster, so that a live inventory of it can be
compared with the snapshot's and a migration can be rehearsed on a copy.

Top-level objects are created as they were (server-populated fields stripped); what controllers make
from them (ReplicaSets, their pods, a CronJob's Jobs) is left to the real controllers. Pods owned by a
CRD kind are created directly, since no operator runs here, with their ownerReference pointing at the
new owner. ResourceSlices (the fleet publishes them) and ResourceClaims (allocation state) are skipped.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from dra_migrate.cluster.kinds import KINDS_BY_KEY, NVIDIA_KINDS, WORKLOAD_CRD_KINDS, Kind
from dra_migrate.cluster.podmeta import controller_of
from dra_migrate.cluster.state import ClusterState
from dra_migrate.sim.kube import ApiError, Kube, path_of, strip_server_fields
from dra_migrate.sim.stack import PAUSE_IMAGE, create_with_status, ensure_namespace, install_crds

Obj = dict[str, Any]

# In creation order: what workloads refer to comes before them.
_SUPPORT_KINDS = (
    "resource.k8s.io/DeviceClass",
    "ConfigMap",
    "resource.k8s.io/ResourceClaimTemplate",
    "policy/PodDisruptionBudget",
)
_WORKLOAD_KINDS = (
    *(k.key for k in WORKLOAD_CRD_KINDS),
    "apps/Deployment",
    "apps/StatefulSet",
    "apps/DaemonSet",
    "batch/CronJob",
    "batch/Job",
    "ReplicationController",
    "apps/ReplicaSet",
)
# A pod or Job whose controller is one of these is made by a real controller here.
_CONTROLLED_BY_BUILTIN = {
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "Deployment",
    "ReplicationController",
}
_CRD_KIND_NAMES = {(k.group, k.kind) for k in WORKLOAD_CRD_KINDS}
# Objects of one kind created at once. Each POST waits on admission and etcd far longer than the Python
# that sends it: one at a time, the 2,000-node fleet's 1,811 objects took 60 s of a 480 s rehearsal (the
# twin's load; issue 25). Kinds still go in order (what workloads refer to first), and a kind's objects
# refer to none of each other. The client's connection pool should be at least this wide (rehearse.run).
CREATE_WORKERS = 16
_JOB_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name")


@dataclass
class LoadReport:
    created: Counter[str] = field(default_factory=Counter)  # kind key -> objects created
    existing: Counter[str] = field(default_factory=Counter)  # kind key -> already there
    skipped: list[str] = field(default_factory=list)  # "<kind> <ns>/<name>: why"
    without_devices: Counter[str] = field(default_factory=Counter)  # kind key -> left out (devices_only)
    # Workers of one kind note their outcomes concurrently (`_create` is called from a pool).
    mutex: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


def _at_once(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = CREATE_WORKERS) -> list[Any]:
    """`fn` of each item on up to `workers` threads, results in order; the first error is raised."""
    todo = list(items)
    if len(todo) <= 1 or workers <= 1:
        return [fn(x) for x in todo]
    with ThreadPoolExecutor(max_workers=min(workers, len(todo)), thread_name_prefix="twin-load") as pool:
        return list(pool.map(fn, todo))


def load_workloads(
    api_client: Any, state: ClusterState, *, sa_timeout: float = 30, devices_only: bool = False
) -> LoadReport:
    """Recreate the snapshot's objects on a cluster whose GPU nodes the simulator plays.

    `devices_only` (the twin): workloads whose pods use no devices are left out (counted in
    `without_devices`): a twin plays only the GPU nodes, so their pods would wait Pending for CPU nodes
    it does not have, by the thousand on a large fleet, and load its scheduler for nothing. DaemonSets
    stay: they run on the GPU nodes, and the device plugin's tells where it runs.
    """
    kube = Kube(api_client)
    report = LoadReport()
    _namespaces(kube, state, sa_timeout)
    used = [KINDS_BY_KEY[k] for k in state.objects if k in KINDS_BY_KEY and KINDS_BY_KEY[k].optional]
    install_crds(api_client, used, versions=_versions_by_kind(state))
    for kind in NVIDIA_KINDS:
        for obj in state.of(kind.key):
            _create(kube, kind, {**strip_server_fields(obj), "status": obj.get("status")}, report, with_status=True)
    for key in _SUPPORT_KINDS:
        _at_once(partial(_create_stripped, kube, KINDS_BY_KEY[key], report), state.of(key))
    new_uids: dict[str, str] = {}  # snapshot uid -> live uid, for the pods of CRD-kind owners
    for key in _WORKLOAD_KINDS:
        kind = KINDS_BY_KEY[key]
        wanted = []
        for obj in state.of(key):
            if controller_of(obj) is not None:
                continue  # made by its controller (a Deployment's ReplicaSet, a CronJob's Job)
            if devices_only and key != "apps/DaemonSet" and not uses_devices(obj):
                report.without_devices[key] += 1
                continue
            wanted.append(obj)
        made = _at_once(partial(_create_workload, kube, key, report), wanted)
        for obj, live in zip(wanted, made, strict=True):
            old_uid = (obj.get("metadata") or {}).get("uid")
            if live is not None and old_uid:
                new_uids[str(old_uid)] = str((live.get("metadata") or {}).get("uid", ""))
    pods = state.of("Pod")
    why = _at_once(lambda pod: _load_pod(kube, pod, new_uids, report), pods)
    report.skipped.extend(w for w in why if w)  # in the snapshot's order
    return report


# What else names the GPU resources and the plan's quota steps act on (docs/dependents.md): created after the
# workloads (a quota admitted first would count, and could refuse, the pods the controllers then make).
DEPENDENT_KEYS = (
    "kueue.x-k8s.io/ResourceFlavor",
    "kueue.x-k8s.io/ClusterQueue",
    "kueue.x-k8s.io/LocalQueue",
    "ResourceQuota",
)


def load_dependents(api_client: Any, state: ClusterState) -> LoadReport:
    """The snapshot's ResourceQuotas and Kueue queues, as they were (their status is the controllers' to
    compute). The Kueue CRDs must be served already (load_workloads installs permissive ones)."""
    kube = Kube(api_client)
    report = LoadReport()
    for key in DEPENDENT_KEYS:
        _at_once(partial(_create_without_status, kube, KINDS_BY_KEY[key], report), state.of(key))
    return report


def _create_stripped(kube: Kube, kind: Kind, report: LoadReport, obj: Mapping[str, Any]) -> Obj | None:
    return _create(kube, kind, strip_server_fields(obj), report)


def _create_workload(kube: Kube, key: str, report: LoadReport, obj: Mapping[str, Any]) -> Obj | None:
    return _create(kube, KINDS_BY_KEY[key], _prepare_workload(key, obj), report)


def _create_without_status(kube: Kube, kind: Kind, report: LoadReport, obj: Mapping[str, Any]) -> Obj | None:
    body = strip_server_fields(obj)
    body.pop("status", None)
    return _create(kube, kind, body, report)


def uses_devices(obj: Any) -> bool:
    """Whether any pod template in `obj` asks for devices: an `nvidia.com/` resource, or a
    ResourceClaim (templates sit at many paths in built-in and CRD kinds; search them all)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("limits", "requests") and isinstance(v, dict) and any(str(r).startswith("nvidia.com/") for r in v):
                return True
            if k == "resourceClaims" and v:
                return True
            if uses_devices(v):
                return True
    elif isinstance(obj, list):
        return any(uses_devices(v) for v in obj)
    return False


def _namespaces(kube: Kube, state: ClusterState, sa_timeout: float) -> None:
    """Namespaces of everything namespaced, and the service accounts pods will run as.

    ServiceAccount admission rejects a pod whose account does not exist yet; the `default` one comes
    from the controller manager shortly after the namespace, so wait for it.
    """
    accounts: dict[str, set[str]] = {}
    for _key, obj in state.all_objects():
        ns = (obj.get("metadata") or {}).get("namespace")
        if ns:
            accounts.setdefault(str(ns), {"default"}).update(_service_accounts(obj))

    def make(item: tuple[str, set[str]]) -> None:
        ns, names = item
        ensure_namespace(kube, ns)
        for name in sorted(names - {"default"}):
            kube.create_or_exists(
                path_of("v1", "serviceaccounts", namespace=ns),
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
            )

    _at_once(make, sorted(accounts.items()))
    deadline = time.monotonic() + sa_timeout

    def default_account(ns: str) -> None:
        while kube.get_or_none(path_of("v1", "serviceaccounts", "default", ns)) is None:
            if time.monotonic() > deadline:
                return  # no controller manager: pods will say why they are rejected
            time.sleep(0.1)

    _at_once(default_account, sorted(accounts))


def _service_accounts(obj: Any) -> Iterator[str]:
    """Every serviceAccountName in an object (pod templates sit at many paths; search them all)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "serviceAccountName" and isinstance(v, str) and v:
                yield v
            else:
                yield from _service_accounts(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _service_accounts(v)


def _versions_by_kind(state: ClusterState) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, obj in state.all_objects():
        api_version = str(obj.get("apiVersion", ""))
        if "/" in api_version:
            out.setdefault(key, set()).add(api_version.split("/", 1)[1])
    return out


def _prepare_workload(key: str, obj: Mapping[str, Any]) -> Obj:
    out = strip_server_fields(obj)
    if key == "batch/Job":
        # A Job's selector and template labels name the old Job's uid; the API server generates new ones
        # and rejects a copied selector unless manualSelector is set.
        spec = dict(out.get("spec") or {})
        if not spec.get("manualSelector"):
            spec.pop("selector", None)
            template = dict(spec.get("template") or {})
            tmeta = dict(template.get("metadata") or {})
            tmeta["labels"] = {k: v for k, v in (tmeta.get("labels") or {}).items() if k not in _JOB_LABELS}
            template["metadata"] = tmeta
            spec["template"] = template
        out["spec"] = spec
    return out


def _create(
    kube: Kube, kind: Kind, obj: Mapping[str, Any], report: LoadReport, *, with_status: bool = False
) -> Obj | None:
    """Create one object at its own apiVersion. Returns the live object, or None if it existed or failed.

    `obj` is created as given (strip it first); with_status also writes its `status`.
    """
    meta = obj.get("metadata") or {}
    ns = str(meta.get("namespace", "")) if kind.namespaced else ""
    api_version = str(obj.get("apiVersion") or kind.api_version)
    try:
        if with_status:
            made = create_with_status(kube, api_version, kind.plural, obj, ns)
            with report.mutex:
                (report.created if made else report.existing)[kind.key] += 1
            return None
        live = kube.create_or_exists(path_of(api_version, kind.plural, namespace=ns), obj)
    except ApiError as e:
        with report.mutex:
            report.skipped.append(f"{kind.key} {ns}/{meta.get('name')}: {e}")
        return None
    with report.mutex:
        (report.existing if live is None else report.created)[kind.key] += 1
    return live


def _load_pod(kube: Kube, pod: Mapping[str, Any], new_uids: Mapping[str, str], report: LoadReport) -> str | None:
    """Create the snapshot's pod (one a built-in controller makes is left to it); why not, if it is skipped."""
    meta = pod.get("metadata") or {}
    where = f"Pod {meta.get('namespace')}/{meta.get('name')}"
    if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return f"{where}: finished or terminating"
    owner = controller_of(pod)
    refs: list[Obj] = []
    if owner is not None:
        group = str(owner.get("apiVersion", "")).rpartition("/")[0]
        if (group, owner.get("kind")) not in _CRD_KIND_NAMES:
            if owner.get("kind") not in _CONTROLLED_BY_BUILTIN:
                return f"{where}: owned by {owner.get('kind')}, which no controller here recreates"
            return None  # a built-in controller makes it
        uid = new_uids.get(str(owner.get("uid")))
        if not uid:
            return f"{where}: its owner {owner.get('kind')}/{owner.get('name')} was not created"
        refs.append({**owner, "uid": uid})
    body = strip_server_fields(pod)
    if refs:
        body["metadata"]["ownerReferences"] = refs
    # Snapshots keep only what the tool reads of a pod; the API server needs an image per container.
    spec = dict(body.get("spec") or {})
    for ckey in ("containers", "initContainers"):
        if isinstance(spec.get(ckey), list):
            spec[ckey] = [{"image": PAUSE_IMAGE, **c} for c in spec[ckey]]
    body["spec"] = spec
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "Pod")
    _create(kube, KINDS_BY_KEY["Pod"], body, report)
    return None
