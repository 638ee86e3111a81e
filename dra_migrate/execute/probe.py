"""`dra-migrate probe`: the hardware contract of one node, tested on the live cluster.

1. What the node's DRA driver publishes: its devices, attributes and capacities (the node's ResourceSlices,
   newest pool generation).
2. A claim that should match — one device through the DeviceClass that maps the node's GPU resource
   (`spec.extendedResourceName`, KEP-5004; a temporary class selecting the driver when none does) — and
   one that should not: the same class plus a selector no published device satisfies, derived from what
   was published (more `memory` than any device has; a `uuid` no device has when no memory is published).
   Claims are allocated by the scheduler for a pod that uses them, so each claim gets a pod pinned to the
   node by node affinity (not nodeName, which would bypass the scheduler).
3. The first is allocated (which devices) and its pod proves use exactly like the canary
   (dra_migrate/execute/canary.py: Succeeded, exit 0, a termination message naming every allocated device);
   the second stays unallocated and the scheduler says why (its PodScheduled condition).
4. Everything it created is deleted (pods with grace 0, then claims, then a temporary class), however it
   ended. It writes nothing else.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.quantity import parse_quantity
from dra_migrate.dra.deviceclasses import MANAGED_BY
from dra_migrate.errors import InputError
from dra_migrate.execute import canary as canary_check
from dra_migrate.kube import ApiError, Kube, Obj, path_of

FORMAT_VERSION = 1
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
PROBE_LABEL = "dra-migrate.io/probe"
REQUEST = "gpu"


@dataclass
class ProbeOptions:
    node: str
    image: str = canary_check.DEFAULT_IMAGE
    command: str = canary_check.DEFAULT_COMMAND
    driver: str = "gpu.nvidia.com"
    resource: str = "nvidia.com/gpu"
    namespace: str = "default"
    timeout_s: float = 180.0
    poll_s: float = 0.5


@dataclass
class ProbeResult:
    node: str
    driver: str
    device_class: str = ""
    devices: list[dict[str, Any]] = field(default_factory=list)
    match: dict[str, Any] = field(default_factory=lambda: {"allocated": False, "devices": [], "containerSaw": ""})
    mismatch: dict[str, Any] = field(default_factory=lambda: {"allocated": False, "reason": "", "selector": ""})
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "node": self.node,
            "driver": self.driver,
            "deviceClass": self.device_class,
            "devices": self.devices,
            "match": self.match,
            "mismatch": self.mismatch,
            "result": "ok" if self.ok else "failed",
            "problems": self.problems,
        }


def published_devices(slices: list[Obj], node: str, driver: str) -> list[dict[str, Any]]:
    """The node's devices of `driver` in the newest generation of each pool: name, pool, attributes (as
    plain values) and capacities (quantity strings), in pool/name order."""
    mine = [s for s in slices if (s.get("spec") or {}).get("driver") == driver and s["spec"].get("nodeName") == node]
    newest: dict[str, int] = {}
    for s in mine:
        pool = s["spec"].get("pool") or {}
        newest[pool.get("name", "")] = max(newest.get(pool.get("name", ""), 0), int(pool.get("generation", 0)))
    out = []
    for s in mine:
        pool = s["spec"].get("pool") or {}
        if int(pool.get("generation", 0)) != newest[pool.get("name", "")]:
            continue
        for d in s["spec"].get("devices") or []:
            attrs = {k: next(iter(v.values()), None) if isinstance(v, dict) else v
                     for k, v in (d.get("attributes") or {}).items()}  # fmt: skip
            caps = {k: str((v or {}).get("value", "")) for k, v in (d.get("capacity") or {}).items()}
            out.append({"name": d.get("name", ""), "pool": pool.get("name", ""), "attributes": attrs, "capacity": caps})
    return sorted(out, key=lambda d: (d["pool"], d["name"]))


def mismatch_selector(devices: list[dict[str, Any]], driver: str) -> str:
    """A CEL selector no published device satisfies: more memory than the largest device has, or else
    another driver than the class selects. Capacities and attributes without a domain are in the driver's domain
    (resource.k8s.io/v1 DeviceSelector CEL environment)."""
    # Bytes, exactly: quantity_int is for extended-resource counts (and caps them).
    parsed = [parse_quantity(d["capacity"]["memory"]) for d in devices if d["capacity"].get("memory")]
    memories = [math.ceil(q) for q in parsed if q is not None]
    if memories:
        return f"device.capacity['{driver}'].memory.compareTo(quantity('{max(memories) + 1}')) >= 0"
    # No memory published: the class selects the driver, so a device of another driver satisfies neither.
    return f"device.driver != '{driver}'"


def run_probe(kube: Kube, opts: ProbeOptions) -> ProbeResult:
    result = ProbeResult(opts.node, opts.driver)
    node = kube.get_or_none(path_of("v1", "nodes", opts.node))
    if node is None:
        raise InputError(f"node {opts.node} not found", "give --node the name of a node (kubectl get nodes)")
    node_labels = (node.get("metadata") or {}).get("labels") or {}
    slices, _ = kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={opts.node}")])
    result.devices = published_devices(slices, opts.node, opts.driver)
    if not result.devices:
        result.problems.append(f"node {opts.node} publishes no {opts.driver} devices (no ResourceSlices)")
        return result
    token = uuid.uuid4().hex[:10]
    with _created(kube, opts.namespace, token) as created:
        result.device_class = _device_class(kube, opts, token, created)
        selector = mismatch_selector(result.devices, opts.driver)
        result.mismatch["selector"] = selector
        uid = namespace_uid(kube, opts.namespace)
        match_pod = _claim_and_pod(kube, opts, token, "match", result.device_class, None, node_labels, created, uid)
        miss_pod = _claim_and_pod(
            kube, opts, token, "mismatch", result.device_class, selector, node_labels, created, uid
        )
        _judge(kube, opts, result, slices, match_pod, miss_pod)
    return result


@dataclass
class _Created:
    pods: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    device_class: str = ""


@contextmanager
def _created(kube: Kube, ns: str, token: str) -> Iterator[_Created]:
    """Deletes what the probe created however the block ends; a failed delete is noted on the error."""
    created = _Created()
    try:
        yield created
    finally:
        for name in created.pods:
            _delete(kube, path_of("v1", "pods", name, ns), {"gracePeriodSeconds": 0})
        for name in created.claims:
            _delete(kube, path_of("resource.k8s.io/v1", "resourceclaims", name, ns))
        if created.device_class:
            _delete(kube, path_of("resource.k8s.io/v1", "deviceclasses", created.device_class))


def _delete(kube: Kube, path: str, options: Mapping[str, Any] | None = None) -> None:
    try:
        kube.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions", **(options or {})})
    except ApiError as e:
        if e.status != 404:
            raise


def _device_class(kube: Kube, opts: ProbeOptions, token: str, created: _Created) -> str:
    """The DeviceClass mapping the node's GPU resource, or a temporary one selecting the driver."""
    classes, _ = kube.list_all(DEVICE_CLASSES)
    for c in sorted(classes, key=lambda c: str(c["metadata"]["name"])):
        if (c.get("spec") or {}).get("extendedResourceName") == opts.resource:
            return str(c["metadata"]["name"])
    name = f"dra-migrate-probe-{token}"
    kube.create(
        DEVICE_CLASSES,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name, "labels": {**MANAGED_BY, PROBE_LABEL: token}},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{opts.driver}'"}}]},
        },
    )
    created.device_class = name
    return name


def probe_pod(
    opts: ProbeOptions, role: str, node_labels: Mapping[str, str], labels: Mapping[str, str], claim: str, uid: int
) -> dict[str, Any]:
    """A probe's pod: the canary's container and security (Pod Security `restricted`, cpu and memory requested:
    dra_migrate/execute/canary.py), its device from the probe's own claim `claim`."""
    check = canary_check.container(opts.image, opts.command if role == "match" else "true", 1)
    fixed = canary_check.RESOURCES
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"dra-migrate-probe-{role}-", "labels": dict(labels)},
        "spec": {
            "affinity": canary_check.on_node(opts.node, node_labels),
            "tolerations": [{"operator": "Exists"}],
            "securityContext": canary_check.pod_security(uid),
            "resourceClaims": [{"name": REQUEST, "resourceClaimName": claim}],
            "containers": [{**check, "resources": {"claims": [{"name": REQUEST}], "requests": dict(fixed),
                                                   "limits": dict(fixed)}}],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
    }  # fmt: skip


def namespace_uid(kube: Kube, namespace: str) -> int:
    """The uid a probe or canary pod runs as in `namespace` (canary.run_as); NOBODY when it cannot be read."""
    try:
        return canary_check.run_as(kube.get_or_none(path_of("v1", "namespaces", namespace)))
    except ApiError as e:
        if e.status != 403:
            raise
        return canary_check.NOBODY


def _claim_and_pod(
    kube: Kube, opts: ProbeOptions, token: str, role: str, device_class: str, selector: str | None,
    node_labels: Mapping[str, str], created: _Created, uid: int,
) -> str:  # fmt: skip
    ns = opts.namespace
    labels = {**MANAGED_BY, PROBE_LABEL: token}
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    claim = kube.create(
        path_of("resource.k8s.io/v1", "resourceclaims", namespace=ns),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"generateName": f"dra-migrate-probe-{role}-", "labels": labels},
            "spec": {"devices": {"requests": [{"name": REQUEST, "exactly": exactly}]}},
        },
    )
    claim_name = str(claim["metadata"]["name"])
    created.claims.append(claim_name)
    pod = kube.create(path_of("v1", "pods", namespace=ns), probe_pod(opts, role, node_labels, labels, claim_name, uid))
    name = str(pod["metadata"]["name"])
    created.pods.append(name)
    return name


def _judge(kube: Kube, opts: ProbeOptions, result: ProbeResult, slices: list[Obj], match: str, miss: str) -> None:
    ns = opts.namespace
    deadline = time.monotonic() + opts.timeout_s
    ids: list[str] | None = None
    verdict = canary_check.Verdict("pending")
    miss_reason = ""
    while True:
        pod = kube.get(path_of("v1", "pods", match, ns))
        if ids is None:
            results = _allocation(kube, ns, pod)
            if results is not None:
                result.match["allocated"] = bool(results)
                result.match["devices"] = [r.get("device") for r in results]
                ids = canary_check.expected_ids(results, slices)
        if ids is not None and verdict.state == "pending":
            events = _events(kube, ns, pod)
            verdict = canary_check.verdict(pod, ids, events)
        if not miss_reason:
            miss_reason = _unschedulable(kube.get(path_of("v1", "pods", miss, ns)))
        if verdict.state != "pending" and miss_reason:
            break
        if time.monotonic() >= deadline:
            if verdict.state == "pending":
                reason = canary_check.timed_out(pod, _events(kube, ns, pod), opts.timeout_s)
                if ids is None:
                    reason = _unschedulable(pod) or f"the matching claim was not allocated within {opts.timeout_s:g}s"
                verdict = canary_check.Verdict("failed", reason)
            break
        time.sleep(opts.poll_s)
    result.match["containerSaw"] = verdict.saw
    if not result.match["allocated"]:
        result.problems.append(f"the matching claim was not allocated: {verdict.reason}")
    elif verdict.state != "ok":
        result.problems.append(f"the container on the matching allocation did not prove use: {verdict.reason}")
    miss_claim = _claim_of(kube, ns, kube.get(path_of("v1", "pods", miss, ns)))
    miss_alloc = ((miss_claim or {}).get("status") or {}).get("allocation")
    result.mismatch["allocated"] = bool(miss_alloc)
    result.mismatch["reason"] = miss_reason
    if miss_alloc:
        result.problems.append("the claim no published device satisfies was allocated")
    elif not miss_reason:
        result.problems.append(f"the scheduler gave no reason for the unsatisfiable claim within {opts.timeout_s:g}s")


def _claim_of(kube: Kube, ns: str, pod: Obj) -> Obj | None:
    names = [c.get("resourceClaimName") for c in (pod.get("spec") or {}).get("resourceClaims") or []]
    return kube.get_or_none(path_of("resource.k8s.io/v1", "resourceclaims", str(names[0]), ns)) if names else None


def _allocation(kube: Kube, ns: str, pod: Obj) -> list[dict[str, Any]] | None:
    """The matching claim's allocated devices once the pod is bound (None before)."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    claim = _claim_of(kube, ns, pod)
    results = ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
    return [{k: r.get(k) for k in ("driver", "pool", "device")} for r in results or []]


def _unschedulable(pod: Obj) -> str:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return str(c.get("message") or c.get("reason"))
    return ""


def _events(kube: Kube, ns: str, pod: Obj) -> list[Obj]:
    uid = (pod.get("metadata") or {}).get("uid")
    if not uid:
        return []
    items, _ = kube.list_all(path_of("v1", "events", namespace=ns), [("fieldSelector", f"involvedObject.uid={uid}")])
    return items
