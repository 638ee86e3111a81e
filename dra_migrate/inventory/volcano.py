"""Volcano queues that budget GPUs by their device-plugin name.

A Volcano Queue (scheduling.volcano.sh/v1beta1, volcano.sh/apis v1.13.0 pkg/apis/scheduling/v1beta1/types.go
`QueueSpec`) caps (`capability`), shares (`deserved`) and reserves (`guarantee.resource`) resources by name.
Volcano counts a pod's container requests against them: a pod that keeps `nvidia.com/gpu` under the DRA
mapping is counted as before, but a ResourceClaim was not counted at all (volcano-sh/volcano#4400). The
capacity plugin counts claims from volcano-sh/volcano PR #5058 (merged 2026-04), under the reserved key
`deviceclass/<DeviceClass>` (docs/design/capacity-dra-support.md): a queue that states only `nvidia.com/gpu`
no longer limits the workloads converted to claims.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dependents import add_quantities, as_map
from dra_migrate.inventory.gitops import GitOpsOwner, gitops_owner
from dra_migrate.inventory.resources import GPU_PREFIX

QUEUE = "scheduling.volcano.sh/Queue"
DEVICECLASS_KEY = "deviceclass/"  # the capacity plugin's reserved key: deviceclass/<DeviceClass>
_FIELDS = (("capability", ("capability",)), ("deserved", ("deserved",)), ("guarantee", ("guarantee", "resource")))
FIELD_PATHS = dict(_FIELDS)  # where each field's ResourceList is in a QueueSpec


@dataclass(frozen=True)
class VolcanoGpuBudget:
    queue: str
    field: str  # capability, deserved or guarantee
    resource: str  # nvidia.com/gpu, nvidia.com/mig-1g.10gb, ...
    value: str
    device_class_keys: dict[str, str]  # the same field's deviceclass/<class> keys, with their values
    owner: GitOpsOwner | None


def volcano_gpu_budgets(state: ClusterState) -> list[VolcanoGpuBudget]:
    """Every GPU device-plugin name a Volcano Queue budgets, field by field; not a time-sliced `.shared` name,
    which convert refuses (its pods keep the request, and are counted under it as before)."""
    out: list[VolcanoGpuBudget] = []
    for q in state.of(QUEUE):
        name = str(as_map(q.get("metadata")).get("name") or "")
        spec = as_map(q.get("spec"))
        for field, path in _FIELDS:
            budget: Any = spec
            for key in path:
                budget = as_map(budget).get(key)
            budget = as_map(budget)
            classes = {str(k): str(v) for k, v in budget.items() if str(k).startswith(DEVICECLASS_KEY)}
            for resource, value in sorted(budget.items(), key=lambda kv: str(kv[0])):
                if str(resource).startswith(GPU_PREFIX) and not str(resource).endswith(".shared"):
                    out.append(VolcanoGpuBudget(name, field, str(resource), str(value), classes, gitops_owner(q)))
    return out


def keys_to_add(
    budgets: Iterable[VolcanoGpuBudget], class_for: Callable[[str], str]
) -> dict[str, dict[str, dict[str, str]]]:
    """queue -> field -> {`deviceclass/<class>`: value}: for each GPU name a field budgets without its class's key,
    that key with the same value (names of one class summed: two MIG profiles are both mig.nvidia.com's). A
    time-sliced `.shared` name is no budget here (volcano_gpu_budgets)."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for b in budgets:
        key = f"{DEVICECLASS_KEY}{class_for(b.resource)}"
        if key in b.device_class_keys:
            continue
        keys = out.setdefault(b.queue, {}).setdefault(b.field, {})
        keys[key] = add_quantities(keys.get(key), b.value)
    return out
