"""LimitRanges that name a GPU resource, and what they do to a pod whose containers name none.

A LimitRange is no cap that quietly stops counting once a workload's GPUs come from a ResourceClaim. Its
admission plugin acts on every pod created in its namespace (k8s.io/kubernetes@v1.37.2):

* the API server stores a Container item with its defaults filled in: the default limit is the max where
  unset, the default request the default limit, else the min (pkg/apis/core/v1/defaults.go
  `SetDefaults_LimitRangeItem`; a manifest not yet applied is read the same way here);
* the LimitRanger gives every container and init container that names no resource R the Container items'
  default limit and default request for R (plugin/pkg/admission/limitranger/admission.go
  `defaultContainerResourceRequirements`, `mergeContainerResources`), then refuses a pod whose containers
  (Container items) or whose sum (Pod items) has no request for R under a min, or no limit under a max
  (`minConstraint`, `maxConstraint`: "No request is specified", "No limit is specified"; under a
  `maxLimitRequestRatio`, `limitRequestRatioConstraint`, "no request is specified");
* an extended resource's request must equal its limit, and a request needs one (pkg/apis/core/validation/
  validation.go: "Limit must be set for non overcommitable resources").

So a pod converted to a ResourceClaim, whose containers no longer name nvidia.com/gpu, either gets the GPU
request back beside its claim (a second device, or a pod no node fits) or is refused outright. The readers
here are pure and tolerant of any shape (a field of the wrong type is read as absent): `check` reads the
cluster's LimitRanges, `convert` the manifests it is given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dra_migrate.inventory.dependents import as_list, as_map
from dra_migrate.inventory.resources import GpuNames

LIMIT_RANGE = "LimitRange"  # core v1: its state key is its kind


@dataclass(frozen=True)
class GpuLimitEffect:
    """What one LimitRange does to a pod that names the GPU resource `resource` in none of its containers."""

    namespace: str
    name: str
    resource: str
    adds: str | None  # the limit (and request) each container that names none is given; None when refused
    refusal: str | None  # why such a pod is refused, if it is

    def says(self) -> str:
        """What it does to a pod converted to a ResourceClaim in its namespace, as one clause."""
        if self.refusal is not None:
            return (
                f"refuses every pod whose containers do not name {self.resource} ({self.refusal}): pods "
                "converted to ResourceClaims are refused in its namespace"
            )
        return (
            f"adds `{self.resource}: {self.adds}` to every container that does not name it: a pod converted to "
            "a ResourceClaim gets a device-plugin GPU request back beside its claim (a second device, or no node "
            "fits it)"
        )


def _items(obj: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for item in as_list(as_map(obj.get("spec")).get("limits")):
        if isinstance(item, Mapping):
            yield item


def _named(items: list[Mapping[str, Any]], gpu_names: GpuNames) -> list[str]:
    fields = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
    found = {str(k) for item in items for f in fields for k in as_map(item.get(f)) if k in gpu_names}
    return sorted(found)


def _container_defaults(items: list[Mapping[str, Any]], resource: str) -> tuple[Any, Any]:
    """The default limit and default request the Container items give `resource`, as the API server stores
    them (`SetDefaults_LimitRangeItem`); a later item overrides an earlier one, as the admission plugin's
    loop does."""
    limit = request = None
    for item in items:
        if item.get("type") != "Container":
            continue
        mx, mn, df, dr = (as_map(item.get(f)).get(resource) for f in ("max", "min", "default", "defaultRequest"))
        item_limit = df if df is not None else mx
        item_request = next((v for v in (dr, item_limit, mn) if v is not None), None)
        limit = item_limit if item_limit is not None else limit
        request = item_request if item_request is not None else request
    return limit, request


def _refusal(items: list[Mapping[str, Any]], resource: str, limit: Any, request: Any) -> str | None:
    """Why a pod that names `resource` nowhere is refused once the defaults are given, or None. (A default
    request unequal to the default limit is no case: the API server refuses such a LimitRange, "default value
    ... must equal to defaultRequest value", pkg/apis/core/validation/validation.go `ValidateLimitRange`.)"""
    if request is not None and limit is None:
        return f"its default request {request} comes without a limit, which an extended resource needs"
    if limit is not None:
        return None  # every container names it now, so no bound finds it missing
    for item in items:
        kind = item.get("type")
        if kind not in ("Container", "Pod"):
            continue
        for bound, wants in (("min", "a request"), ("max", "a limit"), ("maxLimitRequestRatio", "a request")):
            value = as_map(item.get(bound)).get(resource)
            if value is not None:
                return f"{kind} {bound} {value}: it wants {wants} for it"
    return None


def gpu_limit_effects(obj: Mapping[str, Any], gpu_names: GpuNames) -> list[GpuLimitEffect]:
    """What a LimitRange does to pods that name none of the GPU resources it names; [] when it names none."""
    items = list(_items(obj))
    meta = as_map(obj.get("metadata"))
    where = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    out = []
    for resource in _named(items, gpu_names):
        limit, request = _container_defaults(items, resource)
        refusal = _refusal(items, resource, limit, request)
        if refusal is not None:
            out.append(GpuLimitEffect(*where, resource, None, refusal))  # what it would add is moot
        elif limit is not None:
            out.append(GpuLimitEffect(*where, resource, str(limit), None))
    return out
