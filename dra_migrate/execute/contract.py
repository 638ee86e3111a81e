"""The interfaces between the runner and what it drives: live operations, the journal, the lock.

Kept in one place so each piece can be built and tested on its own (ops and lock against the real
control plane, the runner against them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dra_migrate.errors import ClusterError, MigrateError


class StepFailed(ClusterError):
    """A step could not reach its goal within its timeout (or its precondition does not hold).
    `details` says what blocked it, e.g. {"budgets": ["ns/pdb"], "pods": ["ns/pod"]}."""

    def __init__(self, message: str, hint: str = "", details: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint)
        self.details = details or {}


class StepRefused(StepFailed):
    """A step's precondition does not hold, found before it changed anything (the node is gone, replaced, not
    Ready, or the GPU Operator is at work on it). Nothing to undo: the runner records it `refused`, which leaves
    the step as it was before it started, so neither a wave's rollback nor `rollback` writes the plan's recorded
    values over what the cluster holds now (execute/journal.py `Progress`)."""


class LockHeld(ClusterError):
    """Another apply holds the cluster lock."""


class LockLost(ClusterError):
    """The cluster lock was lost mid-run (broken, taken over, or not renewed in time): stop at once,
    roll nothing back (another run may own the cluster now)."""


class Cancelled(MigrateError):
    """A wait or a step was told to stop (another node of the wave failed, the lock was lost, apply was
    interrupted). Not a failure of the step itself: it is journaled as interrupted and runs again on resume."""


# kopf's split (kopf docs "Error handling": TemporaryError vs PermanentError): a transient failure says
# nothing about the step, only that the cluster could not be asked now, so apply stops and a re-run
# resumes; rolling back through the same unreachable server would only fail half-way. A permanent one
# (StepFailed: a drain blocked past its timeout, a canary that failed, a node replaced; a request the
# server refused for good) means the step cannot succeed as planned: the wave is rolled back.


def is_transient(e: BaseException) -> bool:
    """True for "stop and resume later": a request the API client calls transient (no response, 5xx or
    429, after its retries; `dra_migrate.kube.errors`), the lock lost, a cancellation."""
    from dra_migrate.kube import is_transient as request_is_transient

    if isinstance(e, LockLost | Cancelled):
        return True
    if isinstance(e, StepFailed):
        return False
    return request_is_transient(e)


class Cancel:
    """A cancellation token. `cancel(reason)` wakes every wait on it (and on its children) at once; a
    step checks it at its boundaries and waits sleep on it (`Clock.sleep`). `guard` is asked too at each
    check (the cluster lock's `check`), so a lost lock stops a wait within one poll."""

    def __init__(self, parent: Cancel | None = None, guard: Callable[[], None] | None = None) -> None:
        self._event = threading.Event()
        self._mutex = threading.Lock()
        self._children: list[Cancel] = []
        self._wakes: list[threading.Event] = []  # waits on another event too (`wait_or`)
        self._parent = parent
        self._guard: Callable[[], None] | None = guard if guard is not None else (parent._guard if parent else None)
        self.reason = ""
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child: Cancel) -> None:
        with self._mutex:
            self._children.append(child)
            cancelled = self._event.is_set()
        if cancelled:
            child.cancel(self.reason)

    def cancel(self, reason: str) -> None:
        with self._mutex:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            children = list(self._children)
            wakes = list(self._wakes)
        for w in wakes:
            w.set()
        for c in children:
            c.cancel(reason)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise Cancelled when cancelled, or what the guard raises (LockLost)."""
        if self._guard is not None:
            self._guard()
        if self._event.is_set():
            raise Cancelled(f"stopped: {self.reason}")

    def wait(self, seconds: float) -> bool:
        """Block up to `seconds` of real time; True when cancelled meanwhile."""
        return self._event.wait(max(seconds, 0.0))

    def wait_or(self, event: threading.Event, seconds: float) -> bool:
        """Block up to `seconds` of real time, or until `event` is set (a watched object changed) or this
        token is cancelled; True when cancelled. One blocking wait, not a loop of short ones: hundreds of
        lanes waiting this way cost nothing until something they wait on happens."""
        with self._mutex:
            if self._event.is_set():
                return True
            self._wakes.append(event)
        try:
            event.wait(max(seconds, 0.0))
        finally:
            with self._mutex:
                self._wakes.remove(event)
        return self._event.is_set()


NEVER = Cancel()  # for callers that do not cancel (tests of one operation, the CLI's one-offs)


class Clock(Protocol):
    """Time as the runner and the waits see it: injected, so the fake runs a 10-minute drain in microseconds."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float, cancel: Cancel) -> None:
        """Wait `seconds`, or less when `cancel` is cancelled: then raise Cancelled (or the guard's error)."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, cancel: Cancel) -> None:
        cancel.check()
        cancel.wait(seconds)
        cancel.check()


SYSTEM_CLOCK = SystemClock()


@dataclass(frozen=True)
class Change:
    """What a step did to one object: the state before and after (for the journal and for rollback)."""

    target: str  # "Node n1", "DeviceClass x"
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    dry_run: bool = False


class Ops(Protocol):
    """Live operations. Every one re-checks state first, so repeating one is harmless (resume), and
    `dry_run=True` sends writes as server-side dry runs (`dryRun=All`) and changes nothing."""

    def node_state(self, node: str, *, watched: bool = False) -> dict[str, Any]:
        """`watched`: the copy the executor's watches hold will do (a check before a wave; never a step's
        precondition, which reads the node itself). {"exists": bool, "uid": str, "unschedulable": bool, "labels": {...},
        "allocatable": {nvidia.com/*: int}, "ready": bool, "notReady": the Ready condition's status when one
        is posted and is not "True" (else None), "deleting": bool (a deletionTimestamp is set)}"""
        ...

    def node_states(self, *, watched: bool = False) -> dict[str, dict[str, Any]]:
        """Every Node of the cluster now: name -> its `node_state` (one list, or the watched copy: the pool's
        nodes the plan does not list, for the budget before a wave)."""
        ...

    def set_unschedulable(
        self, node: str, value: bool, *, dry_run: bool = False, current: bool | None = None
    ) -> Change:
        """`current`: the node's spec.unschedulable as the caller read it just before (the cordon's
        precondition read), not read again; None reads it."""
        ...

    def set_label(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        """value None removes the label."""
        ...

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
        """Evict the node's pods through policy/v1 Eviction (scope "gpu": pods that use devices; "all":
        every pod), skipping DaemonSet and mirror pods, retrying 429s with backoff, until none is left.
        Raises StepFailed naming the blocking PodDisruptionBudgets and pods after timeout_s, and at once,
        evicting nothing, when a running pod no controller owns is not in `reviewed` (uids the plan
        recorded: evicting it deletes it for good); `reviewed` None lets any go (kubectl drain --force).
        Likewise when a pod that uses devices is marked not to be interrupted (cluster/podmeta.py
        `do_not_interrupt_mark`) and its "namespace/name" is not in `marked_named` (`Plan.marked_pods_named`);
        the marked pods it evicts are each logged, and listed in the change's `before.marked`."""
        ...

    def unreviewed_pods(self, node: str, scope: str, reviewed: Collection[str]) -> list[str]:
        """From the watched copy (a check before a wave; a GET-free read): "namespace/name" of the pods on the
        node that a drain of `scope` would refuse to evict (no controller owns them and their uid is not in
        `reviewed`, as `drain` judges them). [] when the copy is not watched (no request per node)."""
        ...

    def stack_object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One object of the NVIDIA stack (`kind` as cluster/kinds.py keys it: apps/DaemonSet, ConfigMap,
        nvidia.com/ClusterPolicy, nvidia.com/NVIDIADriver); None when it does not exist (or its kind is not
        installed)."""
        ...

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
        """Until allocatable of `resources` is 0 and the driver's slices for the node hold `devices`."""
        ...

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
        """A pod requesting 1 of `resource`, pinned by node affinity (not nodeName), must be scheduled on
        the node with a DRA allocation (pod.status.extendedResourceClaimStatus) and its container, running
        `command` (default: the NVIDIA check), must succeed naming the allocated devices; then deleted. It
        runs in `namespace` (default: the ops' canary namespace), its image pulled with `pull_secrets`."""
        ...

    def create_device_class(self, manifest: dict[str, Any], *, dry_run: bool = False) -> Change: ...

    def delete_device_class(self, name: str, *, dry_run: bool = False) -> Change: ...

    def claims_using_device_class(self, name: str) -> list[str]:
        """The ResourceClaims (`namespace/name`, allocated ones marked ` (allocated)`) whose requests name
        this DeviceClass (`exactly` or a `firstAvailable` subrequest)."""
        ...

    def dra_driver_installed(self, driver: str = "gpu.nvidia.com") -> bool: ...

    def set_quota_hard(
        self,
        namespace: str,
        name: str,
        values: dict[str, str | None],
        *,
        expect: dict[str, str] | None = None,
        dry_run: bool = False,
    ) -> Change:
        """Set (or, for None, remove) keys of a ResourceQuota's spec.hard, leaving its other keys alone.
        Refuses (StepFailed) a quota that is gone, whose `expect`ed limits changed, or that a GitOps
        controller owns (it would revert it)."""
        ...

    def pending_gpu_pods(self, older_than_s: float, *, created_after: str | None = None) -> list[str]:
        """Pods that request GPUs (nvidia.com/* or claims) and stayed Pending longer than older_than_s, but for
        those created at or before `created_after` (a creationTimestamp: `pending_gpu_backlog`'s)."""
        ...

    def pending_gpu_backlog(self) -> tuple[int, str | None]:
        """The GPU pods Pending now, whatever their age, and the newest one's creationTimestamp (None: none)."""
        ...

    # -- replace-pool (plan/strategies.py)

    def set_annotation(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        """value None removes the annotation."""
        ...

    def pool_nodes(self, selector: dict[str, str], *, driver: str = "gpu.nvidia.com") -> list[dict[str, Any]]:
        """The nodes `selector` (label key -> value) selects: [{"name", "ready", "unschedulable", "devices"}],
        `devices` counted in the driver's ResourceSlices for the node."""
        ...

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
        """Until `nodes` nodes the selector selects are Ready, schedulable and each publishes at least
        `devices_per_node` devices of the driver (the new pool is up and serves DRA)."""
        ...
