"""ClusterState: the one model of what was read from a cluster, whatever the source.

Objects are kept as the plain dicts the API returns (JSON), grouped by kind key ("apps/Deployment").
Objects are pruned on the way in to what the tool reads, so a 100,000-pod fleet fits in memory
(see `prune`); everything downstream reads the state and never mutates it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from migrate.cluster.kinds import KINDS_BY_KEY, kind_key
from migrate.cluster.templates import TemplateTable

Obj = dict[str, Any]


@dataclass(frozen=True)
class SourceInfo:
    """Where the state came from."""

    kind: str  # "snapshot" or "live"
    location: str  # the snapshot path, or the API server URL
    context: str | None = None
    kubernetes_version: str | None = None  # gitVersion, e.g. "v1.37.2"
    taken_at: str | None = None  # RFC 3339, when a snapshot was taken
    # Group/versions the server serves ("resource.k8s.io/v1"); None when unknown (a plain kubectl dump).
    served_apis: tuple[str, ...] | None = None


@dataclass
class ClusterState:
    source: SourceInfo
    objects: dict[str, list[Obj]] = field(default_factory=dict)
    # Kinds the tool does not read, counted (kind key -> count), so users see what was skipped.
    skipped: Counter[str] = field(default_factory=Counter)
    templates: TemplateTable = field(default_factory=TemplateTable.builtin)

    def of(self, key: str) -> list[Obj]:
        return self.objects.get(key, [])

    def all_objects(self) -> Iterator[tuple[str, Obj]]:
        for key, items in self.objects.items():
            for obj in items:
                yield key, obj

    def count(self) -> int:
        return sum(len(v) for v in self.objects.values())


class StateBuilder:
    """Collects objects from any source into a ClusterState, pruning each as it arrives."""

    def __init__(self, source: SourceInfo, templates: TemplateTable | None = None) -> None:
        self.templates = templates or TemplateTable.builtin()
        self.state = ClusterState(source=source, templates=self.templates)
        self._known = set(KINDS_BY_KEY) | set(self.templates.kind_keys())

    def add(self, obj: Obj) -> None:
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            self.state.skipped["(no apiVersion/kind)"] += 1
            return
        key = kind_key(api_version, kind)
        if key not in self._known:
            self.state.skipped[key] += 1
            return
        pruned = prune(key, obj)
        if pruned is not None:
            self.state.objects.setdefault(key, []).append(pruned)

    def add_all(self, objs: Iterable[Obj]) -> None:
        for obj in objs:
            self.add(obj)


# Keys of a device-plugin config (k8s-device-plugin api/config/v1/config.go); a ConfigMap whose values
# parse to one of these is a sharing config, and every other ConfigMap is dropped.
_DEVICE_PLUGIN_CONFIG_MARKERS = ("sharing:", "flags:", "resources:")


def is_device_plugin_configmap(obj: Obj) -> bool:
    data = obj.get("data")
    if not isinstance(data, dict):
        return False
    return any(
        isinstance(v, str) and "version:" in v and any(m in v for m in _DEVICE_PLUGIN_CONFIG_MARKERS)
        for v in data.values()
    )


def prune(key: str, obj: Obj) -> Obj | None:
    """Drop what the tool never reads. Returns None for objects to discard entirely."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        obj = {**obj, "metadata": meta}
    if key == "ConfigMap":
        return obj if is_device_plugin_configmap(obj) else None
    if key == "Pod":
        return _prune_pod(obj)
    return obj


def _prune_container(c: Any) -> Any:
    if not isinstance(c, dict):
        return c
    keep = {k: c[k] for k in ("name", "resources", "restartPolicy") if k in c}
    return keep


_POD_SPEC_KEYS = ("nodeName", "nodeSelector", "affinity", "tolerations", "resourceClaims", "priorityClassName")
_POD_META_KEYS = ("name", "namespace", "uid", "resourceVersion", "ownerReferences", "labels", "deletionTimestamp")


def _prune_pod(obj: Obj) -> Obj:
    """Pods are the bulk of a fleet: keep identity, owners, placement and resources only."""
    meta, spec, status = (
        v if isinstance(v, dict) else {} for v in (obj.get(k) for k in ("metadata", "spec", "status"))
    )
    new_spec: Obj = {k: spec[k] for k in _POD_SPEC_KEYS if k in spec}
    for ckey in ("containers", "initContainers"):
        if ckey in spec and isinstance(spec[ckey], list):
            new_spec[ckey] = [_prune_container(c) for c in spec[ckey]]
    new_status: Obj = {k: status[k] for k in ("phase", "extendedResourceClaimStatus") if k in status}
    return {
        "apiVersion": obj.get("apiVersion", "v1"),
        "kind": "Pod",
        "metadata": {k: meta[k] for k in _POD_META_KEYS if k in meta},
        "spec": new_spec,
        "status": new_status,
    }
