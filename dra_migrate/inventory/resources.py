"""GPU resource names and the per-pod request rule.

A pod's effective request for a resource follows Kubernetes' rule (k8s.io/component-helpers
resource/helpers.go `PodRequests`, KEP-753 sidecars): the larger of
  * the sum over app containers plus every restartable init container ("sidecar"), and
  * for each regular init container, its own request plus the sidecars started before it.
A container that sets only a limit for an extended resource requests that limit (the API server
defaults requests from limits; extended resources cannot be overcommitted).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from dra_migrate.cluster.quantity import parse_quantity

__all__ = ["parse_quantity"]

GPU_PREFIX = "nvidia.com/"
# Names the NVIDIA device plugin advertises by default (k8s-device-plugin internal/rm/rm.go, api/config/v1).
DEFAULT_GPU = "nvidia.com/gpu"
SHARED_GPU = "nvidia.com/gpu.shared"
# What `renameByDefault` appends to a time-sliced or MPS-shared name (api/config/v1 consts.go
# DefaultSharedResourceNameSuffix): `nvidia.com/gpu.shared`, `nvidia.com/mig-1g.10gb.shared`.
SHARED_SUFFIX = ".shared"
# Fractional-GPU schemes: names that give a container part of a device, beside (or instead of) a whole-GPU
# count. DRA's extended-resource path and a claim allocate whole devices, so these do not migrate as-is.
# HAMi: Project-HAMi/HAMi README "Resource" (nvidia.com/gpumem, gpumem-percentage, gpucores beside
# nvidia.com/gpu); Alibaba gpushare-scheduler-extender docs/userguide.md (aliyun.com/gpu-mem); Tencent
# gpu-manager README (tencent.com/vcuda-core, vcuda-memory).
FRACTIONAL_GPU_RESOURCES = frozenset(
    {
        "nvidia.com/gpucores",
        "nvidia.com/gpumem",
        "nvidia.com/gpumem-percentage",
        "aliyun.com/gpu-mem",
        "tencent.com/vcuda-core",
        "tencent.com/vcuda-memory",
    }
)
_MIG_RE = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb(\.[a-z0-9.]+)?$")
# A MIG resource's compute size (nvidia.com/mig-1g.10gb -> 1), and the same in GPU feature discovery's product label
# under the single strategy, "<model>-MIG-<profile>" (k8s-device-plugin v0.18.0 internal/lm/mig-strategy.go,
# resource.go `productLabel`): "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb".
_MIG_SIZE_RE = re.compile(r"^nvidia\.com/mig-(\d+)g\.")
_MIG_PRODUCT_RE = re.compile(r"-MIG-(\d+)g\.")


def mig_compute_sizes(node: dict[str, Any]) -> set[int]:
    """The MIG compute sizes (1 for 1g.10gb) a node's GPUs are partitioned into, from the MIG resources it
    advertises (mixed strategy) or its `nvidia.com/gpu.product` label (single strategy); empty: none seen."""
    capacity = (node.get("status") or {}).get("capacity") or {}
    sizes = {int(m.group(1)) for r in capacity if (m := _MIG_SIZE_RE.match(str(r)))}
    product = str(((node.get("metadata") or {}).get("labels") or {}).get("nvidia.com/gpu.product") or "")
    return sizes | {int(m.group(1)) for m in _MIG_PRODUCT_RE.finditer(product)}


_MAX_COUNT = 1 << 31


def quantity_int(value: Any) -> int:
    """An extended-resource count. Extended resources are whole numbers; a fraction is rounded up."""
    # The common case, without regex or Decimal. isdecimal, not isdigit: int() takes every decimal digit,
    # and "²" is a digit it refuses.
    if type(value) is str and value.isdecimal():
        return int(value)
    q = parse_quantity(value)
    if q is None:
        return 0
    q = min(q, Decimal(_MAX_COUNT))  # snapshots refuse more; manifests and live objects are capped, no huge int
    i = int(q)
    return i if i == q else i + 1


def is_default_gpu_name(name: str) -> bool:
    return name in (DEFAULT_GPU, SHARED_GPU) or bool(_MIG_RE.match(name))


class GpuNames:
    """Which resource names count as device-plugin GPUs in this cluster.

    The names the NVIDIA device plugin advertises: `nvidia.com/gpu`, `nvidia.com/mig-<profile>` and, under
    time-slicing or MPS with `renameByDefault`, their `.shared` renames; plus what a device-plugin config
    names (`extra`). Not every nvidia.com/* a node advertises: no release of the plugin advertises a name of
    its own choosing (the config's `resources` and a sharing resource's `rename` are cleared on load, v0.12.0
    `cmd/nvidia-device-plugin/main.go` through v0.18.0 `api/config/v1/config.go`
    `DisableResourceNamingInConfig`), while other plugins use the prefix too: the NVIDIA Network Operator's
    SR-IOV and RDMA devices (`resourcePrefix: nvidia.com`, Mellanox/network-operator
    `deployment/network-operator/values.yaml`; `nvidia.com/hostdev`, `nvidia.com/sriov_rdma_vf`) and GPUs
    passed to VMs (`nvidia.com/<PCI device name>`). Counting those as GPUs made their pods GPU consumers
    and every node's switch wait for them to leave, which they never do.
    """

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.extra = frozenset(n for n in extra if n.startswith(GPU_PREFIX))
        self._seen: dict[str, bool] = {}  # a fleet uses a handful of names, asked about 100,000 times

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        known = self._seen.get(name)
        if known is None:
            known = self._seen[name] = name in self.extra or is_default_gpu_name(name)
        return known


def container_requests(container: dict[str, Any], names: GpuNames) -> dict[str, int]:
    """GPU requests of one container: requests, or the limit where no request is given."""
    res = container.get("resources")
    if not res or not isinstance(res, dict):
        return {}
    out: dict[str, int] = {}
    for part in ("limits", "requests"):  # requests win over limits
        source = res.get(part)
        if not source or not isinstance(source, dict):
            continue
        for name, value in source.items():
            # Cheap prefix test first: almost every request is cpu or memory.
            if isinstance(name, str) and name.startswith(GPU_PREFIX) and name in names:
                out[name] = quantity_int(value)
    return {k: v for k, v in out.items() if v}


def pod_requests(app: Sequence[dict[str, Any]], init: Sequence[dict[str, Any]], names: GpuNames) -> dict[str, int]:
    """Effective per-pod GPU requests (see the module docstring for the rule)."""
    if not init and len(app) == 1 and isinstance(app[0], dict):  # the common pod: one container
        one = container_requests(app[0], names)
        return one if len(one) < 2 else dict(sorted(one.items()))
    total: dict[str, int] = {}
    for c in app:
        if isinstance(c, dict):
            _add(total, container_requests(c, names))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in init:
        if not isinstance(c, dict):
            continue
        req = container_requests(c, names)
        if c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            _max(init_peak, sidecars)
        else:
            _max(init_peak, _sum(sidecars, req))
    _add(total, sidecars)
    _max(total, init_peak)
    return {k: v for k, v in sorted(total.items()) if v}


def _add(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _sum(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    _add(out, b)
    return out


def _max(into: dict[str, int], other: dict[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v
