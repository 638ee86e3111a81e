"""What a drain needs to know of a pod, without the cluster model: `show` and the estimate import it, and
they must not load `cluster.state` (tests/unit/test_cli_conventions.py holds `show` to that)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The kubelet's static pods: their API objects (mirror pods) cannot be evicted.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def drain_skips(pod: Mapping[str, Any]) -> bool:
    """A pod no drain evicts, as kubectl drain skips it (kubernetes/kubectl pkg/drain/filters.go): a mirror
    pod (`mirrorPodFilter`) or a DaemonSet's (`daemonSetFilter`: its controller ignores unschedulable and
    would recreate it at once). The drain, its estimate and `check` all ask here."""
    meta = pod.get("metadata")
    if not isinstance(meta, dict):
        return False
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return True
    refs = meta.get("ownerReferences")
    return isinstance(refs, list) and any(
        isinstance(r, dict) and r.get("controller") and r.get("kind") == "DaemonSet" for r in refs
    )


def has_controller(pod: Mapping[str, Any]) -> bool:
    """Whether an owner reference marked `controller: true` names what recreates the pod once it is evicted
    (a mirror pod's names its Node). kubectl drain refuses a pod without one unless `--force`: nothing
    brings it back (kubernetes/kubectl pkg/drain/filters.go `unreplicatedFilter`)."""
    meta = pod.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    return isinstance(refs, list) and any(isinstance(r, dict) and bool(r.get("controller")) for r in refs)


def is_finished(pod: Mapping[str, Any]) -> bool:
    """A pod whose containers have all ended for good (phase Succeeded or Failed): evicting it loses nothing,
    and kubectl drain deletes it without `--force` (`unreplicatedFilter`)."""
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")
