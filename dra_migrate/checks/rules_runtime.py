"""The readiness rule about the container runtime of each GPU node: can it inject the CDI devices the NVIDIA DRA
driver prepares (inventory/runtime.py has the versions and their sources). Without it a migrated node's first
wave fails its canary and rolls back: right, but late, after a drain. The other rules are in rules.py and the
rules_*.py modules; each rule's docstring feeds docs/rules.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext, switched_in_place
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.inventory.operator import cluster_policies
from dra_migrate.inventory.runtime import UNSUPPORTED, CdiSupport, cdi_support

BLOCKER, WARNING = Severity.BLOCKER, Severity.WARNING
RULE_ID = "container-runtime-cdi"
_VERSIONS_SHOWN = 3


def _operator_cdi(cp: dict[str, Any]) -> bool:
    """The ClusterPolicy says CDI on (explicitly: the chart writes it) and the operator runs the toolkit."""
    spec = cp.get("spec") or {}
    return (spec.get("cdi") or {}).get("enabled") is True and (spec.get("toolkit") or {}).get("enabled") is not False


def _settled(support: CdiSupport, n: GpuNode, operator_cdi: bool) -> bool:
    """The GPU Operator's toolkit configures this node's runtime for CDI (its operand not switched off here)."""
    return support.toolkit_settles and operator_cdi and n.deploy.get("container-toolkit") != "false"


def _versions(versions: list[str]) -> str:
    """`containerd://1.6.38 x3, containerd://1.6.20` and how many more: one line at any fleet size."""
    counts = Counter(versions).most_common()
    shown = [f"{v} x{c}" if c > 1 else v for v, c in counts[:_VERSIONS_SHOWN]]
    more = len(counts) - _VERSIONS_SHOWN
    return ", ".join(shown) + (f" and {more} more version(s)" if more > 0 else "")


@rule(
    RULE_ID,
    BLOCKER,
    WARNING,
    summary="a GPU node's container runtime cannot (or may not, as configured) inject the DRA driver's CDI devices",
)
def container_runtime_cdi(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker (node-scoped: the plan leaves the nodes out) where a GPU node switched in place runs a
    container runtime (`status.nodeInfo.containerRuntimeVersion`) that cannot inject CDI devices named in the CRI:
    containerd before 1.7.2, CRI-O before 1.28, Docker before 25; warning where it can only if configured so, which
    the API does not show: containerd 1.7.2+ (`enable_cdi = true`; unless the first ClusterPolicy says
    `spec.cdi.enabled: true` and its toolkit runs on the node, which sets it), Docker 25+ (`features.cdi` and a
    cri-dockerd that passes CDI devices); nothing on containerd 2.x and CRI-O 1.28+ (on by default). One finding
    per pool and kind; other runtimes and versions without major.minor.patch are not judged. Rests on: the DRA
    driver hands devices over only as CDI ids (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/cdi.go`,
    `docs/prerequisites.md`), which the kubelet passes only in the CRI `CDIDevices` field since 1.31 (kubernetes
    v1.37.2 `pkg/kubelet/cm/dra/manager.go`); containerd v1.6.38 `pkg/cri` (no CDI), v1.7.0/v1.7.2
    `pkg/cri/server/container_create_linux.go` (annotations only, then the field), v1.7.27
    `pkg/cri/config/config_unix.go` (`EnableCDI: false`), v2.0.0 `internal/cri/config/config_unix.go`
    (`EnableCDI: true`); cri-o v1.27.8/v1.28.0 `internal/factory/container/device.go`; moby/moby#45134,
    Mirantis/cri-dockerd#522; nvidia-container-toolkit v1.19.1 `cmd/nvidia-ctk-installer/container/runtime/
    runtime.go` (the operator's toolkit sets `enable_cdi` when CDI is on).
    """
    operator_cdi = any(_operator_cdi(cp) for cp in cluster_policies(ctx.state)[:1])
    groups: dict[tuple[str, str, str], tuple[CdiSupport, list[GpuNode]]] = {}
    for n in ctx.inventory.nodes:
        support = cdi_support(n.runtime_version)
        if support is None or not switched_in_place(ctx, n) or _settled(support, n, operator_cdi):
            continue
        groups.setdefault((n.pool, support.verdict, support.why), (support, []))[1].append(n)
    for (pool, verdict, why), (support, nodes) in sorted(groups.items()):
        names = sorted(n.name for n in nodes)
        versions = _versions([n.runtime_version or "" for n in nodes])
        objects = tuple(ObjectRef("Node", name) for name in names)
        if verdict == UNSUPPORTED:
            yield Finding(
                RULE_ID,
                BLOCKER,
                f"pool {pool}: {len(names)} GPU node(s) run a container runtime that cannot inject the CDI devices "
                f"the DRA driver prepares ({versions}): {why}. Their canary would fail after the drain and roll "
                "back. The plan leaves these nodes out",
                f"{support.fix} on these nodes, then plan again",
                objects,
            )
        else:
            yield Finding(
                RULE_ID,
                WARNING,
                f"pool {pool}: {len(names)} GPU node(s) run a container runtime that injects the CDI devices the "
                f"DRA driver prepares only if configured so ({versions}): {why}, which the API does not show; "
                "if it is off, each wave's canary fails after its drain and rolls back",
                f"verify on these nodes: {support.fix}",
                objects,
            )
