"""What a snapshot leaves out: managedFields, container env values, args and command, ConfigMaps not read.

Env values, args and commands often carry credentials; a snapshot is handed to other people (change
review, bug reports), so they are redacted unless the user asks to keep them. Secrets are never read.

Redaction goes by structure, not by shape: every container of every pod template the template table
knows for the object's kind (KServe's `predictor.model` has no `image` key, Argo's `script` has `source`),
plus, as a second net, any map anywhere in the object's spec that holds `env`, `args` or `command` beside a
container's other keys. Operator CRs (ClusterPolicy, NVIDIADriver, GPUCluster) keep their env values,
which configure the operator and are read by checks, but with credentials scrubbed from them.

A ConfigMap is kept only when a ClusterPolicy (`spec.devicePlugin.config.name`) or a device-plugin
DaemonSet (a configMap volume) names it: a ConfigMap merely shaped like a device-plugin config is not
kept. Objects arrive in list order (ConfigMaps before DaemonSets and ClusterPolicies), so the candidate
ConfigMaps are held back and written at the end, once every reference has been seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dra_migrate.cluster.kinds import NVIDIA_KINDS, kind_key
from dra_migrate.cluster.state import MIG_MANAGER_DEFAULT_CONFIGMAP, is_kept_configmap
from dra_migrate.cluster.templates import TemplateTable, get_path
from dra_migrate.secrets import scrub

REDACTED = "<redacted>"
_OPERATOR_KEYS = frozenset(k.key for k in NVIDIA_KINDS)
# Keys beside which `args`/`command`/`env` are a container's (core/v1 Container), so the second net
# never touches a CRD's own `args` that is not a process's.
_CONTAINER_KEYS = frozenset({"image", "name", "env", "resources", "volumeMounts", "imagePullPolicy", "ports"})


def _redact_env(env: Any, *, keep: bool = False) -> None:
    for e in env if isinstance(env, list) else ():
        if isinstance(e, dict) and "value" in e:
            e["value"] = scrub(str(e["value"])) if keep else REDACTED


def _redact_container(c: dict[str, Any]) -> None:
    _redact_env(c.get("env"))
    for key in ("args", "command"):
        value = c.get(key)
        if isinstance(value, list):
            c[key] = [REDACTED for _ in value]
        elif isinstance(value, str):
            c[key] = REDACTED
    if isinstance(c.get("source"), str):  # Argo `script` templates: the script itself
        c["source"] = REDACTED


def _structural(key: str, obj: dict[str, Any], templates: TemplateTable) -> None:
    """Every container of every pod template of the object, by the template table."""
    for t in templates.resolve(key, obj):
        containers = t.containers() + t.init_containers()
        ephemeral = get_path(t.pod_spec(), "ephemeralContainers")
        if isinstance(ephemeral, list):
            containers += [c for c in ephemeral if isinstance(c, dict)]
        for c in containers:
            _redact_container(c)


def _walk(node: Any, *, keep_env: bool) -> None:
    """The second net: any container-like map (env, args or command beside container keys) anywhere."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            has_process = any(k in cur for k in ("env", "args", "command"))
            if has_process and (cur.keys() & _CONTAINER_KEYS):
                if keep_env:
                    _redact_env(cur.get("env"), keep=True)
                else:
                    _redact_container(cur)
            stack.extend(v for v in cur.values() if isinstance(v, dict | list))
        elif isinstance(cur, list):
            stack.extend(v for v in cur if isinstance(v, dict | list))


def _strip_metadata(obj: dict[str, Any]) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            # kubectl's last-applied copy holds the whole object again, env values included.
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)


def for_snapshot(
    obj: dict[str, Any], *, keep_env: bool, templates: TemplateTable | None = None
) -> dict[str, Any] | None:
    """The object as a snapshot stores it (redacted), or None when it is not stored at all.

    ConfigMaps are not decided here (see `SnapshotFilter`): a ConfigMap not shaped like a device-plugin
    config is dropped, one that is shaped like one is returned for the caller to keep or drop."""
    key = kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if key == "ConfigMap" and not is_kept_configmap(obj):
        return None
    _strip_metadata(obj)
    if key in _OPERATOR_KEYS:
        _walk(obj.get("spec"), keep_env=True)
        return obj
    if not keep_env:
        _structural(key, obj, templates or TemplateTable.builtin())
        _walk(obj.get("spec"), keep_env=False)
    return obj


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _is_device_plugin_daemonset(ds: dict[str, Any]) -> bool:
    """Operator-managed or standalone NVIDIA device plugin (as dra_migrate.inventory.operator tells them):
    its name or image; GPU Feature Discovery ships in the same image but advertises nothing."""
    name = str(_meta(ds).get("name", ""))
    if "feature-discovery" in name:
        return False
    containers = get_path(ds, "spec.template.spec.containers")
    images = [str(c.get("image", "")) for c in containers or [] if isinstance(c, dict)]
    return "nvidia-device-plugin" in name or any("k8s-device-plugin" in i for i in images)


def configmaps_named(obj: dict[str, Any]) -> set[tuple[str | None, str]]:
    """(namespace or None for any, name) of the ConfigMaps a ClusterPolicy or device-plugin DaemonSet uses."""
    key = kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    out: set[tuple[str | None, str]] = set()
    if key == "nvidia.com/ClusterPolicy":
        # gpu-operator api/nvidia/v1 ClusterPolicy: spec.devicePlugin.config.{name,default}; the operands run
        # in the operator's namespace (status.namespace).
        name = get_path(obj, "spec.devicePlugin.config.name")
        ns = get_path(obj, "status.namespace")
        where = ns if isinstance(ns, str) and ns else None
        if isinstance(name, str) and name:
            out.add((where, name))
        # The MIG Manager's mig-parted config: spec.migManager.config.name, the operator's own when unset.
        mig = get_path(obj, "spec.migManager.config.name")
        out.add((where, mig if isinstance(mig, str) and mig else MIG_MANAGER_DEFAULT_CONFIGMAP))
    elif key == "apps/DaemonSet" and _is_device_plugin_daemonset(obj):
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


class SnapshotFilter:
    """Redacts a stream of objects for a snapshot; device-plugin ConfigMaps come last, only when named."""

    def __init__(self, *, keep_env: bool, templates: TemplateTable | None = None) -> None:
        self.keep_env = keep_env
        self.templates = templates or TemplateTable.builtin()
        self._candidates: list[dict[str, Any]] = []
        self._named: set[tuple[str | None, str]] = set()

    def stream(self, objects: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for obj in objects:
            self._named |= configmaps_named(obj)
            kept = for_snapshot(obj, keep_env=self.keep_env, templates=self.templates)
            if kept is None:
                continue
            if kind_key(str(kept.get("apiVersion", "")), str(kept.get("kind", ""))) == "ConfigMap":
                self._candidates.append(kept)
                continue
            yield kept
        for cm in self._candidates:
            meta = _meta(cm)
            name, ns = meta.get("name"), meta.get("namespace")
            if isinstance(name, str) and ((ns, name) in self._named or (None, name) in self._named):
                yield cm
