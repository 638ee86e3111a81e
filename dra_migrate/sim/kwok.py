"""A fleet of GPU nodes played by KWOK (sigs.k8s.io/kwok) on a real control plane.

`KwokFleet` registers the nodes (labels, taints, capacity, and the annotations the Stages read:
`dra_migrate.sim.stages.node_annotations`), runs the `kwok` controller built by tools/kwok/build with the
Stages of the run's timing profile, and plays the one thing a Stage cannot: the canary pod's run.

Why the canary is ours: the canary's container prints `nvidia-smi -L`, one line per device allocated to
it, with the device's UUID (`dra_migrate.sim.pods`). The UUID is an attribute of the device in the node's
ResourceSlice; which device is the pod's is in its ResourceClaim's allocation. A Stage's template renders
from the object it plays only (pkg/utils/lifecycle in kwok v0.8.0), so it cannot join the three. The
canary controller is one watch on pods with the canary label (they are few: one per node in a wave) and
a timer per canary; it writes the same status the real kubelet would (`pods.canary_status`).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from dra_migrate.bundled import bundled
from dra_migrate.errors import InputError
from dra_migrate.kube import Event, Informer, NodeIndex
from dra_migrate.sim.kube import ApiError, Kube, new_api_client, now_rfc3339, path_of
from dra_migrate.sim.placement import LABEL_RULES, PluginRules
from dra_migrate.sim.pods import CANARY_LABEL, allocated_results, canary_status, claim_name, nvidia_smi_lines
from dra_migrate.sim.spec import LABEL_DEVICE_PLUGIN, LABEL_DRA_DRIVER, LABEL_DRA_KUBELET_PLUGIN, GpuNodeSpec
from dra_migrate.sim.stages import (
    A_DP,
    A_DRA,
    A_KUBELET,
    KWOK_NODE,
    config_documents,
    node_annotations,
    ready_status,
)
from dra_migrate.sim.timing import INSTANT, Timers, TimingProfile

log = logging.getLogger("dra_migrate.sim")

KWOK_VERSION = os.environ.get("KWOK_VERSION", "0.8.0")


def build_hint() -> str:
    """The command that builds kwok: the script shipped in the package (or the checkout's tools/kwok/build)."""
    return f"build it once with: {bundled('tools/kwok/build')} (about 3 minutes on 2 cores; needs Go)"


NODES = "/api/v1/nodes"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
# Nodes created at once (one POST each; the API server has no batch create). Each POST waits on admission
# and etcd far longer than the Python that sends it: at 8, 10,000 nodes took about 3 minutes.
REGISTER_WORKERS = 32
# Canaries finished at once: more than the 2,000-node plan's largest wave (80), as kwok's play units
# (sim/stages.py NODE_PLAY_PARALLELISM). Each finish waits on the API server (its claim, its node's slices,
# the status patch); at 8, an 80-node wave's canaries finished in ten rounds of those round trips, the last
# up to 12 s after its window ended on a loaded twin — the largest part of a wave (issue 25, fourth round).
CANARY_WORKERS = 128
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def kwok_binary() -> Path:
    """The kwok binary: DRA_MIGRATE_KWOK (a file), the build cache, or PATH."""
    configured = os.environ.get("DRA_MIGRATE_KWOK")
    if configured:
        return Path(configured)
    root = os.environ.get("DRA_MIGRATE_KWOK_CACHE") or str(Path.home() / ".cache" / "dra-migrate" / "kwok")
    cached = Path(root) / f"v{KWOK_VERSION}" / "kwok"
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    on_path = shutil.which("kwok")
    if on_path:
        return Path(on_path)
    raise InputError(f"no kwok v{KWOK_VERSION} found (build cache {cached.parent}, PATH)", build_hint())


START_TIMEOUT_S = 120  # kwok's start: it waits for the API server, then lists the nodes it manages


def free_port() -> int:
    """A loopback port free now (the kernel's pick); kwok binds it a moment later, and exits if it lost it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Straight to loopback, whatever http_proxy says.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _answers_ok(url: str) -> bool:
    try:
        with _DIRECT.open(url, timeout=2) as resp:
            return bool(resp.status == 200 and resp.read().strip() == b"ok")
    except (OSError, ValueError):
        return False


def require_linux(what: str) -> None:
    """Refuse, in one line, to run the twin or its KWOK nodes anywhere but Linux. Its cleanup rests on Linux
    alone: the watchdog that stops the control plane when a rehearsal is killed outright, and kwok itself, die
    with their parent through PR_SET_PDEATHSIG (prctl(2), Linux only; `die_with_parent`), and tools/k8s/down
    finds the components it stops by their /proc/PID/cmdline (macOS has no /proc): on macOS a rehearsal would
    leave etcd, the API server and kwok running."""
    if not sys.platform.startswith("linux"):
        raise InputError(
            f"{what} runs on Linux only (this is {sys.platform})",
            "run it on a Linux machine or VM, or in a Linux container; every other command runs here "
            "(docs/usage.md, Platforms)",
        )


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (Linux PR_SET_PDEATHSIG), so
    a rehearsal killed outright (SIGKILL, OOM) leaves no kwok behind playing nodes to a dead API server."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def addresses(index: int) -> tuple[str, str]:
    """(host IP, pod CIDR) of the fleet's `index`-th node."""
    return f"172.{16 + index // 65536}.{index // 256 % 256}.{index % 256}", f"10.{64 + index // 256}.{index % 256}.0/24"


# The node lifecycle controller's label reconciliation: the beta OS and arch labels follow the stable ones
# (k8s.io/kubernetes@v1.37.2 pkg/controller/nodelifecycle/node_lifecycle_controller.go labelReconcileInfo,
# reconcileNodeLabels).
RECONCILED_LABELS = (("kubernetes.io/os", "beta.kubernetes.io/os"), ("kubernetes.io/arch", "beta.kubernetes.io/arch"))
# The NoSchedule taints it keeps in step with a node's conditions (same file, nodeConditionToTaintKeyStatusMap
# and doNoScheduleTaintingPass); the unschedulable taint follows spec.unschedulable.
CONDITION_TAINTS = {
    ("Ready", "False"): "node.kubernetes.io/not-ready",
    ("Ready", "Unknown"): "node.kubernetes.io/unreachable",
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
}
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
# Every taint the node lifecycle controller sets from a node's state (NoSchedule above; NoExecute too).
CONTROLLER_TAINTS = frozenset({*CONDITION_TAINTS.values(), UNSCHEDULABLE_TAINT})


def reconciled_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """`labels` as the node lifecycle controller leaves them (RECONCILED_LABELS)."""
    out = dict(labels)
    for primary, secondary in RECONCILED_LABELS:
        if primary in out:
            out[secondary] = out[primary]
    return out


def node_manifest(
    spec: GpuNodeSpec, index: int = 0, fleet: str = "fake", rules: PluginRules = LABEL_RULES, steady: bool = False
) -> dict[str, Any]:
    """The Node a twin registers for `spec`: as its kubelet would, with the plugins where `rules` (the
    cluster's DaemonSets, or the toggle labels) place them.

    `index` (its place in the fleet) gives it its own address and pod range (10.64.0.0/10 holds 16,384
    /24s): kwok takes a pod's IP from its node's podCIDR and its host IP from the node's addresses.

    `steady`: a node of a cluster in steady state (the snapshot's): already Ready, its labels as the node
    lifecycle controller reconciled them long ago, its device plugin's capacity posted (as every twin node
    is). Booted instead (a new pool's node), it registers without conditions and node-initialize makes it
    Ready, and brings the not-ready taint itself: the one the API server's TaintNodesByCondition admission
    adds to every node it creates (k8s.io/kubernetes@v1.37.2 plugin/pkg/admission/nodetaint/admission.go,
    which leaves a node that has it alone), so a twin whose API server runs without that plugin (a
    rehearsal's: its steady nodes registered long ago, their taint lifted) still boots nodes as a cluster
    does. The node lifecycle controller lifts the taint once the node is Ready."""
    taints = [dict(t) for t in spec.taints]
    if not steady and not any(t.get("key") == NOT_READY_TAINT for t in taints):
        taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
    dp_on = rules.device_plugin_on({"metadata": {"name": spec.name, "labels": spec.labels}, "spec": {"taints": taints}})
    capacity = {"cpu": spec.cpu, "memory": spec.memory, "pods": spec.pods, **spec.extra_capacity}
    allocatable = dict(capacity)
    for key, count in spec.device_plugin_resources.items():
        # A plugin switched off by label before this kubelet started is as one stopped long ago: key at 0.
        capacity[key] = allocatable[key] = str(count if dp_on else 0)
    host_ip, pod_cidr = addresses(index)
    # The snapshot's provider ID when it recorded one (a replayed GKE node stays GKE's), else one of KWOK's:
    # a spec's GKE pool label alone does not make it a cloud's node (inventory.platform.which_platform).
    spec_body: dict[str, Any] = {"podCIDR": pod_cidr, "providerID": spec.provider_id or f"kwok://{spec.name}"}
    if taints:
        spec_body["taints"] = taints
    if spec.unschedulable:  # cordoned in the snapshot: the node lifecycle controller keeps its taint with this
        spec_body["unschedulable"] = True
    down = steady and spec.ready != "True"  # its kubelet was not posting Ready: no Stage plays it (A_KUBELET)
    status: dict[str, Any] = ready_status(now_rfc3339(), spec.ready) if steady else {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": reconciled_labels(spec.labels) if steady else dict(spec.labels),
            "annotations": {
                **spec.group_annotations,
                **node_annotations(spec.device_plugin_resources, [d.to_json() for d in spec.devices], dp_on, fleet),
                **({A_KUBELET: "down"} if down else {}),
            },
        },
        "spec": spec_body,
        "status": {
            **status,
            "capacity": capacity,
            "allocatable": allocatable,
            "addresses": [{"type": "InternalIP", "address": host_ip}, {"type": "Hostname", "address": spec.name}],
        },
    }


class KwokFleet:
    """KWOK-played GPU nodes for `nodes` against `kubeconfig`; `start`/`stop` or a `with` block.

    `lease_s`: the nodes' Lease duration (KWOK renews each at a quarter of it); a twin of thousands of
    nodes renews less often, with the node lifecycle controller's grace raised to match (rehearse.run).
    `workdir`: where the Stage file and kwok's log go. `rules`: where the plugins run (`sim.placement`; the
    snapshot's DaemonSets in a rehearsal, the toggle labels by default). `steady`: the nodes register as a
    cluster in steady state shows them (`node_manifest`)."""

    def __init__(
        self,
        kubeconfig: Path | str,
        nodes: Iterable[GpuNodeSpec],
        *,
        workdir: Path,
        timing: TimingProfile = INSTANT,
        lease_s: int = 40,
        fleet: str = "fake",
        rules: PluginRules = LABEL_RULES,
        steady: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.env = dict(env or {})  # added to kwok's environment (the rehearsal's GOGC)
        self.specs = {s.name: s for s in nodes}
        self._index = {name: i for i, name in enumerate(self.specs)}  # a node's addresses (never reused)
        self.workdir = workdir
        self.timing = timing
        self.lease_s = lease_s
        self.fleet = fleet
        self.rules = rules
        self.steady = steady
        self._api = new_api_client(self.kubeconfig, "dra-migrate-twin", pool_size=REGISTER_WORKERS + CANARY_WORKERS + 2)
        self.kube = Kube(self._api)
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._timers = Timers()
        self._threads: list[threading.Thread] = []
        self._canaries: Informer | None = None
        self._devices: CanaryDevices | None = None
        self._seen: set[str] = set()
        self._seen_lock = threading.Lock()

    @property
    def node_names(self) -> list[str]:
        return list(self.specs)

    @property
    def log_path(self) -> Path:
        return self.workdir / "kwok.log"

    def start(self) -> None:
        require_linux("KWOK's simulated nodes")
        binary = kwok_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "stages.yaml"
        # JSON documents are YAML documents: kwok's --config reads them as a multi-document YAML file.
        config.write_text("".join(f"---\n{json.dumps(doc)}\n" for doc in config_documents(self.timing, self.rules)))
        try:
            # Nodes first, kwok after: it finds them all in its first list rather than one watch event each.
            self._register_all()
            port = free_port()
            with self.log_path.open("wb") as out:
                self._proc = subprocess.Popen(
                    [
                        str(binary),
                        f"--kubeconfig={self.kubeconfig}",
                        f"--config={config}",
                        f"--manage-nodes-with-annotation-selector={KWOK_NODE}={self.fleet}",
                        f"--node-lease-duration-seconds={self.lease_s}",
                        # Its server on loopback only, for /healthz (the readiness check below): it serves
                        # once kwok's controllers have started (kwok v0.8.0 pkg/kwok/cmd/root.go runE:
                        # ctr.Start, then startServer). Nothing execs into or logs from twin pods.
                        f"--server-address=127.0.0.1:{port}",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **self.env},
                    start_new_session=True,  # Ctrl-C reaches us, and we stop kwok in order
                    preexec_fn=die_with_parent,
                )
            self.wait_started(f"http://127.0.0.1:{port}/healthz")
            # One watch, on canary pods only (one per node of a wave), resumed and re-listed by the Informer.
            self._canaries = Informer(
                self.kube, "/api/v1/pods", label_selector=CANARY_LABEL, field_selector="spec.nodeName!="
            )
            self._threads.append(self._canaries.run(lambda e: self._on_canary(e.type, e.object), name="kwok-canaries"))
            self._devices = CanaryDevices(self.kube)
            self._threads.extend(self._devices.start())
            self._spawn(lambda: self._timers.run(self._stop, workers=CANARY_WORKERS), "kwok-canary-timers")
        except BaseException:
            self.stop()
            raise

    def wait_started(self, healthz: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until kwok's /healthz answers: its Stage controllers run (it serves only after starting them).

        Or kwok exits first (a configuration it refuses, a port taken, an API server it cannot reach): say
        so, with its last words, rather than rehearse on nodes nobody plays. Before, a fixed 2 s wait that
        returned for any kwok still alive then: every start paid 2 s, and a kwok that died at 3 s was
        taken for a running one."""
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while True:
            code = self._proc.poll()
            if code is not None:
                last = (self.log_path.read_text(errors="replace").strip().splitlines() or ["(no output)"])[-1]
                hint = f"run {bundled('tools/kwok/build')}, then rehearse again"
                raise InputError(f"kwok exited ({code}) at start: {last[:300]}", hint)
            if _answers_ok(healthz):
                return
            if time.monotonic() > deadline:
                raise InputError(
                    f"kwok did not start within {timeout_s:g}s (no answer from {healthz})", f"see {self.log_path}"
                )
            time.sleep(0.05)

    def _spawn(self, fn: Any, name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._timers.wake()
        if self._canaries is not None:
            self._canaries.close()
        if self._devices is not None:
            self._devices.close()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for t in self._threads:
            t.join(timeout)
        self._api.close()

    def __enter__(self) -> KwokFleet:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- what tests switch -----------------------------------------------------------------------

    def set_device_plugin(self, node: str, enabled: bool) -> None:
        self._label(node, {LABEL_DEVICE_PLUGIN: "true" if enabled else "false"})

    def set_dra_plugin(self, node: str, enabled: bool) -> None:
        # Disabling clears both DRA labels, or the other one would keep the plugin on.
        labels: dict[str, str | None] = (
            {LABEL_DRA_KUBELET_PLUGIN: "true"} if enabled else {LABEL_DRA_KUBELET_PLUGIN: None, LABEL_DRA_DRIVER: None}
        )
        self._label(node, labels)

    def _label(self, node: str, labels: Mapping[str, str | None]) -> None:
        if node not in self.specs:
            raise KeyError(f"{node} is not a node of this fleet")
        self.kube.merge_patch(path_of("v1", "nodes", node), {"metadata": {"labels": dict(labels)}})

    # -- nodes added and removed while it runs (the test tier's one fleet, shared by its modules) -----

    def add(self, nodes: Iterable[GpuNodeSpec]) -> None:
        """Register more nodes; the running kwok plays them as it plays those it started with (they carry
        the fleet's annotation)."""
        new = [s for s in nodes if s.name not in self.specs]
        for spec in new:
            self._index[spec.name] = len(self._index)
            self.specs[spec.name] = spec
        with ThreadPoolExecutor(max_workers=REGISTER_WORKERS, thread_name_prefix="kwok-register") as pool:
            list(pool.map(self._register, new, [self._index[s.name] for s in new]))

    def remove(self, names: Iterable[str]) -> None:
        """Delete these nodes (as a scaled-down pool loses them) and stop playing them."""
        for name in names:
            self.specs.pop(name, None)
            try:
                self.kube.delete(path_of("v1", "nodes", name))
            except ApiError as e:
                if e.status != 404:
                    raise

    def wait_ready(self, names: Iterable[str] | None = None, timeout_s: float = 60) -> None:
        """Until kwok has made each node Ready with its plugins as its labels place them (the DRA plugin's
        slice published): the state a kubelet and its DaemonSets reach after boot. Raises TimeoutError."""
        pending = set(self.specs if names is None else names)
        deadline = time.monotonic() + timeout_s
        while True:
            pending = {n for n in pending if not _settled(self.kube.get_or_none(path_of("v1", "nodes", n)), self.rules)}
            if not pending:
                return
            if not self.alive():
                raise InputError(f"kwok exited: see {self.log_path}", build_hint())
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} KWOK node(s) not ready after {timeout_s:g}s: {sorted(pending)[:5]}")
            time.sleep(0.1)

    # -- registration ----------------------------------------------------------------------------

    def _register_all(self) -> None:
        with ThreadPoolExecutor(max_workers=REGISTER_WORKERS, thread_name_prefix="kwok-register") as pool:
            list(pool.map(self._register, self.specs.values(), range(len(self.specs))))

    def _register(self, spec: GpuNodeSpec, index: int) -> None:
        try:
            self.kube.create(NODES, node_manifest(spec, index, self.fleet, self.rules, self.steady))
        except ApiError as e:
            if e.status != 409:
                raise
            # A node of an earlier run keeps its labels (toggles made since are not undone).

    # -- the canary ------------------------------------------------------------------------------

    def _on_canary(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        if kind == "DELETED" or node not in self.specs or meta.get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            return
        uid = str(meta.get("uid", ""))
        with self._seen_lock:
            if uid in self._seen:
                return
            self._seen.add(uid)
        delay = self.timing.container_start_s + self.timing.canary_run_s
        self._timers.call_later(delay, lambda: self._finish_canary(pod))

    def _finish_canary(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        path = path_of("v1", "pods", str(meta.get("name")), namespace=str(meta.get("namespace")))
        try:
            # The watched copy (the status is made from its spec): a pod deleted meanwhile is gone from it,
            # or its patch is answered 404 (below). A GET here was one more round trip per canary.
            canaries = self._canaries
            key = f"{meta.get('namespace')}/{meta.get('name')}"
            current = canaries.get(key) if canaries is not None else self.kube.get_or_none(path)
            if current is None or (current.get("metadata") or {}).get("uid") != meta.get("uid"):
                return
            host_ip, cidr = addresses(self._index[node])
            pod_ip = cidr.replace(".0/24", ".254")  # kwok allocates from the bottom of the range
            status = canary_status(current, self._canary_lines(node, current), host_ip, pod_ip, now_rfc3339())
            self.kube.strategic_patch(path + "/status", {"status": status})
        except ApiError as e:
            if e.status != 404:
                log.warning("canary %s/%s: %s", meta.get("namespace"), meta.get("name"), e)

    def _canary_lines(self, node: str, pod: Mapping[str, Any]) -> list[str]:
        devices = self._devices
        return devices.lines(node, pod) if devices is not None else CanaryDevices(self.kube).lines(node, pod)


class CanaryDevices:
    """What a canary's `nvidia-smi -L` prints, from watched copies of the claims and the slices (indexed by
    node): its claim's allocated devices and their UUIDs in its node's slices. A GET of the claim and a LIST of
    the node's slices per canary waited on the API server between a canary's window and its end, on every
    wave's critical path (0.9 s from binding to end for a 0.25 s window on a 2,000-node twin: issue 25). Either
    copy may lag the canary's pod (separate streams): a claim without an allocation in its copy is read with a
    GET, and a device missing from the node's copy with a LIST, as before. Without `start`, always so."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._claims = Informer(kube, CLAIMS)
        self._slices = Informer(kube, SLICES)
        self._by_node = NodeIndex()
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> list[threading.Thread]:
        self._started = True
        return [
            self._claims.run(lambda _e: None, name="kwok-claims"),
            self._slices.run(self._index, name="kwok-slices"),
        ]

    def close(self) -> None:
        self._claims.close()
        self._slices.close()

    def lines_ready(self) -> bool:
        """Both copies listed (the lines are read from them from then on)."""
        return self._claims.synced.is_set() and self._slices.synced.is_set()

    def _index(self, event: Event) -> None:
        with self._lock:
            self._by_node.apply(event)

    def lines(self, node: str, pod: Mapping[str, Any]) -> list[str]:
        name = claim_name(pod)
        if name is None:
            return []
        ns = str((pod.get("metadata") or {}).get("namespace", ""))
        results = allocated_results(self._claims.get(f"{ns}/{name}")) if self._started else []
        if not results:
            results = allocated_results(
                self.kube.get_or_none(path_of("resource.k8s.io/v1", "resourceclaims", name, ns))
            )
        if not results:
            return []
        with self._lock:
            slices = self._by_node.on(node) if self._started else []
        if len(nvidia_smi_lines(results, slices)) < len(results):
            slices, _ = self.kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={node}")])
        return nvidia_smi_lines(results, slices)


def _settled(node: Mapping[str, Any] | None, rules: PluginRules) -> bool:
    """Ready, and each plugin in the state its placement (`rules`) asks for (the Stages' annotations)."""
    if node is None:
        return False
    meta = node.get("metadata") or {}
    notes = meta.get("annotations") or {}
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    dp = notes.get(A_DP) == "running"
    dra = notes.get(A_DRA) == "running"
    return ready and dp == rules.device_plugin_on(node) and dra == rules.dra_on(node)


def content_pending(node: Mapping[str, Any], rules: PluginRules) -> str | None:
    """What is still to change in the part of a twin node a plan fingerprints (labels, taints, device-plugin
    capacity: plan/fingerprint.py), or None: not Ready yet (node-initialize, then the node lifecycle
    controller), a taint or label the node lifecycle controller has yet to set (CONDITION_TAINTS,
    RECONCILED_LABELS), or a device-plugin Stage still to play (its capacity follows)."""
    meta, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    conditions = {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []}
    down = (meta.get("annotations") or {}).get(A_KUBELET) == "down"  # registered not Ready, stays so
    if conditions.get("Ready") != "True" and not down:
        return "not Ready"
    want = {t for (kind, value), t in CONDITION_TAINTS.items() if conditions.get(kind) == value}
    if spec.get("unschedulable"):
        want.add(UNSCHEDULABLE_TAINT)
    kept = set(CONDITION_TAINTS.values()) | {UNSCHEDULABLE_TAINT}
    have = {t.get("key") for t in spec.get("taints") or [] if t.get("effect") == "NoSchedule" and t.get("key") in kept}
    if have != want:
        return "its taints are not yet the node lifecycle controller's"
    labels = meta.get("labels") or {}
    if reconciled_labels(labels) != labels:
        return "its OS and arch labels are not yet reconciled"
    state = (meta.get("annotations") or {}).get(A_DP)
    if state is not None and state != ("running" if rules.device_plugin_on(node) else "gone"):
        return f"its device plugin is {state}, its placement says otherwise"
    return None
