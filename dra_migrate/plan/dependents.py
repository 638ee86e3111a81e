"""Plan steps for what else depends on the GPU names: the DRA quota limits, added in the prepare stage.

Quota continuity (docs/dependents.md "Quotas"): for every unscoped ResourceQuota limit `requests.R: N` on a
GPU resource R that a DeviceClass C serves after the migration, the prepare stage sets
`C.deviceclass.resource.k8s.io/devices: N` on the same quota, and the same limit on the driver class that
`convert`'s claims use when it is another class (mig.nvidia.com, or gpu.nvidia.com without extendedResourceName:
a claim of a class with no extendedResourceName counts only under its own class; see dra/quotas.py), after
the DeviceClasses exist and before any node moves. The old `requests.R` limit is left in place through the
last wave (and after: Kubernetes 1.37 still counts pods' extended-resource requests under it, and with
DRAExtendedResource the claims of a class that maps R too, so removing it would only move the refusal from pod
admission to claim creation). So at no point is a namespace's GPU use unlimited (both limits hold the same N;
though where converted claims count under the driver class alone, a part-converted namespace can hold up to N
under each: docs/dependents.md "Looser while part converted") or blocked (neither counts a device twice: the
claim evaluator subtracts what the pod's requests already count; k8s.io/kubernetes@v1.37.2
pkg/quota/v1/evaluator/core/resource_claims.go addExtendedResourceQuota).

The step carries the GPU limits its values continue (`continues`): if someone changed one since the
plan, apply stops at the step rather than set a device limit that would now block (or loosen) the
namespace.

Quotas a GitOps controller owns get no step (apply never patches them live); the quota-continuity finding
names the change for their repository.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dra_migrate.dra.quotas import names_in_use, quota_dra
from dra_migrate.inventory.dependents import class_by_resource
from dra_migrate.plan.actions import Action, InverseAction
from dra_migrate.plan.model import Inverse, Step

if TYPE_CHECKING:
    from dra_migrate.checks.run import Readiness  # the checks pull in the CEL engine: plan/build.py


def quota_steps(readiness: Readiness) -> list[Step]:
    """One `set-quota` step per quota that gets DRA limits, in (namespace, name) order: the limit on the
    extended-resource class and on the class converted workloads claim (dra/quotas.py)."""
    state = readiness.inventory.state
    classes = class_by_resource(state, [(p.name, p.extended_resource_name) for p in readiness.generation.proposals])
    adds: dict[tuple[str, str], dict[str, str]] = {}
    expect: dict[tuple[str, str], dict[str, str]] = {}
    for key, q in quota_dra(state, classes, names_in_use(readiness.inventory.consumers)).items():
        if q.owner is not None or not q.add:
            continue  # GitOps-owned: the quota-continuity INFO names the change for its repository
        adds[key], expect[key] = q.add, q.continues
    return [
        Step(
            id=f"prepare/set-quota/{ns}/{name}",
            action=Action.SET_QUOTA,
            target=f"ResourceQuota {ns}/{name}",
            params={
                "namespace": ns,
                "name": name,
                "set": dict(sorted(values.items())),
                "continues": dict(sorted(expect[(ns, name)].items())),
            },
            precondition="the DeviceClasses exist; the GPU limits it continues are unchanged; the quota is "
            "not owned by a GitOps controller",
            timeout="30s",
            inverse=Inverse(
                InverseAction.RESTORE_QUOTA, {"namespace": ns, "name": name, "hard": dict.fromkeys(sorted(values))}
            ),
        )
        for (ns, name), values in sorted(adds.items())
    ]


def set_quota_problems(step: dict[str, Any]) -> list[tuple[str, str]]:
    """What is wrong with a set-quota step as a plan file holds it: (field, problem). Its params are
    {namespace, name, set: {limit: quantity}, continues: {limit: quantity}}, and its inverse removes exactly
    the keys it sets (plan/validate.py asks this of every prepare step of this action)."""
    p = step.get("params")
    ok = (
        isinstance(p, dict)
        and set(p) == {"namespace", "name", "set", "continues"}
        and all(isinstance(p[k], str) and p[k] for k in ("namespace", "name"))
        and all(
            isinstance(p[k], dict) and p[k] and all(isinstance(a, str) and isinstance(b, str) for a, b in p[k].items())
            for k in ("set", "continues")
        )
    )
    if not ok or not isinstance(p, dict):
        return [
            ("params", "set-quota takes params {namespace, name, set: {limit: quantity}, continues: {limit: quantity}}")
        ]
    restore = {"namespace": p["namespace"], "name": p["name"], "hard": dict.fromkeys(p["set"])}
    if step.get("inverse") != {"action": "restore-quota", "restore": restore}:
        return [("inverse", "the inverse must remove the limits it sets (restore-quota, restore.hard: null each)")]
    return []
