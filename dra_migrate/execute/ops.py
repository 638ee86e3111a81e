"""Live operations (`contract.Ops`) against a real API server.

Each operation reads the current state first and does nothing when the goal already holds, so a
resumed run can repeat any step: the `Change` it returns then has `before == after`. Writes are JSON
merge patches (RFC 7386; `null` removes a key), and `dry_run=True` sends every write with
`dryRun=All` (server-side dry run: admission and validation run, nothing is persisted) and reports what
the server says would happen.

Transient failures (5xx, 429 outside eviction, a connection refused or reset) are retried inside each
request by `kubeapi.Kube`; permanent ones (403, 422, ...) surface as `ClusterError` quoting the server.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dra_migrate.cluster.state import uses_devices
from dra_migrate.dra.deviceclasses import MANAGED_BY
from dra_migrate.errors import InputError
from dra_migrate.execute import canary as canary_check
from dra_migrate.execute.contract import NEVER, SYSTEM_CLOCK, Cancel, Change, Clock, StepFailed
from dra_migrate.execute.kubeapi import ApiError, Kube, Obj, RateLimit, path_of
from dra_migrate.inventory.gangs import FRAMEWORK_GANG_KINDS
from dra_migrate.inventory.placement import pdb_selects
from dra_migrate.inventory.resources import quantity_int

PODS = "/api/v1/pods"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
DAEMONSETS = "/apis/apps/v1/daemonsets"
DRY_RUN = ("dryRun", "All")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"  # kubelet's static pods (kubernetes/kubectl pkg/drain)
HOSTNAME_LABEL = "kubernetes.io/hostname"
CANARY_LABEL = "dra-migrate.io/canary"  # one value per canary call: finds a duplicate a retried POST made
CANARY_NODE_ANNOTATION = "dra-migrate.io/canary-node"
CANARY_PREFIX = "dra-migrate-canary-"  # canary pods' generateName
GPU_PREFIX = "nvidia.com/"
EVICTION_BACKOFF_CAP_S = 5.0
REQUEST_RETRIES = 5  # 0.2+0.4+0.8+1.6+3.2 s of backoff: rides out an API server restart or a proxy blip
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


class LiveOps:
    """`Ops` on one api client (from `live_ops`, or any `kubernetes` ApiClient).

    `poll_s` is how often waits first re-read state, growing to `poll_cap_s`; `canary_namespace` where
    canary pods run. `api` is the api client, for others that talk to the same cluster (the lock).
    """

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
        self.kube = Kube(api_client, retries=REQUEST_RETRIES, rate_limit=rate_limit)
        self.poll_s = poll_s
        self.poll_cap_s = poll_cap_s
        self.canary_namespace = canary_namespace
        self.clock = clock

    def _pause(self, seconds: float, deadline: float, cancel: Cancel) -> None:
        """Sleep until the next poll (not past the deadline); a cancellation ends it at once."""
        self.clock.sleep(min(seconds, max(deadline - self.clock.monotonic(), 0.0)), cancel)

    # -- nodes -----------------------------------------------------------------------------------

    def node_state(self, node: str) -> dict[str, Any]:
        obj = self.kube.get_or_none(path_of("v1", "nodes", node))
        if obj is None:
            return {"exists": False, "uid": "", "unschedulable": False, "labels": {}, "allocatable": {}, "ready": False}
        conditions = (obj.get("status") or {}).get("conditions") or []
        return {
            "exists": True,
            "uid": str((obj.get("metadata") or {}).get("uid", "")),
            "unschedulable": _unschedulable(obj),
            "labels": dict(_labels(obj)),
            "allocatable": _gpu_allocatable(obj),
            "ready": any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        }

    def set_unschedulable(self, node: str, value: bool, *, dry_run: bool = False) -> Change:
        current = _unschedulable(self._node(node))
        before = {"unschedulable": current}
        if current == value:
            return Change(f"Node {node}", before, dict(before), dry_run)
        # kubectl cordon/uncordon write the same field (kubectl pkg/drain/cordon.go, a patch of
        # spec.unschedulable); the node lifecycle controller then adds or removes the
        # node.kubernetes.io/unschedulable taint itself.
        out = self._patch_node(node, {"spec": {"unschedulable": value}}, dry_run)
        return Change(f"Node {node}", before, {"unschedulable": _unschedulable(out)}, dry_run)

    def set_label(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        current = _labels(self._node(node)).get(key)
        before = {"labels": {key: current}}
        if current == value:
            return Change(f"Node {node}", before, {"labels": {key: current}}, dry_run)
        out = self._patch_node(node, {"metadata": {"labels": {key: value}}}, dry_run)
        return Change(f"Node {node}", before, {"labels": {key: _labels(out).get(key)}}, dry_run)

    def _node(self, node: str) -> Obj:
        obj = self.kube.get_or_none(path_of("v1", "nodes", node))
        if obj is None:
            raise StepFailed(f"node {node} does not exist", "it was removed since the plan was made: re-plan")
        return obj

    def _patch_node(self, node: str, patch: Mapping[str, Any], dry_run: bool) -> Obj:
        query = [DRY_RUN] if dry_run else []
        try:
            return self.kube.merge_patch(path_of("v1", "nodes", node), patch, query)
        except ApiError as e:
            if e.status == 404:
                raise StepFailed(f"node {node} does not exist", "it was removed since the plan was made") from e
            raise

    # -- drain -----------------------------------------------------------------------------------

    def drain(
        self, node: str, scope: str, timeout_s: float, *, dry_run: bool = False, cancel: Cancel = NEVER
    ) -> Change:
        """Evict the node's pods in `scope` as `kubectl drain` does, but only through the Eviction API.

        Skipped as kubectl's filters skip them (kubernetes/kubectl pkg/drain/filters.go): DaemonSet pods
        (their controller ignores unschedulable and would recreate them at once) and mirror pods (the
        kubelet's static pods; the API object cannot be evicted). Unlike kubectl, pods without a
        controller are evicted too (no --force needed): the plan lists them for review beforehand.
        """
        if scope not in ("gpu", "all"):
            raise InputError(f"drain scope must be 'gpu' or 'all', not {scope!r}")
        deadline = self.clock.monotonic() + timeout_s
        pods = [p for p in self._pods_on(node) if _drainable(p) and (scope == "all" or uses_devices(p))]
        before = {"pods": sorted(_key(p) for p in pods)}
        if not pods:
            return Change(f"Node {node}", before, {"pods": []}, dry_run)
        # Pods already being deleted need no eviction, only the wait for them to go.
        to_evict = {_key(p): p for p in pods if not _meta(p).get("deletionTimestamp")}
        blocked: dict[str, str] = {}
        delay = self.poll_s
        while True:
            for key, reason in self._evict_all(to_evict, dry_run).items():
                if reason is None:
                    del to_evict[key]
                    blocked.pop(key, None)
                else:
                    blocked[key] = reason
            # A dry run changes nothing that would unblock a disruption budget: report at once.
            if not to_evict:
                break
            if dry_run or self.clock.monotonic() >= deadline:
                raise self._blocked(node, timeout_s, to_evict, blocked, dry_run)
            self._pause(delay, deadline, cancel)
            delay = min(delay * 2, EVICTION_BACKOFF_CAP_S)
        if dry_run:
            return Change(f"Node {node}", before, {"pods": []}, dry_run=True)
        self._wait_gone(node, {_uid(p): _key(p) for p in pods}, deadline, timeout_s, cancel)
        return Change(f"Node {node}", before, {"pods": []})

    def _evict_all(self, pods: Mapping[str, Obj], dry_run: bool) -> dict[str, str | None]:
        """Evict every pod at once; per pod None (evicted or gone) or why the server refused for now."""
        if len(pods) <= 1:
            return {key: self._evict(pod, dry_run) for key, pod in pods.items()}
        with ThreadPoolExecutor(max_workers=min(len(pods), EVICTION_WORKERS), thread_name_prefix="evict") as pool:
            reasons = pool.map(lambda pod: self._evict(pod, dry_run), pods.values())
            return dict(zip(pods, reasons, strict=True))

    def _pods_on(self, node: str) -> list[Obj]:
        items, _ = self.kube.list_all(PODS, [("fieldSelector", f"spec.nodeName={node}")])
        return items

    def _evict(self, pod: Obj, dry_run: bool) -> str | None:
        """None when evicted (or already gone); the server's reason when it refused for now (429)."""
        meta = _meta(pod)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
            # Only this pod: a newer one of the same name (a StatefulSet's) is not ours to evict.
            "deleteOptions": {"preconditions": {"uid": meta.get("uid")}, **({"dryRun": ["All"]} if dry_run else {})},
        }
        path = path_of("v1", "pods", name, ns, sub="eviction")
        try:
            # 429 is left out of the request's own retries: here it means a PodDisruptionBudget
            # forbids the eviction now, and the caller retries on its own schedule.
            self.kube.request(
                "POST",
                path,
                body=body,
                query=[DRY_RUN] if dry_run else [],
                retry_status={500, 502, 503, 504},
            )
        except ApiError as e:
            if e.status == 404:
                return None  # gone already
            if e.status == 409 and meta.get("uid"):
                return None  # the uid precondition failed: this pod is gone, another took its name
            if e.status == 429:
                return e.api_message or "Too Many Requests"
            if e.status == 403 and _namespace_terminating(e):
                # Admission refuses every create, evictions included, in a namespace being deleted; the
                # namespace controller deletes the pod soon. kubectl drain does the same: a pod already
                # marked for deletion only needs waiting for, any other is retried (pkg/drain/drain.go,
                # NamespaceTerminatingCause).
                current = self.kube.get_or_none(path_of("v1", "pods", name, ns))
                if current is None or _uid(current) != _uid(pod) or _meta(current).get("deletionTimestamp"):
                    return None
                if dry_run:
                    return None  # it goes with its namespace: nothing blocks a real drain here
                return f"namespace {ns} is being deleted"
            # More than one budget selecting the pod makes the API server refuse every eviction with
            # a 500 (policy/v1 Eviction docs): no retry helps, the budgets must be fixed.
            if e.status == 500 and "more than one" in e.api_message.lower():
                budgets = self._budgets_for(pod)
                raise StepFailed(
                    f"cannot evict {ns}/{name}: {e.api_message}",
                    "leave one PodDisruptionBudget selecting the pod",
                    {"budgets": budgets, "pods": [f"{ns}/{name}"]},
                ) from e
            raise
        return None

    def _blocked(
        self, node: str, timeout_s: float, pending: Mapping[str, Obj], reasons: Mapping[str, str], dry_run: bool
    ) -> StepFailed:
        budgets = sorted({b for pod in pending.values() for b in self._budgets_for(pod)})
        pods = sorted(pending)
        why = f"PodDisruptionBudget {', '.join(budgets)}" if budgets else "the API server"
        when = "a dry-run eviction" if dry_run else f"{timeout_s:g}s of retries"
        said = "; ".join(sorted({reasons[k] for k in pods if reasons.get(k)}))
        return StepFailed(
            f"drain of node {node}: {len(pods)} pod(s) still there after {when}, eviction refused by {why}: "
            f"{', '.join(pods)}" + (f" ({said})" if said else ""),
            "wait until the budget allows a disruption (more replicas ready), or relax the budget, then resume",
            {"budgets": budgets, "pods": pods},
        )

    def _budgets_for(self, pod: Obj) -> list[str]:
        """The PodDisruptionBudgets of the pod's namespace whose selector matches its labels."""
        ns = str(_meta(pod).get("namespace", ""))
        items, _ = self.kube.list_all(path_of("policy/v1", "poddisruptionbudgets", namespace=ns))
        return sorted(f"{ns}/{_meta(b).get('name')}" for b in items if pdb_selects(b, pod))

    def _wait_gone(self, node: str, uids: Mapping[str, str], deadline: float, timeout_s: float, cancel: Cancel) -> None:
        """Until no evicted pod (by uid: a recreated pod of the same name is another pod) is left on the
        node, as kubectl drain's waitForDelete does."""
        delay = self.poll_s
        while True:
            left = sorted(uids[_uid(p)] for p in self._pods_on(node) if _uid(p) in uids)
            if not left:
                return
            if self.clock.monotonic() >= deadline:
                raise StepFailed(
                    f"drain of node {node}: {len(left)} evicted pod(s) still terminating after {timeout_s:g}s: "
                    f"{', '.join(left)}",
                    "check the kubelet on that node and the pods' finalizers, then resume",
                    {"budgets": [], "pods": left},
                )
            self._pause(delay, deadline, cancel)
            delay = min(delay * POLL_GROWTH, self.poll_cap_s)

    # -- DRA readiness ---------------------------------------------------------------------------

    def wait_dra_ready(
        self,
        node: str,
        resources: list[str],
        devices: int,
        timeout_s: float,
        *,
        driver: str = "gpu.nvidia.com",
        cancel: Cancel = NEVER,
    ) -> Change:
        deadline = self.clock.monotonic() + timeout_s
        delay = self.poll_s
        while True:
            obj = self._node(node)
            alloc = (obj.get("status") or {}).get("allocatable") or {}
            left = {r: quantity_int(alloc[r]) for r in resources if quantity_int(alloc.get(r, "0")) != 0}
            published, incomplete = self._published_devices(node, driver)
            if not left and published == devices and not incomplete:
                state = {"allocatable": {r: 0 for r in resources}, "driver": driver, "devices": published}
                return Change(f"Node {node}", state, dict(state))
            if self.clock.monotonic() >= deadline:
                missing = [f"allocatable {r} is still {n} (the device plugin still serves it)" for r, n in left.items()]
                if incomplete:
                    missing.append(f"{driver} pool(s) {', '.join(incomplete)} not fully published")
                if published != devices:
                    missing.append(f"{driver} ResourceSlices hold {published} device(s), expected {devices}")
                raise StepFailed(
                    f"node {node} not ready for DRA after {timeout_s:g}s: {'; '.join(missing)}",
                    "check the device plugin is off and the DRA kubelet plugin runs on that node",
                    {"allocatable": left, "devices": published, "expected": devices, "incomplete": incomplete},
                )
            self._pause(delay, deadline, cancel)
            delay = min(delay * POLL_GROWTH, self.poll_cap_s)

    # -- replace-pool (plan/strategies.py) ------------------------------------------------------

    def set_annotation(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        current = ((self._node(node).get("metadata") or {}).get("annotations") or {}).get(key)
        before = {"annotations": {key: current}}
        if current == value:
            return Change(f"Node {node}", before, dict(before), dry_run)
        out = self._patch_node(node, {"metadata": {"annotations": {key: value}}}, dry_run)
        after = ((out.get("metadata") or {}).get("annotations") or {}).get(key)
        return Change(f"Node {node}", before, {"annotations": {key: after}}, dry_run)

    def pool_nodes(self, selector: dict[str, str], *, driver: str = "gpu.nvidia.com") -> list[dict[str, Any]]:
        query = [("labelSelector", ",".join(f"{k}={v}" for k, v in sorted(selector.items())))]
        items, _ = self.kube.list_all("/api/v1/nodes", query)
        out = []
        for obj in items:
            name = str((obj.get("metadata") or {}).get("name"))
            conditions = (obj.get("status") or {}).get("conditions") or []
            published, incomplete = self._published_devices(name, driver)
            out.append({
                "name": name,
                "ready": any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
                "unschedulable": _unschedulable(obj),
                "devices": 0 if incomplete else published,
            })  # fmt: skip
        return sorted(out, key=lambda n: str(n["name"]))

    def wait_pool(
        self,
        selector: dict[str, str],
        nodes: int,
        devices_per_node: int,
        timeout_s: float,
        *,
        driver: str = "gpu.nvidia.com",
        cancel: Cancel = NEVER,
    ) -> Change:
        deadline = self.clock.monotonic() + timeout_s
        delay = self.poll_s
        while True:
            seen = self.pool_nodes(selector, driver=driver)
            ready = [n for n in seen if n["ready"] and not n["unschedulable"] and n["devices"] >= devices_per_node]
            if len(ready) >= nodes:
                return Change(f"Pool {selector}", {}, {"nodes": [n["name"] for n in ready]})
            if self.clock.monotonic() >= deadline:
                raise StepFailed(
                    f"the new pool ({selector}) has {len(ready)} of {nodes} node(s) Ready with {devices_per_node} "
                    f"{driver} device(s) each after {timeout_s:g}s ({len(seen)} node(s) selected)",
                    "run the platform command the step names, check the DRA driver runs there, then resume",
                    {"nodes": seen},
                )
            self._pause(delay, deadline, cancel)
            delay = min(delay * POLL_GROWTH, self.poll_cap_s)

    def _published_devices(self, node: str, driver: str) -> tuple[int, list[str]]:
        """Devices in the node's slices of `driver`, counting each pool at its highest generation only
        (older generations are being replaced: resource.k8s.io/v1 ResourcePool.generation), and the
        pools whose newest generation has fewer slices than its resourceSliceCount."""
        items, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={node}")])
        pools: dict[str, list[Obj]] = {}
        for s in items:
            spec = s.get("spec") or {}
            if spec.get("driver") == driver:
                pools.setdefault(str((spec.get("pool") or {}).get("name", "")), []).append(spec)
        total = 0
        incomplete: list[str] = []
        for name, specs in sorted(pools.items()):
            newest = max(int((s.get("pool") or {}).get("generation", 0)) for s in specs)
            current = [s for s in specs if int((s.get("pool") or {}).get("generation", 0)) == newest]
            expected = max(int((s.get("pool") or {}).get("resourceSliceCount", 1)) for s in current)
            if len(current) < expected:
                incomplete.append(name)
            total += sum(len(s.get("devices") or []) for s in current)
        return total, incomplete

    # -- canary ----------------------------------------------------------------------------------

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
    ) -> Change:
        """Schedule, run and judge a pod that proves use (dra_migrate/execute/canary.py); then delete it."""
        deadline = time.monotonic() + timeout_s
        ns = self.canary_namespace
        target_labels = _labels(self._node(node))
        token = uuid.uuid4().hex[:12]
        line = canary_check.command_line(command)
        manifest = _canary_pod(node, target_labels.get(HOSTNAME_LABEL, node), resource, image, token, line)
        pods = path_of("v1", "pods", namespace=ns)
        if dry_run:
            out = self.kube.create(pods, manifest, [DRY_RUN])
            after = {"pod": f"{ns}/{_meta(out).get('name') or manifest['metadata']['generateName']}", "node": node}
            return Change(f"Node {node}", {}, after, dry_run=True)
        self._delete_canaries(node=node)  # one left by an interrupted run
        attempt = 1
        while True:
            with self._cleanup(token):
                name = str(_meta(self.kube.create(pods, manifest)).get("name", ""))
                try:
                    allocated = self._await_canary(node, ns, name, resource, deadline, timeout_s, cancel)
                except _SchedulerBehind as behind:
                    if attempt >= CANARY_ATTEMPTS or time.monotonic() >= deadline:
                        raise behind.failed(attempt) from None
                else:
                    return self._judge_canary(node, ns, name, allocated, deadline, timeout_s, cancel)
            attempt += 1  # the stale canary is deleted (leaving the block); give the scheduler a poll
            cancel.wait(min(self.poll_s, max(deadline - time.monotonic(), 0.0)))
            cancel.check()

    def _await_canary(
        self, node: str, ns: str, name: str, resource: str, deadline: float, timeout_s: float, cancel: Cancel = NEVER
    ) -> Change:
        """Until the canary is bound to `node` with a DRA allocation; the Change names the claim and its devices."""
        path = path_of("v1", "pods", name, ns)
        delay = self.poll_s
        while True:
            pod = self.kube.get(path)
            bound = (pod.get("spec") or {}).get("nodeName")
            status = pod.get("status") or {}
            claim_status = status.get("extendedResourceClaimStatus")
            if bound and bound != node:
                raise StepFailed(f"canary pod {ns}/{name} was scheduled to {bound}, not {node}")
            if bound and claim_status:
                claim_name = str(claim_status.get("resourceClaimName", ""))
                claim = self.kube.get_or_none(path_of("resource.k8s.io/v1", "resourceclaims", claim_name, ns))
                results = ((((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                    "results"
                )
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
            # The canary's deadline is on time.monotonic (its own body): so is this wait.
            cancel.wait(min(delay, max(deadline - time.monotonic(), 0.0)))
            cancel.check()
            delay = min(delay * POLL_GROWTH, self.poll_cap_s)

    def _allocatable(self, node: str, resource: str) -> int:
        alloc = (self._node(node).get("status") or {}).get("allocatable") or {}
        return quantity_int(alloc.get(resource, "0"))

    def _judge_canary(
        self, node: str, ns: str, name: str, allocated: Change, deadline: float, timeout_s: float, cancel: Cancel
    ) -> Change:
        """Until the kubelet has run the canary: ok when it Succeeded naming every allocated device — or,
        its claim gone before it was read, naming one of the node's published devices."""
        claim_gone = allocated.after.get("devices") is None
        results = list(allocated.after.get("devices") or [])
        slices: list[Obj] = []
        if claim_gone:
            slices, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={node}")])
        for d in sorted({str(r.get("driver")) for r in results}):
            items, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.driver={d}")])
            slices.extend(items)
        ids = canary_check.expected_ids(results, slices)
        path = path_of("v1", "pods", name, ns)
        while True:
            pod = self.kube.get(path)
            events = self._pod_events(ns, pod)
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
            if v.state == "failed" or expired:
                reason = v.reason if v.state == "failed" else canary_check.timed_out(pod, events, timeout_s)
                raise StepFailed(
                    f"canary pod {ns}/{name} on node {node} did not prove use of {', '.join(ids)}: {reason}",
                    "check the DRA kubelet plugin's log on that node and the canary image/command "
                    "(plan --canary-image/--canary-command)",
                    {"pod": f"{ns}/{name}", "node": node, "expected": ids, "saw": v.saw, "exitCode": v.exit_code,
                     "reason": reason},
                )  # fmt: skip
            cancel.wait(min(self.poll_s, max(deadline - time.monotonic(), 0.0)))
            cancel.check()

    def _pod_events(self, ns: str, pod: Obj) -> list[Obj]:
        uid = _uid(pod)
        if not uid:
            return []
        items, _ = self.kube.list_all(
            path_of("v1", "events", namespace=ns), [("fieldSelector", f"involvedObject.uid={uid}")]
        )
        return items

    @contextlib.contextmanager
    def _cleanup(self, token: str) -> Iterator[None]:
        """Delete the canary pod(s) of this call however the block ends; a failed delete is reported,
        without hiding the error that ended the block."""
        try:
            yield
        except BaseException as e:
            try:
                self._delete_canaries(token=token)
            except Exception as cleanup:
                e.add_note(f"and deleting the canary pod failed: {cleanup}")
            raise
        self._delete_canaries(token=token)

    def _delete_canaries(self, *, token: str = "", node: str = "") -> None:
        selector = f"{CANARY_LABEL}={token}" if token else CANARY_LABEL
        ns = self.canary_namespace
        items, _ = self.kube.list_all(path_of("v1", "pods", namespace=ns), [("labelSelector", selector)])
        for pod in items:
            if node and (_meta(pod).get("annotations") or {}).get(CANARY_NODE_ANNOTATION) != node:
                continue
            # Grace 0: the canary holds a device; its claim goes with it (the pod owns it).
            self.kube.delete(
                path_of("v1", "pods", str(_meta(pod).get("name")), ns),
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )

    # -- DeviceClasses ---------------------------------------------------------------------------

    def create_device_class(self, manifest: dict[str, Any], *, dry_run: bool = False) -> Change:
        name = str(_meta(manifest).get("name", ""))
        if not name:
            raise InputError("a DeviceClass manifest needs metadata.name")
        meta = {**_meta(manifest), "labels": {**(_meta(manifest).get("labels") or {}), **MANAGED_BY}}
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", **manifest, "metadata": meta}
        want = _pruned(manifest.get("spec") or {})
        existing = self.kube.get_or_none(path_of("resource.k8s.io/v1", "deviceclasses", name))
        if existing is None:
            try:
                out = self.kube.create(DEVICE_CLASSES, body, [DRY_RUN] if dry_run else [])
                return Change(
                    f"DeviceClass {name}", {"exists": False}, {"exists": True, "spec": out.get("spec")}, dry_run
                )
            except ApiError as e:
                if e.status != 409:
                    raise
                # Created meanwhile (or by our own retried POST whose answer was lost): compare.
                existing = self.kube.get(path_of("resource.k8s.io/v1", "deviceclasses", name))
        have = _pruned(existing.get("spec") or {})
        if have != want:
            raise StepFailed(
                f"DeviceClass {name} already exists with a different spec; it is not overwritten",
                "rename the class in the plan, or delete the existing one if it is yours",
                {"existing": existing.get("spec"), "wanted": manifest.get("spec")},
            )
        state = {"exists": True, "spec": existing.get("spec")}
        return Change(f"DeviceClass {name}", state, dict(state), dry_run)

    def delete_device_class(self, name: str, *, dry_run: bool = False) -> Change:
        """Deletes only a class labelled as ours; any other is left alone (a no-op Change that shows
        `managedBy`), so rolling back never removes someone else's class."""
        path = path_of("resource.k8s.io/v1", "deviceclasses", name)
        existing = self.kube.get_or_none(path)
        if existing is None:
            return Change(f"DeviceClass {name}", {"exists": False}, {"exists": False}, dry_run)
        (key, ours), *_ = MANAGED_BY.items()
        managed_by = _labels(existing).get(key)
        before = {"exists": True, "spec": existing.get("spec"), "managedBy": managed_by}
        if managed_by != ours:
            return Change(f"DeviceClass {name}", before, dict(before), dry_run)
        # The uid precondition: never delete a class someone recreated since we read it.
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": _meta(existing).get("uid")},
        }
        if dry_run:
            # In the body as well: a DELETE's body DeleteOptions replace its query parameters, so
            # `?dryRun=All` beside a body without dryRun deletes for real (measured on v1.37.2).
            options["dryRun"] = ["All"]
        self.kube.delete(path, options, query=[DRY_RUN] if dry_run else [])
        return Change(f"DeviceClass {name}", before, {"exists": False}, dry_run)

    # -- reads -----------------------------------------------------------------------------------

    def dra_driver_installed(self, driver: str = "gpu.nvidia.com") -> bool:
        # The NVIDIA DRA driver chart's DaemonSet is <release>-dra-driver-gpu-kubelet-plugin; any
        # namespace, as installs differ. Failing that, a published slice proves a running plugin.
        daemonsets, _ = self.kube.list_all(DAEMONSETS)
        for ds in daemonsets:
            name = str(_meta(ds).get("name", ""))
            if "dra-driver" in name and "kubelet-plugin" in name:
                return True
        page = self.kube.get(SLICES, [("fieldSelector", f"spec.driver={driver}"), ("limit", 1)])
        return bool(page.get("items"))

    def pending_gpu_pods(self, older_than_s: float) -> list[str]:
        items, _ = self.kube.list_all(PODS, [("fieldSelector", "status.phase=Pending,spec.nodeName=")])
        now = datetime.now(UTC)
        pending = []
        for pod in items:
            created = _parse_time(str(_meta(pod).get("creationTimestamp", "")))
            if created is not None and (now - created).total_seconds() > older_than_s and uses_devices(pod):
                pending.append(pod)
        return group_pending(pending)


def _gang_of(pod: Mapping[str, Any]) -> str | None:
    """The gang a pod belongs to: its 1.37 PodGroup (spec.schedulingGroup), or a training framework's job
    that owns it directly (dra_migrate/inventory/gangs.py names the kinds)."""
    ns = str(_meta(pod).get("namespace", ""))
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if isinstance(group, str) and group:
        return f"PodGroup {ns}/{group}"
    for ref in _meta(pod).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") in FRAMEWORK_GANG_KINDS:
            return f"{ref['kind']} {ns}/{ref.get('name')}"
    return None


def group_pending(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Pending pods as the health gate names them: each pod by `namespace/name`, except that the pods of
    one gang are one failure, `<Kind> namespace/name (N pods Pending)` — a gang waits whole, so its pods
    are one problem, not N."""
    gangs: dict[str, int] = {}
    out = []
    for pod in pods:
        gang = _gang_of(pod)
        if gang is None:
            out.append(_key(pod))
        else:
            gangs[gang] = gangs.get(gang, 0) + 1
    out += [f"{g} ({n} pod{'s' if n != 1 else ''} Pending)" for g, n in gangs.items()]
    return sorted(out)


def live_ops(
    kubeconfig: Path | None,
    context: str | None,
    *,
    parallelism: int = 1,
    rate_limit: RateLimit | None = None,
) -> LiveOps:
    """LiveOps on the cluster the tool reads (kubeconfig resolution and user agent of `cluster.live`),
    with a connection pool wide enough for `parallelism` lanes each evicting several pods at once
    (urllib3 otherwise discards and reopens connections beyond its pool: "Connection pool is full")."""
    from kubernetes.client import rest

    from dra_migrate.cluster.live import LiveOptions, _api_client

    api = _api_client(LiveOptions(kubeconfig=kubeconfig, context=context))
    wanted = max(parallelism * 2, parallelism + EVICTION_WORKERS)
    if int(api.configuration.connection_pool_maxsize or 0) < wanted:
        api.configuration.connection_pool_maxsize = wanted
        api.rest_client = rest.RESTClientObject(api.configuration)
    return LiveOps(api, rate_limit=rate_limit)


# -- helpers ---------------------------------------------------------------------------------------


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


def _drainable(pod: Mapping[str, Any]) -> bool:
    """Not a DaemonSet's pod nor a mirror pod: kubectl drain's daemonSetFilter and mirrorPodFilter."""
    if MIRROR_ANNOTATION in (_meta(pod).get("annotations") or {}):
        return False
    for ref in _meta(pod).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "DaemonSet":
            return False
    return True


def _namespace_terminating(e: ApiError) -> bool:
    causes = e.details.get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


def _canary_pod(node: str, hostname: str, resource: str, image: str, token: str, command: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": CANARY_PREFIX,
            "labels": {**MANAGED_BY, CANARY_LABEL: token},
            "annotations": {CANARY_NODE_ANNOTATION: node},
        },
        "spec": {
            # Node affinity, not nodeName: nodeName bypasses the scheduler, which is what must allocate
            # the device through DRA. The hostname label (read from the node) rather than the node name,
            # which it may differ from.
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}]}
                        ]
                    }
                }
            },
            # Tolerate every taint, the cordon's node.kubernetes.io/unschedulable included: the canary
            # runs while the node is still cordoned.
            "tolerations": [{"operator": "Exists"}],
            "containers": [{**canary_check.container(image, command, 1), "resources": {"limits": {resource: "1"}}}],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
    }


def _pruned(value: Any) -> Any:
    """`value` without empty lists, maps and nulls, which the API server drops when it stores an
    object: a manifest and the stored object compare equal when they mean the same."""
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
