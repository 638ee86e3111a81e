"""What an installed NVIDIA stack shows on the API server, without the stack: the DRA kubelet plugin's
DaemonSet (its pods come from the real DaemonSet controller and are marked Running by the fleet),
the ClusterPolicy CRD and object, and permissive CRDs for the optional kinds a snapshot uses.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from dra_migrate.cluster.kinds import KINDS_BY_KEY, Kind
from dra_migrate.errors import ClusterError
from dra_migrate.sim.kube import Kube, path_of, strip_server_fields

DRA_PLUGIN_DAEMONSET = "nvidia-dra-driver-gpu-kubelet-plugin"
DRA_PLUGIN_NAMESPACE = "nvidia-dra-driver-gpu"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# Built-in groups: served by the API server itself, never installed as CRDs.
_BUILTIN_GROUPS = ("", "apps", "batch", "policy", "resource.k8s.io")


def install_nvidia_stack(
    api_client: Any,
    *,
    dra_driver: bool = True,
    cluster_policy: Mapping[str, Any] | None = None,
    namespace: str = DRA_PLUGIN_NAMESPACE,
) -> None:
    """Create the DRA kubelet plugin DaemonSet and/or the ClusterPolicy CRD and object. Re-runnable."""
    kube = Kube(api_client)
    if dra_driver:
        ensure_namespace(kube, namespace)
        kube.create_or_exists(path_of("apps/v1", "daemonsets", namespace=namespace), dra_plugin_daemonset(namespace))
    if cluster_policy is not None:
        install_crds(api_client, [KINDS_BY_KEY["nvidia.com/ClusterPolicy"]])
        create_with_status(kube, "nvidia.com/v1", "clusterpolicies", _with_defaults(cluster_policy))


def dra_plugin_daemonset(namespace: str = DRA_PLUGIN_NAMESPACE) -> dict[str, Any]:
    """The v25.x chart's kubelet-plugin DaemonSet, reduced to what placement needs (nvidia-facts.md §4.1)."""
    labels = {"app.kubernetes.io/name": "nvidia-dra-driver-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DRA_PLUGIN_DAEMONSET, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # The recipe's selector (nvidia-facts.md §1.4 "Older recipe"): the label is the toggle.
                    "nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"},
                    "tolerations": [{"operator": "Exists"}],
                    "priorityClassName": "system-node-critical",
                    "containers": [
                        {"name": "gpus", "image": PAUSE_IMAGE},
                        {"name": "compute-domains", "image": PAUSE_IMAGE},
                    ],
                },
            },
        },
    }


def install_crds(
    api_client: Any, kinds: Iterable[Kind], *, versions: Mapping[str, Iterable[str]] | None = None, timeout: float = 30
) -> list[str]:
    """Permissive CRDs (any fields kept, status subresource) for optional CRD kinds; waits until Established.

    `versions` adds served versions per kind key (a snapshot may hold objects of another version than the
    one the tool lists with); they share the schema, so no conversion is needed. Returns the CRD names.
    """
    kube = Kube(api_client)
    names: list[str] = []
    for kind in kinds:
        if kind.group in _BUILTIN_GROUPS or not kind.optional:
            continue
        extra = set((versions or {}).get(kind.key, ())) - {kind.version}
        body = crd_for(kind, sorted(extra))
        name = body["metadata"]["name"]
        if kube.create_or_exists(CRDS, body) is None and extra:
            _add_versions(kube, name, body)
        names.append(name)
    for name in names:
        wait_established(kube, name, timeout)
    return names


def crd_for(kind: Kind, extra_versions: Iterable[str] = ()) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    versions = [
        {"name": v, "served": True, "storage": v == kind.version, "schema": schema, "subresources": {"status": {}}}
        for v in [kind.version, *extra_versions]
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{kind.group}"},
        "spec": {
            "group": kind.group,
            "names": {
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
            },
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": versions,
        },
    }


def _add_versions(kube: Kube, name: str, wanted: Mapping[str, Any]) -> None:
    """An existing CRD (from an earlier run) gains the versions it lacks."""
    current = kube.get(f"{CRDS}/{name}")
    have = {v["name"] for v in current["spec"]["versions"]}
    missing = [v for v in wanted["spec"]["versions"] if v["name"] not in have]
    if missing:
        current["spec"]["versions"] = current["spec"]["versions"] + [{**v, "storage": False} for v in missing]
        kube.replace(f"{CRDS}/{name}", current)


def wait_established(kube: Kube, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        crd = kube.get(f"{CRDS}/{name}")
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"CRD {name} not Established after {timeout:.0f}s", "check the API server's log")
        time.sleep(0.1)


def ensure_namespace(kube: Kube, name: str) -> None:
    kube.create_or_exists("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def create_with_status(kube: Kube, api_version: str, plural: str, obj: Mapping[str, Any], namespace: str = "") -> bool:
    """Create an object, then write its status through the status subresource, as an operator would.

    False when it already existed (left as it is)."""
    name = str((obj.get("metadata") or {}).get("name", ""))
    body = {k: v for k, v in obj.items() if k != "status"}
    if kube.create_or_exists(path_of(api_version, plural, namespace=namespace), body) is None:
        return False
    if obj.get("status"):
        kube.merge_patch(path_of(api_version, plural, name, namespace, sub="status"), {"status": obj["status"]})
    return True


def _with_defaults(policy: Mapping[str, Any]) -> dict[str, Any]:
    out = {**strip_server_fields(policy), "status": policy.get("status")}
    out.setdefault("apiVersion", "nvidia.com/v1")
    out.setdefault("kind", "ClusterPolicy")
    meta = dict(out.get("metadata") or {})
    meta.setdefault("name", "cluster-policy")  # the Helm chart's name (nvidia-facts.md §1.1)
    out["metadata"] = meta
    out.setdefault("spec", {})
    return out
