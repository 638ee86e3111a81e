"""The canary step: schedule a pod that asks for the GPU resource, see it served by DRA, run it and
judge its output (dra_migrate/execute/canary.py), delete it (part of `LiveOps`)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from dra_migrate.dra.deviceclasses import MANAGED_BY
from dra_migrate.errors import ClusterError
from dra_migrate.execute import canary as canary_check
from dra_migrate.execute.contract import NEVER, Cancel, Change, StepFailed
from dra_migrate.execute.ops_base import (
    CANARY_ATTEMPTS,
    CANARY_LABEL,
    CANARY_NODE_ANNOTATION,
    CANARY_PREFIX,
    DEVICE_CLASSES,
    DRY_RUN,
    POLL_GROWTH,
    SLICES,
    OpsBase,
    _labels,
    _meta,
    _uid,
)
from dra_migrate.inventory.resources import quantity_int
from dra_migrate.kube import ApiError, Obj, path_of

# How often a pending canary's events are read (a failed DRA prepare shows there; kubelet retries it on a
# backoff of seconds, so a few seconds' delay in seeing it costs nothing).
EVENTS_EVERY_S = 5.0
# ... and the first time, this long after the canary was seen bound: at its binding the kubelet has not yet
# admitted it, let alone tried to prepare its device, so there is nothing to read. A list of events scans
# the namespace's (they are not indexed by object); read at once, it was one such scan per migrated node
# that never found anything (a canary runs ~2.6 s on a real node, 0.25 s on the twin: run.twin_timing).
EVENTS_FIRST_S = 1.0


class CanaryOps(OpsBase):
    def canary(
        self,
        node: str,
        resource: str,
        image: str,
        timeout_s: float,
        *,
        dry_run: bool = False,
        cancel: Cancel = NEVER,
        command: list[str] | None = None,
        namespace: str | None = None,
        pull_secrets: Sequence[str] = (),
    ) -> Change:
        """Schedule, run and judge a pod that proves use (dra_migrate/execute/canary.py); then delete it."""
        deadline = time.monotonic() + timeout_s
        ns = namespace or self.canary_namespace
        labels = _labels(self._node_now(node))  # its hostname label; nothing is written to the node
        token = uuid.uuid4().hex[:12]
        line = canary_check.command_line(command)
        uid = canary_check.run_as(self._canary_namespace_object(ns, check=dry_run))
        manifest = _canary_pod(node, labels, resource, image, token, line, uid=uid, pull_secrets=pull_secrets)
        pods = path_of("v1", "pods", namespace=ns)
        if dry_run:
            out = self.kube.create(pods, manifest, [DRY_RUN])
            self._check_claim_quota(ns, resource)
            after = {"pod": f"{ns}/{_meta(out).get('name') or manifest['metadata']['generateName']}", "node": node}
            return Change(f"Node {node}", {}, after, dry_run=True)
        if self._leftover_canary(ns, node):
            self._delete_canaries(ns, node=node)  # one left by an interrupted run
        attempt = 1
        while True:
            judged: Change | None = None
            started = time.monotonic()
            marks: dict[str, float] = {}
            made: list[str] = []  # the canary's name once created: its cleanup deletes it by name
            with self._cleanup(ns, token, made):
                name = str(_meta(self.kube.create(pods, manifest)).get("name", ""))
                made.append(name)
                marks["created"] = time.monotonic() - started
                try:
                    allocated = self._await_canary(node, ns, name, resource, deadline, timeout_s, cancel)
                except _SchedulerBehind as behind:
                    if attempt >= CANARY_ATTEMPTS or time.monotonic() >= deadline:
                        raise behind.failed(attempt) from None
                else:
                    marks["bound"] = time.monotonic() - started
                    judged = self._judge_canary(node, ns, name, allocated, deadline, timeout_s, cancel)
                    marks["ended"] = time.monotonic() - started
            if judged is not None:
                marks["deleted"] = time.monotonic() - started
                return _with_timing(judged, marks, attempt)
            attempt += 1  # the stale canary is deleted (leaving the block); give the scheduler a poll
            cancel.wait(min(self.poll_s, max(deadline - time.monotonic(), 0.0)))
            cancel.check()

    def _canary_namespace_object(self, ns: str, *, check: bool) -> Obj | None:
        """The canary's namespace (read once: only its uid range is used), None when it cannot be read (a role
        without `get namespaces` from before this read: the canary then runs as NOBODY). `check` (the dry run
        before a wave): a namespace missing or being deleted is the namespace's problem, said as such."""
        if ns in self.canary_ns_read and not check:
            return self.canary_ns_read[ns]
        try:
            found = self.kube.get_or_none(path_of("v1", "namespaces", ns))
        except ApiError as e:
            if e.status != 403:
                raise
            found = None
        else:
            if found is None and check:
                raise ClusterError(f"the canary's namespace {ns} does not exist",
                                   "create it, or make the plan again with another --canary-namespace")  # fmt: skip
            if check and found is not None and (found.get("status") or {}).get("phase") == "Terminating":
                raise ClusterError(f"the canary's namespace {ns} is being deleted (Terminating)",
                                   "make the plan again with another --canary-namespace")  # fmt: skip
        self.canary_ns_read[ns] = found
        return found

    def _check_claim_quota(self, ns: str, resource: str) -> None:
        """The canary namespace's ResourceQuotas have room for the claim the scheduler makes for the canary
        (canary.claim_quota_refusals): a dry run of the pod cannot show that."""
        quotas, _ = self.kube.list_all(path_of("v1", "resourcequotas", namespace=ns))
        if not quotas:
            return
        classes, _ = self.kube.list_all(DEVICE_CLASSES)
        refusals = canary_check.claim_quota_refusals(quotas, classes, resource)
        if refusals:
            raise ClusterError(
                f"the scheduler could not create the canary's ResourceClaim: {'; '.join(refusals)}",
                f"raise the quota in {ns} by one claim and one device, or plan with another --canary-namespace",
            )

    def _await_canary(
        self, node: str, ns: str, name: str, resource: str, deadline: float, timeout_s: float, cancel: Cancel = NEVER
    ) -> Change:
        """Until the canary is bound to `node` with a DRA allocation; the Change names the claim and its devices."""
        with self._changes(f"{ns}/{name}") as changed:
            return self._bound_canary(node, ns, name, resource, deadline, timeout_s, cancel, changed)

    def _bound_canary(
        self,
        node: str,
        ns: str,
        name: str,
        resource: str,
        deadline: float,
        timeout_s: float,
        cancel: Cancel,
        changed: threading.Event | None,
    ) -> Change:
        delay = self.poll_s
        while True:
            if changed is not None:
                changed.clear()  # before the read: a change after it wakes the wait below
            pod = self._canary_now(ns, name, fresh=time.monotonic() >= deadline)
            bound = (pod.get("spec") or {}).get("nodeName")
            status = pod.get("status") or {}
            claim_status = status.get("extendedResourceClaimStatus")
            if bound and bound != node:
                raise StepFailed(f"canary pod {ns}/{name} was scheduled to {bound}, not {node}")
            if bound and claim_status:
                claim_name = str(claim_status.get("resourceClaimName", ""))
                results = self._allocation(ns, claim_name)
                after = {"pod": f"{ns}/{name}", "node": node, "resource": resource, "claim": claim_name}
                if not results:
                    # The pod finished before its claim was read: the resourceclaim controller deletes a
                    # terminal pod's generated claim (k8s.io/kubernetes@v1.37.2
                    # pkg/controller/resourceclaim/controller.go L1650-1668). A canary runs a second or
                    # two, a poll can be longer: it is judged by the node's published devices instead.
                    return Change(f"Node {node}", {}, {**after, "devices": None})
                devices = [{k: r.get(k) for k in ("driver", "pool", "device")} for r in results]
                return Change(f"Node {node}", {}, {**after, "devices": devices})
            if bound:
                # The scheduler writes extendedResourceClaimStatus before it binds (KEP-5004 PreBind),
                # so a bound pod without it got the resource from the device plugin — from a stale view
                # if the node no longer offers it (see CANARY_ATTEMPTS).
                if self._allocatable(node, resource) == 0:
                    raise _SchedulerBehind(ns, name, node, resource)
                raise StepFailed(
                    f"canary pod {ns}/{name} on node {node} was served by the device plugin, not DRA "
                    f"(no extendedResourceClaimStatus): {resource} is still advertised by the node",
                    "check that the device plugin is off on the node and a DeviceClass maps the resource",
                    {"pod": f"{ns}/{name}", "node": node},
                )
            if time.monotonic() >= deadline:
                message = next(
                    (
                        str(c.get("message") or c.get("reason") or "")
                        for c in status.get("conditions") or []
                        if c.get("type") == "PodScheduled" and c.get("status") == "False"
                    ),
                    "",
                )
                raise StepFailed(
                    f"canary pod {ns}/{name} requesting 1 {resource} was not scheduled to node {node} within "
                    f"{timeout_s:g}s: {message or 'no scheduling decision yet'}",
                    "check the node's ResourceSlices and the DeviceClass with extendedResourceName " + resource,
                    {"pod": f"{ns}/{name}", "node": node, "scheduler": message},
                )
            self._canary_pause(delay, deadline, cancel, changed)
            delay = min(delay * POLL_GROWTH, self.poll_cap_s)

    def _canary_now(self, ns: str, name: str, *, fresh: bool = False, seen: bool = False) -> Obj:
        """The canary pod as the waits see it: the watched copy, a GET when not watching or `fresh` (the
        timeout's message). Missing from the copy, it is not yet delivered ({}: not yet scheduled) —
        unless it was `seen` there already: then it was deleted, and the GET says so (404)."""
        cache = self.cache
        if cache is not None and not fresh:
            pod = cache.pod(ns, name)
            if pod is not None or not seen:
                return pod or {}
        return self.kube.get(path_of("v1", "pods", name, ns))

    def _allocation(self, ns: str, claim: str) -> list[Obj]:
        """The allocated devices of the canary's claim: from the watched copy when it shows them, else a
        GET (the claims watch may not have delivered the allocation the pod's binding already shows:
        the two are separate streams), [] when the claim is gone."""
        cache = self.cache
        found = cache.claim(ns, claim) if cache is not None else None
        results = _results(found)
        if not results:
            results = _results(self.kube.get_or_none(path_of("resource.k8s.io/v1", "resourceclaims", claim, ns)))
        return results

    def _canary_pause(self, delay: float, deadline: float, cancel: Cancel, changed: threading.Event | None) -> None:
        """The canary's deadline is on time.monotonic (its own body): so is this wait. Watching, until the
        pod changes (at least every poll cap); else one poll."""
        left = max(deadline - time.monotonic(), 0.0)
        if changed is not None and self.cache is not None:
            cancel.wait_or(changed, min(self.poll_cap_s, left))
        else:
            cancel.wait(min(delay, left))
        cancel.check()

    def _allocatable(self, node: str, resource: str) -> int:
        alloc = (self._node(node).get("status") or {}).get("allocatable") or {}
        return quantity_int(alloc.get(resource, "0"))

    def _judge_canary(
        self, node: str, ns: str, name: str, allocated: Change, deadline: float, timeout_s: float, cancel: Cancel
    ) -> Change:
        """Until the kubelet has run the canary: ok when it Succeeded naming every allocated device — or,
        its claim gone before it was read, naming one of the node's published devices."""
        with self._changes(f"{ns}/{name}") as changed:
            return self._judged(node, ns, name, allocated, deadline, timeout_s, cancel, changed)

    def _judged(
        self,
        node: str,
        ns: str,
        name: str,
        allocated: Change,
        deadline: float,
        timeout_s: float,
        cancel: Cancel,
        changed: threading.Event | None,
    ) -> Change:
        claim_gone = allocated.after.get("devices") is None
        results = list(allocated.after.get("devices") or [])
        slices: list[Obj] = []
        if claim_gone:
            slices = self._slices_of(node)
        slices.extend(self._allocated_slices(node, results))
        ids = canary_check.expected_ids(results, slices)
        events: list[Obj] = []
        events_read = time.monotonic() - EVENTS_EVERY_S + EVENTS_FIRST_S  # first read EVENTS_FIRST_S from now
        while True:
            if changed is not None:
                changed.clear()  # before the read: a change after it wakes the wait below
            # Watched: the verdict passes only on what the copy shows last, and a canary's end is final
            # (restartPolicy Never: Succeeded or Failed, a terminated container stays terminated).
            pod = self._canary_now(ns, name, fresh=time.monotonic() >= deadline, seen=True)
            v = canary_check.verdict(pod, ids)
            bound = bool((pod.get("spec") or {}).get("nodeName"))
            if v.state == "pending" and bound and time.monotonic() - events_read >= EVENTS_EVERY_S:
                # Only a bound, pending canary can have kubelet warnings (a failed prepare fails it at once);
                # events are not indexed by their object, so each read scans the namespace's events.
                events, events_read = self._pod_events(ns, pod), time.monotonic()
                v = canary_check.verdict(pod, ids, events)
            if v.state == "ok" and claim_gone:
                v, seen = canary_check.judged_by_node(v, slices, node)
                if seen:
                    devices = [{k: d[k] for k in ("driver", "pool", "device")} for d in seen]
                    after = {**allocated.after, "devices": devices, "saw": v.saw, "expected": [d["id"] for d in seen]}
                    return Change(allocated.target, {}, {**after, "claimGone": True})
            if v.state == "ok":
                return Change(allocated.target, {}, {**allocated.after, "saw": v.saw, "expected": ids})
            expired = time.monotonic() >= deadline
            if expired and v.state != "failed":
                events = self._pod_events(ns, pod)  # the timeout's message names the kubelet's last warning
            if v.state == "failed" or expired:
                reason = v.reason if v.state == "failed" else canary_check.timed_out(pod, events, timeout_s)
                raise StepFailed(
                    f"canary pod {ns}/{name} on node {node} did not prove use of {', '.join(ids)}: {reason}",
                    "check the DRA kubelet plugin's log on that node and the canary image/command "
                    "(plan --canary-image/--canary-command)",
                    {"pod": f"{ns}/{name}", "node": node, "expected": ids, "saw": v.saw, "exitCode": v.exit_code,
                     "reason": reason},
                )  # fmt: skip
            self._canary_pause(self.poll_s, deadline, cancel, changed)

    def _slices_of(self, node: str) -> list[Obj]:
        """The node's ResourceSlices: the watched copy (wait-dra-ready passed on it), else one indexed LIST."""
        cache = self.cache
        if cache is not None:
            return cache.slices_of(node)
        items, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={node}")])
        return items

    def _allocated_slices(self, node: str, results: list[Obj]) -> list[Obj]:
        """The slices that publish the allocated devices: the node's own of each driver (one indexed list),
        and the driver's whole set only when a device is not among them (a pool that is not the node's).
        Listing every slice of the driver for each canary read 2,000 slices per node of a wave."""
        out: list[Obj] = []
        cache = self.cache
        for d in sorted({str(r.get("driver")) for r in results}):
            if cache is not None:
                items = [s for s in cache.slices_of(node) if (s.get("spec") or {}).get("driver") == d]
            else:
                items, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.driver={d},spec.nodeName={node}")])
            published = {
                (str((s.get("spec") or {}).get("pool", {}).get("name")), str(dev.get("name")))
                for s in items for dev in (s.get("spec") or {}).get("devices") or []
            }  # fmt: skip
            wanted = {(str(r.get("pool")), str(r.get("device"))) for r in results if str(r.get("driver")) == d}
            if not wanted <= published:
                items, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.driver={d}")])
            out.extend(items)
        return out

    def _pod_events(self, ns: str, pod: Obj) -> list[Obj]:
        uid = _uid(pod)
        if not uid:
            return []
        items, _ = self.kube.list_all(
            path_of("v1", "events", namespace=ns), [("fieldSelector", f"involvedObject.uid={uid}")]
        )
        return items

    @contextlib.contextmanager
    def _cleanup(self, ns: str, token: str, made: list[str]) -> Iterator[None]:
        """Delete the canary pod(s) of this call however the block ends; a failed delete is reported,
        without hiding the error that ended the block. Ended normally, the pods are found in the pods
        watch when it shows the canary `made` ended (`_ended_in_copy`), else listed."""
        try:
            yield
        except BaseException as e:
            try:
                self._delete_canaries(ns, token=token)
            except Exception as cleanup:
                e.add_note(f"and deleting the canary pod failed: {cleanup}")
            raise
        copied = self._ended_in_copy(ns, token, made)
        if copied is None:
            self._delete_canaries(ns, token=token)
            return
        for pod in copied:
            self._delete_pod(ns, str(_meta(pod).get("name")))

    def _ended_in_copy(self, ns: str, token: str, made: list[str]) -> list[Obj] | None:
        """The pods of `token` in the pods watch's copy, when that copy shows the canary `made` ended; else
        None (list them). One watch delivers its events in resourceVersion order: a pod a retried POST
        made twice was created before the canary ran, so a copy that shows the canary's end holds it too.
        The LIST this replaces waited on the API server on every wave's critical path (0.6 s from the
        canary's end to its deletion on a 2,000-node twin: issue 25)."""
        cache = self.cache
        if cache is None or not made:
            return None
        pods = [p for p in cache.pods_in(ns) if _labels(p).get(CANARY_LABEL) == token]
        mine = next((p for p in pods if _meta(p).get("name") == made[-1]), None)
        if mine is None or (mine.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            return None
        return pods

    def _leftover_canary(self, ns: str, node: str) -> bool:
        """Whether a canary of `node` may be left by an interrupted run. Watching, the pods watch's first
        list was made after that run ended, so its copy holds any such canary: only then is it listed again
        and deleted (the read before the delete stays a LIST). Not watching: assume one may be."""
        cache = self.cache
        if cache is None:
            return True
        return any(
            CANARY_LABEL in _labels(p) and (_meta(p).get("annotations") or {}).get(CANARY_NODE_ANNOTATION) == node
            for p in cache.pods_in(ns)
        )

    def _delete_canaries(self, ns: str, *, token: str = "", node: str = "") -> None:
        selector = f"{CANARY_LABEL}={token}" if token else CANARY_LABEL
        items, _ = self.kube.list_all(path_of("v1", "pods", namespace=ns), [("labelSelector", selector)])
        for pod in items:
            if node and (_meta(pod).get("annotations") or {}).get(CANARY_NODE_ANNOTATION) != node:
                continue
            self._delete_pod(ns, str(_meta(pod).get("name")))

    def _delete_pod(self, ns: str, name: str) -> None:
        """Delete one canary pod; gone already is fine. Grace 0: the canary holds a device; its claim goes
        with it (the pod owns it)."""
        try:
            self.kube.delete(
                path_of("v1", "pods", name, ns),
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
        except ApiError as e:
            if e.status != 404:
                raise


class _SchedulerBehind(Exception):
    """The canary was bound by the device plugin to a node whose allocatable is already 0 (a temporary
    error: the scheduler had not seen the node's status yet); `failed` is the step's error once retries end."""

    def __init__(self, ns: str, name: str, node: str, resource: str) -> None:
        super().__init__(f"{ns}/{name}")
        self.ns, self.name, self.node, self.resource = ns, name, node, resource

    def failed(self, attempts: int) -> StepFailed:
        return StepFailed(
            f"canary pod {self.ns}/{self.name} on node {self.node} was served by the device plugin, not DRA, "
            f"{attempts} time(s), although the node's allocatable {self.resource} is 0: the scheduler is "
            "placing pods from a view older than the node's status",
            "check the scheduler's load (its queue and client rate), then run apply again to resume",
            {"pod": f"{self.ns}/{self.name}", "node": self.node, "attempts": attempts},
        )


def _canary_pod(
    node: str,
    labels: dict[str, str],
    resource: str,
    image: str,
    token: str,
    command: str,
    *,
    uid: int = canary_check.NOBODY,
    pull_secrets: Sequence[str] = (),
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": CANARY_PREFIX,
            "labels": {**MANAGED_BY, CANARY_LABEL: token, **canary_check.NO_MESH_LABELS},
            "annotations": {CANARY_NODE_ANNOTATION: node, **canary_check.NO_MESH_ANNOTATIONS},
        },
        "spec": {
            "affinity": canary_check.on_node(node, labels),
            # Tolerate every taint, the cordon's node.kubernetes.io/unschedulable included: the canary
            # runs while the node is still cordoned.
            "tolerations": [{"operator": "Exists"}],
            "securityContext": canary_check.pod_security(uid),
            "containers": [{**canary_check.container(image, command, 1), "resources": _resources(resource)}],
            **({"imagePullSecrets": [{"name": s} for s in pull_secrets]} if pull_secrets else {}),
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
    }


def _resources(resource: str) -> dict[str, Any]:
    """One `resource` (limited: an extended resource cannot be overcommitted), cpu and memory requested and limited."""
    fixed = canary_check.RESOURCES
    return {"requests": {**fixed, resource: "1"}, "limits": {**fixed, resource: "1"}}


def _with_timing(change: Change, marks: dict[str, float], attempt: int) -> Change:
    """The canary's Change with when (seconds after its POST was sent, as this process saw it) it was
    created, seen bound with its allocation read, seen ended, and deleted: where a canary's time goes, in
    the journal of every run (a rehearsal sums them per wave: rehearse/model.py)."""
    timing: dict[str, Any] = {k: round(v, 3) for k, v in marks.items()}
    if attempt > 1:
        timing["attempt"] = attempt
    return Change(change.target, change.before, {**change.after, "timing": timing}, change.dry_run)


def _results(claim: Obj | None) -> list[Obj]:
    """A ResourceClaim's allocated devices (status.allocation.devices.results), [] when none."""
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])
