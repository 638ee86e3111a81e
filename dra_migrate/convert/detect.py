"""Finding GPU requests in a manifest: in containers, and where the tool cannot rewrite them.

A GPU request the tool does not understand must never be passed over in silence: a CRD's own count
(`gpu: "1"` in NVIDIA Dynamo's DynamoGraphDeployment, `gpus: 2`), a device-plugin name as a key under a
path no pod template covers, or a request written inside a string (an Argo `podSpecPatch`, a manifest
embedded in a resource template) is reported by path so `convert` can refuse the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from dra_migrate.inventory.resources import FRACTIONAL_GPU_RESOURCES, GpuNames, parse_quantity

GPU_STRING_RE = re.compile(r"nvidia\.com/(gpu|mig-)")


def count_value(raw: Any) -> Decimal | None:
    """A device-plugin count as the API server reads it (k8s.io/apimachinery pkg/api/resource quantity.go
    `UnmarshalJSON`): a number or a quantity string, blanks trimmed (`2`, `2.0`, `"2"`, `1e0`, `"2000m"`);
    `null` (`nvidia.com/gpu:` with no value, as a Helm chart renders an unset value) is a zero quantity.
    None: not a quantity (a flag, a list, a word, an empty string), which the API server refuses."""
    if raw is None:
        return Decimal(0)
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    return parse_quantity(raw)


def count_problem(c: dict[str, Any], resource: str) -> str | None:
    """What the API server refuses in a device-plugin count (kubernetes v1.37.2
    pkg/apis/core/validation/validation.go `ValidateResourceQuantityValue`: non-negative, and an integer for
    an extended resource; `validateResourceRequirements`: a request equal to its limit). A zero count is no
    problem: it is no request (see `is_zero`)."""
    res = c.get("resources")
    values = {
        part: res[part][resource]
        for part in ("requests", "limits")
        if isinstance(res, dict) and isinstance(res.get(part), dict) and resource in res[part]
    }
    read: dict[str, Decimal] = {}
    for part, raw in values.items():
        q = count_value(raw)
        if q is None:
            return f"{resource} in {part} is {raw!r}: not a quantity the API server accepts"
        if q < 0:
            return f"{resource} in {part} is {raw!r}: a device count must not be negative"
        if q != q.to_integral_value():
            return f"{resource} in {part} is {raw!r}: a device count must be an integer"
        read[part] = q
    if len(set(read.values())) > 1:
        return (
            f"{resource}: requests and limits differ ({values['requests']} and {values['limits']}); "
            "an extended resource's request must equal its limit"
        )
    return None


def is_zero(c: dict[str, Any], resource: str) -> bool:
    """A count of 0 (or null) for `resource` wherever the container names it: no request at all. The
    scheduler skips it (kubernetes v1.37.2 pkg/scheduler/framework/plugins/noderesources/fit.go
    `if rQuant == 0 { continue }`) and the device manager allocates nothing for it, so convert leaves it as
    it is, as inventory/resources.py `container_requests` drops it. Call after `count_problem` found none."""
    res = c.get("resources")
    parts = [res.get(p) for p in ("requests", "limits")] if isinstance(res, dict) else []
    return all(count_value(m[resource]) == 0 for m in parts if isinstance(m, dict) and resource in m)


def asks_for_gpu(c: dict[str, Any], names: GpuNames) -> bool:
    """The container names a device-plugin GPU with a count other than zero (or one the API server refuses,
    which convert must report): a container whose every GPU count is 0 asks for nothing."""
    return any(count_problem(c, k) is not None or not is_zero(c, k) for k in gpu_keys(c, names))


def fractional(c: dict[str, Any]) -> list[str]:
    res = c.get("resources")
    if not isinstance(res, dict):
        return []
    found: set[str] = set()
    for part in ("requests", "limits"):
        m = res.get(part)
        if isinstance(m, dict):
            found.update(k for k in m if isinstance(k, str) and k in FRACTIONAL_GPU_RESOURCES)
    return sorted(found)


def gpu_keys(c: dict[str, Any], names: GpuNames) -> list[str]:
    """Device-plugin GPU names in a container's requests and limits, whatever their values."""
    res = c.get("resources")
    found: dict[str, None] = {}
    if isinstance(res, dict):
        for part in ("requests", "limits"):
            m = res.get(part)
            if isinstance(m, dict):
                found.update((k, None) for k in m if isinstance(k, str) and k in names)
    return list(found)


# Keys a CRD may use for a GPU count of its own (a shorthand the tool cannot rewrite into a claim): NVIDIA
# Dynamo's DynamoGraphDeployment writes `resources.limits.gpu: "1"` (a string), others `gpus: 2`.
_SHORTHAND_KEYS = frozenset(
    {"gpu", "gpus", "numGpus", "numGPUs", "num_gpus", "gpuCount", "gpusPerNode", "gpusPerWorker", "nvidiaGpu"}
)
_SKIP_KEYS = frozenset({"metadata", "nodeSelector", "affinity", "tolerations", "annotations", "labels"})
# Kinds whose data is an application's own (a `gpus: 2` in a ConfigMap is not a request of the cluster's).
_DATA_KINDS = frozenset({"ConfigMap", "Secret"})


def _positive_count(v: Any) -> bool:
    """A GPU count as a CRD writes it: 1, 1.0, "1", "2" (a quantity string) — never a flag or a word."""
    if isinstance(v, bool):
        return False
    if isinstance(v, int | float):
        return v > 0
    if isinstance(v, str):
        q = parse_quantity(v.strip())
        return q is not None and q > 0
    return False


def _names_a_gpu_count(k: Any, v: Any, names: GpuNames, shorthand: bool) -> bool:
    if not isinstance(k, str):
        return False
    if k in names or k in FRACTIONAL_GPU_RESOURCES:
        return count_value(v) != 0  # a zero (or null) count is no request, wherever it is written
    return shorthand and k in _SHORTHAND_KEYS and _positive_count(v)


def gpu_keys_elsewhere(doc: Any, names: GpuNames, covered: set[int], path: str = "") -> Iterator[str]:
    """Paths of GPU counts outside the containers of known pod templates: a device-plugin name as a key
    anywhere (a CRD's `resourcesPerNode`, an unknown container path), a fractional-GPU name, a
    `gpu:`-like shorthand with a positive count (an integer or a quantity string), or a named count
    (`gpu: {name: nvidia.com/gpu, quantity: 1}`). Labels, selectors and tolerations name GPUs without asking
    for them; a ConfigMap's or Secret's own keys are its data; a NodePool's limits are a cap on nodes."""
    shorthand = not (isinstance(doc, dict) and doc.get("kind") in _DATA_KINDS and not path)
    if not path:
        covered = covered | _caps(doc)
    yield from _elsewhere(doc, names, covered, path, shorthand)


def _caps(doc: Any) -> set[int]:
    """Maps that cap what an autoscaler provisions, written with the device plugin's names: no pod's request.
    Karpenter's NodePool `spec.limits` (karpenter.sh/v1; https://karpenter.sh/docs/concepts/nodepools/, "Limits")."""
    if not (isinstance(doc, dict) and doc.get("kind") == "NodePool"):
        return set()
    if not str(doc.get("apiVersion", "")).startswith("karpenter.sh/"):
        return set()
    spec = doc.get("spec")
    limits = spec.get("limits") if isinstance(spec, dict) else None
    return {id(limits)} if isinstance(limits, dict) else set()


# A request written as a resource's name beside its count: the Spark operator's `gpu: {name: nvidia.com/gpu,
# quantity: 1}` on a driver or executor (kubeflow/spark-operator api/v1beta2 sparkapplication_types.go, GPUSpec).
# The device plugin's sharing config (`name:` beside `replicas:`) and Kueue's quotas (`nominalQuota:`) are not.
_NAME_KEYS = ("name", "resourceName")
_COUNT_KEYS = ("quantity", "count", "amount")


def _named_count(node: dict[Any, Any], names: GpuNames) -> str | None:
    for key in _NAME_KEYS:
        if node.get(key) in names and any(_positive_count(node.get(c)) for c in _COUNT_KEYS):
            return key
    return None


def _elsewhere(doc: Any, names: GpuNames, covered: set[int], path: str, shorthand: bool) -> Iterator[str]:
    if isinstance(doc, dict):
        if id(doc) in covered:
            return
        named = _named_count(doc, names) if shorthand else None
        if named is not None:
            yield f"{path}.{named}" if path else named
        for k, v in doc.items():
            p = f"{path}.{k}" if path else str(k)
            if _names_a_gpu_count(k, v, names, shorthand):
                yield p
            elif k not in _SKIP_KEYS:
                yield from _elsewhere(v, names, covered, p, shorthand)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _elsewhere(v, names, covered, f"{path}[{i}]", shorthand)


# A GPU request written inside a string: a device-plugin name as a key followed by a count, as YAML or
# JSON writes it (`nvidia.com/gpu: 1`, `"nvidia.com/mig-1g.10gb":"2"`, `nvidia.com/gpu=1`). Node labels
# such as `nvidia.com/gpu.count` or `nvidia.com/gpu.product` are not device-plugin names and do not match.
_GPU_IN_TEXT_RE = re.compile(
    r"nvidia\.com/(?:gpu(?:\.shared)?|mig-\d+g\.\d+gb(?:[.+][a-z0-9.]+)?)[\"']?\s*[:=]\s*[\"']?0*[1-9]"
)


def gpu_patch_strings(doc: Any, path: str = "") -> Iterator[str]:
    """Paths of strings that carry a GPU request: a pod-spec patch (Argo `podSpecPatch`) that names a GPU
    resource at all, or any string (an embedded manifest, a Helm values blob, a JSON patch) that writes a
    device-plugin GPU name with a count. `metadata` is skipped: kubectl's last-applied-configuration
    annotation repeats the object itself."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{path}.{k}" if path else str(k)
            if k == "metadata" and not path:
                continue
            if isinstance(v, str):
                loose = str(k).endswith("podSpecPatch") and GPU_STRING_RE.search(v)
                if loose or _GPU_IN_TEXT_RE.search(v):
                    yield p
            else:
                yield from gpu_patch_strings(v, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from gpu_patch_strings(v, f"{path}[{i}]")
