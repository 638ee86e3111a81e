"""What the GPU Operator is in the middle of doing on a node, read from the node's labels alone.

Three of the operator's components take a node's operands down and bring them back by rewriting its
`nvidia.com/gpu.deploy.*` labels, from values they read when they began:

* the driver upgrade controller (k8s-operator-libs `pkg/upgrade`, label `nvidia.com/gpu-driver-upgrade-state`,
  states in `consts.go`) cordons the node, deletes its GPU pods, restarts the driver pod, waits for the
  operator-validator and uncordons the node at `uncordon-required` (unless it was cordoned before the upgrade
  began: `common_manager.go` `updateNodeToUncordonOrDoneState`);
* the driver pod's k8s-driver-manager (NVIDIA/k8s-driver-manager `cmd/driver-manager/main.go`) reads the deploy
  labels (`fetchCurrentLabels`), sets each "true" to `paused-for-driver-upgrade` (`maybeSetPaused`), reloads the
  driver, then writes back what it read (`rescheduleGPUOperatorComponents`, `maybeSetTrue`);
* the MIG Manager (NVIDIA/mig-parted `pkg/mig/reconfigure/reconfigure.go`) sets `nvidia.com/mig.config.state`
  to `pending` (`rebooting` across a reboot), pauses the device plugin's label as `paused-for-mig-change`, and at
  the end writes back "true" if it had read anything but "false" (`restartKubernetesGPUClients`).

So a node the plan switches while one of them is at work gets its `nvidia.com/gpu.deploy.device-plugin=false`
overwritten with the "true" read before (the device plugin returns beside the DRA plugin), is uncordoned in the
middle of its migration, or was read by `plan` with a paused label (its device plugin looked off, and no step
switches it). Such a node is left out of a plan and refused by `apply` until the operator is done.
"""

from __future__ import annotations

from collections.abc import Mapping

UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
# The upgrade states of a node no upgrade is working on: unset (never upgraded) and `upgrade-done`. Every other
# state (`upgrade-required` ... `uncordon-required`, and `upgrade-failed`, from which the controller still moves
# the node to `uncordon-required`: `ProcessUpgradeFailedNodes`) is an upgrade under way.
UPGRADE_IDLE = frozenset({"", "upgrade-done"})
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
MIG_BUSY = frozenset({"pending", "rebooting"})
# The values the driver manager and the MIG Manager give a paused label (`pausedStr`; `maybeSetPaused`).
PAUSED_VALUES = ("paused-for-driver-upgrade", "paused-for-mig-change")
SKIP_UPGRADE_LABEL = "nvidia.com/gpu-driver-upgrade.skip"  # k8s-operator-libs GetUpgradeSkipNodeLabelKey


def operator_busy(labels: Mapping[str, str]) -> str | None:
    """Why the GPU Operator is working on the node now (a driver upgrade, a driver reload, a MIG change), or None."""
    upgrade = str(labels.get(UPGRADE_STATE_LABEL, ""))
    if upgrade not in UPGRADE_IDLE:
        return f"a GPU driver upgrade is under way ({UPGRADE_STATE_LABEL}={upgrade})"
    mig = str(labels.get(MIG_STATE_LABEL, ""))
    if mig in MIG_BUSY:
        return f"the MIG Manager is applying a MIG configuration ({MIG_STATE_LABEL}={mig})"
    paused = sorted(f"{k}={v}" for k, v in labels.items() if is_paused(v))
    if paused:
        return f"the GPU Operator has paused this node's operands ({', '.join(paused)})"
    return None


def unpaused(value: str) -> str:
    """A label's value as the driver manager or the MIG Manager writes it back at the end of its pause
    (`maybeSetTrue`: a bare paused value was "true", `<v>_paused-for-...` was `<v>`)."""
    if value in PAUSED_VALUES:
        return "true"
    for p in PAUSED_VALUES:
        value = value.replace("_" + p, "").replace(p, "")
    return value


def is_paused(value: object) -> bool:
    return isinstance(value, str) and any(p in value for p in PAUSED_VALUES)
