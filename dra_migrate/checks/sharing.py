"""What a time-sliced or MPS-shared pool needs under DRA, for `shared-gpu-capacity-loss` to say it.

The device plugin shares a GPU by advertising it N times; the NVIDIA DRA driver has no replicas: pods share a
device only by referencing one ResourceClaim, with no cap on how many do. What the claim's opaque config can set
(dra-driver-nvidia-gpu v0.4.1 api/nvidia.com/resource/v1beta1, apiVersion resource.nvidia.com/v1beta1, driver
gpu.nvidia.com):
  * `GpuConfig` (full GPUs) / `MigDeviceConfig` (MIG devices) `sharing.strategy` TimeSlicing or MPS
    (sharing.go); `timeSlicingConfig.interval` Default|Short|Medium|Long, full GPUs only (validate.go; MIG
    devices take no interval: cmd/gpu-kubelet-plugin/device_state.go applySharingConfig);
    `mpsConfig.defaultActiveThreadPercentage` 0..100, `defaultPinnedDeviceMemoryLimit` (a quantity, at least
    1Mi), `defaultPerDevicePinnedMemoryLimit` (device index or UUID -> quantity).
  * TimeSlicing is refused unless the kubelet plugin runs with the TimeSlicingSettings feature gate, MPS unless
    with MPSSupport; both default to false in v0.4.1 (pkg/featuregates/featuregates.go), and MPSSupport is
    refused together with DynamicMIG (featuregates.go ValidateFeatureGates, device_state.go).
  * The driver's MPS daemon sets no thread or memory limit the config does not give (cmd/gpu-kubelet-plugin
    sharing.go), where the device plugin's gave each of N replicas 100/N % of the threads and 1/N of each GPU's
    memory (k8s-device-plugin v0.18.0 cmd/mps-control-daemon/mps/daemon.go activeThreadPercentage,
    perDevicePinnedDeviceMemoryLimits).
"""

from __future__ import annotations

from dra_migrate.checks.context import CheckContext
from dra_migrate.dra.capacity import PoolCapacity
from dra_migrate.inventory.draversion import daemonset_release
from dra_migrate.inventory.operator import dra_feature_gate_on, dra_plugin_daemonset_objects, sharing_configs

TIME_SLICING_GATE = "TimeSlicingSettings"
MPS_GATE = "MPSSupport"


def _label_prefix(resource: str) -> str:
    return resource.removesuffix(".shared") if resource.startswith("nvidia.com/mig-") else "nvidia.com/gpu"


def pool_strategies(ctx: CheckContext, cap: PoolCapacity) -> set[str]:
    """ "mps" / "time-slicing" for the pool's nodes sharing `cap.resource`: GFD's `<name>.sharing-strategy` label,
    else the device-plugin config key the node runs."""
    members = ctx.pool_members(cap.pool)
    key = _label_prefix(cap.resource) + ".sharing-strategy"
    by_config: dict[str, str] = {}
    if any(key not in n.labels for n in members):
        for sc in sharing_configs(ctx.state, [(n.name, n.labels) for n in members]):
            if any(r.advertised_as == cap.resource and r.replicas > 1 for r in sc.resources):
                by_config |= dict.fromkeys(sc.nodes, "mps" if sc.strategy == "mps" else "time-slicing")
    out = {n.labels.get(key) or by_config.get(n.name, "") for n in members}
    return {s for s in out if s in ("mps", "time-slicing")}


def _gate_state(ctx: CheckContext, gate: str) -> str:
    """What the installed kubelet plugin needs for `gate`'s sharing. NVIDIA's v25.3.x has no feature gates and
    applies sharing configs as they are (NVIDIA/k8s-dra-driver-gpu `pkg/featuregates` first appears at v25.8.0);
    v25.8.0 on and dra-driver-nvidia-gpu v0.x gate them, off by default (`pkg/featuregates/featuregates.go`)."""
    daemonsets = dra_plugin_daemonset_objects(ctx.state)
    if not daemonsets:
        return f"{gate}=true, off by default in dra-driver-nvidia-gpu v0.4.1"
    releases = [daemonset_release(d) for d in daemonsets]
    if all(r is not None and not r.feature_gates for r in releases):
        text = ", ".join(sorted({r.text for r in releases if r is not None}))
        return f"nothing more: {text} applies it without a feature gate (v25.8.0 on: {gate}=true, off by default)"
    off = [
        (str((d.get("metadata") or {}).get("name")), r)
        for d, r in zip(daemonsets, releases, strict=True)
        if not dra_feature_gate_on(d, gate)
    ]
    if off:
        default = ", ".join(sorted({r.text if r is not None else "v0.4.1" for _, r in off}))
        return f"{gate}=true, off by default in {default} and not set on DaemonSet(s) {', '.join(n for n, _ in off)}"
    return f"{gate}=true, set on the kubelet plugin"


def _memory_mib(ctx: CheckContext, cap: PoolCapacity) -> int | None:
    """The pool's one GPU (or MIG profile) memory in MiB from GFD's `<name>.memory`, None if unknown or mixed."""
    key = _label_prefix(cap.resource) + ".memory"
    values = {n.labels.get(key) for n in ctx.pool_members(cap.pool)}
    value = values.pop() if len(values) == 1 else None
    return int(value) if value and value.isdecimal() and int(value) > 0 else None


def sharing_advice(ctx: CheckContext, cap: PoolCapacity) -> str:
    """What keeping these consumers on shared GPUs takes under DRA, and what it cannot carry over."""
    kind = "MigDeviceConfig" if cap.resource.startswith("nvidia.com/mig-") else "GpuConfig"
    strategies = pool_strategies(ctx, cap)
    text = (
        "Under DRA pods share a GPU only by referencing one ResourceClaim (dra-migrate convert --shared-claim "
        "for the pods of one workload), which is allocated on one node: every pod referencing it runs there, where "
        f"replicas spread over the pool, and nothing caps their number as the {cap.replicas} replicas did"
    )
    if "mps" in strategies:
        threads = 100 // cap.replicas
        memory = _memory_mib(ctx, cap)
        limit = f"{memory // cap.replicas}Mi" if memory else f"<GPU memory / {cap.replicas}>"
        text += (
            f"; for MPS, give the claim an opaque config (driver gpu.nvidia.com, apiVersion "
            f"resource.nvidia.com/v1beta1, kind {kind}, sharing: {{strategy: MPS, mpsConfig: "
            f"{{defaultActiveThreadPercentage: {threads}, defaultPinnedDeviceMemoryLimit: {limit}}}}}; `dra-migrate "
            f"convert --shared-claim --sharing mps --mps-thread-percentage {threads}"
            + (f" --mps-memory-limit {limit}" if memory else "")
            + "` writes it): the device "
            f"plugin's MPS gave each of its {cap.replicas} replicas {threads}% of the threads and 1/{cap.replicas} "
            "of the memory, the DRA driver sets no limit the config does not give; MPS needs "
            f"{_gate_state(ctx, MPS_GATE)} (not with DynamicMIG)"
        )
    if "time-slicing" in strategies or not strategies:
        text += (
            "; time-slicing needs no config (a GPU's processes are time-sliced by default); a "
            f"{kind} sharing.strategy TimeSlicing"
            + (" with timeSlicingConfig.interval Default|Short|Medium|Long" if kind == "GpuConfig" else "")
            + f" is refused unless the DRA kubelet plugin runs with {_gate_state(ctx, TIME_SLICING_GATE)}"
        )
    return text


SHARED_NAME_REMEDIATION = (
    "dra-migrate convert refuses shared names (a DRA request takes whole devices): change these workloads to "
    "request whole GPUs (nvidia.com/gpu or the MIG profile) and convert them, or make them share one ResourceClaim "
    "by hand (it is allocated on one node: every pod referencing it runs there), or keep their pool on the device "
    "plugin"
)
