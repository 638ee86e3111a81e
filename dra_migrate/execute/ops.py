"""Live operations (`contract.Ops`) against a real API server.

Each operation reads the current state first and does nothing when the goal already holds, so a
resumed run can repeat any step: the `Change` it returns then has `before == after`. Writes are JSON
merge patches (RFC 7386; `null` removes a key); a node's field, when the executor watches nodes, is one
conditional JSON patch instead of a read and a write (`_write_if_unchanged`). `dry_run=True` sends every
write with `dryRun=All` (server-side dry run: admission and validation run, nothing is persisted) and
reports what the server says would happen.

Transient failures (5xx, 429 outside eviction, a connection refused or reset) are retried inside each
request by the API client (`dra_migrate.kube`); permanent ones (403, 422, ...) surface as `ApiError`
quoting the server.

`LiveOps` is assembled from parts: its state, paths and object readers (ops_base.py), drain (ops_drain.py),
the canary (ops_canary.py); nodes, DRA readiness, DeviceClasses and the health gate's reads are here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dra_migrate.cluster.kinds import KINDS_BY_KEY
from dra_migrate.cluster.kubeconfig import checked_api_client
from dra_migrate.cluster.state import uses_devices
from dra_migrate.dra.deviceclasses import MANAGED_BY
from dra_migrate.errors import InputError
from dra_migrate.execute.contract import NEVER, Cancel, Change, StepFailed
from dra_migrate.execute.ops_base import (
    CANARY_ATTEMPTS,
    CANARY_LABEL,
    CANARY_PREFIX,
    CLAIMS,
    DAEMONSETS,
    DEVICE_CLASSES,
    DRY_RUN,
    EVICTION_WORKERS,
    NODE_GONE_HINT,
    PODS,
    POLL_CAP_S,
    POLL_GROWTH,
    SLICES,
    _gpu_allocatable,
    _key,
    _labels,
    _meta,
    _parse_time,
    _unschedulable,
    claims_naming_class,
    going_claim,
)
from dra_migrate.execute.ops_canary import CanaryOps
from dra_migrate.execute.ops_drain import DrainOps
from dra_migrate.inventory.computedomain import compute_domain_only
from dra_migrate.inventory.gangs import FRAMEWORK_GANG_KINDS, KUEUE_POD_GROUP, LWS_GROUP_INDEX, VOLCANO_GROUP
from dra_migrate.inventory.gitops import gitops_owner
from dra_migrate.inventory.resources import quantity_int
from dra_migrate.kube import ApiError, Obj, RateLimit, path_of

__all__ = ["CANARY_ATTEMPTS", "CANARY_LABEL", "CANARY_PREFIX", "POLL_CAP_S", "LiveOps", "group_pending", "live_ops"]


_UNREAD: Any = object()  # `_set_node_field`'s current value, not read yet


def _same(raw: Any) -> Any:
    return raw


def _passthrough(device: Any) -> bool:
    """A device the NVIDIA driver publishes for a VM, not a container: with its PassthroughSupport gate,
    dra-driver-nvidia-gpu v0.4.1 adds a `type: vfio` device beside each full GPU without MIG devices
    (cmd/gpu-kubelet-plugin/deviceinfo.go `VfioDeviceInfo.GetDevice`). The plan predicts the node's container
    devices (full GPUs and MIG devices) only."""
    attrs = device.get("attributes") if isinstance(device, dict) else None
    kind = attrs.get("type") if isinstance(attrs, dict) else None
    return isinstance(kind, dict) and kind.get("string") == "vfio"


def _node_state(obj: Obj) -> dict[str, Any]:
    """`Ops.node_state` of a Node object that exists."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    posted = [str(c.get("status")) for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"]
    return {
        "exists": True,
        "uid": str((obj.get("metadata") or {}).get("uid", "")),
        "unschedulable": _unschedulable(obj),
        "labels": dict(_labels(obj)),
        "annotations": dict((obj.get("metadata") or {}).get("annotations") or {}),
        "allocatable": _gpu_allocatable(obj),
        "ready": posted[:1] == ["True"],
        # The Ready condition's status when one is posted and it is not True ("False", "Unknown"): a node
        # with no condition at all (no kubelet ever reported) is not called NotReady.
        "notReady": posted[0] if posted and posted[0] != "True" else None,
        "deleting": bool((obj.get("metadata") or {}).get("deletionTimestamp")),
    }


class LiveOps(DrainOps, CanaryOps):
    """`Ops` on one api client (from `live_ops`, or any `kubernetes` ApiClient).

    `poll_s` is how often waits first re-read state, growing to `poll_cap_s`; `canary_namespace` where
    canary pods run. `api` is the api client, for others that talk to the same cluster (the lock).
    """

    # -- nodes -----------------------------------------------------------------------------------

    def node_state(self, node: str, *, watched: bool = False) -> dict[str, Any]:
        cached = self.cache.node(node) if watched and self.cache is not None else None
        obj = cached if cached is not None else self.kube.get_or_none(path_of("v1", "nodes", node))
        if obj is None:
            return {"exists": False, "uid": "", "unschedulable": False, "labels": {}, "allocatable": {}, "ready": False}
        return _node_state(obj)

    def node_states(self, *, watched: bool = False) -> dict[str, dict[str, Any]]:
        """Every node's state. Asked before each wave (the pool budget's joined nodes), so each Node is converted
        once per resourceVersion: a fleet of many small pools has one wave per node, and converting all 15,000
        Nodes of a 10,000-GPU-node cluster took 0.15 s a wave, half an hour of an apply. The states are shared
        between calls: read them, never change them."""
        cache = self.cache if watched else None
        items = cache.nodes() if cache is not None else self.kube.list_all("/api/v1/nodes", [])[0]
        seen, out = self._converted, {}
        with self._converted_lock:  # the lanes of concurrent pools ask it at once
            for obj in items:
                meta = obj.get("metadata") or {}
                name, version = str(meta.get("name")), meta.get("resourceVersion")
                hit = seen.get(name)
                if hit is None or version is None or hit[0] != version:
                    hit = seen[name] = (version, _node_state(obj))
                out[name] = hit[1]
            for gone in seen.keys() - out.keys():
                del seen[gone]
        return out

    def stack_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        # A list of the one name, not a GET: apply runs with the read-only role's `list` on these kinds beside the
        # operator role, which grants no `get` of ConfigMaps, DaemonSets or the GPU Operator's objects (deploy/rbac;
        # tests/integration/test_rbac_used.py). A GET was refused there, and a refused read is not judged: the
        # check would never have run under the documented roles. `metadata.name` selects on every kind, CRDs too.
        known = KINDS_BY_KEY[kind]  # the version and plural the tool lists the kind with (cluster/kinds.py)
        path = path_of(known.api_version, known.plural, "", namespace)
        items, _ = self.kube.list_all(path, [("fieldSelector", f"metadata.name={name}")])
        return items[0] if items else None

    def set_unschedulable(
        self, node: str, value: bool, *, dry_run: bool = False, current: bool | None = None
    ) -> Change:
        # kubectl cordon/uncordon write the same field (kubectl pkg/drain/cordon.go, a patch of
        # spec.unschedulable); the node lifecycle controller then adds or removes the
        # node.kubernetes.io/unschedulable taint itself.
        known = _UNREAD if current is None else current
        before, after = self._set_node_field(node, ("spec", "unschedulable"), value, dry_run, norm=bool, current=known)
        return Change(f"Node {node}", {"unschedulable": before}, {"unschedulable": after}, dry_run)

    def set_label(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        before, after = self._set_node_field(node, ("metadata", "labels", key), value, dry_run)
        return Change(f"Node {node}", {"labels": {key: before}}, {"labels": {key: after}}, dry_run)

    def _set_node_field(
        self,
        node: str,
        path: tuple[str, ...],
        value: Any,
        dry_run: bool,
        *,
        norm: Callable[[Any], Any] = _same,
        current: Any = _UNREAD,
    ) -> tuple[Any, Any]:
        """Set the node's field at `path` to `value` (None removes it) unless it holds it already: (its value
        before, after; `norm` reads a raw value, e.g. an absent `unschedulable` as False). `current`: the value
        just read, when the caller has it."""
        if current is _UNREAD:
            written = self._write_if_unchanged(node, path, value, dry_run, norm)
            if written is not None:
                return written
            current = norm(_at(self._node(node), path))
        if current == value:
            return current, current
        out = self._patch_node(node, _merge_patch(path, value), dry_run)
        return current, norm(_at(out, path))

    def _write_if_unchanged(
        self, node: str, path: tuple[str, ...], value: Any, dry_run: bool, norm: Callable[[Any], Any]
    ) -> tuple[Any, Any] | None:
        """One conditional write instead of a GET and a write, when the node's watched copy is at hand: a JSON
        patch (RFC 6902) that tests the field still holds the copy's value, then sets it. The API server
        applies both or neither, against the node as it stands at the write, and answers a failed test with
        422 (k8s.io/apiserver@v0.37.2 pkg/endpoints/handlers/patch.go, gopkg.in/evanphx/json-patch.v4
        `test`: a null value tests that the key is absent). So the value recorded for the inverse is the one
        the write replaced, as a GET just before it would read, without its round trip (three per migrated
        node). None (the caller reads the node, as without a copy) when there is no copy, when the copy
        already shows `value` (the copy may lag: "already done" is only believed from a read), or when the
        test failed (the copy lagged behind a change)."""
        cache = self.cache
        cached = cache.node(node) if cache is not None else None
        if cached is None:
            return None
        raw = _at(cached, path)
        if norm(raw) == value:
            return None
        pointer = "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path)
        write = {"op": "remove", "path": pointer} if value is None else {"op": "add", "path": pointer, "value": value}
        try:
            out = self.kube.json_patch(
                path_of("v1", "nodes", node), [{"op": "test", "path": pointer, "value": raw}, write],
                [DRY_RUN] if dry_run else [],
            )  # fmt: skip
        except ApiError as e:
            if e.status == 404:
                raise StepFailed(f"node {node} does not exist", NODE_GONE_HINT) from e
            if e.status == 422:  # the test failed (or the write is invalid: the merge patch says so again)
                return None
            raise
        return norm(raw), norm(_at(out, path))

    def _patch_node(self, node: str, patch: Mapping[str, Any], dry_run: bool) -> Obj:
        query = [DRY_RUN] if dry_run else []
        try:
            return self.kube.merge_patch(path_of("v1", "nodes", node), patch, query)
        except ApiError as e:
            if e.status == 404:
                raise StepFailed(f"node {node} does not exist", NODE_GONE_HINT) from e
            raise

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
        with self._changes(node) as changed:
            while True:
                if changed is not None:
                    changed.clear()  # before the read: a change after it wakes the pause below
                obj = self._node_now(node)
                alloc = (obj.get("status") or {}).get("allocatable") or {}
                left = {r: quantity_int(alloc[r]) for r in resources if quantity_int(alloc.get(r, "0")) != 0}
                published, incomplete = self._published_devices(node, driver)
                if not left and published == devices and not incomplete:
                    state = {"allocatable": {r: 0 for r in resources}, "driver": driver, "devices": published}
                    return Change(f"Node {node}", state, dict(state))
                if self.clock.monotonic() >= deadline:
                    missing = [
                        f"allocatable {r} is still {n} (the device plugin still serves it)" for r, n in left.items()
                    ]
                    if incomplete:
                        missing.append(f"{driver} pool(s) {', '.join(incomplete)} not fully published")
                    if published != devices:
                        missing.append(f"{driver} ResourceSlices hold {published} device(s), expected {devices}")
                    hint = "check the device plugin is off and the DRA kubelet plugin runs on that node"
                    if published == 0 and devices and not incomplete:
                        # One GPU NVML cannot query fails the driver's whole enumeration, and it publishes
                        # nothing (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go
                        # GetPerGpuAllocatableDevices, device_state.go NewDeviceState; go-nvlib v0.11.0
                        # VisitDevices): docs/readiness.md "Unhealthy GPUs".
                        hint += (
                            "; if it runs, read its log: a GPU NVML cannot query (unhealthy, fallen off the bus) "
                            "stops it publishing any device"
                        )
                    raise StepFailed(
                        f"node {node} not ready for DRA after {timeout_s:g}s: {'; '.join(missing)}",
                        hint,
                        {"allocatable": left, "devices": published, "expected": devices, "incomplete": incomplete},
                    )
                self._pause(delay, deadline, cancel, changed)
                delay = min(delay * POLL_GROWTH, self.poll_cap_s)

    # -- replace-pool (plan/strategies.py) ------------------------------------------------------

    def set_annotation(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        before, after = self._set_node_field(node, ("metadata", "annotations", key), value, dry_run)
        return Change(f"Node {node}", {"annotations": {key: before}}, {"annotations": {key: after}}, dry_run)

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
        if self.cache is not None:
            items = self.cache.slices_of(node)
        else:
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
            total += sum(1 for s in current for d in s.get("devices") or [] if not _passthrough(d))
        return total, incomplete

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

    def claims_using_device_class(self, name: str) -> list[str]:
        items, _ = self.kube.list_all(CLAIMS)  # cluster-wide: a claim of any namespace may name the class

        def pod(namespace: str, pod_name: str) -> Obj | None:
            return self.kube.get_or_none(path_of("v1", "pods", pod_name, namespace=namespace))

        return claims_naming_class(items, name, lambda claim: going_claim(claim, pod))

    def set_quota_hard(
        self,
        namespace: str,
        name: str,
        values: dict[str, str | None],
        *,
        expect: dict[str, str] | None = None,
        dry_run: bool = False,
    ) -> Change:
        """A JSON merge patch of spec.hard (null removes a key): the quota's other limits are never sent, so
        a limit someone changed meanwhile is kept. A quota a GitOps controller owns is refused: the
        controller would revert the patch at its next sync (docs/dependents.md "GitOps")."""
        path = path_of("v1", "resourcequotas", name, namespace)
        target = f"ResourceQuota {namespace}/{name}"
        existing = self.kube.get_or_none(path)
        if existing is None:
            raise StepFailed(f"{target} does not exist", "it was removed since the plan was made: re-plan")
        owner = gitops_owner(existing)
        if owner is not None:
            raise StepFailed(
                f"{target} is owned by {owner}, which would revert a live change",
                "make the change in the owning repository and re-plan",
            )
        hard = (existing.get("spec") or {}).get("hard") or {}
        changed = {k: hard.get(k) for k, v in (expect or {}).items() if str(hard.get(k)) != v}
        if changed:
            raise StepFailed(
                f"{target}: its GPU limits changed since the plan ({_limits(changed)}; planned {_limits(expect)})",
                "make a new plan: the DRA limit must equal the GPU limit it continues",
            )
        before = {"hard": {k: hard.get(k) for k in values}}
        if all(hard.get(k) == v for k, v in values.items()):
            return Change(target, before, dict(before), dry_run)
        out = self.kube.merge_patch(path, {"spec": {"hard": values}}, [DRY_RUN] if dry_run else [])
        after = (out.get("spec") or {}).get("hard") or {}
        return Change(target, before, {"hard": {k: after.get(k) for k in values}}, dry_run)

    # -- reads -----------------------------------------------------------------------------------

    def dra_driver_installed(self, driver: str = "gpu.nvidia.com") -> bool:
        # The NVIDIA DRA driver chart's DaemonSet is <release>-dra-driver-gpu-kubelet-plugin; any
        # namespace, as installs differ; never one of the chart's ComputeDomain side alone (a chart with
        # resources.gpus.enabled=false, a ComputeDomain's daemon: inventory/computedomain.py), which serves no GPU.
        # Failing that, a published slice proves a running plugin.
        daemonsets, _ = self.kube.list_all(DAEMONSETS)
        for ds in daemonsets:
            name = str(_meta(ds).get("name", ""))
            if "dra-driver" in name and "kubelet-plugin" in name and not compute_domain_only(ds):
                return True
        page = self.kube.get(SLICES, [("fieldSelector", f"spec.driver={driver}"), ("limit", 1)])
        return bool(page.get("items"))

    def pending_gpu_pods(self, older_than_s: float, *, created_after: str | None = None) -> list[str]:
        cutoff = _parse_time(created_after) if created_after else None
        now = datetime.now(UTC)
        pending = []
        for pod, created in self._unscheduled_gpu_pods():
            if (now - created).total_seconds() > older_than_s and (cutoff is None or created > cutoff):
                pending.append(pod)
        return group_pending(pending)

    def pending_gpu_backlog(self) -> tuple[int, str | None]:
        pods = self._unscheduled_gpu_pods()
        newest = max((created for _, created in pods), default=None)
        return len(pods), newest.strftime("%Y-%m-%dT%H:%M:%SZ") if newest is not None else None

    def _unscheduled_gpu_pods(self) -> list[tuple[Obj, datetime]]:
        """GPU pods no node was given yet, with their creationTimestamp (the API server's clock)."""
        items, _ = self.kube.list_all(PODS, [("fieldSelector", "status.phase=Pending,spec.nodeName=")])
        out = []
        for pod in items:
            created = _parse_time(str(_meta(pod).get("creationTimestamp", "")))
            if created is not None and uses_devices(pod):
                out.append((pod, created))
        return out


# Labels the controllers put on pods that their job does not own directly (the gate reads pods, not owners).
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"  # jobset v0.8.0 api/jobset/v1alpha2/jobset_types.go
_LWS_NAME = "leaderworkerset.sigs.k8s.io/name"  # lws v0.5.0 api/leaderworkerset/v1/leaderworkerset_types.go
_KUBEFLOW_JOB = "training.kubeflow.org/job-name"  # mpi-operator v0.6.0 pkg/controller/mpi_job_controller.go
_KUBEFLOW_OPERATOR = "training.kubeflow.org/operator-name"


def _gang_of(pod: Mapping[str, Any]) -> str | None:
    """The gang a pod belongs to, named as inventory names it (dra_migrate/inventory/gangs.py): its 1.37
    PodGroup (spec.schedulingGroup); a LeaderWorkerSet's group; the JobSet of the Job that owns it; an MPIJob,
    whose launcher is a Job's pod; a Volcano Job; a Kueue pod group; or a training framework's job that owns
    it directly."""
    ns = str(_meta(pod).get("namespace", ""))
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if isinstance(group, str) and group:
        return f"PodGroup {ns}/{group}"
    labels = _meta(pod).get("labels") or {}
    if labels.get(_LWS_NAME):
        return f"LeaderWorkerSet {ns}/{labels[_LWS_NAME]}/{labels.get(LWS_GROUP_INDEX, '?')}"
    if labels.get(_JOBSET_NAME):
        return f"JobSet {ns}/{labels[_JOBSET_NAME]}"
    if labels.get(_KUBEFLOW_JOB) and labels.get(_KUBEFLOW_OPERATOR) == "mpi-operator":
        return f"MPIJob {ns}/{labels[_KUBEFLOW_JOB]}"
    for ref in _meta(pod).get("ownerReferences") or []:
        if not isinstance(ref, dict) or not ref.get("controller"):
            continue
        kind = ref.get("kind")
        if kind in FRAMEWORK_GANG_KINDS or (kind == "Job" and str(ref.get("apiVersion", "")).startswith(VOLCANO_GROUP)):
            return f"{kind} {ns}/{ref.get('name')}"
    if labels.get(KUEUE_POD_GROUP):
        return f"KueuePodGroup {ns}/{labels[KUEUE_POD_GROUP]}"
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
    """LiveOps on the cluster the tool reads (kubeconfig resolution and user agent of `dra_migrate.kube`),
    with a connection pool wide enough for `parallelism` lanes each evicting several pods at once
    (urllib3 otherwise discards and reopens connections beyond its pool: "Connection pool is full")."""
    wanted = max(parallelism * 2, parallelism + EVICTION_WORKERS)
    default = (os.cpu_count() or 1) * 5  # the client's own default (kubernetes.client.Configuration)
    api = checked_api_client(kubeconfig, context, pool_size=max(wanted, default))
    return LiveOps(api, rate_limit=rate_limit)


def _pruned(value: Any) -> Any:
    """`value` without empty lists, maps and nulls, which the API server drops when it stores an
    object: a manifest and the stored object compare equal when they mean the same."""
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _limits(values: Mapping[str, Any] | None) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted((values or {}).items()))


def _at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at `path` of an API object, None where any part of it is absent."""
    value: Any = obj
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _merge_patch(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that sets `path` to `value` (null removes it)."""
    patch: dict[str, Any] = {path[-1]: value}
    for part in reversed(path[:-1]):
        patch = {part: patch}
    return patch
