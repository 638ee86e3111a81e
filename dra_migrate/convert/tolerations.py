"""The toleration a converted pod no longer gets from the API server.

The ExtendedResourceToleration admission plugin adds, to every pod whose containers request an extended
resource, the toleration `{key: <resource>, operator: Exists, effect: NoSchedule}`
(k8s.io/kubernetes v1.37.2 plugin/pkg/admission/extendedresourcetoleration/admission.go; the design in
kubernetes/kubernetes#55080: nodes dedicated to a device are tainted with its resource name). GKE runs it and
taints GPU nodes `nvidia.com/gpu:NoSchedule` when a cluster has other node pools
(https://cloud.google.com/kubernetes-engine/docs/how-to/gpus). A pod converted to ResourceClaims requests no
extended resource, so the plugin adds nothing, and the converted pod stays Pending on the nodes it ran on.

So convert writes that toleration into the pod template, for each device-plugin name it converts, unless the
template already tolerates every NoSchedule taint of that key. Where no node carries such a taint it
tolerates nothing; where nodes do, they are by that convention the nodes for pods that use the device, which
a converted pod still does (through its claim).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from dra_migrate.convert.comments import insert_after

EFFECT = "NoSchedule"


def _tolerates_every_value(t: Any, key: str) -> bool:
    """Whether one toleration tolerates a NoSchedule taint of `key` whatever its value
    (k8s.io/api core/v1 toleration.go `ToleratesTaint`: an empty key with Exists matches every key)."""
    if not isinstance(t, Mapping) or t.get("effect") not in (None, "", EFFECT):
        return False
    operator = t.get("operator") or "Equal"
    return operator == "Exists" and t.get("key") in (None, "", key)


def untolerated(pod_spec: Mapping[str, Any], resources: Iterable[str]) -> list[str]:
    """The resource names, sorted, whose taint the pod template does not tolerate yet."""
    tolerations = pod_spec.get("tolerations")
    have = tolerations if isinstance(tolerations, list) else []
    return sorted({r for r in resources if not any(_tolerates_every_value(t, r) for t in have)})


def add_tolerations(pod_spec: Any, keys: list[str]) -> None:
    """Append the admission plugin's toleration for each key (a `tolerations` list is made if there is none)."""
    if not keys:
        return
    tolerations = pod_spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = CommentedSeq()
        if "tolerations" in pod_spec:  # `tolerations:` with no value: filled where it stands
            pod_spec["tolerations"] = tolerations
        else:
            after = "resourceClaims" if "resourceClaims" in pod_spec else (list(pod_spec)[-1] if pod_spec else None)
            insert_after(pod_spec, after, "tolerations", tolerations)
    for key in keys:
        entry = CommentedMap()
        entry["key"] = key
        entry["operator"] = "Exists"
        entry["effect"] = EFFECT
        tolerations.append(entry)
