"""Autoscalers that scale on what a migration changes: a KEDA trigger's query, or a HorizontalPodAutoscaler's
metric, that reads the GPU extended resources (kube-state-metrics' `nvidia_com_gpu`) or DCGM metrics by pod.
Those series vanish or lose their pod label as nodes migrate (unless the exporter attributes DRA-allocated
GPUs), and an autoscaler reading an empty result scales as if the load were gone.

- **KEDA** (kedacore/keda v2.18.0, keda.sh/v1alpha1 ScaledObject and ScaledJob, `spec.triggers[]`): a
  `prometheus` trigger whose `metadata.query` reads them. Its `ignoreNullValues` defaults to true, and an empty
  result is then the value 0 (pkg/scalers/prometheus_scaler.go): the workload is scaled down to its minimum,
  to zero where that is allowed. Other triggers' metadata are read the same way.
- **HorizontalPodAutoscaler** (autoscaling/v2, k8s.io/api v0.37.2 autoscaling/v2/types.go `MetricSpec`): a
  `Pods`, `Object` or `External` metric whose name is such a series. A `Pods` metric is per pod by definition
  (the metrics adapter ties each series to a pod by its labels); an `External` one is when its selector names
  a pod, namespace or container label. The HPA controller then stops scaling (it cannot read the metric).
  The HPAs KEDA makes for its ScaledObjects name KEDA's metrics, not these, so a workload is listed once.

Metric names an adapter renamed (a prometheus-adapter rule that serves `DCGM_FI_DEV_GPU_UTIL` as
`gpu_utilisation`) are out of sight here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dependents import Recorded, as_list, as_map, expr_reads, gpu_recorded, ns_name
from dra_migrate.inventory.gitops import GitOpsOwner, gitops_owner

KEDA_KINDS = ("keda.sh/ScaledObject", "keda.sh/ScaledJob")
HPA = "autoscaling/HorizontalPodAutoscaler"
_DCGM = "DCGM_FI_"
_PER_POD = frozenset({"pod", "namespace", "container"})  # the DCGM exporter's pod attribution labels


@dataclass(frozen=True)
class GpuScaler:
    kind: str  # kind key
    namespace: str
    name: str
    target: str  # what it scales: "Deployment/serve" (a ScaledJob: its Job)
    place: str  # `trigger prometheus "gpu-util"`, `Pods metric`
    text: str  # the query, or the metric name
    terms: tuple[str, ...]
    per_pod_dcgm: bool
    empty_is_zero: bool  # KEDA's prometheus scaler reads an empty result as 0 (ignoreNullValues)
    owner: GitOpsOwner | None


def gpu_scalers(state: ClusterState) -> list[GpuScaler]:
    out: list[GpuScaler] = []
    recorded = gpu_recorded(state)  # a query of a GPU recording rule's series reads what it reads
    for key in KEDA_KINDS:
        for obj in state.of(key):
            out.extend(_keda(key, obj, recorded))
    for obj in state.of(HPA):
        out.extend(_hpa(obj))
    return out


def _target(spec: Mapping[str, Any], key: str) -> str:
    if key == "keda.sh/ScaledJob":
        return "Job"
    ref = as_map(spec.get("scaleTargetRef"))
    return f"{ref.get('kind') or 'Deployment'}/{ref.get('name') or '?'}"  # KEDA's default kind is Deployment


def _keda(key: str, obj: Mapping[str, Any], recorded: Recorded) -> list[GpuScaler]:
    spec = as_map(obj.get("spec"))
    ns, name = ns_name(obj)
    out = []
    for i, trigger in enumerate(as_list(spec.get("triggers"))):
        trigger = as_map(trigger)
        kind = str(trigger.get("type") or "?")
        meta = as_map(trigger.get("metadata"))
        for field, text in meta.items():
            if not isinstance(text, str):
                continue
            terms, per_pod = expr_reads(text, recorded)
            if terms or per_pod:
                label = trigger.get("name") or i
                zero = kind == "prometheus" and str(meta.get("ignoreNullValues", "true")).lower() != "false"
                place = f"trigger {kind} {label} {field}"
                out.append(
                    GpuScaler(key, ns, name, _target(spec, key), place, text, terms, per_pod, zero, gitops_owner(obj))
                )
    return out


def _selector_keys(selector: Any) -> set[str]:
    sel = as_map(selector)
    keys = {str(k) for k in as_map(sel.get("matchLabels"))}
    return keys | {str(as_map(e).get("key")) for e in as_list(sel.get("matchExpressions"))}


def _hpa(obj: Mapping[str, Any]) -> list[GpuScaler]:
    spec = as_map(obj.get("spec"))
    ns, name = ns_name(obj)
    out = []
    for m in as_list(spec.get("metrics")):
        m = as_map(m)
        kind = str(m.get("type") or "")
        source = as_map(m.get(kind[:1].lower() + kind[1:]))  # Pods -> pods, External -> external
        metric = as_map(source.get("metric"))
        metric_name = str(metric.get("name") or "")
        terms, _ = expr_reads(metric_name)
        per_pod = _DCGM in metric_name and (kind == "Pods" or bool(_selector_keys(metric.get("selector")) & _PER_POD))
        if terms or per_pod:
            place = f"{kind} metric"
            target = _target(spec, HPA)
            out.append(GpuScaler(HPA, ns, name, target, place, metric_name, terms, per_pod, False, gitops_owner(obj)))
    return out
