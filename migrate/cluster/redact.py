"""What a snapshot leaves out: managedFields, container env values and args, ConfigMaps not read.

Env values and args often carry credentials; a snapshot is handed to other people (change review,
bug reports), so they are redacted unless the user asks to keep them. Secrets are never read.
"""

from __future__ import annotations

from typing import Any

from migrate.cluster.kinds import kind_key
from migrate.cluster.state import is_device_plugin_configmap

REDACTED = "<redacted>"


def _redact_container(c: dict[str, Any]) -> None:
    for env in c.get("env") or []:
        if isinstance(env, dict) and "value" in env:
            env["value"] = REDACTED
    if isinstance(c.get("args"), list):
        c["args"] = [REDACTED for _ in c["args"]]


def _walk(node: Any) -> None:
    """Redact every container-shaped dict (one with an image), wherever a kind nests it."""
    if isinstance(node, dict):
        if "image" in node and ("env" in node or "args" in node):
            _redact_container(node)
        for v in node.values():
            _walk(v)
    elif isinstance(node, list):
        for v in node:
            _walk(v)


def for_snapshot(obj: dict[str, Any], *, keep_env: bool) -> dict[str, Any] | None:
    """The object as a snapshot stores it, or None when it is not stored at all."""
    key = kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if key == "ConfigMap" and not is_device_plugin_configmap(obj):
        return None
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            # kubectl's last-applied copy holds the whole object again, env values included.
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if not keep_env:
        _walk(obj.get("spec"))
    return obj
