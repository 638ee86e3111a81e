"""The interfaces between the runner and what it drives: live operations, the journal, the lock.

Kept in one place so each piece can be built and tested on its own (ops and lock against the real
control plane, the runner against them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from migrate.errors import ClusterError


class StepFailed(ClusterError):
    """A step could not reach its goal within its timeout (or its precondition does not hold).
    `details` says what blocked it, e.g. {"budgets": ["ns/pdb"], "pods": ["ns/pod"]}."""

    def __init__(self, message: str, hint: str = "", details: dict[str, Any] | None = None) -> None:
        super().__init__(message, hint)
        self.details = details or {}


class LockHeld(ClusterError):
    """Another apply holds the cluster lock."""


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

    def node_state(self, node: str) -> dict[str, Any]:
        """{"exists": bool, "uid": str, "unschedulable": bool, "labels": {...},
        "allocatable": {nvidia.com/*: int}, "ready": bool}"""
        ...

    def set_unschedulable(self, node: str, value: bool, *, dry_run: bool = False) -> Change: ...

    def set_label(self, node: str, key: str, value: str | None, *, dry_run: bool = False) -> Change:
        """value None removes the label."""
        ...

    def drain(self, node: str, scope: str, timeout_s: float, *, dry_run: bool = False) -> Change:
        """Evict the node's pods through policy/v1 Eviction (scope "gpu": pods that use devices; "all":
        every pod), skipping DaemonSet and mirror pods, retrying 429s with backoff, until none is left.
        Raises StepFailed naming the blocking PodDisruptionBudgets and pods after timeout_s."""
        ...

    def wait_dra_ready(
        self, node: str, resources: list[str], devices: int, timeout_s: float, *, driver: str = "gpu.nvidia.com"
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
        command: str | None = None,
    ) -> Change:
        """A pod requesting 1 of `resource`, pinned by node affinity (not nodeName), must be scheduled on
        the node with a DRA allocation (pod.status.extendedResourceClaimStatus) and its container, running
        `command` (default: the NVIDIA check), must succeed naming the allocated devices; then deleted."""
        ...

    def create_device_class(self, manifest: dict[str, Any], *, dry_run: bool = False) -> Change: ...

    def delete_device_class(self, name: str, *, dry_run: bool = False) -> Change: ...

    def dra_driver_installed(self, driver: str = "gpu.nvidia.com") -> bool: ...

    def pending_gpu_pods(self, older_than_s: float) -> list[str]:
        """Pods that request GPUs (nvidia.com/* or claims) and stayed Pending longer than older_than_s."""
        ...
