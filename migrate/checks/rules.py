"""The readiness rules. Each is one function, registered with its id and the severities it reports.

Facts each rule rests on are cited beside it (primary sources); README "Checks" lists them for users.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from migrate.checks.context import CheckContext
from migrate.checks.model import Finding, Severity
from migrate.checks.registry import rule
from migrate.dra.deviceclasses import existing_mappings
from migrate.inventory.dra import NVIDIA_DRA_DRIVER
from migrate.inventory.placement import _match_expression

BLOCKER, WARNING, INFO = Severity.BLOCKER, Severity.WARNING, Severity.INFO
MIN_VERSION = (1, 34, 2)
MIN_DRIVER = 580
GATE = "DRAExtendedResource"


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _ref(kind: str, o: dict[str, Any]) -> str:
    m = _meta(o)
    return f"{kind} {m['namespace']}/{m.get('name')}" if m.get("namespace") else f"{kind} {m.get('name')}"


# resource.k8s.io/v1 is served from 1.34 (k8s.io/api resource/v1 types.go, prerelease-lifecycle-gen
# introduced=1.34); the NVIDIA DRA driver and GPU Operator require 1.34.2 (dra-driver-nvidia-gpu
# site/content/docs/prerequisites.md; cloud-native-docs gpu-operator/dra-intro-install.rst).
@rule("k8s-version-unsupported", BLOCKER, summary="server older than 1.34.2, or resource.k8s.io/v1 not served")
def k8s_version(ctx: CheckContext) -> Iterator[Finding]:
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
    old: list[tuple[str, str]] = []
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
            old.append((f"Node {n.name}", str(v)))
    if old:
        versions = sorted({v for _, v in old})
        yield Finding(
            "driver-version-too-old",
            BLOCKER,
            f"NVIDIA driver {', '.join(versions)} is older than {MIN_DRIVER}, the minimum for the DRA driver",
            f"upgrade the NVIDIA driver to {MIN_DRIVER} or later on the listed objects' nodes before migrating",
            tuple(sorted(o for o, _ in old)),
        )


# The DRA driver hands devices to containers through CDI (dra-driver-nvidia-gpu prerequisites.md).
@rule("cdi-disabled", BLOCKER, summary="ClusterPolicy spec.cdi.enabled is false")
def cdi_disabled(ctx: CheckContext) -> Iterator[Finding]:
    for cp in ctx.state.of("nvidia.com/ClusterPolicy"):
        if ((cp.get("spec") or {}).get("cdi") or {}).get("enabled") is False:
            yield Finding(
                "cdi-disabled",
                BLOCKER,
                "CDI is disabled in the ClusterPolicy: the DRA driver injects devices via CDI",
                "set spec.cdi.enabled: true in the ClusterPolicy (the chart's default)",
                (_ref("ClusterPolicy", cp),),
            )


@rule("dra-driver-missing", BLOCKER, summary="the gpu.nvidia.com DRA kubelet plugin is not installed")
def dra_driver_missing(ctx: CheckContext) -> Iterator[Finding]:
    if not ctx.inventory.dra["nvidiaDraPlugin"]["installed"]:
        yield Finding(
            "dra-driver-missing",
            BLOCKER,
            "the NVIDIA DRA kubelet plugin (driver gpu.nvidia.com) is not installed: no DaemonSet of it and no "
            "ResourceSlices from it",
            "install the dra-driver-nvidia-gpu chart with kubeletPlugin.nodeSelector "
            "nvidia.com/dra-kubelet-plugin=true (and gpuResourcesEnabledOverride=true beside the device plugin); "
            "migrated nodes get that label",
        )


# KEP-5004: one node cannot have the same extended resource backed by the device plugin and by DRA;
# on a node with allocatable > 0 the device plugin serves it, but DRA slices stay allocatable through
# explicit claims (kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go shouldDelegateResourceToDRA).
@rule("dual-advertising", BLOCKER, summary="a node advertises GPUs from the device plugin and publishes DRA slices")
def dual_advertising(ctx: CheckContext) -> Iterator[Finding]:
    nodes = sorted(
        n.name for n in ctx.inventory.nodes if any(n.allocatable.values()) and n.dra_devices.get(NVIDIA_DRA_DRIVER)
    )
    if nodes:
        yield Finding(
            "dual-advertising",
            BLOCKER,
            f"{len(nodes)} node(s) advertise a GPU resource from the device plugin while the DRA driver publishes "
            "ResourceSlices for the same GPUs: one GPU can be handed out twice",
            "disable the device plugin on these nodes (label nvidia.com/gpu.deploy.device-plugin=false) or remove "
            "the DRA plugin's label, so each node has one owner of its GPUs",
            tuple(f"Node {n}" for n in nodes),
        )


# resource/v1 DeviceClassSpec.ExtendedResourceName: "If two device classes have the same name, then the
# class created later is picked" (k8s.io/api resource/v1 types.go).
@rule("duplicate-extended-resource-name", WARNING, summary="several DeviceClasses name the same extendedResourceName")
def duplicate_ern(ctx: CheckContext) -> Iterator[Finding]:
    for ern, classes in sorted(existing_mappings(ctx.state).items()):
        if len(classes) > 1:
            yield Finding(
                "duplicate-extended-resource-name",
                WARNING,
                f"{len(classes)} DeviceClasses map {ern}: the scheduler silently uses the newest",
                f"keep one class with extendedResourceName {ern} and clear the field on the others",
                tuple(f"DeviceClass {c}" for c in classes),
            )


@rule(
    "shared-gpu-capacity-loss",
    BLOCKER,
    WARNING,
    summary="time-slicing or MPS replicas > 1: under DRA each request takes whole devices",
)
def shared_capacity(ctx: CheckContext) -> Iterator[Finding]:
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
            "keep this pool on the device plugin, add GPUs, or move its consumers to a shared ResourceClaim "
            "(GpuConfig sharing.strategy TimeSlicing/MPS) before migrating"
            if not cap.fits
            else "expect fewer concurrent consumers per GPU after migration; confirm the headroom is enough",
            (f"Pool {cap.pool}",),
        )


@rule("unmapped-gpu-resource", WARNING, summary="a GPU resource name in use that no DeviceClass will map")
def unmapped(ctx: CheckContext) -> Iterator[Finding]:
    for ng in ctx.generation.not_generated:
        if ng.existing_class is not None:
            continue
        users = sorted(
            f"{c.kind} {c.namespace}/{c.name}" for c in ctx.inventory.consumers if ng.extended_resource_name in c.totals
        )
        yield Finding(
            "unmapped-gpu-resource",
            WARNING,
            f"{ng.extended_resource_name} is in use but no DeviceClass will map it ({ng.reason}); "
            "its consumers cannot run on migrated nodes unchanged",
            "convert these workloads to ResourceClaims (dra-migrate convert) or keep their pool on the device plugin",
            tuple(users),
        )


# "both ClusterPolicy and GPUCluster CRs exist; only one may be present at a time" (NVIDIA/gpu-operator
# controllers/nodelabeling_controller.go).
@rule("clusterpolicy-gpucluster-conflict", BLOCKER, summary="both a ClusterPolicy and a GPUCluster exist")
def cp_gc_conflict(ctx: CheckContext) -> Iterator[Finding]:
    cps, gcs = ctx.state.of("nvidia.com/ClusterPolicy"), ctx.state.of("nvidia.com/GPUCluster")
    if cps and gcs:
        yield Finding(
            "clusterpolicy-gpucluster-conflict",
            BLOCKER,
            "both a ClusterPolicy and a GPUCluster exist: the GPU Operator reconciles neither",
            "delete one; for a staged migration keep the ClusterPolicy and install the standalone DRA driver",
            tuple([_ref("ClusterPolicy", o) for o in cps] + [_ref("GPUCluster", o) for o in gcs]),
        )


# "An in-place migration from a standalone DRA driver Helm release or from ClusterPolicy to GPUCluster is
# not supported" (NVIDIA cloud-native-docs gpu-operator/dra-intro-install.rst).
@rule("operator-no-in-place-migration", WARNING, summary="a ClusterPolicy-managed cluster cannot move in place")
def operator_in_place(ctx: CheckContext) -> Iterator[Finding]:
    cps = ctx.state.of("nvidia.com/ClusterPolicy")
    if cps:
        yield Finding(
            "operator-no-in-place-migration",
            WARNING,
            "the GPU Operator manages this cluster through a ClusterPolicy: NVIDIA supports no in-place move to the "
            "GPUCluster DRA workflow",
            "migrate node pool by node pool with the standalone DRA driver beside the ClusterPolicy "
            "(what dra-migrate plan produces)",
            tuple(_ref("ClusterPolicy", o) for o in cps),
        )


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not selector:
        return True  # an empty PDB selector selects every pod in the namespace (policy/v1)
    if any(labels.get(k) != str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_match_expression(e, labels) for e in selector.get("matchExpressions") or [])


def _pdb_blocks(pdb: dict[str, Any]) -> bool:
    status = pdb.get("status") or {}
    if "disruptionsAllowed" in status:
        return int(status.get("disruptionsAllowed") or 0) == 0
    spec = pdb.get("spec") or {}
    return str(spec.get("maxUnavailable", "")) in ("0", "0%")


@rule("pdb-blocks-drain", WARNING, summary="a PodDisruptionBudget allowing no disruption covers GPU pods")
def pdb_blocks(ctx: CheckContext) -> Iterator[Finding]:
    pods = ctx.state.of("Pod")
    for pdb in ctx.state.of("policy/PodDisruptionBudget"):
        if not _pdb_blocks(pdb):
            continue
        ns = _meta(pdb).get("namespace")
        covered = sorted(
            _ref("Pod", p)
            for p in pods
            if _meta(p).get("namespace") == ns
            and (p.get("spec") or {}).get("nodeName")
            and _selector_matches((pdb.get("spec") or {}).get("selector") or {}, _meta(p).get("labels") or {})
        )
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
    for c in ctx.inventory.consumers:
        volcano = c.kind == "Job" and c.api_version.startswith("batch.volcano.sh/")
        if (c.kind in GANG_KINDS or volcano) and len(c.pools) > 1:
            yield Finding(
                "gang-workload-split",
                INFO,
                f"{c.kind} {c.namespace}/{c.name} runs across pools {', '.join(sorted(c.pools))}, which migrate in "
                "different stages: between them its workers are served by different mechanisms",
                f"pin it to one pool, or migrate its pools back to back when it is not running "
                f"(plan --order {','.join(sorted(c.pools))}); within a pool the planner keeps a gang's nodes in one "
                "wave where the wave is wide enough",
                (f"{c.kind} {c.namespace}/{c.name}",),
            )
