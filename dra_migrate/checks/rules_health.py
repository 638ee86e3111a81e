"""Rules about the health of the GPUs a migration moves (docs/readiness.md "Unhealthy GPUs")."""

from __future__ import annotations

from collections.abc import Iterator

from dra_migrate.checks.context import CheckContext, switched_in_place
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.dra.capacity import unhealthy_gpus

WARNING = Severity.WARNING

_DRIVER_VIEW = (
    "the DRA driver publishes every GPU NVML enumerates, healthy or not (so wait-dra-ready still expects them all): "
    "it learns of a fault only from NVML events after it starts, and only under its NVMLDeviceHealthCheck feature "
    "gate (alpha, off by default), so a GPU broken before is published untainted and the scheduler hands it to "
    "pods, which the device plugin prevented; a GPU NVML cannot query any more "
    "(fallen off the bus) fails the driver's enumeration, so the node publishes nothing, wait-dra-ready times out "
    "and the node is rolled back to the device plugin"
)


@rule("unhealthy-gpus", WARNING, summary="a node still to migrate has GPUs its device plugin reports unhealthy")
def unhealthy(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning (one per node). When: a node the plan switches in place still runs the device plugin and its
    `status.allocatable` of an `nvidia.com/` resource is below `status.capacity`: GPUs the device plugin marked
    Unhealthy (an XID, a lost GPU), or, at allocatable 0, a device plugin that stopped within the kubelet's grace
    period. Capacity after migration leaves those GPUs out; `wait-dra-ready` still expects every GPU. Rests on:
    k8s-device-plugin v0.18.0 `internal/rm/health.go` `checkHealth` and `internal/plugin/server.go` `ListAndWatch`
    (Unhealthy, never recovered); kubernetes v1.37.2 `pkg/kubelet/cm/devicemanager/manager.go` `GetCapacity`
    (unhealthy devices in capacity, not allocatable); dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/nvlib.go`
    `GetPerGpuAllocatableDevices` (every GPU NVML enumerates; one it cannot query fails the enumeration),
    `driver.go` `deviceHealthEvents` and `device_health.go` `registerEventsForDevices`, `healthEventToTaint`
    (taints on NVML events after the plugin starts, under the `NVMLDeviceHealthCheck` gate, default off:
    `pkg/featuregates/featuregates.go`).
    """
    for n in sorted(ctx.inventory.nodes, key=lambda n: n.name):
        if not switched_in_place(ctx, n) or not n.device_plugin_enabled:
            continue
        broken = {r: unhealthy_gpus(n, r) for r in sorted(n.capacity) if r.startswith("nvidia.com/")}
        broken = {r: k for r, k in broken.items() if k}
        if not broken:
            continue
        counts = ", ".join(f"{n.capacity[r] - n.allocatable.get(r, 0)} of {n.capacity[r]} {r}" for r in broken)
        if not any(n.allocatable.get(r, 0) for r in n.capacity):
            yield Finding(
                "unhealthy-gpus",
                WARNING,
                f"node {n.name} has allocatable 0 of its GPUs ({counts} not allocatable): every GPU is unhealthy, "
                f"or its device plugin stopped (the kubelet keeps the capacity for its grace period); {_DRIVER_VIEW}. "
                "Capacity after migration counts none of its GPUs",
                "find out why (the device plugin pod's log, `nvidia-smi` and the kernel log for XIDs on the node); "
                "repair or reset the GPUs, or leave the node out of the migration (cordon it) until they are",
                (ObjectRef("Node", n.name),),
            )
            continue
        yield Finding(
            "unhealthy-gpus",
            WARNING,
            f"node {n.name}: its device plugin reports {counts} unhealthy (capacity above allocatable); "
            f"{_DRIVER_VIEW}. Capacity after migration leaves them out",
            "repair or reset the unhealthy GPUs before the node's wave (`nvidia-smi -r`, a reboot); a GPU fallen off "
            "the bus needs the node repaired first. Enabling the DRA driver's NVMLDeviceHealthCheck gate taints GPUs "
            "that fail after it starts, not these",
            (ObjectRef("Node", n.name),),
        )
