"""A fleet of simulated GPU nodes on a real control plane.

Size: the home-made simulator, retired from the twin (rehearse runs on KWOK: sim/kwok.py, sim/stages.py).
It stays, whole, only for the integration tests' fleets until they move to KwokFleet (docs/twin.md), and is
then deleted rather than split.

Per node it does what kubelet, the NVIDIA device plugin and the NVIDIA DRA kubelet plugin would do,
driven by the same node labels that drive the real DaemonSets (see `spec.device_plugin_enabled`):
  * Node Ready with fresh heartbeats and a Lease in kube-node-lease, so the node lifecycle controller
    neither taints nor evicts;
  * the device plugin's resources in capacity/allocatable: when its pod leaves the node, allocatable
    drops to 0 at the next status sync while capacity keeps the count for kubelet's 5-minute grace,
    then reads 0 (the key kept), as kubelet's devicemanager does;
  * the DRA plugin's ResourceSlice (owned by the Node, as kubelet plugins publish them), published
    after the plugin's start-up and wiped by "kubelet" 30 s after the plugin went away;
  * pods bound to the node marked Running after their containers' start-up; a canary pod (label
    `dra-migrate.io/canary`) runs to completion and reports the devices it got (`dra_migrate.sim.pods`);
    pods being deleted stay Terminating for their grace period, then are finally deleted.
How long each of these takes is the run's `TimingProfile` (`dra_migrate.sim.timing`: `instant`, the
default, does everything at once; `realistic` as the real components, with their sources).
Only the nodes in the spec list are touched. Everything runs in background threads between
`start()` and `stop()`; errors are logged (logger "dra_migrate.sim") and retried, never raised into them.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from dra_migrate.sim.kube import ApiError, Kube, WatchStream, new_api_client, now_rfc3339, path_of
from dra_migrate.sim.pods import (
    allocated_results,
    canary_status,
    claim_name,
    is_canary,
    nvidia_smi_lines,
    running_status,
)
from dra_migrate.sim.spec import (
    DRA_DRIVER,
    LABEL_DEVICE_PLUGIN,
    LABEL_DRA_DRIVER,
    LABEL_DRA_KUBELET_PLUGIN,
    GpuNodeSpec,
    device_plugin_enabled,
    dra_plugin_enabled,
)
from dra_migrate.sim.timing import (
    INSTANT,
    Timer,
    Timers,
    TimingProfile,
    device_plugin_advertised,
    next_sync,
    sync_phase,
)

log = logging.getLogger("dra_migrate.sim")

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40  # kubelet's default nodeLeaseDurationSeconds
MAX_DEVICES_PER_SLICE = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices (dra-facts.md §1.2)
KUBELET_VERSION = "v1.37.2"
HEARTBEAT_WORKERS = 8  # lease renewals at once (see _heartbeat_loop)
TIMER_WORKERS = 8  # delayed calls at once: plugin starts and exits, status syncs, pod starts and deletes
REGISTER_WORKERS = 8  # nodes registered at once on start (each a handful of requests in a row)
# Every thread that talks to the API server at once keeps a connection: heartbeat and timer workers, the
# two watches and a caller's (set_device_plugin...); the registration workers run before all of them.
# Beyond its pool urllib3 opens a connection per request and warns "Connection pool is full".
POOL_SIZE = HEARTBEAT_WORKERS + TIMER_WORKERS + 4
TIMER_RETRIES, TIMER_RETRY_S = 10, 1.0  # a delayed call (status sync, slice wipe, pod start) that failed


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass
class _NodeState:
    spec: GpuNodeSpec
    index: int
    uid: str = ""
    device_plugin: bool | None = None  # what the labels ask for; None before the first reconcile
    dra_plugin: bool | None = None
    dp_running: bool = False  # the device plugin registered with "kubelet"
    dp_stopped_at: float | None = None  # when its endpoint stopped (timers' clock)
    dra_running: bool = False
    slice_generation: int = 0
    ready_since: str = ""
    gone: bool = False
    next_pod_ip: int = 2
    sync_phase: float = 0.0
    dp_timer: Timer | None = None  # the device plugin's pending start or exit
    dra_timer: Timer | None = None  # the DRA plugin's pending start or exit
    wipe_timer: Timer | None = None  # kubelet's pending wipe of the DRA slices
    posted: dict[str, int] | None = None  # device-plugin capacity/allocatable last posted
    status_posted_at: float = 0.0  # time.monotonic() of the last heartbeat's status post
    pods: set[str] = field(default_factory=set)  # uids with a pending start or final delete
    # One kubelet's state is changed by the watches, the heartbeat and the timers' workers; each node has
    # its own lock (as each kubelet is its own process), so one node's API calls never hold up another's.
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def host_ip(self) -> str:
        return f"172.16.{self.index // 250}.{self.index % 250 + 1}"

    def pod_ip(self) -> str:
        """A pod IP from a per-node /24, reused after 253 pods (enough for tests and rehearsals)."""
        ip = f"10.{64 + self.index // 256}.{self.index % 256}.{self.next_pod_ip}"
        self.next_pod_ip = self.next_pod_ip + 1 if self.next_pod_ip < 254 else 2
        return ip


class SimulatedFleet:
    """Simulated kubelets + device plugins + DRA kubelet plugins for `nodes`, against `kubeconfig`."""

    def __init__(
        self,
        kubeconfig: Path | str,
        nodes: Iterable[GpuNodeSpec],
        *,
        heartbeat_seconds: float = 10,
        status_report_seconds: float = 0,
        timing: TimingProfile = INSTANT,
        timers: Timers | None = None,
    ) -> None:
        specs = list(nodes)
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("node names in a fleet must be unique")
        self.kubeconfig = Path(kubeconfig)
        self.heartbeat_seconds = heartbeat_seconds
        # kubelet renews its Lease every heartbeat but posts an unchanged status only every
        # nodeStatusReportFrequency (default 5m: k8s.io/kubernetes@v1.37.2
        # pkg/kubelet/apis/config/v1beta1/defaults.go); the node lifecycle controller takes either as
        # the node's heartbeat (pkg/controller/nodelifecycle/node_lifecycle_controller.go tryUpdateNodeHealth).
        # 0 posts it every heartbeat, as the simulator did; 2,000 nodes need the real frequency: one Python
        # thread posting 4,000 requests a round falls behind the controller's grace and nodes flap NotReady.
        self.status_report_seconds = status_report_seconds
        self.timing = timing
        # What the simulated components do later; a test may pass its own (a fake clock, run by hand).
        self.timers = timers if timers is not None else Timers(on_error=_log_failure)
        self._own_timers = timers is None
        self._nodes = {
            s.name: _NodeState(s, i, sync_phase=sync_phase(s.name, timing.node_status_sync_s))
            for i, s in enumerate(specs)
        }
        self._streams_lock = threading.Lock()  # guards _streams (per-node state has each node's own lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._streams: set[WatchStream] = set()
        self._kube: Kube | None = None
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            self._kube = Kube(new_api_client(self.kubeconfig, pool_size=POOL_SIZE))
        return self._kube

    def start(self) -> None:
        """Register the nodes, apply their plugins' state once, then run watches and heartbeats."""
        if self._started:
            return
        self._started = True
        self._stop.clear()
        self._register_all()
        loops: list[tuple[Callable[[], None], str]] = [
            (self._heartbeat_loop, "heartbeat"),
            (self._watch_nodes, "nodes"),
            (self._watch_pods, "pods"),
        ]
        if self._own_timers:
            loops.append((lambda: self.timers.run(self._stop, workers=TIMER_WORKERS), "timers"))
        for run, name in loops:
            t = threading.Thread(target=run, name=f"sim-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        log.info("simulating %d GPU node(s), %s timing", len(self._nodes), self.timing.name)

    def stop(self, timeout: float = 10) -> None:
        """Stop the threads and wait for them. Leaves the objects in place, as a stopped kubelet does."""
        self._stop.set()
        with self._streams_lock:
            streams = list(self._streams)
        for s in streams:
            s.close()
        self.timers.wake()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()
        self._started = False
        if self._kube is not None:
            self._kube.api_client.close()
            self._kube = None

    def __enter__(self) -> SimulatedFleet:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- toggles (the real toggles are the labels; these only set them) ------------------------

    def set_device_plugin(self, node: str, enabled: bool) -> None:
        self._label(node, {LABEL_DEVICE_PLUGIN: "true" if enabled else "false"})

    def set_dra_plugin(self, node: str, enabled: bool) -> None:
        # Disabling clears both DRA labels, or the other one would keep the plugin on.
        labels: dict[str, str | None] = (
            {LABEL_DRA_KUBELET_PLUGIN: "true"} if enabled else {LABEL_DRA_KUBELET_PLUGIN: None, LABEL_DRA_DRIVER: None}
        )
        self._label(node, labels)

    def _label(self, node: str, labels: Mapping[str, str | None]) -> None:
        if node not in self._nodes:
            raise KeyError(f"{node} is not a node of this fleet")
        self.kube.merge_patch(path_of("v1", "nodes", node), {"metadata": {"labels": dict(labels)}})

    # -- node registration and status ----------------------------------------------------------

    def _register_all(self) -> None:
        """Register every node, a few at once: one after the other, 2,000 nodes took 3.5 minutes (each is
        a handful of requests in a row: the Node, its Lease, its status, its slices)."""
        nodes = list(self._nodes.values())
        with ThreadPoolExecutor(max_workers=REGISTER_WORKERS, thread_name_prefix="sim-register") as pool:
            list(pool.map(self._register, nodes))  # the first failure is raised here, as before

    def _register(self, st: _NodeState) -> None:
        path = path_of("v1", "nodes", st.name)
        existing = self.kube.get_or_none(path)
        if existing is None:
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": st.name, "labels": dict(st.spec.labels)},
                # The snapshot's provider ID when it recorded one (a replayed GKE node stays GKE's), else one
                # of its own: a spec's GKE pool label alone does not make it a cloud's (platform.which_platform).
                "spec": {"providerID": st.spec.provider_id or f"dra-migrate-sim://{st.name}"}
                | ({"taints": [dict(t) for t in st.spec.taints]} if st.spec.taints else {}),
            }
            existing = self.kube.create(NODES, body)
        else:
            # A restarted simulator must not undo label toggles made since: only add missing labels.
            have = (existing.get("metadata") or {}).get("labels") or {}
            missing = {k: v for k, v in st.spec.labels.items() if k not in have}
            if missing:
                existing = self.kube.merge_patch(path, {"metadata": {"labels": missing}})
        meta = existing.get("metadata") or {}
        st.uid = str(meta.get("uid", ""))
        st.ready_since = now_rfc3339()
        st.gone = False
        st.posted = None
        self._renew_lease(st)
        self._reconcile(st, meta.get("labels") or {}, force=True)

    def _reconcile(self, st: _NodeState, labels: Mapping[str, str], *, force: bool = False) -> None:
        """Bring the plugins in line with the node's labels: at once on registration (`force`: the node
        comes up as its labels say), otherwise after the profile's delays, as the DaemonSets would."""
        dp = device_plugin_enabled(labels)
        dra = dra_plugin_enabled(labels)
        with st.lock:
            if force:
                self._cancel(st.dp_timer, st.dra_timer, st.wipe_timer)
                st.device_plugin, st.dp_running, st.dp_stopped_at = dp, dp, None
                self._patch_node_status(st, resources=True)
                st.dra_plugin, st.dra_running = dra, dra
                # Kubelet wipes a node's slices when it starts (dra_plugin_manager.go L504-537).
                self._publish_slices(st) if dra else self._delete_slices(st)
                log.info("%s: device plugin %s, DRA plugin %s", st.name, _on(dp), _on(dra))
                return
            if dp != st.device_plugin:
                st.device_plugin = dp
                self._cancel(st.dp_timer)
                delay = self.timing.device_plugin_start_s if dp else self.timing.plugin_exit_s
                st.dp_timer = self._after(delay, lambda: self._device_plugin_up(st, dp))
            if dra != st.dra_plugin:
                st.dra_plugin = dra
                self._cancel(st.dra_timer)
                delay = self.timing.dra_plugin_start_s if dra else self.timing.plugin_exit_s
                st.dra_timer = self._after(delay, lambda: self._dra_plugin_up(st, dra))

    def _after(self, delay: float, fn: Callable[[], None]) -> Timer | None:
        """Run `fn` after `delay` on the timers' thread; at once (here) when there is no delay. A call
        that fails on the timers' thread (the API server busy) is retried, as the component would."""
        if delay <= 0:
            fn()
            return None
        return self.timers.call_later(delay, lambda: self._retrying(fn, TIMER_RETRIES))

    def _retrying(self, fn: Callable[[], None], left: int) -> None:
        try:
            fn()
        except Exception as e:
            if left <= 0 or self._stop.is_set():
                raise
            log.debug("retrying a simulated component's call in %.1fs: %s", TIMER_RETRY_S, e)
            self.timers.call_later(TIMER_RETRY_S, lambda: self._retrying(fn, left - 1))

    @staticmethod
    def _cancel(*timers: Timer | None) -> None:
        for t in timers:
            if t is not None:
                t.cancel()

    def _device_plugin_up(self, st: _NodeState, running: bool) -> None:
        """The device plugin's pod has registered (`running`) or exited. Kubelet posts the change at its
        next status sync, and once more when the stopped plugin's capacity grace has passed."""
        with st.lock:
            if st.gone or st.device_plugin != running:
                return  # the labels changed again meanwhile
            now = self.timers.clock()
            st.dp_running = running
            st.dp_stopped_at = None if running else now
            period, phase = self.timing.node_status_sync_s, st.sync_phase
            self._at(next_sync(now, phase, period), lambda: self._status_sync(st))
            if not running:
                self._at(next_sync(now + self.timing.capacity_grace_s, phase, period), lambda: self._status_sync(st))
            log.info("%s: device plugin %s", st.name, "registered" if running else "stopped")

    def _at(self, due: float, fn: Callable[[], None]) -> None:
        self._after(due - self.timers.clock(), fn)

    def _status_sync(self, st: _NodeState) -> None:
        with st.lock:
            if not st.gone:
                self._patch_node_status(st, resources=True)

    def _dra_plugin_up(self, st: _NodeState, running: bool) -> None:
        """The DRA plugin has started and publishes its slice, or has exited: kubelet then wipes its
        slices after the wiping delay, unless a plugin registers again first (dra_plugin_manager.go
        L151-180 cancels the pending wipe)."""
        with st.lock:
            if st.gone or st.dra_plugin != running:
                return
            st.dra_running = running
            self._cancel(st.wipe_timer)
            st.wipe_timer = None
            if running:
                self._publish_slices(st)
            else:
                st.wipe_timer = self._after(self.timing.slice_wipe_delay_s, lambda: self._wipe_slices(st))
            log.info("%s: DRA plugin %s", st.name, "published" if running else "stopped")

    def _wipe_slices(self, st: _NodeState) -> None:
        with st.lock:
            if not st.dra_running and not st.gone:
                self._delete_slices(st)
                log.info("%s: DRA slices wiped", st.name)

    def _patch_node_status(self, st: _NodeState, *, resources: bool = False) -> None:
        status: dict[str, Any] = {"conditions": self._conditions(st)}
        if resources:
            capacity = {"cpu": st.spec.cpu, "memory": st.spec.memory, "pods": st.spec.pods}
            capacity.update(st.spec.extra_capacity)
            allocatable = dict(capacity)
            now = self.timers.clock()
            grace = self.timing.capacity_grace_s
            posted: dict[str, int] = {}
            for key, count in st.spec.device_plugin_resources.items():
                # A plugin never seen by this kubelet but switched off by label counts as stopped long
                # ago: the key is kept at 0, as after the grace.
                cap, alloc = device_plugin_advertised(count, st.dp_running, st.dp_stopped_at, now, grace)
                capacity[key], allocatable[key] = str(cap), str(alloc)
                posted[f"c:{key}"], posted[f"a:{key}"] = cap, alloc
            if posted == st.posted:
                return  # nothing changed since the last sync: kubelet posts only changes
            st.posted = posted
            status.update(
                capacity=capacity,
                allocatable=allocatable,
                addresses=[
                    {"type": "InternalIP", "address": st.host_ip},
                    {"type": "Hostname", "address": st.name},
                ],
                daemonEndpoints={"kubeletEndpoint": {"Port": 10250}},
                nodeInfo=self._node_info(st),
            )
        self.kube.strategic_patch(path_of("v1", "nodes", st.name, sub="status"), {"status": status})

    def _conditions(self, st: _NodeState) -> list[dict[str, str]]:
        now = now_rfc3339()

        def cond(type_: str, status: str, reason: str, message: str) -> dict[str, str]:
            return {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": st.ready_since,
            }

        return [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status (dra-migrate simulator)"),
        ]

    @staticmethod
    def _node_info(st: _NodeState) -> dict[str, str]:
        ident = hashlib.sha256(st.name.encode()).hexdigest()
        return {
            "machineID": ident[:32],
            "systemUUID": ident[32:64],
            "bootID": ident[:32],
            "kernelVersion": "6.8.0-sim",
            "osImage": "dra-migrate simulated node",
            "containerRuntimeVersion": "containerd://2.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        }

    def _renew_lease(self, st: _NodeState) -> None:
        path = path_of("coordination.k8s.io/v1", "leases", st.name, namespace=LEASE_NAMESPACE)
        renew = {"spec": {"holderIdentity": st.name, "renewTime": now_rfc3339(micro=True)}}
        try:
            self.kube.merge_patch(path, renew)
        except ApiError as e:
            if e.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": st.name,
                    "namespace": LEASE_NAMESPACE,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": st.name, "uid": st.uid}],
                },
                "spec": {**renew["spec"], "leaseDurationSeconds": LEASE_DURATION_SECONDS},
            }
            self.kube.create_or_exists(path_of("coordination.k8s.io/v1", "leases", namespace=LEASE_NAMESPACE), body)

    # -- ResourceSlices --------------------------------------------------------------------------

    def _slice_selector(self, st: _NodeState) -> list[tuple[str, str | int | bool]]:
        return [("fieldSelector", f"spec.nodeName={st.name},spec.driver={DRA_DRIVER}")]

    def _delete_slices(self, st: _NodeState) -> list[dict[str, Any]]:
        """Delete this node's gpu.nvidia.com slices (as kubelet does when a plugin unregisters)."""
        existing, _ = self.kube.list_all(SLICES, self._slice_selector(st))
        for s in existing:
            self.kube.delete(path_of("resource.k8s.io/v1", "resourceslices", s["metadata"]["name"]))
        return existing

    def _publish_slices(self, st: _NodeState) -> None:
        old = self._delete_slices(st)
        if not st.spec.devices:
            return
        # A new generation, above anything published before (also by an earlier run), so consumers
        # that see old and new slices at once know which to use.
        previous = max((int(((s.get("spec") or {}).get("pool") or {}).get("generation", 0)) for s in old), default=0)
        st.slice_generation = max(st.slice_generation, previous) + 1
        devices = [d.to_json() for d in st.spec.devices]
        chunks = [devices[i : i + MAX_DEVICES_PER_SLICE] for i in range(0, len(devices), MAX_DEVICES_PER_SLICE)]
        for chunk in chunks:
            body = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {
                    "generateName": f"{st.name}-{DRA_DRIVER}-",
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": st.name, "uid": st.uid, "controller": True}
                    ],
                },
                "spec": {
                    "driver": DRA_DRIVER,
                    "nodeName": st.name,
                    "pool": {"name": st.name, "generation": st.slice_generation, "resourceSliceCount": len(chunks)},
                    "devices": chunk,
                },
            }
            self.kube.create(SLICES, body)

    # -- background loops ------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        # Each kubelet renews its own Lease; played by one thread, 2,000 renewals in a row at ~20 ms
        # each take longer than the node lifecycle controller's grace (--node-monitor-grace-period,
        # 50s), and nodes go unreachable. A few workers keep a round well inside it.
        with ThreadPoolExecutor(max_workers=HEARTBEAT_WORKERS, thread_name_prefix="sim-beat") as pool:
            while not self._stop.wait(self.heartbeat_seconds):
                list(pool.map(self._heartbeat, list(self._nodes.values())))

    def _heartbeat(self, st: _NodeState) -> None:
        if self._stop.is_set() or st.gone:
            return
        try:
            self._renew_lease(st)
            if time.monotonic() - st.status_posted_at >= self.status_report_seconds:
                with st.lock:
                    self._patch_node_status(st)
                st.status_posted_at = time.monotonic()
        except Exception as e:
            log.warning("%s: heartbeat failed: %s", st.name, e)

    def _watch_nodes(self) -> None:
        self._watch_loop(NODES, (), self._on_node)

    def _watch_pods(self) -> None:
        # Only pods bound to some node matter; the server filters the rest out.
        self._watch_loop(PODS, [("fieldSelector", "spec.nodeName!=")], self._on_pod)

    def _watch_loop(
        self,
        path: str,
        query: list[tuple[str, str | int | bool]] | tuple[()],
        handle: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """List, then watch from the list's resourceVersion; list again on 410 or any failure."""
        backoff = 0.2
        while not self._stop.is_set():
            try:
                items, rv = self.kube.list_all(path, query)
                for item in items:
                    self._handle(handle, "ADDED", item)
                while not self._stop.is_set():
                    rv = self._watch_once(path, query, rv, handle)
                    backoff = 0.2
            except _Expired:
                continue
            except Exception as e:
                if self._stop.is_set():
                    return
                log.warning("watch %s failed, retrying: %s", path, e)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5)

    def _watch_once(
        self,
        path: str,
        query: list[tuple[str, str | int | bool]] | tuple[()],
        rv: str,
        handle: Callable[[str, dict[str, Any]], None],
    ) -> str:
        stream = self.kube.watch(path, rv, query, timeout_seconds=240)
        with self._streams_lock:
            self._streams.add(stream)
        try:
            if self._stop.is_set():
                return rv
            for event in stream:
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired
                    raise RuntimeError(f"watch error: {obj.get('message')}")
                rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                if kind != "BOOKMARK":
                    self._handle(handle, str(kind), obj)
            return rv
        finally:
            stream.close()
            with self._streams_lock:
                self._streams.discard(stream)

    def _handle(self, handle: Callable[[str, dict[str, Any]], None], kind: str, obj: dict[str, Any]) -> None:
        if self._stop.is_set():
            return
        try:
            handle(kind, obj)
        except Exception as e:
            name = (obj.get("metadata") or {}).get("name")
            log.warning("handling %s %s failed: %s", kind, name, e)

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        meta = node.get("metadata") or {}
        st = self._nodes.get(str(meta.get("name", "")))
        if st is None:
            return
        if kind == "DELETED":
            # Kubelet does not re-register a deleted Node until it restarts; neither do we.
            st.gone = True
            log.info("%s: node deleted", st.name)
            return
        if st.gone or meta.get("uid") != st.uid:
            return
        self._reconcile(st, meta.get("labels") or {})

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        st = self._nodes.get(str(spec.get("nodeName", "")))
        if st is None or st.gone:
            return
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if kind == "DELETED":
            with st.lock:
                st.pods.discard(uid)
            return
        if meta.get("deletionTimestamp"):
            # Terminating: preStop and SIGTERM run within the grace the deletion set, then kubelet's
            # final delete (the API server set deletionGracePeriodSeconds from the pod's
            # terminationGracePeriodSeconds or the caller's override).
            if self._claim_pod_action(st, f"delete/{uid}"):
                grace = meta.get("deletionGracePeriodSeconds")
                delay = self.timing.termination_s(float(grace) if grace is not None else None)
                self._after(delay, lambda: self._finish_delete(st, pod))
            return
        status = pod.get("status") or {}
        if status.get("phase") in ("Running", "Succeeded", "Failed"):
            return
        if self._claim_pod_action(st, f"start/{uid}"):
            delay = self.timing.container_start_s + (self.timing.canary_run_s if is_canary(pod) else 0)
            self._after(delay, lambda: self._start_pod(st, pod))

    def _claim_pod_action(self, st: _NodeState, key: str) -> bool:
        """True the first time a pod's start or delete is seen (watch events repeat; one timer each)."""
        with st.lock:
            if key in st.pods:
                return False
            st.pods.add(key)
            return True

    def _finish_delete(self, st: _NodeState, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        st.pods.discard(f"delete/{meta.get('uid')}")
        st.pods.discard(f"start/{meta.get('uid')}")
        path = path_of("v1", "pods", str(meta.get("name")), namespace=str(meta.get("namespace")))
        # Kubelet's final delete once the containers are gone: grace period 0, same pod only.
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta.get("uid")},
        }
        try:
            self.kube.delete(path, body)
        except ApiError as e:
            if e.status not in (404, 409):  # 409: a newer pod of the same name; not ours to delete
                raise

    def _start_pod(self, st: _NodeState, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        st.pods.discard(f"start/{meta.get('uid')}")
        path = path_of("v1", "pods", str(meta.get("name")), namespace=str(meta.get("namespace")))
        now = now_rfc3339()
        with st.lock:
            ip = st.host_ip if spec.get("hostNetwork") else st.pod_ip()
        try:
            if is_canary(pod):
                status = canary_status(pod, self._canary_lines(st, pod), st.host_ip, ip, now)
            else:
                status = running_status(spec, st.host_ip, ip, now)
            self.kube.strategic_patch(path + "/status", {"status": status})
        except ApiError as e:
            if e.status != 404:
                raise

    def _canary_lines(self, st: _NodeState, pod: Mapping[str, Any]) -> list[str]:
        """What `nvidia-smi -L` prints in the canary: its claim's devices, as this node's slices hold them."""
        name = claim_name(pod)
        if name is None:
            return []
        ns = str((pod.get("metadata") or {}).get("namespace", ""))
        claim = self.kube.get_or_none(path_of("resource.k8s.io/v1", "resourceclaims", name, ns))
        results = allocated_results(claim)
        if not results:
            return []
        slices, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={st.name}")])
        return nvidia_smi_lines(results, slices)


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _log_failure(e: BaseException) -> None:
    log.warning("a simulated component failed : %s", e)
