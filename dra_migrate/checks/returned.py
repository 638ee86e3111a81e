"""Migrated nodes on which the device plugin is back beside the DRA kubelet plugin: the `dual-advertising` rule's
blocker for after a migration (rules.py), and what to do about it.

A node reads as migrated here when the DRA kubelet plugin runs there because of a label someone set (the plan's
`enable-dra-plugin` step: `nvidia.com/dra-kubelet-plugin=true`, or the label the DRA DaemonSet selects on) and
publishes slices. Before a migration no such label is set (the DRA chart's default placement selects NFD's and
GFD's own labels, which `switch_keys` never counts), and during one the plan switches the device plugin off
before it sets it (plan/steps.py), as a rollback removes it first: a device plugin selected again beside it is
never a step of ours.

How it comes back (NVIDIA/gpu-operator `controllers/state_manager.go`, v1.11.1 and main alike): under a
ClusterPolicy, `labelGPUNodes` deletes every `nvidia.com/gpu.deploy.*` label of a node whose NFD GPU labels
(`gpuNodeLabels`, e.g. `feature.node.kubernetes.io/pci-10de.present`) are gone (`removeAllGPUStateLabels`, also
under `nvidia.com/gpu.deploy.operands=false`), and `addGPUStateLabels` sets each missing one to `true` ("If a
required state label already exists on the node, honor the current value"): an NFD label flap, a node recreated
from a template without `nvidia.com/gpu.deploy.device-plugin=false`, or operands switched off and on by that label
turn the device plugin back on. A re-run of the k8s-device-plugin chart restores its DaemonSet's affinity.

Why it blocks: the DRA plugin publishes every GPU it finds in a pool named after the node, whatever else serves
them (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/driver.go`, `PublishResources`), and the
device plugin advertises the same GPUs in `status.allocatable`. KEP-5004 requires that "one node in a cluster
cannot have both extended resource backed by DRA, and same named extended resource backed by device plugin at
the same time" (kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/README.md`, Proposal):
the scheduler then serves `nvidia.com/gpu` requests from the device plugin's count (kubernetes v1.37.2
`pkg/scheduler/framework/plugins/noderesources/fit.go`) while ResourceClaims keep taking the same GPUs from the
slices, and neither allocator sees the other's pods.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.inventory.fleet import DRA_PLUGIN_LABELS, GpuNode
from dra_migrate.inventory.operator import (
    OPERATOR_DEVICE_PLUGIN_OFF,
    dra_plugin_daemonset_objects,
    switch_keys,
)

RULE = "dual-advertising"


@dataclass(frozen=True)
class Returned:
    node: GpuNode
    switch: str  # "key=value": the DRA switch label the node carries (why it reads as migrated)
    advertising: bool  # the device plugin advertises GPUs there now; else a DaemonSet of it selects the node again


def _switch_keys_by_daemonset(ctx: CheckContext) -> dict[str, list[str]]:
    def compute() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for ds in dra_plugin_daemonset_objects(ctx.state):
            meta = ds.get("metadata") or {}
            out[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = switch_keys(ds)
        return out

    return ctx.state.memo("returned.dra-switch-keys", compute)


def dra_switch(ctx: CheckContext, n: GpuNode) -> str | None:
    """The label that switched the DRA kubelet plugin on for this node, as `key=value`, or None."""
    for key in DRA_PLUGIN_LABELS:
        if n.labels.get(key) == "true":
            return f"{key}=true"
    daemonset = n.dra_placement.daemonset if n.dra_placement is not None else None
    for key in _switch_keys_by_daemonset(ctx).get(daemonset or "", []):
        if key in n.labels:
            return f"{key}={n.labels[key]}"
    return None


def returned_nodes(ctx: CheckContext) -> list[Returned]:
    """Migrated nodes (DRA plugin on by a label, slices published) whose device plugin advertises GPUs again, or
    that a device-plugin DaemonSet selects again (its pod is coming: the snapshot or the read came first)."""
    out: list[Returned] = []
    for n in ctx.inventory.nodes:
        if not (n.dra_plugin_enabled and n.dra_devices.get(ctx.dra_driver) and n.device_plugin_enabled):
            continue
        switch = dra_switch(ctx, n)
        if switch is None:
            continue
        advertising = any(v > 0 for v in n.allocatable.values())
        # "assumed" (no device-plugin DaemonSet read): only GPUs advertised show that a device plugin runs.
        selected = n.dp_placement is not None and n.dp_placement.mode in ("label", "unknown")
        if advertising or selected:
            out.append(Returned(n, switch, advertising))
    return out


def _remediation(ctx: CheckContext, group: list[Returned]) -> str:
    stops: set[str] = set()
    stuck: set[str] = set()
    for p in (r.node.dp_placement for r in group):
        if p is not None and p.mode == "unknown":
            stuck.add(str(p.daemonset))
        elif p is not None and p.mode == "label" and p.label:
            stops.add(f"{p.label}={p.value}")
        else:  # no device-plugin DaemonSet read: the GPU Operator's switch, the plan's default
            stops.add("=".join(OPERATOR_DEVICE_PLUGIN_OFF))
    parts = []
    if stops:
        parts.append(
            f"label these nodes {' or '.join(sorted(stops))} again (kubectl label node NODE {min(stops)} "
            "--overwrite): the device plugin leaves and its allocatable drops to 0, the DRA plugin keeps serving"
        )
    if stuck:
        parts.append(
            f"no node label stops DaemonSet(s) {', '.join(sorted(stuck))} there (re-installed without its "
            "affinity, e.g. a re-run of its Helm chart): give it {key: nvidia.com/gpu.deploy.device-plugin, "
            'operator: NotIn, values: ["false"]} again (device-plugin-placement-unknown)'
        )
    policies = ctx.state.of("nvidia.com/ClusterPolicy")
    if policies:
        enabled = ((policies[0].get("spec") or {}).get("devicePlugin") or {}).get("enabled")
        if enabled is False:
            parts.append(
                "ClusterPolicy spec.devicePlugin.enabled is false, so this device plugin is not the GPU Operator's: "
                "find what installed it"
            )
        else:
            parts.append(
                "the GPU Operator writes nvidia.com/gpu.deploy.device-plugin=true wherever the label is missing (NFD's "
                "GPU labels lost and back, a recreated node, nvidia.com/gpu.deploy.operands toggled): put "
                "nvidia.com/gpu.deploy.device-plugin=false in the node group's template labels, and once every GPU "
                "pool is migrated set ClusterPolicy spec.devicePlugin.enabled=false, which no node label brings back"
            )
    parts.append("until then create no GPU ResourceClaims on these nodes; check again after")
    return "; ".join(parts)


def returned_findings(ctx: CheckContext, returned: list[Returned]) -> Iterator[Finding]:
    """One blocker for the nodes where both plugins publish now, one for those whose device plugin is coming back."""
    for advertising in (True, False):
        group = [r for r in returned if r.advertising is advertising]
        if not group:
            continue
        switches = ", ".join(sorted({r.switch for r in group}))
        if advertising:
            what = (
                "run the device plugin again beside the DRA kubelet plugin: both publish the same GPUs (extended "
                f"resource allocatable > 0 and {ctx.dra_driver} ResourceSlices), so a pod requesting nvidia.com/gpu "
                "and a ResourceClaim can be given the same GPU"
            )
        else:
            what = (
                "are selected by the device plugin's DaemonSet again: it is coming back beside the DRA kubelet "
                f"plugin, which publishes {ctx.dra_driver} ResourceSlices of the same GPUs (its pod is not "
                "advertising yet); once it runs, a pod requesting nvidia.com/gpu and a ResourceClaim can be given "
                "the same GPU"
            )
        yield Finding(
            RULE,
            Severity.BLOCKER,
            f"{len(group)} migrated node(s) (DRA plugin switched on by {switches}) {what}",
            _remediation(ctx, group),
            tuple(ObjectRef("Node", r.node.name) for r in sorted(group, key=lambda r: r.node.name)),
        )
