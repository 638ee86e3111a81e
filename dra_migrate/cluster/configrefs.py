"""Which ConfigMaps the tool reads: the device plugin's own configs, found by who uses them.

A ConfigMap is read for one thing only, the NVIDIA device plugin's config file (k8s-device-plugin
api/config/v1: sharing, MIG strategy, resource renames). Which ConfigMap that is is decided by kind and
known ownership, never by how its text looks (an application's ConfigMap may well mention nvidia.com/gpu,
and a device-plugin config in JSON or with only `version: v1` looks like nothing):

- the GPU Operator's ClusterPolicy names it in `spec.devicePlugin.config.name`, in the operator's
  namespace (`status.namespace`) (NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go,
  DevicePluginConfig; the operator mounts it into the plugin's DaemonSet);
- a device-plugin DaemonSet mounts it as a `configMap` volume, or inside a `projected` one (the
  k8s-device-plugin Helm chart's `config.name`/`config.map`, deployments/helm/nvidia-device-plugin/
  templates/daemonset-device-plugin.yml). The DaemonSet is the device plugin's by its image or name, as
  the inventory tells it (inventory/operator.py), or by the GPU Operator owning it (an ownerReference to a
  ClusterPolicy) under the plugin's `app` label.

One more is read for the prediction of mixed-MIG nodes: the GPU Operator MIG Manager's mig-parted config,
which says which GPU holds which instances (inventory/migparted.py). The ClusterPolicy names it in
`spec.migManager.config.name`, the operator's own `default-mig-parted-config` when unset (gpu-operator
api/nvidia/v1 MIGManagerSpec; assets/state-mig-manager), in the operator's namespace; a MIG Manager
DaemonSet (image k8s-mig-manager, NVIDIA/mig-parted deployments/gpu-operator) mounts it as a volume.

Grafana dashboards are kept too, found by what loads them (cluster/dashboards.py), and held apart from these:
a reader of the NVIDIA configs never sees one (ClusterState.dashboard_configmaps).

Every other ConfigMap is dropped on the way in, by the snapshot writer and by every reader alike.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.cluster.dashboards import DashboardSelection
from dra_migrate.cluster.kinds import kind_key
from dra_migrate.cluster.templates import get_path

Obj = dict[str, Any]
Ref = tuple[str | None, str]  # (namespace, or None for any; name)

_PLUGIN_IMAGE = "k8s-device-plugin"  # nvcr.io/nvidia/k8s-device-plugin, the plugin's one image
_MIG_MANAGER_IMAGE = "k8s-mig-manager"  # nvcr.io/nvidia/cloud-native/k8s-mig-manager
MIG_MANAGER_DEFAULT_CONFIGMAP = "default-mig-parted-config"


def _meta(o: Obj) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _owned_by_cluster_policy(obj: Obj) -> bool:
    owners = _meta(obj).get("ownerReferences")
    return any(
        isinstance(o, dict)
        and o.get("kind") == "ClusterPolicy"
        and str(o.get("apiVersion", "")).startswith("nvidia.com/")
        for o in (owners if isinstance(owners, list) else ())
    )


def is_device_plugin_daemonset(ds: Obj) -> bool:
    """The NVIDIA device plugin's DaemonSet, operator-managed or standalone (as inventory/operator.py tells
    them): it runs the plugin's image, is named for it, or the GPU Operator owns it (an ownerReference to a
    ClusterPolicy) with the plugin's `app` label. GPU Feature
    Discovery ships in the same image but advertises nothing and reads no plugin config of its own."""
    name = str(_meta(ds).get("name", ""))
    if "feature-discovery" in name:
        return False
    containers = get_path(ds, "spec.template.spec.containers")
    images = [str(c.get("image", "")) for c in containers or [] if isinstance(c, dict)]
    if "nvidia-device-plugin" in name or any(_PLUGIN_IMAGE in i for i in images):
        return True
    # The operator's own (state-device-plugin manifest): owned by the ClusterPolicy, labelled for the plugin.
    labels = _meta(ds).get("labels")
    app = labels.get("app") if isinstance(labels, dict) else None
    return _owned_by_cluster_policy(ds) and app == "nvidia-device-plugin-daemonset"


def mig_manager_configmap(policy: Obj) -> Ref:
    """The MIG Manager's mig-parted ConfigMap a ClusterPolicy names (its operator's default when unset)."""
    name = get_path(policy, "spec.migManager.config.name")
    ns = get_path(policy, "status.namespace")
    where = ns if isinstance(ns, str) and ns else None
    return (where, name if isinstance(name, str) and name else MIG_MANAGER_DEFAULT_CONFIGMAP)


def names(cm: Obj, refs: set[Ref]) -> bool:
    """Whether the ConfigMap `cm` is one of `refs` (a None namespace matches any)."""
    meta = _meta(cm)
    name, ns = meta.get("name"), meta.get("namespace")
    return isinstance(name, str) and ((ns, name) in refs or (None, name) in refs)


def is_mig_manager_daemonset(ds: Obj) -> bool:
    """The MIG Manager's DaemonSet (the GPU Operator's nvidia-mig-manager, or one deployed on its own): by its
    image or name."""
    containers = get_path(ds, "spec.template.spec.containers")
    images = [str(c.get("image", "")) for c in containers or [] if isinstance(c, dict)]
    return "mig-manager" in str(_meta(ds).get("name", "")) or any(_MIG_MANAGER_IMAGE in i for i in images)


def configmaps_named(obj: Obj) -> set[Ref]:
    """The ConfigMaps a ClusterPolicy, a device-plugin or a MIG Manager DaemonSet uses (none for any other)."""
    key = kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    out: set[Ref] = set()
    if key == "nvidia.com/ClusterPolicy":
        name = get_path(obj, "spec.devicePlugin.config.name")
        ns = get_path(obj, "status.namespace")
        if isinstance(name, str) and name:
            out.add((ns if isinstance(ns, str) and ns else None, name))
        out.add(mig_manager_configmap(obj))
    elif key == "apps/DaemonSet" and (is_device_plugin_daemonset(obj) or is_mig_manager_daemonset(obj)):
        ns = _meta(obj).get("namespace")
        for v in get_path(obj, "spec.template.spec.volumes") or []:
            if not isinstance(v, dict):
                continue
            refs = [v.get("configMap")]
            for source in get_path(v, "projected.sources") or []:
                refs.append(source.get("configMap") if isinstance(source, dict) else None)
            for ref in refs:
                if isinstance(ref, dict) and isinstance(ref.get("name"), str):
                    out.add((ns if isinstance(ns, str) else None, ref["name"]))
    return out


def is_configmap(obj: Obj) -> bool:
    return obj.get("kind") == "ConfigMap" and obj.get("apiVersion") == "v1"


class ConfigMapsInUse:
    """Collects what the objects seen so far use, and holds back the ConfigMaps not (yet) known to be used.

    Objects may come in any order (a kubectl dump lists ConfigMaps before DaemonSets), so a ConfigMap
    nobody has named yet is held until `release()`, which gives the held ones named since; the rest are
    dropped. A live read lists ConfigMaps last (cluster/live.py), so nothing is held there."""

    def __init__(self) -> None:
        self._named: set[Ref] = set()
        self._held: list[Obj] = []
        self._dashboards = DashboardSelection()

    def note(self, obj: Obj) -> None:
        """Record the ConfigMaps `obj` uses."""
        self._named |= configmaps_named(obj)
        self._dashboards.note(obj)

    def nvidia_config(self, cm: Obj) -> bool:
        """Whether the ConfigMap is a device-plugin or MIG Manager config (not only a dashboard)."""
        return names(cm, self._named)

    def used(self, cm: Obj) -> bool:
        return self.nvidia_config(cm) or self._dashboards.selects(cm)

    def offer(self, cm: Obj) -> bool:
        """Whether the ConfigMap is used now; when not, it is held for `release`."""
        if self.used(cm):
            return True
        self._held.append(cm)
        return False

    def release(self) -> list[Obj]:
        """The held ConfigMaps that are used by now (each once); the others stay held, and are dropped."""
        used = [cm for cm in self._held if self.used(cm)]
        self._held = [cm for cm in self._held if not self.used(cm)]
        return used

    @property
    def dropped(self) -> int:
        return len(self._held)
