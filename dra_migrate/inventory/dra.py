"""DRA state: DeviceClasses, ResourceSlices per node and driver, ResourceClaims and templates.

The NVIDIA DRA driver's name is gpu.nvidia.com (kubernetes-sigs/dra-driver-nvidia-gpu); the
scheduler marks the claims it creates for extended-resource requests with the annotation
resource.kubernetes.io/extended-resource-claim: "true" (k8s.io/api resource/v1 types.go,
ExtendedResourceClaimAnnotation; KEP-5004).
"""

from __future__ import annotations

import re
from typing import Any

from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.errors import InputError

NVIDIA_DRA_DRIVER = "gpu.nvidia.com"
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# A driver name is a DNS subdomain of at most 63 characters (k8s.io/api resource/v1 types.go
# DriverNameMaxLength; validation in pkg/apis/resource/validation).
_DRIVER_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _created(dc: Obj) -> str:
    stamp = (dc.get("metadata") or {}).get("creationTimestamp")
    return stamp if isinstance(stamp, str) else ""


def extended_resource_classes(state: ClusterState) -> dict[str, list[str]]:
    """extendedResourceName -> the DeviceClasses that declare it, the one the scheduler serves the name with first:
    the newest (creationTimestamp), a tie going to the name sorted first (k8s.io/dynamic-resource-allocation v0.37.2
    deviceclass/extendedresourcecache/extendedresourcecache.go; k8s.io/api v0.37.2 resource/v1 types.go
    `ExtendedResourceName`). A class without a timestamp (a hand-made snapshot) sorts as the oldest. The API server
    writes RFC 3339 in UTC with seconds (`...T10:00:00Z`), so the text sorts as the time does."""
    out: dict[str, list[Obj]] = {}
    for dc in state.of("resource.k8s.io/DeviceClass"):
        ern = (dc.get("spec") or {}).get("extendedResourceName")
        if isinstance(ern, str) and ern:
            out.setdefault(ern, []).append(dc)
    names: dict[str, list[str]] = {}
    for ern, classes in out.items():
        by_name = sorted(classes, key=lambda dc: str((dc.get("metadata") or {}).get("name")))
        newest_first = sorted(by_name, key=_created, reverse=True)  # stable: a tie keeps the name order
        names[ern] = [str((dc.get("metadata") or {}).get("name")) for dc in newest_first]
    return names


def check_driver_name(name: str) -> str:
    """`--dra-driver NAME`, validated as the API server validates ResourceSlice.spec.driver."""
    if len(name) > 63 or not _DRIVER_RE.match(name):
        raise InputError(
            f"bad --dra-driver {name!r}: not a DNS subdomain of at most 63 characters",
            "give the driver name its ResourceSlices carry, e.g. gpu.nvidia.com",
        )
    return name


def _meta(o: Obj) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _spec(o: Obj) -> dict[str, Any]:
    s = o.get("spec")
    return s if isinstance(s, dict) else {}


def slice_devices_by_node(state: ClusterState) -> dict[str, dict[str, int]]:
    """node -> driver -> number of devices in that node's slices (highest pool generation only)."""
    latest: dict[tuple[str, str], int] = {}
    slices = state.of("resource.k8s.io/ResourceSlice")
    for s in slices:
        spec = _spec(s)
        pool = spec.get("pool") or {}
        k = (str(spec.get("driver", "")), str(pool.get("name", "")))
        latest[k] = max(latest.get(k, 0), int(pool.get("generation") or 0))
    out: dict[str, dict[str, int]] = {}
    for s in slices:
        spec = _spec(s)
        node = spec.get("nodeName")
        pool = spec.get("pool") or {}
        driver = str(spec.get("driver", ""))
        if not isinstance(node, str) or int(pool.get("generation") or 0) < latest[(driver, str(pool.get("name", "")))]:
            continue  # consumers use only a pool's highest generation (resource/v1 ResourcePool docs)
        per = out.setdefault(node, {})
        per[driver] = per.get(driver, 0) + len(spec.get("devices") or [])
    return out


def nodes_with_counters(state: ClusterState, driver: str = NVIDIA_DRA_DRIVER) -> frozenset[str]:
    """Nodes whose `driver` slices carry shared counters or devices that consume them: what the NVIDIA
    driver publishes under DynamicMIG (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/driver.go,
    partitions.go). The counters-only slice of k8s >= 1.35 has no nodeName but its pool is the node's."""
    out: set[str] = set()
    for s in state.of("resource.k8s.io/ResourceSlice"):
        spec = _spec(s)
        if spec.get("driver") != driver:
            continue
        devices = [d for d in spec.get("devices") or [] if isinstance(d, dict)]
        if spec.get("sharedCounters") or any(d.get("consumesCounters") for d in devices):
            node = spec.get("nodeName") or (spec.get("pool") or {}).get("name")
            if isinstance(node, str):
                out.add(node)
    return frozenset(out)


def device_classes(state: ClusterState) -> list[dict[str, Any]]:
    out = []
    for dc in sorted(state.of("resource.k8s.io/DeviceClass"), key=lambda o: str(_meta(o).get("name"))):
        spec = _spec(dc)
        out.append(
            {
                "name": _meta(dc).get("name"),
                "selectors": [
                    (sel.get("cel") or {}).get("expression")
                    for sel in spec.get("selectors") or []
                    if isinstance(sel, dict)
                ],
                "extendedResourceName": spec.get("extendedResourceName"),
                "creationTimestamp": _meta(dc).get("creationTimestamp"),
            }
        )
    return out


def _claim(c: Obj) -> dict[str, Any]:
    meta = _meta(c)
    results = ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    ext = (meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "extendedResourceClaim": ext,
        "allocated": bool((c.get("status") or {}).get("allocation")),
        "devices": [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results if isinstance(r, dict)],
    }


def summarize_dra(state: ClusterState, plugin_daemonsets: list[str]) -> dict[str, Any]:
    by_node = slice_devices_by_node(state)
    claims = [_claim(c) for c in state.of("resource.k8s.io/ResourceClaim")]
    claims.sort(key=lambda c: (str(c["namespace"]), str(c["name"])))
    nodes_with_nvidia_slices = sorted(n for n, d in by_node.items() if d.get(NVIDIA_DRA_DRIVER))
    return {
        "deviceClasses": device_classes(state),
        "resourceSlices": [
            {"node": node, "driver": driver, "devices": count}
            for node in sorted(by_node)
            for driver, count in sorted(by_node[node].items())
        ],
        "resourceClaims": claims,
        "resourceClaimTemplates": sorted(
            f"{_meta(t).get('namespace')}/{_meta(t).get('name')}"
            for t in state.of("resource.k8s.io/ResourceClaimTemplate")
        ),
        "nvidiaDraPlugin": {
            # Installed when its DaemonSet exists or its slices do (a snapshot may hold one without the other).
            "installed": bool(plugin_daemonsets or nodes_with_nvidia_slices),
            "daemonSets": plugin_daemonsets,
            "nodesWithSlices": nodes_with_nvidia_slices,
        },
    }
