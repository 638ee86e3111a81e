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
from typing import Any

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
    """A label value one of them paused."""
    # Every label of every node passes here: the common prefix rules out nearly all of them in one test.
    return isinstance(value, str) and "paused-for-" in value and any(p in value for p in PAUSED_VALUES)


def unpaused_node(node: dict[str, Any]) -> dict[str, Any]:
    """The node with the labels the GPU Operator's driver manager or MIG Manager paused as they will write them
    back (above): a device plugin paused for a driver reload is not off, it returns. Such a node is left out of the
    plan (`gpu-operator-node-busy`); read as paused it counted as migrated wherever the DRA plugin already ran, and
    no step and no rule concerned it."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels")
    if not isinstance(labels, dict) or not any(is_paused(v) for v in labels.values()):
        return node
    restored = {k: unpaused(v) if is_paused(v) else v for k, v in labels.items()}
    return {**node, "metadata": {**meta, "labels": restored}}


# The nvidia.com/gpu.deploy.* keys the operator's node labelling deletes from every node under a ClusterPolicy: those
# of the workload configurations a node does not run (vm-passthrough, vm-vgpu; `removeGPUStateLabels` in every
# version) and, from v26.7.0, those of the GPUCluster (DRA) stack (gpu-operator v26.7.0 controllers/state_manager.go
# `gpuStateLabels`, `gpuClusterStateLabels`, `removeGPUStateLabels`: "keys not in the effective set are deleted,
# which also sweeps DRA leftovers off device-plugin nodes"; it waits only while pods hold gpu.nvidia.com claims
# there: controllers/nodelabeling_controller.go `draPluginRemovalDeferred`). Set to start a DRA kubelet plugin,
# such a label is gone at a later reconcile, and the plugin with it: no switch where a ClusterPolicy exists.
CLUSTER_POLICY_SWEPT = frozenset(
    "nvidia.com/gpu.deploy." + k
    for k in (
        "dra-driver", "dra-validator", "dcgm-dra", "dcgm-exporter-dra",
        "sandbox-device-plugin", "kata-sandbox-device-plugin", "sandbox-validator", "vfio-manager", "kata-manager",
        "cc-manager", "vgpu-manager", "vgpu-device-manager",
    )
)  # fmt: skip


def swept_note(keys: set[str]) -> str:
    """What a placement's `why` adds where a DaemonSet selects on keys the ClusterPolicy deletes."""
    if not keys:
        return ""
    return (
        f"; the GPU Operator's ClusterPolicy removes {', '.join(sorted(keys))} from every node (gpu-operator "
        "v26.7.0 controllers/state_manager.go removeGPUStateLabels)"
    )
