"""An in-memory `Ops` and a virtual clock, so the runner's semantics are tested in milliseconds.

`FakeOps` keeps nodes (cordon, labels, GPU pods, allocatable, published DRA devices) and DeviceClasses,
and behaves as the live cluster does in the ways the runner relies on: writes are idempotent and return
the state before and after, the device plugin's allocatable goes to 0 when its label turns it off, the
DRA plugin publishes the node's devices when its label turns it on, drains take time on the clock and
can be cancelled, a canary succeeds only on a node served by DRA alone.

Faults are injected per operation and node (`Fault`): transient (the API server unreachable) or
permanent (`StepFailed`), at the start of the operation (nothing changed) or mid-way (the write done,
then the failure); `hang` blocks until the wait is cancelled; `crash` stops the process as a SIGKILL
would (nothing after it reaches the journal: use `CrashableJournal`).

Not used by the product (an import contract forbids it): the CLI only ever builds `LiveOps`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from dra_migrate.execute.contract import NEVER, Cancel, Change, StepFailed
from dra_migrate.execute.ops_base import NODE_GONE_HINT
from dra_migrate.kube import ApiError, Unreachable
from dra_migrate.plan.model import Plan


class FakeClock:
    """Virtual time: `sleep` advances it at once (and still honours cancellation)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._mutex = threading.Lock()

    def monotonic(self) -> float:
        with self._mutex:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._mutex:
            self._now += seconds

    def sleep(self, seconds: float, cancel: Cancel) -> None:
        cancel.check()
        self.advance(max(seconds, 0.0))
        time.sleep(0)  # let the other lanes run
        cancel.check()


class Crash(BaseException):
    """The process died here (SIGKILL). BaseException: nothing in the runner handles it."""


@dataclass
class Fault:
    kind: str  # "transient" | "permanent" | "refused" (an ApiError) | "hang" | "crash" | "interrupt" (Ctrl-C)
    when: str = "start"  # "start": before the operation changes anything; "mid": after its write
    times: int = 1  # how many calls fail (then it works)
    after: int = 0  # calls that succeed before the first failure
    calls: int = 0

    def due(self) -> bool:
        self.calls += 1
        return self.after < self.calls <= self.after + self.times


@dataclass
class FakeNode:
    name: str
    uid: str
    unschedulable: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)  # device-plugin resources and their count
    devices: int = 0  # DRA devices the plugin publishes once enabled
    gpu_pods: int = 0
    exists: bool = True
    annotations: dict[str, str] = field(default_factory=dict)
    # Replace-pool: a node the platform command makes, which appears after this long on the clock.
    appears_at: float = 0.0
    ready: bool = True  # its kubelet posts Ready
    deleting: bool = False  # the Node has a deletionTimestamp
    # GPU pods no controller owns, "namespace/name" -> uid: a drain evicts one only when its uid is reviewed
    unowned: dict[str, str] = field(default_factory=dict)
    # GPU pods marked not to be interrupted, "namespace/name" -> mark: a drain evicts one only when the plan named it
    marked: dict[str, str] = field(default_factory=dict)


class CrashableJournal:
    """A journal that goes silent after a `Crash`, as a SIGKILLed process writes nothing more."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self.dead = False

    def record(self, event: str, **fields: Any) -> Any:
        if self.dead:
            return None
        return self.journal.record(event, **fields)


class FakeOps:
    """`Ops` in memory. `dp_label`/`dp_off` and `dra_label`/`dra_on` are the plan's parameters."""

    def __init__(
        self,
        nodes: Iterable[FakeNode],
        *,
        clock: FakeClock,
        dp_label: str = "nvidia.com/gpu.deploy.device-plugin",
        dp_off: str = "false",
        dra_label: str = "nvidia.com/dra-kubelet-plugin",
        dra_on: str = "true",
        drain_s_per_pod: float = 30.0,
        poll_s: float = 1.0,
        driver_installed: bool = True,
        journal: CrashableJournal | None = None,
    ) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.clock = clock
        self.dp_label, self.dp_off, self.dra_label, self.dra_on = dp_label, dp_off, dra_label, dra_on
        self.drain_s_per_pod = drain_s_per_pod
        self.poll_s = poll_s
        self.driver_installed = driver_installed
        self.device_classes: dict[str, dict[str, Any]] = {}
        # ResourceClaims: "namespace/name" -> {"deviceClass": name, "allocated": bool}
        self.claims: dict[str, dict[str, Any]] = {}
        self.quotas: dict[tuple[str, str], dict[str, str]] = {}  # (namespace, name) -> spec.hard
        self.pending: list[str] = []  # GPU pods Pending since the run began (`pending_gpu_pods`)
        self.backlog: list[str] = []  # GPU pods Pending before it began
        self.faults: dict[tuple[str, str | None], Fault] = {}
        self.journal = journal
        self.calls: list[tuple[str, str | None]] = []
        # (call, node, namespace, pull secrets) of each canary and canary admission
        self.canary_places: list[tuple[str, str, str, tuple[str, ...]]] = []
        self.reviewed: dict[str, frozenset[str] | None] = {}  # per node: the pod uids its drain may delete
        self.stack: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, namespace, name): NVIDIA stack objects
        self.barriers: dict[str, threading.Barrier] = {}  # per operation: lanes must meet there
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}
        self._mutex = threading.RLock()

    @classmethod
    def for_plan(cls, plan: Plan, clock: FakeClock, **kwargs: Any) -> FakeOps:
        """The cluster as the plan found it: every planned node with its original values."""
        uids = plan.node_uids()
        params = plan.parameters
        nodes = []
        for _stage, _wave, n in plan.nodes():
            labels = {k: v for k, v in n.original["labels"].items() if v is not None}
            annotations = {k: v for k, v in (n.original.get("annotations") or {}).items() if v is not None}
            nodes.append(
                FakeNode(
                    n.node,
                    uids.get(n.node, f"uid-{n.node}"),
                    bool(n.original["unschedulable"]),
                    labels,
                    dict.fromkeys(n.resources, max(n.expected_devices, 1)),
                    n.expected_devices,
                    n.gpu_pods,
                    annotations=annotations,
                )
            )
        for key, name in (("dp_label", "devicePluginLabel"), ("dp_off", "devicePluginOff"),
                          ("dra_label", "draLabel"), ("dra_on", "draOn")):  # fmt: skip
            if name in params:
                kwargs.setdefault(key, params[name])
        return cls(nodes, clock=clock, **kwargs)

    # -- fault injection

    def fail(
        self, op: str, node: str | None, kind: str, *, when: str = "start", times: int = 1, after: int = 0
    ) -> None:
        self.faults[(op, node)] = Fault(kind, when, times, after)

    def _enter(self, op: str, node: str | None, cancel: Cancel = NEVER, *, faults: str | None = None) -> Fault | None:
        """Record the call of `op`; the fault injected for `faults` (default: `op`) when one is due."""
        with self._mutex:
            self.calls.append((op, node))
            key = faults or op
            fault = self.faults.get((key, node)) or self.faults.get((key, None))
            due = fault is not None and fault.due()
            self.active[op] = self.active.get(op, 0) + 1
            self.max_active[op] = max(self.max_active.get(op, 0), self.active[op])
        try:
            barrier = self.barriers.get(op)
            if barrier is not None:
                barrier.wait()
            if due and fault is not None and fault.when == "start":
                self._raise(fault, op, node, cancel)
            return fault if due else None
        finally:
            with self._mutex:
                self.active[op] -= 1

    def _raise(self, fault: Fault, op: str, node: str | None, cancel: Cancel) -> None:
        if fault.kind == "transient":
            raise Unreachable(f"{op} {node}: no response from the API server (injected)", "re-run apply")
        if fault.kind == "permanent":
            raise StepFailed(f"{op} of node {node} failed (injected)", "fix it, then resume")
        if fault.kind == "refused":  # the API server refuses the request for good (admission: 403)
            message = f'pods "x" is forbidden: {op} of node {node} refused (injected)'
            body = orjson.dumps({"kind": "Status", "status": "Failure", "message": message, "code": 403})
            raise ApiError("POST", "/api/v1/namespaces/default/pods", 403, body)
        if fault.kind == "hang":
            deadline = time.monotonic() + 10  # a safety net for a test that forgot to cancel
            while not cancel.wait(0.005):
                cancel.check()  # the guard (a lost lock) ends it too
                if time.monotonic() > deadline:
                    raise AssertionError(f"{op} {node}: hung for 10 s and nobody cancelled it")
            cancel.check()
        if fault.kind == "interrupt":
            raise KeyboardInterrupt
        if fault.kind == "crash":
            if self.journal is not None:
                self.journal.dead = True
            raise Crash(f"{op} {node}")

    def _mid(self, fault: Fault | None, op: str, node: str | None, cancel: Cancel = NEVER) -> None:
        if fault is not None and fault.when == "mid":
            self._raise(fault, op, node, cancel)

    def _node(self, name: str) -> FakeNode:
        n = self.nodes.get(name)
        if n is None or not n.exists:
            raise StepFailed(f"node {name} does not exist", NODE_GONE_HINT)
        return n

    # -- Ops

    def node_state(self, node: str, *, watched: bool = False) -> dict[str, Any]:
        self._enter("node_state", node)
        n = self.nodes.get(node)
        if n is None or not n.exists:
            return {"exists": False, "uid": "", "unschedulable": False, "labels": {}, "allocatable": {}, "ready": False}
        return self._state(n)

    def _state(self, n: FakeNode) -> dict[str, Any]:
        return {"exists": True, "uid": n.uid, "unschedulable": n.unschedulable, "labels": dict(n.labels),
                "annotations": dict(n.annotations),
                "allocatable": self._allocatable(n), "ready": n.ready, "notReady": None if n.ready else "False",
                "deleting": n.deleting}  # fmt: skip

    def node_states(self, *, watched: bool = False) -> dict[str, dict[str, Any]]:
        self._enter("node_states", None)
        now = self.clock.monotonic()
        return {n.name: self._state(n) for n in list(self.nodes.values()) if n.exists and n.appears_at <= now}

    def _allocatable(self, n: FakeNode) -> dict[str, int]:
        on = n.labels.get(self.dp_label) != self.dp_off
        return {r: (c if on else 0) for r, c in n.resources.items()}

    def set_unschedulable(
        self, node: str, value: bool, *, dry_run: bool = False, current: bool | None = None
    ) -> Change:
        fault = self._enter("set_unschedulable", node)
        with self._mutex:
            n = self._node(node)
            before = {"unschedulable": n.unschedulable if current is None else current}
            if not dry_run:
                n.unschedulable = value
        self._mid(fault, "set_unschedulable", node)
        return Change(f"Node {node}", before, {"unschedulable": value}, dry_run)

    def set_label(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        fault = self._enter("set_label", node)
        with self._mutex:
            n = self._node(node)
            before = {"labels": {key: n.labels.get(key)}}
            if not dry_run:
                if value is None:
                    n.labels.pop(key, None)
                else:
                    n.labels[key] = value
        self._mid(fault, "set_label", node)
        return Change(f"Node {node}", before, {"labels": {key: value}}, dry_run)

    def drain(
        self,
        node: str,
        scope: str,
        timeout_s: float,
        *,
        dry_run: bool = False,
        cancel: Cancel = NEVER,
        reviewed: Collection[str] | None = frozenset(),
        marked_named: Collection[str] = frozenset(),
    ) -> Change:
        fault = self._enter("drain", node, cancel)
        with self._mutex:
            self.reviewed[node] = None if reviewed is None else frozenset(reviewed)
        n = self._node(node)
        lost = [] if reviewed is None else sorted(k for k, uid in n.unowned.items() if uid not in reviewed)
        if lost:  # as LiveOps.drain: nothing evicted
            raise StepFailed(f"drain of node {node}: pod(s) no controller owns: {', '.join(lost)}", "resume")
        unnamed = sorted(k for k in n.marked if k not in marked_named)
        if unnamed:  # as LiveOps.drain: nothing evicted
            raise StepFailed(f"drain of node {node}: marked pod(s) not named: {', '.join(unnamed)}", "resume",
                             {"budgets": [], "pods": unnamed})  # fmt: skip
        before = {"pods": [f"ns/pod-{node}-{i}" for i in range(n.gpu_pods)]}
        if dry_run or not n.gpu_pods:
            return Change(f"Node {node}", before, {"pods": []}, dry_run)
        # Evictions go out at once; the pods then take their grace period to go.
        if self.drain_s_per_pod > timeout_s:
            self.clock.sleep(timeout_s, cancel)
            raise StepFailed(f"drain of node {node}: pods still there after {timeout_s:g}s", "resume")
        self.clock.sleep(self.drain_s_per_pod, cancel)
        self._mid(fault, "drain", node, cancel)
        with self._mutex:
            n.gpu_pods = 0
            n.marked.clear()
        return Change(f"Node {node}", before, {"pods": []})

    def stack_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self._enter("stack_object", f"{kind} {namespace}/{name}")
        return self.stack.get((kind, namespace, name))

    def unreviewed_pods(self, node: str, scope: str, reviewed: Collection[str]) -> list[str]:
        self._enter("unreviewed_pods", node)
        n = self.nodes.get(node)
        return [] if n is None else sorted(k for k, uid in n.unowned.items() if uid not in reviewed)

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
        # Rollback's wait for a node's slices to go (execute/actions.py `_wait_dra_gone`: no resources, 0 devices)
        # is the same call, but a fault injected into the apply's wait (`fail("wait_dra_ready", ...)`) is not
        # meant for it: a one-time hang it used up hung the rollback instead. Its own faults: "wait_dra_gone".
        gone = devices == 0 and not resources
        fault = self._enter("wait_dra_ready", node, cancel, faults="wait_dra_gone" if gone else None)
        deadline = self.clock.monotonic() + timeout_s
        while True:
            n = self._node(node)
            left = {r: c for r, c in self._allocatable(n).items() if r in resources and c}
            published = n.devices if n.labels.get(self.dra_label) == self.dra_on else 0
            if not left and published == devices:
                self._mid(fault, "wait_dra_ready", node, cancel)
                state = {"allocatable": dict.fromkeys(resources, 0), "driver": driver, "devices": published}
                return Change(f"Node {node}", state, dict(state))
            if self.clock.monotonic() >= deadline:
                raise StepFailed(f"node {node} not ready for DRA after {timeout_s:g}s", "check the plugins")
            self.clock.sleep(min(self.poll_s, deadline - self.clock.monotonic()), cancel)

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
        place = (namespace or "default", tuple(pull_secrets))
        self.canary_places.append(("canary-admission" if dry_run else "canary", node, *place))
        if dry_run:  # the API server's admission of the pod (a server-side dry run): nothing is scheduled
            self._enter("canary-admission", node, cancel)
            self._node(node)  # LiveOps reads the node's hostname label for the pod's affinity
            return Change(f"Node {node}", {}, {"pod": "default/canary-", "node": node}, dry_run=True)
        fault = self._enter("canary", node, cancel)
        n = self._node(node)
        if any(self._allocatable(n).values()) or n.labels.get(self.dra_label) != self.dra_on:
            raise StepFailed(f"canary on node {node} was not served by DRA", "check the node")
        self._mid(fault, "canary", node, cancel)
        return Change(f"Node {node}", {}, {"pod": f"default/canary-{node}", "node": node, "resource": resource})

    def create_device_class(self, manifest: dict[str, Any], *, dry_run: bool = False) -> Change:
        name = str((manifest.get("metadata") or {}).get("name"))
        fault = self._enter("create_device_class", name)
        with self._mutex:
            existed = name in self.device_classes
            if not dry_run:
                self.device_classes[name] = manifest
        self._mid(fault, "create_device_class", name)
        return Change(f"DeviceClass {name}", {"exists": existed}, {"exists": True}, dry_run)

    def delete_device_class(self, name: str, *, dry_run: bool = False) -> Change:
        fault = self._enter("delete_device_class", name)
        with self._mutex:
            existed = name in self.device_classes
            if not dry_run:
                self.device_classes.pop(name, None)
        self._mid(fault, "delete_device_class", name)
        return Change(f"DeviceClass {name}", {"exists": existed}, {"exists": False}, dry_run)

    def claims_using_device_class(self, name: str) -> list[str]:
        self._enter("claims_using_device_class", name)
        with self._mutex:
            mine = {k: c for k, c in self.claims.items() if c.get("deviceClass") == name}
        return sorted(f"{k} (allocated)" for k, c in mine.items() if c.get("allocated")) + sorted(
            k for k, c in mine.items() if not c.get("allocated")
        )

    def set_quota_hard(
        self,
        namespace: str,
        name: str,
        values: dict[str, str | None],
        *,
        expect: dict[str, str] | None = None,
        dry_run: bool = False,
    ) -> Change:
        target = f"ResourceQuota {namespace}/{name}"
        fault = self._enter("set_quota_hard", f"{namespace}/{name}")
        with self._mutex:
            hard = self.quotas.get((namespace, name))
            if hard is None:
                raise StepFailed(f"{target} does not exist", "re-plan")
            if any(hard.get(k) != v for k, v in (expect or {}).items()):
                raise StepFailed(f"{target}: its GPU limits changed since the plan", "re-plan")
            before = {"hard": {k: hard.get(k) for k in values}}
            if not dry_run:
                for k, v in values.items():
                    if v is None:
                        hard.pop(k, None)
                    else:
                        hard[k] = v
        self._mid(fault, "set_quota_hard", f"{namespace}/{name}")
        after = before if dry_run else {"hard": {k: hard.get(k) for k in values}}
        return Change(target, before, after, dry_run)

    def dra_driver_installed(self, driver: str = "gpu.nvidia.com") -> bool:
        self._enter("dra_driver_installed", None)
        return self.driver_installed

    # Pods the tests make Pending: `backlog` were Pending before the run began (created at _BEFORE), `pending`
    # became Pending during it (created at _DURING), whenever the test sets them.
    _BEFORE, _DURING = "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"

    def pending_gpu_pods(self, older_than_s: float, *, created_after: str | None = None) -> list[str]:
        self._enter("pending_gpu_pods", None)
        old = [p for p in self.backlog if created_after is None or created_after < self._BEFORE]
        new = [p for p in self.pending if created_after is None or created_after < self._DURING]
        return sorted(old + new)

    def pending_gpu_backlog(self) -> tuple[int, str | None]:
        self._enter("pending_gpu_backlog", None)
        newest = self._DURING if self.pending else self._BEFORE if self.backlog else None
        return len(self.backlog) + len(self.pending), newest

    # -- replace-pool

    def set_annotation(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        fault = self._enter("set_annotation", node)
        with self._mutex:
            n = self._node(node)
            before = {"annotations": {key: n.annotations.get(key)}}
            if not dry_run:
                if value is None:
                    n.annotations.pop(key, None)
                else:
                    n.annotations[key] = value
        self._mid(fault, "set_annotation", node)
        return Change(f"Node {node}", before, {"annotations": {key: value}}, dry_run)

    def pool_nodes(self, selector: dict[str, str], *, driver: str = "gpu.nvidia.com") -> list[dict[str, Any]]:
        self._enter("pool_nodes", None)
        now = self.clock.monotonic()
        with self._mutex:
            chosen = [
                n
                for n in self.nodes.values()
                if n.exists and n.appears_at <= now and all(n.labels.get(k) == v for k, v in selector.items())
            ]
            return [
                {"name": n.name, "ready": True, "unschedulable": n.unschedulable,
                 "devices": n.devices if n.labels.get(self.dra_label) == self.dra_on else 0}
                for n in sorted(chosen, key=lambda n: n.name)
            ]  # fmt: skip

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
        fault = self._enter("wait_pool", None, cancel)
        deadline = self.clock.monotonic() + timeout_s
        while True:
            ready = [n for n in self.pool_nodes(selector, driver=driver) if n["devices"] >= devices_per_node]
            if len(ready) >= nodes:
                self._mid(fault, "wait_pool", None, cancel)
                return Change(f"Pool {selector}", {}, {"nodes": [n["name"] for n in ready]})
            if self.clock.monotonic() >= deadline:
                raise StepFailed(f"pool {selector}: {len(ready)} of {nodes} node(s) ready after {timeout_s:g}s", "")
            self.clock.sleep(min(self.poll_s, deadline - self.clock.monotonic()), cancel)

    # -- what tests compare

    def snapshot(self) -> dict[str, Any]:
        """The state a rollback must restore and an apply must reach, per node, plus the DeviceClasses."""
        return {
            "nodes": {
                n.name: {
                    "unschedulable": n.unschedulable,
                    "labels": dict(sorted(n.labels.items())),
                    **({"annotations": dict(sorted(n.annotations.items()))} if n.annotations else {}),
                }
                for n in self.nodes.values()
            },
            "deviceClasses": sorted(self.device_classes),
        }
