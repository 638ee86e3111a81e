"""The changes to the objects that depend on the GPU names, as manifests for the repository that owns them
(`dra-migrate generate dependents`, docs/dependents.md).

For a GitOps-owned object these manifests are the only way the change is made (apply never patches it
live); for the others they are what the plan's set-quota steps do, for review or for hand-applying.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.census import driver_class_for
from dra_migrate.dra.quotas import kueue_mappings, names_in_use, quota_dra
from dra_migrate.inventory.consumers import Consumer
from dra_migrate.inventory.dependents import class_by_resource, gpu_queues
from dra_migrate.inventory.gitops import GitOpsOwner
from dra_migrate.inventory.model import build_inventory
from dra_migrate.inventory.volcano import FIELD_PATHS, QUEUE, keys_to_add, volcano_gpu_budgets


@dataclass(frozen=True)
class DependentChange:
    target: str  # "ResourceQuota team-a/gpu"
    owner: GitOpsOwner | None
    why: str
    manifest: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "gitops": self.owner.to_dict() if self.owner else None,
            "why": self.why,
            "manifest": self.manifest,
        }


def dependent_changes(
    state: ClusterState, proposals: list[tuple[str, str]], consumers: Iterable[Consumer] | None = None
) -> list[DependentChange]:
    """Each GPU quota that can keep its limit under DRA, whole, with the device limit added; the Kueue
    Configuration fragment that maps the serving DeviceClasses onto the queues' resource names; and each
    Volcano Queue, whole, with the capacity plugin's DeviceClass keys added (inventory/volcano.py)."""
    classes = class_by_resource(state, proposals)
    out: list[DependentChange] = []
    by_quota: dict[tuple[str, str], tuple[GitOpsOwner | None, dict[str, str]]] = {}
    # The limits for the extended-resource class and for the class convert's claims use (dra/quotas.py).
    in_use = names_in_use(build_inventory(state).consumers if consumers is None else consumers)
    for key, q in quota_dra(state, classes, in_use).items():
        if q.add:
            by_quota[key] = (q.owner, {**q.hard, **q.add})
    for (ns, name), (owner, hard) in sorted(by_quota.items()):
        out.append(
            DependentChange(
                f"ResourceQuota {ns}/{name}",
                owner,
                "the same GPU limit for DRA claims, beside the device-plugin limit (kept)",
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"hard": dict(sorted(hard.items()))},
                },
            )
        )
    mapped = sorted({r for q in gpu_queues(state) for r in q.resources if r in classes})
    if mapped:
        out.append(
            DependentChange(
                "Kueue Configuration",
                None,
                "merge into Kueue's Configuration (Kueue >= 0.17, with DynamicResourceAllocation and "
                "DRAExtendedResources on, in this Configuration's featureGates or as --feature-gates, not both) so "
                "DRA claims of these classes count under the ClusterQueues' resource names",
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta1",
                    "kind": "Configuration",
                    "resources": {
                        "deviceClassMappings": [
                            {"name": r, "deviceClassNames": cs} for r, cs in kueue_mappings(mapped, classes)
                        ]
                    },
                },
            )
        )
    out.extend(_volcano_changes(state))
    return out


def _volcano_changes(state: ClusterState) -> list[DependentChange]:
    """Each Volcano Queue that budgets a GPU name without its DeviceClass key, whole, with the key added beside it."""
    budgets = volcano_gpu_budgets(state)
    owners = {b.queue: b.owner for b in budgets}
    by_name = {str((q.get("metadata") or {}).get("name")): q for q in state.of(QUEUE)}
    out = []
    for name, fields in sorted(keys_to_add(budgets, driver_class_for).items()):
        spec = copy.deepcopy(by_name[name].get("spec") or {})
        for field, keys in fields.items():
            holder = spec
            for part in FIELD_PATHS[field]:
                holder = holder.setdefault(part, {})
            holder.update(keys)
        out.append(
            DependentChange(
                f"Queue {name}",
                owners[name],
                "the same GPU budget for DRA claims under Volcano's capacity plugin (volcano-sh/volcano PR #5058), "
                "beside the device-plugin keys (kept)",
                {
                    "apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": spec,
                },
            )
        )
    return out
