"""The cluster fingerprint a plan carries: what it depends on, so apply can refuse a stale plan.

Every object the plan depends on is listed with its uid and resourceVersion (as Terraform records
what a plan read), plus a hash of the content the plan actually uses. Why both: a Node's
resourceVersion moves with every status heartbeat and a Deployment's with every pod restart, so a
resourceVersion alone would call every plan stale within minutes; a changed uid (an object replaced)
or a changed content hash (labels, taints, GPU capacity, pod templates) is what makes a plan wrong.
"""

from __future__ import annotations

import copy
import hashlib
from typing import TYPE_CHECKING, Any

import orjson

from dra_migrate.cluster.podmeta import lost_if_evicted
from dra_migrate.cluster.redact import for_snapshot
from dra_migrate.cluster.state import ClusterState, uses_devices

if TYPE_CHECKING:
    from dra_migrate.checks.run import Readiness  # the checks pull in the CEL engine: plan/build.py


def content_hash(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


# The keys of a pod's spec that builds since the oldest plan this version reads (format 1 sealed over its
# whole body, 2026-12-01) began to keep (cluster/state.py POD_SPEC_KEYS). A Pod's content hash is over its
# spec as kept, so a plan made before one was added recorded its hash without it; the branches that added
# them merged in more than one order, so a plan may lack any of them. A key added to POD_SPEC_KEYS goes here
# too (tests/unit/test_compat_old_builds.py holds the two lists together).
POD_SPEC_KEYS_BEFORE = ("nodeName", "nodeSelector", "affinity", "tolerations", "resourceClaims", "priorityClassName")
POD_SPEC_KEYS_ADDED = ("terminationGracePeriodSeconds", "schedulingGroup", "schedulerName")


def earlier_contents(kind: str, obj: dict[str, Any]) -> set[str]:
    """The content hashes earlier builds recorded for `obj` as it is now: for a Pod, of its spec without
    each combination of the keys kept since (`schedulerName`, which the API server sets on every pod,
    k8s.io/kubernetes v1.37.2 pkg/apis/core/v1/defaults.go `SetDefaults_PodSpec`, made every bare GPU pod
    of an older plan read as changed). Empty for other kinds, whose content is what it was."""
    spec = obj.get("spec")
    if kind != "Pod" or not isinstance(spec, dict):
        return set()
    present = [k for k in POD_SPEC_KEYS_ADDED if k in spec]
    out = set()
    for mask in range(1, 2 ** len(present)):
        dropped = {k for i, k in enumerate(present) if mask >> i & 1}
        out.add(content_hash({k: v for k, v in spec.items() if k not in dropped}))
    return out


def _node_content(node: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    gpu = {k: v for k, v in (status.get("capacity") or {}).items() if str(k).startswith("nvidia.com/")}
    return {
        "labels": meta.get("labels") or {},
        "taints": spec.get("taints") or [],
        "unschedulable": bool(spec.get("unschedulable")),
        "gpuCapacity": gpu,
    }


def _group(api_version: Any) -> str:
    """The API group of an apiVersion ("batch/v1" -> "batch", "v1" -> "" for the core group)."""
    text = str(api_version or "")
    return text.rpartition("/")[0] if "/" in text else ""


def _entry(kind: str, obj: dict[str, Any], content: Any, group: str | None = None) -> dict[str, Any]:
    """One dependency. Its identity is (group, kind, namespace, name): kinds alone collide across API groups
    (batch/v1 Job and Volcano's batch.volcano.sh Job), and a change to one must not hide behind the other."""
    meta = obj.get("metadata") or {}
    return {
        "kind": kind,
        "group": _group(obj.get("apiVersion")) if group is None else group,
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name") or "",
        "uid": meta.get("uid") or "",
        "resourceVersion": meta.get("resourceVersion") or "",
        "content": content_hash(content),
    }


def _spec(obj: dict[str, Any], state: ClusterState, redacted: bool) -> Any:
    """A consumer's spec as hashed: as it is, or as `dra-migrate snapshot` writes it (`redacted`)."""
    if not redacted:
        return obj.get("spec")
    kept = for_snapshot(copy.deepcopy(obj), keep_env=False, templates=state.templates)  # copy: a reader shares
    return (kept or {}).get("spec")  # parsed containers between pods


def dependencies(state: ClusterState, readiness: Readiness, *, redacted: bool = False) -> list[dict[str, Any]]:
    """The objects a plan depends on: GPU nodes, GPU consumers, DeviceClasses, the NVIDIA stack's CRs and
    device-plugin configs, PodDisruptionBudgets.

    `redacted`: the consumers' and bare pods' specs hashed as a snapshot stores them, env values, args and
    commands redacted (cluster/redact.py), which is what a plan made from such a snapshot recorded. Plans
    record the specs as read (`fingerprint`); drift compares with this only for what differs (plan/drift.py)."""
    gpu_nodes = {n.name for n in readiness.inventory.nodes}
    out = [
        _entry("Node", n, _node_content(n), group="")
        for n in state.of("Node")
        if (n.get("metadata") or {}).get("name") in gpu_nodes
    ]
    consumer_ids = {(_group(c.api_version), c.kind, c.namespace, c.name) for c in readiness.inventory.consumers}
    for key in state.templates.kind_keys():
        for o in state.of(key):
            m = o.get("metadata") or {}
            ident = (_group(o.get("apiVersion")), str(o.get("kind")), str(m.get("namespace") or ""), str(m.get("name")))
            if ident in consumer_ids:
                out.append(_entry(str(o.get("kind")), o, _spec(o, state, redacted)))
    to_migrate = {n.name for n in readiness.inventory.nodes if not n.migrated}
    listed = {(e["namespace"], e["name"]) for e in out if e["kind"] == "Pod"}
    out.extend(_unowned_pods(state, to_migrate, listed, redacted))
    for key in ("resource.k8s.io/DeviceClass", "nvidia.com/ClusterPolicy", "nvidia.com/NVIDIADriver",
                "nvidia.com/GPUCluster", "policy/PodDisruptionBudget"):  # fmt: skip
        group, _, kind = key.rpartition("/")
        out.extend(_entry(kind, o, o.get("spec"), group=group) for o in state.of(key))
    out.extend(_entry("ConfigMap", o, o.get("data"), group="") for o in state.of("ConfigMap"))
    return sorted(out, key=identity)


def _unowned_pods(
    state: ClusterState, to_migrate: set[str], listed: set[tuple[str, str]], redacted: bool
) -> list[dict[str, Any]]:
    """Running pods that use devices and that no controller owns, on GPU nodes still to migrate, not listed
    yet (a bare pod that only claims DRA devices is no GPU consumer): what the drain deletes for good, and
    only when the plan lists it here (`Plan.reviewed_pods`, `LiveOps.drain`), as `check` showed it
    (`unmanaged-gpu-pod`). Pods on migrated nodes are not the plan's: a DRA notebook started on a node an
    interrupted run migrated is no drift to refuse its resume for."""
    out = []
    for pod in state.of("Pod"):
        meta = pod.get("metadata") or {}
        if (str(meta.get("namespace") or ""), str(meta.get("name") or "")) in listed:
            continue
        if (pod.get("spec") or {}).get("nodeName") in to_migrate and uses_devices(pod) and lost_if_evicted(pod):
            out.append(_entry("Pod", pod, _spec(pod, state, redacted), group=""))
    return out


def identity(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    """A fingerprint object's identity, in the order objects are listed: kind, group, namespace, name."""
    return (
        str(entry.get("kind")),
        str(entry.get("group") or ""),
        str(entry.get("namespace") or ""),
        str(entry.get("name")),
    )


def fingerprint(state: ClusterState, readiness: Readiness) -> dict[str, Any]:
    objects = dependencies(state, readiness)
    digest = hashlib.sha256(orjson.dumps(objects, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return {"kubernetesVersion": state.source.kubernetes_version, "digest": f"sha256:{digest}", "objects": objects}
