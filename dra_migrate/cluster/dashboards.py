"""Which ConfigMaps are Grafana dashboards: the ones Grafana itself is set to load, decided by who loads them
(as cluster/configrefs.py decides the device plugin's configs), never by how their text looks.

- **The Grafana chart's dashboard sidecar** (grafana/helm-charts charts/grafana, also inside
  kube-prometheus-stack) runs kiwigrid/k8s-sidecar beside Grafana; it loads every ConfigMap that carries the
  label named by its env `LABEL`, of the value `LABEL_VALUE` when that is set, and reads ConfigMaps unless
  `RESOURCE` is `secret` (kiwigrid/k8s-sidecar src/sidecar.py; the chart's templates/_pod.tpl writes them
  from `sidecar.dashboards.label`/`labelValue`/`resource`). Its container is `<name>-sc-dashboard`; the
  other sidecars of the chart (datasources, alerts, notifiers, plugins) take the same env, so only a
  sidecar container named for dashboards, or writing to a dashboards folder, selects dashboards.
- **The chart's default label** `grafana_dashboard` (any value; charts/grafana/values.yaml
  `sidecar.dashboards.label`, `labelValue: ""`) is taken even when no Grafana is in sight: a snapshot of some
  namespaces may hold the dashboards and not the Grafana that loads them.
- **The Grafana Operator** (grafana/grafana-operator api/v1beta1 content.go, `GrafanaContentSpec`): a
  GrafanaDashboard or GrafanaLibraryPanel may load its model from `spec.configMapRef` (a ConfigMap key of
  its own namespace).

Dashboards in Secrets (the sidecar's `RESOURCE: both`) are not read: the tool never reads Secrets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dra_migrate.cluster.kinds import kind_key
from dra_migrate.cluster.templates import get_path

Obj = dict[str, Any]
Selector = tuple[str, str | None]  # (label, value, or None for any value)

SIDECAR_IMAGE = "k8s-sidecar"  # quay.io/kiwigrid/k8s-sidecar, the chart's sidecar.image.repository
DEFAULT_SELECTOR: Selector = ("grafana_dashboard", None)
GRAFANA_OPERATOR_GROUP = "grafana.integreatly.org"
CONTENT_KINDS = (f"{GRAFANA_OPERATOR_GROUP}/GrafanaDashboard", f"{GRAFANA_OPERATOR_GROUP}/GrafanaLibraryPanel")
_POD_OWNERS = ("apps/Deployment", "apps/StatefulSet", "apps/DaemonSet")


def _meta(o: Mapping[str, Any]) -> Mapping[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    """A container's literal env values (a value from a Secret or ConfigMap is not known here)."""
    out = {}
    for e in container.get("env") or []:
        if isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str):
            out[e["name"]] = e["value"]
    return out


def _dashboard_sidecars(obj: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """The env of each dashboard sidecar of a Grafana Deployment/StatefulSet (an init container too: the chart's
    `sidecar.dashboards.initDashboards` loads them once before Grafana starts)."""
    containers = [
        *(get_path(obj, "spec.template.spec.initContainers") or []),
        *(get_path(obj, "spec.template.spec.containers") or []),
    ]
    for c in containers:
        if not isinstance(c, dict) or SIDECAR_IMAGE not in str(c.get("image", "")):
            continue
        env = _env(c)
        if "dashboard" in str(c.get("name", "")) or "dashboard" in env.get("FOLDER", ""):
            yield env


def sidecar_selectors(obj: Mapping[str, Any]) -> set[Selector]:
    """The ConfigMap labels a Grafana Deployment's or StatefulSet's dashboard sidecars load."""
    key = kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if key not in _POD_OWNERS:
        return set()
    out: set[Selector] = set()
    for env in _dashboard_sidecars(obj):
        label = env.get("LABEL")
        if label and env.get("RESOURCE", "configmap") != "secret":
            out.add((label, env.get("LABEL_VALUE") or None))
    return out


def content_configmap(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(namespace, ConfigMap name, key) a GrafanaDashboard or GrafanaLibraryPanel loads its model from."""
    if kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", ""))) not in CONTENT_KINDS:
        return None
    ref = get_path(obj, "spec.configMapRef")
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not isinstance(ref.get("key"), str):
        return None
    return str(_meta(obj).get("namespace") or ""), ref["name"], ref["key"]


def selected(cm: Mapping[str, Any], selectors: set[Selector]) -> bool:
    """Whether a ConfigMap carries the label (and value) of one of the selectors."""
    labels = _meta(cm).get("labels")
    if not isinstance(labels, dict):
        return False
    return any(label in labels and (value is None or labels[label] == value) for label, value in selectors)


class DashboardSelection:
    """What loads dashboards from ConfigMaps, as the objects that say so are seen (any order: the caller holds
    ConfigMaps back until the end, cluster/configrefs.py)."""

    def __init__(self) -> None:
        self.selectors: set[Selector] = {DEFAULT_SELECTOR}
        self._named: set[tuple[str, str]] = set()

    def note(self, obj: Mapping[str, Any]) -> None:
        self.selectors |= sidecar_selectors(obj)
        ref = content_configmap(obj)
        if ref is not None:
            self._named.add((ref[0], ref[1]))

    def selects(self, cm: Mapping[str, Any]) -> bool:
        meta = _meta(cm)
        named = (str(meta.get("namespace") or ""), str(meta.get("name") or "")) in self._named
        return named or selected(cm, self.selectors)
