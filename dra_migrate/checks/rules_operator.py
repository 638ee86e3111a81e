"""The readiness rules about the NVIDIA GPU Operator's ClusterPolicy (and GPUCluster): what the operator
keeps doing, or stops, when a pool moves from the device plugin to the DRA driver beside it. The other
rules are in rules.py and the rules_*.py modules; each rule's docstring feeds docs/rules.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext, still_to_migrate, switched_in_place
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.dra.capacity import ClassSelectors, compile_classes, dra_served, unmatched_by_dra
from dra_migrate.dra.layout import unpredictable_layout
from dra_migrate.dra.products import LABEL_PRODUCT, single_profile
from dra_migrate.inventory.migparted import mig_parted_configs
from dra_migrate.inventory.operator import cluster_policies, dra_plugin_daemonset_objects, switch_keys
from dra_migrate.inventory.operator_activity import SKIP_UPGRADE_LABEL, operator_busy

BLOCKER, WARNING = Severity.BLOCKER, Severity.WARNING


def _policy(cp: dict[str, Any]) -> ObjectRef:
    return ObjectRef.of("ClusterPolicy", cp)


# The DRA driver hands devices to containers through CDI (dra-driver-nvidia-gpu prerequisites.md).
@rule("cdi-disabled", BLOCKER, summary="ClusterPolicy spec.cdi.enabled is false")
def cdi_disabled(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: ClusterPolicy `spec.cdi.enabled: false`. Rests on: the DRA driver injects devices
    through CDI (dra-driver-nvidia-gpu `prerequisites.md`).
    """
    for cp in ctx.state.of("nvidia.com/ClusterPolicy"):
        if ((cp.get("spec") or {}).get("cdi") or {}).get("enabled") is False:
            yield Finding(
                "cdi-disabled",
                BLOCKER,
                "CDI is disabled in the ClusterPolicy: the DRA driver injects devices via CDI",
                "set spec.cdi.enabled: true in the ClusterPolicy (the chart's default)",
                (_policy(cp),),
            )


def _device_plugin_enabled_in(cp: dict[str, Any]) -> bool:
    return ((cp.get("spec") or {}).get("devicePlugin") or {}).get("enabled") is not False


# The GPU Operator keeps the operator-validator's `plugin-validation` init container while
# devicePlugin.enabled is true cluster-wide (gpu-operator controllers/object_controls.go); it needs node
# capacity nvidia.com/gpu or nvidia.com/mig-* >= 1 and fails after 30 tries 5 s apart (cmd/nvidia-validator/main.go
# validateGPUResource, through v26.7.0). Once a device plugin leaves, the kubelet keeps capacity for 5 minutes,
# then sets it to 0 (kubernetes pkg/kubelet/cm/devicemanager endpoint.go endpointStopGracePeriod). What restarts
# the validator, and why nvidia.com/gpu.deploy.operator-validator=false is no way out: checks/explain.py.
@rule(
    "operator-validator-device-plugin",
    WARNING,
    summary="the GPU Operator validator's plugin validation will fail on migrated nodes",
)
def operator_validator(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a ClusterPolicy keeps `devicePlugin.enabled` (so the validator keeps its plugin
    validation) and GPU nodes are still to migrate. Rests on: the validator's `plugin-validation` needs node
    capacity `nvidia.com/gpu*`/`nvidia.com/mig-*` ≥ 1 (gpu-operator `cmd/nvidia-validator/main.go`, kept while
    devicePlugin is enabled: `controllers/object_controls.go`); capacity drops to 0 five minutes after the device
    plugin leaves (kubernetes `pkg/kubelet/cm/devicemanager/endpoint.go`), so the validator crash-loops whenever
    it restarts on a migrated node (a reboot, a driver upgrade or reload, a MIG change), and a driver upgrade there
    waits 600 s in `validation-required` and ends `upgrade-failed` before its uncordon (k8s-operator-libs
    `pkg/upgrade/validation_manager.go`). Remediation: `devicePlugin.enabled=false` after the last pool; not
    `nvidia.com/gpu.deploy.operator-validator=false` (no validator pod: the upgrade waits for ever, and after a
    reboot GFD, dcgm-exporter and the MIG Manager wait for the `toolkit-ready` file the validator writes).
    """
    policies = [cp for cp in cluster_policies(ctx.state)[:1] if _device_plugin_enabled_in(cp)]
    nodes = sorted(n.name for n in ctx.inventory.nodes if still_to_migrate(n) and n.device_plugin_enabled)
    if policies and nodes:
        yield Finding(
            "operator-validator-device-plugin",
            WARNING,
            f"ClusterPolicy {_policy(policies[0]).name} keeps the operator-validator's plugin validation "
            "(devicePlugin.enabled is true), which needs nvidia.com/gpu capacity on its node: on a migrated node "
            "capacity drops to 0 five minutes after the device plugin leaves, and whenever that node's "
            "nvidia-operator-validator pod restarts (a reboot, a driver upgrade or reload, a MIG change) it "
            "crash-loops in plugin-validation; a driver upgrade there then waits 10 minutes in validation-required "
            "and ends upgrade-failed before the node is uncordoned",
            "after the last pool is migrated set ClusterPolicy spec.devicePlugin.enabled=false (the operator then "
            "drops plugin-validation). Do not label migrated nodes nvidia.com/gpu.deploy.operator-validator=false: "
            "with no validator pod a driver upgrade waits for ever with the node cordoned, and after a reboot GFD, "
            "dcgm-exporter and the MIG Manager wait for the toolkit-ready file the validator writes",
            (_policy(policies[0]), *(ObjectRef("Node", n) for n in nodes)),
        )


EVICTION_ENV = "NODE_LABEL_FOR_GPU_POD_EVICTION"
DRA_LABEL = "nvidia.com/dra-kubelet-plugin"  # the GPU Operator docs' recipe label (dra-intro-install.rst)


def _driver_manager_env(cp: dict[str, Any]) -> dict[str, str]:
    env = (((cp.get("spec") or {}).get("driver") or {}).get("manager") or {}).get("env") or []
    return {str(e.get("name")): str(e.get("value", "")) for e in env if isinstance(e, dict)}


# "the NVIDIA Driver Manager is not aware of the DRA driver kubelet plugin": the GPU Operator's DRA
# recipe sets driver.manager.env NODE_LABEL_FOR_GPU_POD_EVICTION to the label the DRA kubelet plugin
# DaemonSet selects on, so a driver upgrade switches the plugin off before it unloads the driver
# (NVIDIA cloud-native-docs gpu-operator/dra-intro-install.rst @ 66160ebc).
@rule(
    "driver-manager-eviction-label",
    WARNING,
    summary="the GPU Operator's driver manager does not know how to stop the DRA kubelet plugin",
)
def driver_manager_label(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: an operator-managed driver (ClusterPolicy `driver.enabled` not false) whose
    `driver.manager.env` `NODE_LABEL_FOR_GPU_POD_EVICTION` is not a label the DRA kubelet-plugin DaemonSet selects
    on (or the DaemonSet selects on no settable label at all: the chart default). Rests on: "the NVIDIA Driver
    Manager is not aware of the DRA driver kubelet plugin": the GPU Operator's DRA recipe sets that variable to the
    plugin's label (NVIDIA cloud-native-docs `gpu-operator/dra-intro-install.rst` @ 66160ebc).
    """
    policies = cluster_policies(ctx.state)[:1]
    if not policies or ((policies[0].get("spec") or {}).get("driver") or {}).get("enabled") is False:
        return
    cp = policies[0]
    daemonsets = dra_plugin_daemonset_objects(ctx.state)
    wanted = sorted({k for ds in daemonsets for k in switch_keys(ds)}) if daemonsets else [DRA_LABEL]
    value = _driver_manager_env(cp).get(EVICTION_ENV)
    if wanted and value in wanted:
        return
    if wanted:
        problem = f"{EVICTION_ENV} is {value!r}" if value else f"{EVICTION_ENV} is not set"
        message = (
            f"ClusterPolicy {_policy(cp).name}: {problem}, but the DRA kubelet plugin is switched by the "
            f"label {' or '.join(wanted)}: on a driver upgrade the driver manager unloads the driver while the "
            "DRA plugin still holds it"
        )
        fix = f"set spec.driver.manager.env {EVICTION_ENV}={wanted[0]} in the ClusterPolicy"
    else:
        message = (
            f"ClusterPolicy {_policy(cp).name}: the DRA kubelet plugin runs by node affinity (no label "
            f"switches it), so the driver manager ({EVICTION_ENV}={value or 'unset'}) cannot stop it before a "
            "driver upgrade unloads the driver"
        )
        fix = (
            "install the DRA chart with kubeletPlugin.nodeSelector nvidia.com/dra-kubelet-plugin=true and set "
            f"spec.driver.manager.env {EVICTION_ENV}=nvidia.com/dra-kubelet-plugin, or upgrade drivers by "
            "draining nodes first"
        )
    yield Finding("driver-manager-eviction-label", WARNING, message, fix, (_policy(cp),))


# "both ClusterPolicy and GPUCluster CRs exist; only one may be present at a time" (NVIDIA/gpu-operator
# controllers/nodelabeling_controller.go).
@rule("clusterpolicy-gpucluster-conflict", BLOCKER, summary="both a ClusterPolicy and a GPUCluster exist")
def cp_gc_conflict(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: both a ClusterPolicy and a GPUCluster exist. Rests on: "only one may be present at a
    time" (gpu-operator `controllers/nodelabeling_controller.go`).
    """
    cps, gcs = ctx.state.of("nvidia.com/ClusterPolicy"), ctx.state.of("nvidia.com/GPUCluster")
    if cps and gcs:
        yield Finding(
            "clusterpolicy-gpucluster-conflict",
            BLOCKER,
            "both a ClusterPolicy and a GPUCluster exist: the GPU Operator reconciles neither",
            "delete one; for a staged migration keep the ClusterPolicy and install the standalone DRA driver",
            tuple([_policy(o) for o in cps] + [ObjectRef.of("GPUCluster", o) for o in gcs]),
        )


# "An in-place migration from a standalone DRA driver Helm release or from ClusterPolicy to GPUCluster is
# not supported" (NVIDIA cloud-native-docs gpu-operator/dra-intro-install.rst).
@rule("operator-no-in-place-migration", WARNING, summary="a ClusterPolicy-managed cluster cannot move in place")
def operator_in_place(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a ClusterPolicy manages the cluster. Rests on: "an in-place migration … from
    ClusterPolicy to GPUCluster is not supported" (gpu-operator `dra-intro-install.rst`).
    """
    cps = ctx.state.of("nvidia.com/ClusterPolicy")
    if cps:
        yield Finding(
            "operator-no-in-place-migration",
            WARNING,
            "the GPU Operator manages this cluster through a ClusterPolicy: NVIDIA supports no in-place move to the "
            "GPUCluster DRA workflow",
            "migrate node pool by node pool with the standalone DRA driver beside the ClusterPolicy "
            "(what dra-migrate plan produces)",
            tuple(_policy(o) for o in cps),
        )


# The driver upgrade controller, the driver manager and the MIG Manager take a node's operands down and write back
# the deploy labels they read when they began (sources: inventory/operator_activity.py).
@rule(
    "gpu-operator-node-busy",
    BLOCKER,
    summary="the GPU Operator is upgrading the driver, reloading it or changing MIG on a node still to migrate",
)
def operator_node_busy(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped: the plan leaves the nodes out, `apply` refuses them at the cordon and at the
    device-plugin switch). When: a node still to migrate has `nvidia.com/gpu-driver-upgrade-state` other than unset
    or `upgrade-done`, `nvidia.com/mig.config.state` `pending`/`rebooting`, or a label paused
    (`paused-for-driver-upgrade`, `paused-for-mig-change`). Rests on: the driver manager and the MIG Manager write
    back the deploy labels they read before the switch, so the device plugin returns beside the DRA plugin
    (NVIDIA/k8s-driver-manager `cmd/driver-manager/main.go` `rescheduleGPUOperatorComponents`, NVIDIA/mig-parted
    `pkg/mig/reconfigure/reconfigure.go` `restartKubernetesGPUClients`); the upgrade controller uncordons the node
    at `uncordon-required` (k8s-operator-libs `pkg/upgrade/common_manager.go`); a paused label reads as "device
    plugin off", so the plan would switch nothing there.
    """
    by_why: dict[str, list[str]] = {}
    for n in ctx.inventory.nodes:
        why = operator_busy(n.labels)
        if why is not None and switched_in_place(ctx, n):
            by_why.setdefault(why.split(" (")[0], []).append(n.name)
    for why, nodes in sorted(by_why.items()):
        yield Finding(
            "gpu-operator-node-busy",
            BLOCKER,
            f"{len(nodes)} GPU node(s): {why}. The operator writes back the device plugin's label as it read it "
            "before (the device plugin would return beside the DRA plugin) and uncordons the node itself; the plan "
            "leaves these nodes out and apply refuses them",
            f"let the upgrade or MIG change finish (or keep the node out of driver upgrades: {SKIP_UPGRADE_LABEL}"
            "=true), then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(nodes)),
        )


# GFD's labels under mig.strategy=single when the GPUs are not laid out as that strategy needs, and under the none
# strategy when the MIG Manager may have turned MIG on (sources: dra/layout.py unpredictable_layout, mig_mode_unseen).
@rule(
    "mig-layout-unpredicted",
    BLOCKER,
    summary="a node's MIG layout is in no GFD label and it has no slices yet: its device count cannot be predicted",
)
def mig_layout_unpredicted(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped: the plan leaves the nodes out). When: a node still to migrate, without
    slices of the DRA driver, whose GFD product label ends in `-MIG-<suffix>` that is no MIG profile (GFD's
    `-MIG-INVALID`, with `gpu.count` 0), or whose MIG Manager config (`nvidia.com/mig.config`) may have turned MIG on
    while GFD runs the none strategy. Rests on: under the single strategy GFD labels a node whose GPUs are not
    all MIG-enabled with instances of one profile `<model>-MIG-INVALID` with count 0 (k8s-device-plugin v0.18.0
    `internal/lm/mig-strategy.go` `newInvalidMigStrategyLabeler`), under none it labels MIG-enabled GPUs whole
    (`NewResourceLabeler`), while the DRA driver publishes each MIG-disabled GPU whole and every MIG device of the
    others (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/nvlib.go` `GetPerGpuAllocatableDevices`): the
    exact count `wait-dra-ready` waits for is in no label.
    """
    configs = mig_parted_configs(ctx.state)
    invalid: list[str] = []
    unseen: list[str] = []
    for n in ctx.inventory.nodes:
        if not still_to_migrate(n) or n.dra_devices.get(ctx.dra_driver) or not unpredictable_layout(n.labels, configs):
            continue
        if single_profile(n.labels.get(LABEL_PRODUCT, "")) is not None:
            invalid.append(n.name)
        elif operator_busy(n.labels) is None:  # else gpu-operator-node-busy says it, and the plan leaves it out
            unseen.append(n.name)
    if invalid:
        yield Finding(
            "mig-layout-unpredicted",
            BLOCKER,
            f"{len(invalid)} GPU node(s) are labelled by GFD with an invalid MIG layout for the single strategy "
            "(product `...-MIG-INVALID`, gpu.count 0): the DRA driver will publish their whole GPUs and MIG devices, "
            "but how many no label says, so the exact count the plan waits for cannot be predicted. The plan leaves "
            "these nodes out",
            "give every GPU of the node MIG instances of one profile (or turn MIG off on all of them), or use the "
            "mixed strategy, or let the DRA plugin publish on these nodes first (its slices then give the count), "
            "then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(invalid)),
        )
    if unseen:
        yield Finding(
            "mig-layout-unpredicted",
            BLOCKER,
            f"{len(unseen)} GPU node(s) run the device plugin's none MIG strategy with a MIG Manager config "
            "(nvidia.com/mig.config) that turns MIG on, is not applied, or is not known here: GFD then labels every "
            "GPU whole and no MIG device, while the DRA driver publishes a MIG-enabled GPU as its MIG devices only "
            "(none for a GPU without instances), so the count the plan waits for cannot be predicted; and the "
            "nvidia.com/gpu workloads the device plugin gave those GPUs whole find no full GPU there under DRA. "
            "The plan leaves these nodes out",
            "if the GPUs are meant whole, apply nvidia.com/mig.config=all-disabled; if MIG is meant, run the device "
            "plugin and GFD with the mixed (or single) MIG strategy so GFD counts the MIG devices; or let the DRA "
            "plugin publish on these nodes first (its slices then give the count); then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(unseen)),
        )


@rule(
    "gpu-devices-unmatched",
    BLOCKER,
    summary="no DeviceClass of a node's GPU resources matches a device the DRA driver publishes there",
)
def gpu_devices_unmatched(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped: the plan leaves the nodes out). When: a node switched in place serves GPU
    resources (capacity above 0) that DeviceClasses map, and none of those classes matches any of its devices (its
    slices of the DRA driver, else the prediction). Rests on: the scheduler backs an extended resource only with
    devices of its class (KEP-5004 DRAExtendedResource), so the plan's canary, and every pod of the node's
    resources, is never scheduled there once the device plugin is off; under the device plugin's none MIG strategy a
    MIG-enabled GPU is served whole as `nvidia.com/gpu` (k8s-device-plugin v0.18.0 `internal/rm/device_map.go`
    `buildGPUDeviceMap`) while the DRA driver publishes it as `type: mig` devices only, which the `nvidia.com/gpu`
    class (`type == 'gpu'`) does not select (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/nvlib.go`).
    """
    proposals = [(p.name, p.extended_resource_name, p.selector) for p in ctx.generation.proposals]
    classes: list[ClassSelectors] | None = None
    nodes: list[str] = []
    for n in ctx.inventory.nodes:
        if not switched_in_place(ctx, n) or not n.capacity:
            continue
        classes = compile_classes(ctx.state, proposals) if classes is None else classes
        if unmatched_by_dra(dra_served(ctx.state, n, classes, ctx.dra_driver)):
            nodes.append(n.name)
    if nodes:
        yield Finding(
            "gpu-devices-unmatched",
            BLOCKER,
            f"{len(nodes)} GPU node(s) serve GPU resources whose DeviceClasses match none of the devices the DRA "
            "driver publishes (or will publish) there (e.g. MIG-enabled GPUs served whole as nvidia.com/gpu under the "
            "device plugin's none MIG strategy, published as MIG devices only): their canary and their pods could "
            "never be scheduled there once the device plugin is off. The plan leaves these nodes out",
            "turn MIG off on these GPUs (nvidia.com/mig.config=all-disabled) or serve their MIG devices under the "
            "mixed MIG strategy, or give the resource a DeviceClass that selects the node's devices; then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(nodes)),
        )
