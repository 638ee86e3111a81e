"""What every part of `LiveOps` shares: its connection and clock, the paths it asks for, small
readers of API objects. `LiveOps` (ops.py) is assembled from the parts: drain (ops_drain.py), canary
(ops_canary.py), nodes, DRA readiness and DeviceClasses (ops.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from dra_migrate.execute.contract import SYSTEM_CLOCK, Cancel, Clock, StepFailed
from dra_migrate.execute.watched import Watched
from dra_migrate.inventory.resources import quantity_int
from dra_migrate.kube import WRITE_RETRIES, Kube, Obj, RateLimit, path_of

PODS = "/api/v1/pods"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
DAEMONSETS = "/apis/apps/v1/daemonsets"
DRY_RUN = ("dryRun", "All")
CANARY_LABEL = "dra-migrate.io/canary"  # one value per canary call: finds a duplicate a retried POST made
CANARY_NODE_ANNOTATION = "dra-migrate.io/canary-node"
CANARY_PREFIX = "dra-migrate-canary-"  # canary pods' generateName
GPU_PREFIX = "nvidia.com/"
EVICTION_BACKOFF_CAP_S = 5.0
# A node's evictions go out at once, as kubectl's evictPods starts one goroutine per pod under one global
# timeout (k8s.io/kubectl v0.37.2 pkg/drain/drain.go); bounded here, and by the client's rate limit.
EVICTION_WORKERS = 32
# Waits poll quickly at first, then less often: a wave of 200 nodes each polling every 0.5 s would ask for
# 400+ requests a second, throttled by the client's rate limit and costing every other lane its turn.
POLL_GROWTH = 1.5
# A canary the scheduler placed by the device plugin on a node whose allocatable is already 0 was
# scheduled from a view older than the node's status: the scheduler works from its informer cache,
# snapshotted at the start of each cycle (k8s.io/kubernetes@v1.37.2 pkg/scheduler/schedule_one.go,
# UpdateSnapshot), so a status update it has not yet received is invisible to it. Such a canary is made
# again, this many times in all, before the step fails (seen on a 2,000-node twin whose scheduler lagged).
CANARY_ATTEMPTS = 3
POLL_CAP_S = 2.0
# The uid of the pod this tool runs in, from the downward API (deploy/in-cluster/apply-job.yaml): a drain never
# evicts it, as kubectl drain never evicts the pods evicting would not move (DaemonSet and mirror pods).
OWN_POD_UID_ENV = "DRA_MIGRATE_POD_UID"


# A node's write or wait that meets no Node: deleted since the plan, or during the run under its steps.
NODE_GONE_HINT = (
    "it was deleted since the plan was made or during the run (a scale-down, a spot reclaim, a repair): "
    "make a new plan (dra-migrate plan), which lists the pool as it is now"
)


class OpsBase:
    """The state every part of `LiveOps` uses (see LiveOps for the parameters)."""

    def __init__(
        self,
        api_client: Any,
        *,
        poll_s: float = 0.5,
        poll_cap_s: float = POLL_CAP_S,
        canary_namespace: str = "default",
        clock: Clock = SYSTEM_CLOCK,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.api = api_client
        self.kube = Kube(api_client, retry=WRITE_RETRIES, rate_limit=rate_limit)
        self.poll_s = poll_s
        self.poll_cap_s = poll_cap_s
        self.canary_namespace = canary_namespace
        # Each canary namespace as read once (ops_canary: its uid range), None when it could not be.
        self.canary_ns_read: dict[str, dict[str, Any] | None] = {}
        self.clock = clock
        # Set by `watch()`: the waits then read watched copies instead of polling (execute/watched.py).
        self.watched: Watched | None = None
        # `LiveOps.node_states`: each Node's state as last converted, with the resourceVersion it was converted at.
        self._converted: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._converted_lock = threading.Lock()
        # The tool's own pod (in-cluster), which no drain evicts: evicting it would stop the apply mid-wave.
        self.own_pod_uid = os.environ.get(OWN_POD_UID_ENV) or None

    def watch(self) -> Watched:
        """Start the informers the waits read (once; `unwatch` ends them)."""
        if self.watched is None:
            watched = Watched(self.kube)
            watched.start()
            self.watched = watched
        return self.watched

    def unwatch(self) -> None:
        if self.watched is not None:
            self.watched.close()
            self.watched = None

    @property
    def cache(self) -> Watched | None:
        """The watched copies the waits read: only while every informer runs (else they read directly)."""
        watched = self.watched
        return watched if watched is not None and watched.alive else None

    def _node_now(self, node: str) -> Obj:
        """The node as the waits see it: the watched copy when watching, else a GET."""
        if self.cache is not None:
            obj = self.cache.node(node)
            if obj is not None:
                return obj
        return self._node(node)

    @contextlib.contextmanager
    def _changes(self, *keys: str) -> Iterator[threading.Event | None]:
        """While watching, an event set when a watched object of `keys` changes (`Watched.changes`); None
        when not watching (the wait then polls)."""
        watched = self.cache
        if watched is None:
            yield None
            return
        with watched.changes(*keys) as changed:
            yield changed

    def _pause(self, seconds: float, deadline: float, cancel: Cancel, changed: threading.Event | None = None) -> None:
        """Sleep until the next poll (not past the deadline); a cancellation ends it at once. With `changed`
        (the wait reads watched copies) until what it reads changes, re-reading at least every poll cap
        (a safety net: a change is woken on, not polled for)."""
        if changed is None or self.cache is None:
            self.clock.sleep(min(seconds, max(deadline - self.clock.monotonic(), 0.0)), cancel)
            return
        cancel.check()
        cancel.wait_or(changed, min(self.poll_cap_s, max(deadline - self.clock.monotonic(), 0.0)))
        cancel.check()

    def _node(self, node: str) -> Obj:
        obj = self.kube.get_or_none(path_of("v1", "nodes", node))
        if obj is None:
            raise StepFailed(f"node {node} does not exist", NODE_GONE_HINT)
        return obj


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return _meta(obj).get("labels") or {}


def _key(pod: Mapping[str, Any]) -> str:
    return f"{_meta(pod).get('namespace')}/{_meta(pod).get('name')}"


def _uid(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("uid", ""))


def _unschedulable(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def _gpu_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: quantity_int(v) for k, v in alloc.items() if k.startswith(GPU_PREFIX)}


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def claims_naming_class(claims: list[Obj], name: str, going: Callable[[Obj], bool] | None = None) -> list[str]:
    """The claims (`namespace/name`, ` (allocated)` when they hold devices) whose requests name DeviceClass
    `name`, allocated ones first: through `exactly.deviceClassName` or a `firstAvailable` subrequest's
    (k8s.io/api v0.37.2 resource/v1 types.go `ExactDeviceRequest`, `DeviceSubRequest`). Claims `going` says
    are on their way out are left out (`going_claim`)."""
    allocated, pending = [], []
    for claim in claims:
        if going is not None and going(claim):
            continue
        requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        named = set()
        for r in requests:
            named.add(str((r.get("exactly") or {}).get("deviceClassName") or ""))
            named.update(str(s.get("deviceClassName") or "") for s in r.get("firstAvailable") or [])
        if name not in named:
            continue
        if (claim.get("status") or {}).get("allocation"):
            allocated.append(f"{_key(claim)} (allocated)")
        else:
            pending.append(_key(claim))
    return sorted(allocated) + sorted(pending)


def going_claim(claim: Obj, pod: Callable[[str, str], Obj | None]) -> bool:
    """A claim that goes by itself: being deleted, or made for a pod (a ResourceClaimTemplate's, or the
    scheduler's for an extended-resource request: owned by the pod, k8s.io/kubernetes v1.37.2
    pkg/controller/resourceclaim/controller.go) that is gone, replaced, being deleted or finished; the
    resourceclaim controller deletes it then. Such a claim allocates nothing again, so the class it names may
    go: a rollback drains the pods that hold GPUs through DRA before the prepare stage's undo, and their
    claims linger for the pods' grace periods. `pod(namespace, name)`: the pod now, or None."""
    meta = claim.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return True
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Pod" and o.get("name")]
    if not owners:
        return False  # a claim someone made: it outlives its pods, and may be allocated again
    for owner in owners:
        now = pod(str(meta.get("namespace") or ""), str(owner["name"]))
        if now is None:
            continue
        now_meta = now.get("metadata") or {}
        finished = (now.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if now_meta.get("uid") == owner.get("uid") and not now_meta.get("deletionTimestamp") and not finished:
            return False
    return True
