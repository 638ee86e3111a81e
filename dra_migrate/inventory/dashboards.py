"""Grafana dashboards that read what a migration changes: panels and variables whose queries name the GPU
extended resources (kube-state-metrics' `resource="nvidia_com_gpu"`, which migrated nodes no longer
advertise and converted workloads no longer request) or read DCGM metrics by pod (blank unless the exporter
attributes DRA-allocated GPUs). The query test is the alerting rules' (inventory/dependents.py `expr_reads`).

Where a dashboard's model is read from (which ConfigMaps are dashboards: cluster/dashboards.py):
- a ConfigMap the Grafana chart's sidecar loads: each data key is a dashboard file (JSON);
- a Grafana Operator GrafanaDashboard or GrafanaLibraryPanel (grafana/grafana-operator api/v1beta1/content.go
  `GrafanaContentSpec`): `spec.json`, `spec.gzipJson` (the JSON gzip'd; base64 in YAML) or `spec.configMapRef`.
  A model fetched from `spec.url` or `spec.grafanaCom`, or built from Jsonnet, is not in the cluster's
  objects: such a dashboard is listed as not read, for a person to check.

The models are the user's data, not validated on the way in: anything unreadable is said, never raised.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from dra_migrate.cluster.dashboards import CONTENT_KINDS, content_configmap
from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.dependents import Recorded, expr_reads, gpu_recorded, ns_name
from dra_migrate.inventory.gitops import GitOpsOwner, gitops_owner

# A gzip'd model is inflated up to this many bytes: a small object must not expand into gigabytes in the
# tool (Grafana's own largest dashboards are a few MB of JSON).
MAX_MODEL_BYTES = 64 << 20
_QUERY_KEYS = ("expr", "query")  # a Prometheus target's expression; a variable's query (text or {query})
_UNREAD_SOURCES = (
    ("url", "loads its model from a URL"),
    ("grafanaCom", "loads its model from grafana.com"),
    ("jsonnet", "builds its model from Jsonnet"),
    ("jsonnetLib", "builds its model from a Jsonnet project"),
)


@dataclass(frozen=True)
class DashboardQuery:
    place: str  # `panel "GPUs allocated"`, `variable $node`, or "" at the model's top
    expr: str
    terms: tuple[str, ...]  # the GPU extended-resource names it names
    per_pod_dcgm: bool  # a DCGM metric read by pod, namespace or container


@dataclass(frozen=True)
class Dashboard:
    kind: str  # "ConfigMap", or the Grafana Operator kind key
    namespace: str
    name: str
    key: str | None  # the ConfigMap data key that holds it
    title: str
    queries: tuple[DashboardQuery, ...]  # only those that read what the migration changes
    owner: GitOpsOwner | None


@dataclass(frozen=True)
class UnreadDashboard:
    kind: str
    namespace: str
    name: str
    why: str


def dashboards(state: ClusterState) -> tuple[list[Dashboard], list[UnreadDashboard]]:
    """Every dashboard with a query that reads what the migration changes, and the ones that could not be read."""
    found: list[Dashboard] = []
    unread: list[UnreadDashboard] = []
    configmaps = {ns_name(cm): cm for cm in state.dashboard_configmaps}
    by_operator: set[tuple[str, str, str]] = set()  # (namespace, ConfigMap, key) an operator object loads
    recorded = gpu_recorded(state)  # a panel on a GPU recording rule's series reads what it reads
    for key in CONTENT_KINDS:
        for obj in state.of(key):
            ref = content_configmap(obj)
            if ref is not None:
                by_operator.add(ref)
            _read_operator_object(key, obj, configmaps, found, unread, recorded)
    for (ns, name), cm in sorted(configmaps.items()):
        data = cm.get("data")
        for data_key, text in sorted(data.items()) if isinstance(data, dict) else ():
            if (ns, name, data_key) in by_operator or not isinstance(text, str):
                continue
            model = _json_model(text)
            if isinstance(model, str):
                if data_key.endswith(".json"):
                    unread.append(UnreadDashboard("ConfigMap", ns, name, f"key {data_key}: {model}"))
                continue
            _note("ConfigMap", cm, data_key, model, found, recorded)
    return found, unread


def _read_operator_object(
    key: str,
    obj: Mapping[str, Any],
    configmaps: Mapping[tuple[str, str], Mapping[str, Any]],
    found: list[Dashboard],
    unread: list[UnreadDashboard],
    recorded: Recorded,
) -> None:
    ns, name = ns_name(obj)
    model = _operator_model(obj, configmaps)
    if isinstance(model, str):
        unread.append(UnreadDashboard(key, ns, name, model))
    else:
        _note(key, obj, None, model, found, recorded)


def _operator_model(obj: Mapping[str, Any], configmaps: Mapping[tuple[str, str], Mapping[str, Any]]) -> Any:
    """A Grafana Operator object's model, or why it cannot be read (a str)."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if isinstance(spec.get("json"), str) and spec["json"].strip():
        return _json_model(spec["json"])
    if isinstance(spec.get("gzipJson"), str) and spec["gzipJson"]:
        return _gzip_model(spec["gzipJson"])
    ref = content_configmap(obj)
    if ref is not None:
        cm = configmaps.get((ref[0], ref[1]))
        data = cm.get("data") if cm is not None else None
        text = data.get(ref[2]) if isinstance(data, dict) else None
        if not isinstance(text, str):
            return f"its ConfigMap {ref[0]}/{ref[1]} key {ref[2]} is not in what was read"
        return _json_model(text)
    for field, why in _UNREAD_SOURCES:
        if spec.get(field):
            return why
    return "has no model (no json, gzipJson or configMapRef)"


def _json_model(text: str) -> Any:
    try:
        model = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return f"not JSON ({e.msg} at character {e.pos})"
    return model if isinstance(model, dict) else f"a JSON {type(model).__name__}, not a dashboard model"


def _gzip_model(encoded: str) -> Any:
    try:
        packed = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return "gzipJson is not base64"
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip framing only
    try:
        text = inflate.decompress(packed, MAX_MODEL_BYTES)
    except zlib.error:
        return "gzipJson is not gzip"
    if inflate.unconsumed_tail:
        return f"gzipJson inflates past {MAX_MODEL_BYTES >> 20} MB; not read"
    if not inflate.eof:
        return "gzipJson is cut short"
    try:
        return _json_model(text.decode())
    except UnicodeDecodeError:
        return "gzipJson is not UTF-8 text"


def _note(
    kind: str,
    obj: Mapping[str, Any],
    data_key: str | None,
    model: Mapping[str, Any],
    found: list[Dashboard],
    recorded: Recorded,
) -> None:
    queries = []
    for place, expr in unique_queries(model):
        terms, per_pod = expr_reads(expr, recorded)
        if terms or per_pod:
            queries.append(DashboardQuery(place, expr, terms, per_pod))
    if queries:
        ns, name = ns_name(obj)
        title = model.get("title") or model.get("name") or "(untitled)"
        found.append(Dashboard(kind, ns, name, data_key, str(title), tuple(queries), gitops_owner(obj)))


def unique_queries(model: Any) -> Iterator[tuple[str, str]]:
    """(place, query) for every query of a dashboard or panel model, in the model's order, each once."""
    seen: set[tuple[str, str]] = set()
    for item in _queries(model):
        if item not in seen:
            seen.add(item)
            yield item


def _queries(model: Any) -> Iterator[tuple[str, str]]:
    # An explicit stack: a model is the user's data and may nest deeper than Python's recursion allows.
    stack: list[tuple[Any, str]] = [(model, "")]
    while stack:
        value, place = stack.pop()
        if isinstance(value, dict):
            place = _place(value) or place
            children = []
            for k, v in value.items():
                if k in _QUERY_KEYS and isinstance(v, str) and v.strip():
                    yield place, v
                elif isinstance(v, dict | list):
                    children.append((v, place))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend((v, place) for v in reversed(value))


def _place(d: Mapping[str, Any]) -> str | None:
    """Where in a dashboard a map is: a panel (a title and a type) or a templating variable (a name and a query)."""
    if isinstance(d.get("title"), str) and "type" in d:
        return f'panel "{d["title"]}"'
    if isinstance(d.get("name"), str) and "query" in d:
        return f"variable ${d['name']}"
    return None
