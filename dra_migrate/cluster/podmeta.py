"""What a drain needs to know of a pod, without the cluster model: `show` and the estimate import it, and
they must not load `cluster.state` (tests/unit/test_cli_conventions.py holds `show` to that)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The kubelet's static pods: their API objects (mirror pods) cannot be evicted.
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

# Marks that ask for a pod not to be interrupted, which a drain through the eviction API does not read (kubectl
# drain neither). Karpenter does not disrupt a node running an active pod with `karpenter.sh/do-not-disrupt:
# "true"` (kubernetes-sigs/karpenter v1.6.2 pkg/apis/v1/labels.go `DoNotDisruptAnnotationKey`,
# pkg/utils/pod/scheduling.go `HasDoNotDisrupt`: the value "true" exactly, `IsDisruptable`: not terminal or
# terminating). The cluster autoscaler does not remove a node running a pod with
# `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`, and waits for one with "on-completion" to end
# (kubernetes/autoscaler cluster-autoscaler-1.36.1 utils/drain/drain.go `HasNotSafeToEvictAnnotation`,
# `HasSafeToEvictOnCompletionAnnotation`; simulator/drainability/rules/notsafetoevict, oncompletion; FAQ
# "What types of pods can prevent CA from removing a node?").
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
_DO_NOT_INTERRUPT = {DO_NOT_DISRUPT: ("true",), SAFE_TO_EVICT: ("false", "on-completion")}
# The annotations of a pod the state keeps (cluster/state.py `kept_annotations`): those a check reads, the mirror
# mark included, so that `drain_skips` skips in `check` and the estimate the mirror pods the drain skips.
KEPT_POD_ANNOTATIONS = (MIRROR_ANNOTATION, *_DO_NOT_INTERRUPT)


def do_not_interrupt_mark(pod: Mapping[str, Any]) -> str | None:
    """The first annotation asking that the pod not be interrupted (`key: "value"`), None when none does."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        return None
    for key, values in _DO_NOT_INTERRUPT.items():
        if annotations.get(key) in values:
            return f'{key}: "{annotations[key]}"'
    return None


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


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference marked `controller: true`: what recreates the object once it is deleted (a
    mirror pod's names its Node); None when nothing does."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if not isinstance(refs, list):
        return None
    return next((r for r in refs if isinstance(r, Mapping) and r.get("controller")), None)


def has_controller(pod: Mapping[str, Any]) -> bool:
    """Whether a controller recreates the pod once it is evicted. kubectl drain refuses a pod without one
    unless `--force`: nothing brings it back (kubernetes/kubectl pkg/drain/filters.go `unreplicatedFilter`)."""
    return controller_of(pod) is not None


def lost_if_evicted(pod: Mapping[str, Any]) -> bool:
    """Whether a drain's eviction deletes the pod's work for good: a drain evicts it (`drain_skips`), no
    controller recreates it, it has not finished and is not already being deleted. `check` lists such pods
    (`unmanaged-gpu-pod`), the plan records them, and the drain deletes no other (execute/ops_drain.py)."""
    meta = pod.get("metadata")
    going = isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))
    return not (going or drain_skips(pod) or has_controller(pod) or is_finished(pod))


def is_finished(pod: Mapping[str, Any]) -> bool:
    """A pod whose containers have all ended for good (phase Succeeded or Failed): evicting it loses nothing,
    and kubectl drain deletes it without `--force` (`unreplicatedFilter`)."""
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed")
