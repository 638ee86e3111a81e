"""The changes to the objects that depend on the GPU names, as manifests for the repository that owns them
(`dra-migrate generate dependents`, docs/dependents.md).

For a GitOps-owned object these manifests are the only way the change is made (apply never patches it
live); for the others they are what the plan's set-quota steps do, for review or for hand-applying.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dependents import (
    REQUESTS,
    add_quantities,
    class_by_resource,
    device_quota_key,
    gpu_queues,
    gpu_quota_limits,
    quota_hard,
)
from dra_migrate.inventory.gitops import GitOpsOwner


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


def dependent_changes(state: ClusterState, proposals: list[tuple[str, str]]) -> list[DependentChange]:
    """Each GPU quota that can keep its limit under DRA, whole, with the device limit added; and the Kueue
    Configuration fragment that maps the serving DeviceClasses onto the queues' resource names."""
    classes = class_by_resource(state, proposals)
    out: list[DependentChange] = []
    by_quota: dict[tuple[str, str], tuple[GitOpsOwner | None, dict[str, str]]] = {}
    for q in gpu_quota_limits(state):
        cls = classes.get(q.resource)
        if cls is None or q.scoped or not q.key.startswith(REQUESTS):
            continue  # quota-continuity says why no equivalent exists
        original = quota_hard(state, q.namespace, q.quota)
        key = device_quota_key(cls)
        if key in original:
            continue  # already limited under DRA
        owner, hard = by_quota.setdefault((q.namespace, q.quota), (q.owner, original))
        hard[key] = add_quantities(hard.get(key), q.value)
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
                "merge into Kueue's Configuration (Kueue >= 0.17, --feature-gates=DynamicResourceAllocation=true,"
                "DRAExtendedResources=true) so DRA claims of these classes count under the ClusterQueues' "
                "resource names",
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta1",
                    "kind": "Configuration",
                    "resources": {
                        "deviceClassMappings": [{"name": r, "deviceClassNames": [classes[r]]} for r in mapped]
                    },
                },
            )
        )
    return out
