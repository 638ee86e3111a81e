"""Rules about what workloads ask for (rather than what nodes offer).

Facts each rule rests on are cited beside it (primary sources); docs/rules.md is generated from the docstrings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.cluster.templates import ResolvedTemplate
from dra_migrate.inventory.resources import FRACTIONAL_GPU_RESOURCES

WARNING = Severity.WARNING


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _ref(kind: str, o: dict[str, Any]) -> ObjectRef:
    return ObjectRef.of(kind, o)


def _fractional_names(containers: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for c in containers:
        res = c.get("resources")
        if not isinstance(res, dict):
            continue
        for part in ("limits", "requests"):
            m = res.get(part)
            if isinstance(m, dict):
                found.update(k for k in m if k in FRACTIONAL_GPU_RESOURCES)
    return found


def _template_names(templates: list[ResolvedTemplate]) -> set[str]:
    names: set[str] = set()
    for t in templates:
        names |= _fractional_names(t.containers() + t.init_containers())
    return names


def _has_owner(o: dict[str, Any]) -> bool:
    return bool(_meta(o).get("ownerReferences"))


def fractional_users(ctx: CheckContext) -> dict[ObjectRef, set[str]]:
    """Top-level workloads (and bare pods) whose containers ask for a fraction of a GPU: object -> names.

    Owned objects (a Deployment's ReplicaSets, a workload's pods) are their owner's demand, said once."""
    state = ctx.state
    out: dict[ObjectRef, set[str]] = {}
    for key in state.templates.kind_keys():
        if state.templates.is_blueprint(key):
            continue
        for o in state.of(key):
            if _has_owner(o):
                continue
            names = _template_names(state.templates.resolve(key, o))
            if names:
                out[_ref(str(o.get("kind", key)), o)] = names
    return out


# HAMi and similar schemes hand a container part of a GPU (nvidia.com/gpucores: a percentage of its cores,
# nvidia.com/gpumem: MiB of its memory; Project-HAMi/HAMi README "Resource"). DRA's extended-resource path
# allocates whole devices (KEP-5004: one extended-resource unit is one device of the class), and the NVIDIA
# DRA driver shares a GPU only through explicit claims with a sharing config, so these pods would take
# whole GPUs after the migration, or not schedule.
@rule(
    "fractional-gpu-request",
    WARNING,
    summary="workloads ask for a fraction of a GPU (HAMi gpucores/gpumem and similar), which DRA cannot serve",
)
def fractional_gpu_request(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a workload (or bare pod) asks for part of a GPU: HAMi's `nvidia.com/gpucores` /
    `nvidia.com/gpumem` / `gpumem-percentage` beside `nvidia.com/gpu`, Alibaba's `aliyun.com/gpu-mem`, Tencent's
    `tencent.com/vcuda-*`. Rests on: DRA allocates whole devices: one extended-resource unit is one device
    (KEP-5004); HAMi's names: Project-HAMi/HAMi README "Resource"; `convert` refuses these pods.
    """
    users = fractional_users(ctx)
    if not users:
        return
    names = sorted(set().union(*users.values()))
    yield Finding(
        "fractional-gpu-request",
        WARNING,
        f"{len(users)} workload(s) ask for a fraction of a GPU ({', '.join(names)}): DRA's extended-resource "
        "path and ResourceClaims allocate whole devices, so after the migration each would take whole GPUs "
        "or not schedule",
        "keep their pool on the fractional-GPU scheduler (leave it out of the plan), or move them to whole "
        "GPUs, MIG devices, or explicit claims with the DRA driver's sharing config; dra-migrate convert "
        "refuses them",
        tuple(sorted(users)),
    )
