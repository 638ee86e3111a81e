"""The readiness rules about the cluster, its nodes and its DRA driver. Each is one function, registered with
its id and the severities it reports. The rules about the GPU Operator's ClusterPolicy are in rules_operator.py,
those about platforms, workloads, gangs and dependents in their rules_*.py modules.

Facts each rule rests on are cited beside it (primary sources); each rule's docstring says when it fires and
what it rests on, and docs/rules.md is generated from them (tools/docs/generate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext, still_to_migrate
from dra_migrate.checks.context import switched_in_place as _switched_in_place
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.checks.returned import returned_findings, returned_nodes
from dra_migrate.checks.sharing import SHARED_NAME_REMEDIATION, sharing_advice
from dra_migrate.dra.deviceclasses import SHARED_NAME_REASON, existing_mappings, mig_profile_of, single_strategy_nodes
from dra_migrate.inventory.fleet import EXTENDED_RESOURCE_GATE, GpuNode, kubelet_skew, other_nvidia_resources
from dra_migrate.inventory.model import gpu_names
from dra_migrate.inventory.placement import pdb_selects

BLOCKER, WARNING, INFO = Severity.BLOCKER, Severity.WARNING, Severity.INFO
MIN_VERSION = (1, 34, 2)
MIN_DRIVER = 580
GATE = EXTENDED_RESOURCE_GATE


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _ref(kind: str, o: dict[str, Any]) -> ObjectRef:
    return ObjectRef.of(kind, o)


# resource.k8s.io/v1 is served from 1.34 (k8s.io/api resource/v1 types.go, prerelease-lifecycle-gen
# introduced=1.34); the NVIDIA DRA driver and GPU Operator require 1.34.2 (dra-driver-nvidia-gpu
# site/content/docs/prerequisites.md; cloud-native-docs gpu-operator/dra-intro-install.rst).
@rule("k8s-version-unsupported", BLOCKER, summary="server older than 1.34.2, or resource.k8s.io/v1 not served")
def k8s_version(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: server older than 1.34.2, version unknown, or `resource.k8s.io/v1` not served. Rests
    on: `resource.k8s.io/v1` introduced in 1.34 (k8s.io/api `resource/v1/types.go`); NVIDIA DRA driver and GPU
    Operator require 1.34.2 (dra-driver-nvidia-gpu `prerequisites.md`, gpu-operator `dra-intro-install.rst`).
    """
    served = ctx.state.source.served_apis
    version = ctx.version
    if version is None:
        yield Finding(
            "k8s-version-unsupported",
            BLOCKER,
            f"the server version is unknown ({ctx.state.source.kubernetes_version or 'not recorded in the snapshot'})",
            "state it with --kubernetes-version vX.Y.Z, or take the snapshot with dra-migrate snapshot",
        )
    elif version < MIN_VERSION:
        yield Finding(
            "k8s-version-unsupported",
            BLOCKER,
            f"Kubernetes {ctx.state.source.kubernetes_version} is older than 1.34.2, the first release with "
            "resource.k8s.io/v1 that the NVIDIA DRA driver supports",
            "upgrade the control plane and nodes to 1.34.2 or later (1.36+ enables DRAExtendedResource by default)",
        )
    if served is not None and "resource.k8s.io/v1" not in served:
        yield Finding(
            "k8s-version-unsupported",
            BLOCKER,
            "the API server does not serve resource.k8s.io/v1",
            "enable the resource.k8s.io/v1 API (on by default from 1.34) or upgrade",
        )


# KEP-5004 gate DRAExtendedResource: alpha 1.34 (off), beta 1.36 (on), GA 1.37 (locked on)
# (kubernetes/enhancements keps/sig-scheduling/5004-dra-extended-resource/kep.yaml; pkg/features).
@rule("extended-resource-unavailable", BLOCKER, summary="the DRAExtendedResource feature is not available")
def extended_resource(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: `DRAExtendedResource` off: 1.34-1.35 unless declared on with `--feature-gate`; 1.36
    when declared off; never on 1.37 (GA, locked). Rests on: KEP-5004 `kep.yaml` (alpha 1.34, beta 1.36, stable
    1.37), kubernetes `pkg/features`.
    """
    version, declared = ctx.version, ctx.feature_gates.get(GATE)
    if version is None or version < (1, 34, 0):
        return  # k8s-version-unsupported says it
    minor = version[1]
    if minor >= 37:
        return  # GA and locked on: cannot be turned off
    if minor >= 36 and declared is not False:
        return  # beta, on by default
    if minor < 36 and declared is True:
        return
    why = "declared off (--feature-gate)" if declared is False else "alpha and off by default before 1.36"
    yield Finding(
        "extended-resource-unavailable",
        BLOCKER,
        f"{GATE} is {why} on Kubernetes {ctx.state.source.kubernetes_version}: unchanged nvidia.com/gpu requests "
        "cannot be served by DRA devices",
        f"enable {GATE}=true on kube-apiserver, kube-scheduler, kube-controller-manager and kubelet (then pass "
        f"--feature-gate {GATE}=true), or upgrade to 1.36+",
    )


def _major(version: Any) -> int | None:
    try:
        return int(str(version).lstrip("v").split(".")[0])
    except ValueError:
        return None


# NVIDIA driver 580+ for the GPU Operator's DRA workflow (cloud-native-docs gpu-operator/dra-intro-install.rst);
# the standalone driver documents 565+ (dra-driver-nvidia-gpu prerequisites.md): we hold the stricter floor.
@rule("driver-version-too-old", BLOCKER, summary="NVIDIA driver older than 580")
def driver_version(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: NVIDIA driver < 580 in ClusterPolicy `spec.driver.version`, an NVIDIADriver, or a
    node's `nvidia.com/cuda.driver-version.full`. Rests on: GPU Operator DRA requirements (580+); the standalone
    driver documents 565+, we hold the stricter floor.
    """
    old: list[tuple[ObjectRef, str]] = []
    for cp in ctx.state.of("nvidia.com/ClusterPolicy"):
        v = ((cp.get("spec") or {}).get("driver") or {}).get("version")
        if v and (m := _major(v)) is not None and m < MIN_DRIVER:
            old.append((_ref("ClusterPolicy", cp), str(v)))
    for d in ctx.state.of("nvidia.com/NVIDIADriver"):
        v = (d.get("spec") or {}).get("version")
        if v and (m := _major(v)) is not None and m < MIN_DRIVER:
            old.append((_ref("NVIDIADriver", d), str(v)))
    for n in ctx.inventory.nodes:
        v = n.gfd.get("driverVersion") or n.labels.get("nvidia.com/cuda.driver.major")
        if v and (m := _major(v)) is not None and m < MIN_DRIVER:
            old.append((ObjectRef("Node", n.name), str(v)))
    if old:
        versions = sorted({v for _, v in old})
        yield Finding(
            "driver-version-too-old",
            BLOCKER,
            f"NVIDIA driver {', '.join(versions)} is older than {MIN_DRIVER}, the minimum for the DRA driver",
            f"upgrade the NVIDIA driver to {MIN_DRIVER} or later on the listed objects' nodes before migrating",
            tuple(sorted(o for o, _ in old)),
        )


@rule("dra-driver-missing", BLOCKER, summary="the gpu.nvidia.com DRA kubelet plugin is not installed")
def dra_driver_missing(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: no DaemonSet of the NVIDIA DRA kubelet plugin and no `gpu.nvidia.com` ResourceSlices.
    Rests on: the scheduler serves DRA requests only from published slices (KEP-4381).
    """
    plugin = ctx.inventory.dra["nvidiaDraPlugin"]
    has_slices = any(n.dra_devices.get(ctx.dra_driver) for n in ctx.inventory.nodes)
    if not (plugin["daemonSets"] or has_slices):
        yield Finding(
            "dra-driver-missing",
            BLOCKER,
            "the NVIDIA DRA kubelet plugin (driver gpu.nvidia.com) is not installed: no DaemonSet of it and no "
            "ResourceSlices from it",
            "install the dra-driver-nvidia-gpu chart (gpuResourcesEnabledOverride=true beside the device plugin); "
            "its default placement runs the plugin on every GPU node, or pass kubeletPlugin.nodeSelector "
            "nvidia.com/dra-kubelet-plugin=true to switch it per node with a label",
        )


def _nodes_with_claimed_devices(ctx: CheckContext) -> set[str]:
    """Nodes (pools of the DRA driver are named after the node) with a device an allocated claim holds."""
    out: set[str] = set()
    for c in ctx.state.of("resource.k8s.io/ResourceClaim"):
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        out.update(str(r.get("pool")) for r in results if isinstance(r, dict) and r.get("driver") == ctx.dra_driver)
    return out


# KEP-5004: on a node whose allocatable for the name is > 0 the scheduler serves `nvidia.com/gpu` from the
# device plugin only (kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go), but the node's DRA
# slices stay allocatable to explicit ResourceClaims (dynamicresources plugin): two allocators, one GPU.
# The DRA chart's default placement (dra-driver-nvidia-gpu deployments/helm/dra-driver-nvidia-gpu/values.yaml,
# kubeletPlugin.affinity on GPU nodes) produces exactly this state on every GPU node before migration.
@rule(
    "dual-advertising",
    BLOCKER,
    WARNING,
    summary="a node serves GPUs from the device plugin and publishes DRA slices of the same GPUs",
)
def dual_advertising(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker on a migrated node whose device plugin came back (the DRA plugin runs there by a label
    someone set, `nvidia.com/dra-kubelet-plugin=true` or the one its DaemonSet selects, and publishes slices, while
    the device plugin advertises GPUs again or a DaemonSet of it selects the node again: its pod is coming), and
    where an allocated ResourceClaim already holds a device of such a node; else warning. When: a node's device
    plugin advertises a GPU resource (allocatable > 0) while the DRA driver publishes slices for it (what the DRA
    chart's default placement does on every GPU node before migration), or a migrated node's device plugin is back.
    Rests on: the same physical GPU is then allocatable twice, which KEP-5004 rules out ("one node in a cluster
    cannot have both", kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/README.md`): the
    scheduler serves `nvidia.com/gpu` from the device plugin where allocatable > 0 (kubernetes v1.37.2
    `pkg/scheduler/framework/plugins/noderesources/fit.go`) while the slices stay allocatable to explicit claims
    (`dynamicresources` plugin); the DRA plugin publishes every GPU it finds (dra-driver-nvidia-gpu v0.4.1
    `cmd/gpu-kubelet-plugin/driver.go` `PublishResources`); chart default: its `deployments/helm/dra-driver-nvidia-
    gpu/values.yaml` `kubeletPlugin.affinity`. The GPU Operator sets every missing `nvidia.com/gpu.deploy.*` label
    to `true` and deletes them all when NFD's GPU labels go (gpu-operator `controllers/state_manager.go`
    `addGPUStateLabels`, `removeAllGPUStateLabels`): how a migrated node gets its device plugin back (returned.py).
    """
    returned = returned_nodes(ctx)
    yield from returned_findings(ctx, returned)
    gone = {r.node.name for r in returned}
    nodes = sorted(
        n.name
        for n in ctx.inventory.nodes
        if any(n.allocatable.values()) and n.dra_devices.get(ctx.dra_driver) and n.name not in gone
    )
    if not nodes:
        return
    claimed = sorted(set(nodes) & _nodes_with_claimed_devices(ctx))
    danger = (
        "the same physical GPU is allocatable twice: to pods requesting a device-plugin resource (the device "
        "plugin hands it out) and to explicit ResourceClaims (the scheduler allocates it from the "
        f"{ctx.dra_driver} slices), and neither allocator sees the other's use"
    )
    if claimed:
        yield Finding(
            "dual-advertising",
            BLOCKER,
            f"{len(claimed)} node(s) serve GPUs from the device plugin while ResourceClaims already hold "
            f"{ctx.dra_driver} devices there: {danger}",
            "move the claims' pods off these nodes or migrate the nodes now (device plugin off first); until "
            "then create no ResourceClaims for GPUs on nodes still on the device plugin",
            tuple(ObjectRef("Node", n) for n in claimed),
        )
    rest = [n for n in nodes if n not in claimed]
    if rest:
        yield Finding(
            "dual-advertising",
            WARNING,
            f"{len(rest)} node(s) serve GPUs from the device plugin and publish {ctx.dra_driver} ResourceSlices "
            f"(the DRA chart's default placement): {danger}. No claim holds one yet",
            "create no GPU ResourceClaims until a node is migrated; the plan turns each node's device plugin off "
            "before its canary",
            tuple(ObjectRef("Node", n) for n in rest),
        )


@rule(
    "kubelet-version-unsupported",
    BLOCKER,
    summary="a GPU node's kubelet cannot serve a DRA-backed extended resource (before 1.36)",
)
def kubelet_version(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped: the plan leaves the nodes out). When: a GPU node's
    `status.nodeInfo.kubeletVersion` is before 1.36 (unless `--feature-gate DRAExtendedResource=true` declares it
    on), 1.36 with the gate declared off, or before 1.34; an unknown version is not judged. Such nodes add nothing
    to capacity `after` (`afterSource: excluded`). Rests on: KEP-5004 lists the kubelet among the gate's components
    (kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/kep.yaml`); only a kubelet with the
    gate on drops DRA-backed requests from admission, otherwise the pod fails against the device plugin's leftover
    allocatable 0 (kubernetes v1.37.2 `pkg/kubelet/lifecycle/predicate.go`); gate stages in
    `pkg/features/kube_features.go`.
    """
    by_reason: dict[str, list[str]] = {}
    for n in ctx.inventory.nodes:
        why = kubelet_skew(n.kubelet_version, ctx.feature_gates)
        if why is not None and _switched_in_place(ctx, n):
            by_reason.setdefault(why, []).append(n.name)
    for why, nodes in sorted(by_reason.items()):
        yield Finding(
            "kubelet-version-unsupported",
            BLOCKER,
            f"{len(nodes)} GPU node(s) run a kubelet that rejects pods whose nvidia.com/gpu DRA serves ({why}): "
            "after migration such a pod fails admission against the device plugin's leftover allocatable 0. "
            "The plan leaves these nodes out and capacity after migration does not count them",
            "upgrade these nodes' kubelets to 1.36+ (or enable DRAExtendedResource=true on them and pass "
            "--feature-gate DRAExtendedResource=true), then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(nodes)),
        )


def _unknown_placement(ctx: CheckContext, placement: Callable[[GpuNode], Any]) -> list[tuple[str, list[str]]]:
    """Nodes still to migrate whose plugin no label can switch (one of the two placements), by reason."""
    by_why: dict[str, list[str]] = {}
    for n in ctx.inventory.nodes:
        p = placement(n)
        if p is not None and p.mode == "unknown" and _switched_in_place(ctx, n):
            by_why.setdefault(p.why, []).append(n.name)
    return sorted(by_why.items())


@rule(
    "dra-plugin-placement-unknown",
    BLOCKER,
    summary="no node label can make the installed DRA kubelet-plugin DaemonSet run on a GPU node",
)
def dra_placement(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped). When: no node label an operator can set makes an installed DRA kubelet-plugin
    DaemonSet run on a GPU node (its affinity uses only labels NFD/GFD/the kubelet own, `Gt`/`Lt`, `matchFields`, or
    a taint it does not tolerate). Rests on: the DaemonSet controller's own test: nodeSelector, required node
    affinity (ORed terms), taints (kubernetes `pkg/controller/daemon/daemon_controller.go`); DaemonSet names: dra-
    driver-nvidia-gpu v0.4 chart `dra-driver-nvidia-gpu-kubelet-plugin`, v25.x `nvidia-dra-driver-gpu-kubelet-
    plugin`, GPU Operator GPUCluster `nvidia-dra-driver-kubelet-plugin` selecting `nvidia.com/gpu.deploy.dra-
    driver=true` (gpu-operator `manifests/state-dra-driver/0500_daemonset.yaml`).
    """
    for why, nodes in _unknown_placement(ctx, lambda n: n.dra_placement):
        yield Finding(
            "dra-plugin-placement-unknown",
            BLOCKER,
            f"{len(nodes)} GPU node(s) cannot be given the DRA kubelet plugin by a label: {why}. The plan leaves "
            "them out",
            'upgrade the DRA chart with kubeletPlugin.nodeSelector {nvidia.com/dra-kubelet-plugin: "true"} (or '
            "the chart's default affinity, which selects nvidia.com/gpu.present=true), or remove the taint it "
            "does not tolerate, then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(nodes)),
        )


@rule(
    "device-plugin-placement-unknown",
    BLOCKER,
    summary="no node label can stop the installed device-plugin DaemonSet on a GPU node",
)
def device_plugin_placement(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped). When: no one settable node label stops every device-plugin DaemonSet running on
    a GPU node (a standalone manifest without selector or affinity runs on every node; the k8s-device-plugin chart
    v0.18.0's default affinity ORs terms on NFD's and the GPU Operator's labels only: its values.yaml). Rests on:
    same DaemonSet test; the operator's DaemonSet selects `nvidia.com/gpu.deploy.device-plugin=true` and the
    operator keeps a value once set (gpu-operator `assets/state-device-plugin/0500_daemonset.yaml`,
    `controllers/state_manager.go`).
    """
    for why, nodes in _unknown_placement(ctx, lambda n: n.dp_placement):
        yield Finding(
            "device-plugin-placement-unknown",
            BLOCKER,
            f"{len(nodes)} GPU node(s) cannot have their device plugin switched off by a label: {why}. The plan "
            "leaves them out",
            'add {key: nvidia.com/gpu.deploy.device-plugin, operator: NotIn, values: ["false"]} to every '
            "nodeSelectorTerm of the device-plugin DaemonSet's required node affinity (terms are ORed: a term "
            "without it keeps the plugin running; for the k8s-device-plugin Helm chart, its `affinity` value), "
            "or give a DaemonSet without affinity that expression; nodes without the label keep the plugin, and "
            "the GPU Operator's DaemonSet selects that label already. Then plan again",
            tuple(ObjectRef("Node", n) for n in sorted(nodes)),
        )


# DynamicMIG (alpha gate of the NVIDIA DRA driver) publishes the full GPU and every possible MIG placement
# with shared counters (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/driver.go, partitions.go): the
# device count is not what GFD's labels describe, so an exact prediction is refused.
@rule(
    "dynamic-mig-unpredicted",
    BLOCKER,
    summary="DynamicMIG is on and the node has no slices yet: its device count cannot be predicted",
)
def dynamic_mig(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped). When: the DRA plugin serving a node runs with `DynamicMIG=true` (container args
    or env) or its slices carry shared counters, and the node has no slices yet. Rests on: under DynamicMIG the
    driver publishes the full GPU and every possible MIG placement with counters (dra-driver-nvidia-gpu `cmd/gpu-
    kubelet-plugin/driver.go`, `partitions.go`): GFD labels do not give the exact count `wait-dra-ready` waits for.
    """
    nodes = sorted(
        n.name
        for n in ctx.inventory.nodes
        if n.dynamic_mig and still_to_migrate(n) and not n.dra_devices.get(ctx.dra_driver)
    )
    if nodes:
        yield Finding(
            "dynamic-mig-unpredicted",
            BLOCKER,
            f"{len(nodes)} GPU node(s) will be served by a DRA plugin with DynamicMIG on, which publishes every "
            "full GPU and every possible MIG placement with shared counters: the exact device count the plan "
            "waits for cannot be predicted from GFD labels. The plan leaves these nodes out",
            "let the DRA plugin publish on these nodes first (its slices then give the count), or turn "
            "DynamicMIG off, then plan again",
            tuple(ObjectRef("Node", n) for n in nodes),
        )


# resource/v1 DeviceClassSpec.ExtendedResourceName: "If two device classes have the same name, then the
# class created later is picked" (k8s.io/api resource/v1 types.go).
@rule("duplicate-extended-resource-name", WARNING, summary="several DeviceClasses name the same extendedResourceName")
def duplicate_ern(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: two or more DeviceClasses name the same `extendedResourceName`. Rests on: "the class
    created later is picked" (k8s.io/api `resource/v1/types.go`).
    """
    for ern, classes in sorted(existing_mappings(ctx.state).items()):
        if len(classes) > 1:
            yield Finding(
                "duplicate-extended-resource-name",
                WARNING,
                f"{len(classes)} DeviceClasses map {ern}: the scheduler silently uses the newest",
                f"keep one class with extendedResourceName {ern} and clear the field on the others",
                tuple(ObjectRef("DeviceClass", c) for c in classes),
            )


@rule(
    "shared-gpu-capacity-loss",
    BLOCKER,
    WARNING,
    summary="time-slicing or MPS replicas > 1: under DRA each request takes whole devices",
)
def shared_capacity(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker if the pool's demand no longer fits the whole devices after migration, else warning. When:
    time-slicing or MPS replicas > 1 on the pool's nodes: `nvidia.com/gpu.replicas` for full GPUs,
    `nvidia.com/mig-<profile>.replicas` for a time-sliced MIG profile. Rests on: DRA has no replicas: one request
    takes whole devices; what sharing a claim takes (config, feature gates, MPS limits): checks/sharing.py.
    """
    for cap in ctx.capacity:
        if cap.replicas <= 1 or cap.after is None:
            continue
        severity = WARNING if cap.fits else BLOCKER
        verdict = "still fit" if cap.fits else "no longer fit"
        yield Finding(
            "shared-gpu-capacity-loss",
            severity,
            f"pool {cap.pool}: {cap.resource} is shared {cap.replicas} ways today ({cap.before} allocatable); after "
            f"migration {cap.after} whole devices serve it, and today's demand of {cap.demand} would {verdict}",
            (
                "keep this pool on the device plugin, add GPUs, or move its consumers to shared ResourceClaims "
                "before migrating"
                if not cap.fits
                else "expect fewer concurrent consumers per GPU after migration; confirm the headroom is enough"
            )
            + ". "
            + sharing_advice(ctx, cap),
            (ObjectRef("Pool", cap.pool),),
        )


@rule("unmapped-gpu-resource", WARNING, summary="a GPU resource name in use that no DeviceClass will map")
def unmapped(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a GPU name in use that no DeviceClass will map (`nvidia.com/gpu.shared`, `rename`s,
    unknown names). Rests on: see `generate deviceclasses`.
    """
    for ng in ctx.generation.not_generated:
        if ng.existing_class is not None:
            continue
        users = sorted(
            ObjectRef(c.kind, c.name, c.namespace or None)
            for c in ctx.inventory.consumers
            if ng.extended_resource_name in c.totals
        )
        yield Finding(
            "unmapped-gpu-resource",
            WARNING,
            f"{ng.extended_resource_name} is in use but no DeviceClass will map it ({ng.reason}); "
            "its consumers cannot run on migrated nodes unchanged",
            SHARED_NAME_REMEDIATION
            if ng.reason == SHARED_NAME_REASON
            else "convert these workloads to ResourceClaims (dra-migrate convert) or keep their pool on the device "
            "plugin",
            tuple(users),
        )


# Under the `single` strategy the device plugin advertises a MIG profile's instances as nvidia.com/gpu, so the
# class generated for nvidia.com/gpu selects those instances too (dra/deviceclasses.py); under `mixed` it
# advertises them as nvidia.com/mig-<profile> (k8s-device-plugin v0.18.0 internal/rm, internal/lm/resource.go).
@rule(
    "mig-strategy-class-overlap",
    WARNING,
    summary="whole-GPU requests could be given MIG instances of mixed-strategy nodes",
)
def mig_strategy_overlap(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: nodes under the MIG `single` strategy advertise profile P as nvidia.com/gpu (so the
    nvidia.com/gpu DeviceClass selects P's MIG devices) while nodes under `mixed` have P instances of their own,
    advertised as nvidia.com/mig-P: once migrated, an nvidia.com/gpu pod may be given a P slice there, which the
    device plugin never did. Rests on: k8s-device-plugin v0.18.0 MIG strategies (internal/rm, internal/lm); a
    DeviceClass selects devices, not nodes (k8s.io/api resource/v1 `DeviceClassSpec`).
    """
    single = single_strategy_nodes(ctx.inventory)
    if not single:
        return
    for profile, single_nodes in single.items():
        mixed = sorted(
            n.name
            for n in ctx.inventory.nodes
            if n.gfd.get("migStrategy") == "mixed" and any(mig_profile_of(r) == profile for r in n.capacity)
        )
        if not mixed:
            continue
        yield Finding(
            "mig-strategy-class-overlap",
            WARNING,
            f"{len(single_nodes)} node(s) under the MIG single strategy advertise {profile} instances as "
            f"nvidia.com/gpu, so its DeviceClass selects {profile} instances; {len(mixed)} node(s) under the mixed "
            f"strategy have {profile} instances too (nvidia.com/mig-{profile}): once they migrate, a pod asking for "
            "nvidia.com/gpu may be given one of those slices instead of a whole GPU",
            f"move the single-strategy nodes to the mixed strategy before migrating (their pods then ask for "
            f"nvidia.com/mig-{profile}), or convert the whole-GPU workloads to claims of gpu.nvidia.com "
            "(dra-migrate convert), which selects whole GPUs only",
            tuple(ObjectRef("Node", n) for n in (single_nodes[:10] + mixed[:10])),
        )


# No release of the NVIDIA device plugin advertises a name of its own choosing (v0.18.0 api/config/v1/config.go
# `DisableResourceNamingInConfig`); the NVIDIA Network Operator gives SR-IOV devices the nvidia.com prefix
# (Mellanox/network-operator deployment/network-operator/values.yaml `resourcePrefix: nvidia.com`).
@rule(
    "other-nvidia-resource",
    INFO,
    summary="nvidia.com/* resources of other device plugins, which the migration leaves alone",
)
def other_nvidia_resource(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: info. When: nodes advertise an nvidia.com/* extended resource that is not the NVIDIA GPU device
    plugin's (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`, their `.shared` renames): the Network Operator's
    SR-IOV and RDMA devices, GPUs passed to VMs. Rests on: the device plugin clears custom names from its config
    (k8s-device-plugin v0.18.0 `api/config/v1/config.go` `DisableResourceNamingInConfig`); the Network Operator's
    SR-IOV resource prefix `nvidia.com` (Mellanox/network-operator `deployment/network-operator/values.yaml`).
    """
    for name, nodes in sorted(other_nvidia_resources(ctx.state.of("Node"), gpu_names(ctx.state)).items()):
        yield Finding(
            "other-nvidia-resource",
            INFO,
            f"{name} is advertised by {len(nodes)} node(s) but is not a name the NVIDIA GPU device plugin advertises "
            "(a network or VM device plugin's): the migration neither converts its requests nor waits for it to "
            "leave a node; its pods keep asking for it unchanged",
            "nothing, unless it is a GPU resource of a device plugin this tool does not know",
            tuple(ObjectRef("Node", n) for n in nodes[:20]),
        )


def _pdb_blocks(pdb: dict[str, Any]) -> bool:
    status = pdb.get("status") or {}
    if "disruptionsAllowed" in status:
        return int(status.get("disruptionsAllowed") or 0) == 0
    spec = pdb.get("spec") or {}
    return str(spec.get("maxUnavailable", "")) in ("0", "0%")


@rule("pdb-blocks-drain", WARNING, summary="a PodDisruptionBudget allowing no disruption covers GPU pods")
def pdb_blocks(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a PodDisruptionBudget allowing no disruption (`status.disruptionsAllowed: 0`, or
    `maxUnavailable: 0`) selects bound GPU pods; a budget with no selector selects none, `selector: {}` selects
    every pod of its namespace — the one rule `check` and the drain share
    (`dra_migrate.inventory.placement.pdb_selects`). Rests on: eviction honours budgets (policy/v1 Eviction API);
    null vs empty selector: k8s.io/api `policy/v1` `PodDisruptionBudgetSpec.selector`, converted by
    `metav1.LabelSelectorAsSelector` (nil → nothing, `{}` → everything; apimachinery `pkg/apis/meta/v1/helpers.go`)
    as the disruption controller does.
    """
    bound: dict[Any, list[dict[str, Any]]] | None = None  # namespace -> its bound pods: a budget selects only there
    for pdb in ctx.state.of("policy/PodDisruptionBudget"):
        if not _pdb_blocks(pdb):
            continue
        if bound is None:
            bound = {}
            for p in ctx.state.of("Pod"):
                if (p.get("spec") or {}).get("nodeName"):
                    bound.setdefault(_meta(p).get("namespace"), []).append(p)
        ns = _meta(pdb).get("namespace")
        covered = sorted(_ref("Pod", p) for p in bound.get(ns, []) if pdb_selects(pdb, p))
        if covered:
            yield Finding(
                "pdb-blocks-drain",
                WARNING,
                f"PodDisruptionBudget {ns}/{_meta(pdb).get('name')} allows no disruption and covers {len(covered)} "
                "GPU pod(s): a drain through the Eviction API will wait on it",
                "scale the workload up, relax the budget for the migration window, or schedule the pool last",
                (_ref("PodDisruptionBudget", pdb), *covered),
            )


GANG_KINDS = {
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "PaddleJob",
    "JAXJob",
    "JobSet",
    "LeaderWorkerSet",
    "RayCluster",
    "RayJob",
    "RayService",
}


@rule("gang-workload-split", INFO, summary="a multi-pod training workload runs across pools that migrate apart")
def gang_split(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: info. When: a multi-pod training workload (Kubeflow jobs, JobSet, LeaderWorkerSet, Ray, Volcano Job)
    runs in more than one pool. Rests on: each pool migrates in its own stage.
    """
    for c in ctx.inventory.consumers:
        volcano = c.kind == "Job" and c.api_version.startswith("batch.volcano.sh/")
        if (c.kind in GANG_KINDS or volcano) and len(c.pools) > 1:
            pools = sorted(c.pools)
            # A workload across hundreds of pools is named with a few of them: the message stays readable
            # and the plan file stays quick to write (a long message was written by PyYAML: issue 29).
            shown = ", ".join(pools[:_SHOWN_POOLS]) + (
                f" and {len(pools) - _SHOWN_POOLS} more" if len(pools) > _SHOWN_POOLS else ""
            )
            order = ",".join(pools) if len(pools) <= _SHOWN_POOLS else f"<its {len(pools)} pools: inventory -o json>"
            yield Finding(
                "gang-workload-split",
                INFO,
                f"{c.kind} {c.namespace}/{c.name} runs across pools {shown}, which migrate in "
                "different stages: between them its workers are served by different mechanisms",
                f"pin it to one pool, or migrate its pools back to back when it is not running "
                f"(plan --order {order}); within a pool the planner keeps a gang's nodes in one "
                "wave where the wave is wide enough",
                (ObjectRef(c.kind, c.name, c.namespace or None),),
            )


_SHOWN_POOLS = 8
