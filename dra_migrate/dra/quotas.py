"""The DRA limits a GPU ResourceQuota needs, shared by the quota-continuity rule, the plan's set-quota step
and `generate dependents` (docs/dependents.md "Quotas").

The quota evaluator of k8s.io/kubernetes@v1.37.2 (pkg/quota/v1/evaluator/core/resource_claims.go) counts a
ResourceClaim's devices under its own class only, `<class>.deviceclass.resource.k8s.io/devices` (`Usage`), and
under `requests.R` only when that class's `extendedResourceName` is R (`addExtendedResourceQuota`). A GPU
request takes one of two DRA paths, each with its class:

* **extended-resource claims**: a pod that keeps `nvidia.com/gpu` on a migrated node gets a claim that
  kube-scheduler makes from the class whose `extendedResourceName` is R (KEP-5004); it counts under
  `requests.R` as well, so the old limit keeps holding it;
* **converted workloads**: `convert` writes claims of the NVIDIA driver's classes (gpu.nvidia.com for
  `nvidia.com/gpu`, mig.nvidia.com with a profile selector for `nvidia.com/mig-*`; convert/claims.py
  `alternatives_for`). mig.nvidia.com has no `extendedResourceName`: only a limit on that class counts them
  (`apart`: no key counts them with the pods that keep R, so a part-converted namespace can hold up to N under
  each). The chart's gpu.nvidia.com has `extendedResourceName: nvidia.com/gpu` on resource.k8s.io/v1
  (dra-driver-nvidia-gpu v0.4.1 templates/deviceclass-gpu.yaml): in the cluster, it is the serving class and
  `requests.R` counts its converted claims too.

So `requests.R: N` gets `C.deviceclass...: N` for the extended-resource class C, and the driver class D gets
the sum of the limits of the names it serves (one class for every MIG profile: the quota cannot tell them
apart). A limit on D that would refuse claims for a name the namespace uses and this quota leaves unlimited
(a MIG profile it does not name) is not added: the finding says those converted claims escape instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.census import driver_class_for
from dra_migrate.dra.deviceclasses import mig_profile_of
from dra_migrate.inventory.consumers import Consumer
from dra_migrate.inventory.dependents import (
    REQUESTS,
    QuotaLimit,
    add_quantities,
    as_map,
    device_quota_key,
    gpu_quota_limits,
    ns_name,
    quota_hard,
)
from dra_migrate.inventory.gitops import GitOpsOwner
from dra_migrate.inventory.resources import DEFAULT_GPU


def converted_class(resource: str) -> str | None:
    """The class `convert` writes for `resource` without --device-class; None for a name it does not convert
    by default (a custom rename needs --device-class; a `.shared` name is refused)."""
    return driver_class_for(resource) if resource == DEFAULT_GPU or mig_profile_of(resource) else None


@dataclass
class QuotaDra:
    """One quota's GPU limits and the DRA limits to add beside them."""

    namespace: str
    name: str
    owner: GitOpsOwner | None
    hard: dict[str, str]  # spec.hard as read
    add: dict[str, str] = field(default_factory=dict)  # key -> quantity
    continues: dict[str, str] = field(default_factory=dict)  # the requests.R limits the added values derive from
    # per limited R: the added keys that carry its limit (for the findings)
    keys_for: dict[str, list[str]] = field(default_factory=dict)
    # driver class -> names the namespace uses that this quota leaves unlimited (so no limit on the class)
    escapes: dict[str, list[str]] = field(default_factory=dict)
    # the limited names whose converted claims count under their class's limit alone, not under `requests.R`
    # (their class has no extendedResourceName R): while the namespace is part converted, the two limits
    # together admit up to twice the old one
    apart: set[str] = field(default_factory=set)


def _extended_names(state: ClusterState) -> dict[str, str]:
    """DeviceClass name -> its spec.extendedResourceName, for the classes in the cluster that have one."""
    out: dict[str, str] = {}
    for dc in state.of("resource.k8s.io/DeviceClass"):
        ext = as_map(dc.get("spec")).get("extendedResourceName")
        if isinstance(ext, str) and ext:
            out[ns_name(dc)[1]] = ext
    return out


def names_in_use(consumers: Iterable[Consumer]) -> dict[str, set[str]]:
    """namespace -> the GPU names its workloads request."""
    out: dict[str, set[str]] = {}
    for c in consumers:
        out.setdefault(c.namespace, set()).update(c.totals)
    return out


def quota_dra(
    state: ClusterState, classes: Mapping[str, str], in_use: Mapping[str, set[str]]
) -> dict[tuple[str, str], QuotaDra]:
    """(namespace, name) -> what each quota with an unscoped `requests.R` limit on a served GPU name gets.
    `classes` is R -> the class whose extendedResourceName is R (dependents.class_by_resource)."""
    limits: dict[tuple[str, str], list[QuotaLimit]] = {}
    for q in gpu_quota_limits(state):
        if q.key.startswith(REQUESTS) and not q.scoped and q.resource in classes:
            limits.setdefault((q.namespace, q.quota), []).append(q)
    out: dict[tuple[str, str], QuotaDra] = {}
    extended = _extended_names(state)
    for (ns, name), qs in sorted(limits.items()):
        d = QuotaDra(ns, name, qs[0].owner, quota_hard(state, ns, name))
        limited = {q.resource for q in qs}
        driver: dict[str, list[QuotaLimit]] = {}
        for q in qs:
            key = device_quota_key(classes[q.resource])
            d.keys_for.setdefault(q.resource, []).append(key)
            if key not in d.hard:
                d.add[key] = q.value
                d.continues[q.key] = q.value
            cls = converted_class(q.resource)
            if cls is not None and cls != classes[q.resource]:
                driver.setdefault(cls, []).append(q)
        for cls, served in sorted(driver.items()):
            key = device_quota_key(cls)
            unlimited = sorted(r for r in in_use.get(ns, ()) if converted_class(r) == cls and r not in limited)
            if unlimited:
                d.escapes[cls] = unlimited
                continue
            for q in served:
                d.keys_for[q.resource].append(key)
                if extended.get(cls) != q.resource:
                    d.apart.add(q.resource)
            if key in d.hard:
                continue
            total: str | None = None
            for q in served:
                total = add_quantities(total, q.value)
                d.continues[q.key] = q.value
            d.add[key] = str(total)
        out[(ns, name)] = d
    return out


def kueue_mappings(resources: Iterable[str], classes: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """Kueue's `resources.deviceClassMappings` for a ClusterQueue's GPU names: (name, classes). The class
    whose extendedResourceName is the name, and the class `convert`'s templates claim: Kueue makes a workload
    whose template class is not mapped inadmissible (sigs.k8s.io/kueue@v0.17.0 pkg/dra/claims.go). Not
    mig.nvidia.com: it serves every profile and a class maps to one name only (pkg/config/validation.go
    `validateDeviceClassMappings`), and its claims select the profile with CEL, which Kueue refuses
    (`countDevicesPerClass`)."""
    out = []
    for r in sorted(set(resources)):
        if r not in classes:
            continue
        names = [classes[r]]
        cls = converted_class(r)
        if cls is not None and not mig_profile_of(r) and cls not in names:
            names.append(cls)
        out.append((r, names))
    return out
