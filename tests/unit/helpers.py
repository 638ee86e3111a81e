"""Small builders for Kubernetes objects in unit tests."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import yaml

from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder

_uids = itertools.count(1)


def uid() -> str:
    return f"uid-{next(_uids):04d}"


def container(
    name: str = "main", requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": name, "image": "img", "resources": res, **extra}


def pod_spec(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers), **extra}
    if init:
        spec["initContainers"] = init
    return spec


def obj(
    api_version: str,
    kind: str,
    name: str,
    spec: dict[str, Any] | None = None,
    namespace: str | None = "ml",
    owner: dict[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "uid": uid(), **meta}
    if namespace:
        m["namespace"] = namespace
    if owner is not None:
        m["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {"apiVersion": api_version, "kind": kind, "metadata": m, "spec": spec or {}}


def pod(
    name: str,
    spec: dict[str, Any],
    owner: dict[str, Any] | None = None,
    node: str | None = "gpu-1",
    phase: str = "Running",
) -> dict[str, Any]:
    p = obj("v1", "Pod", name, dict(spec), owner=owner)
    if node:
        p["spec"]["nodeName"] = node
    p["status"] = {"phase": phase}
    return p


def node(
    name: str,
    labels: dict[str, str] | None = None,
    gpus: dict[str, Any] | None = None,
    taints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    n = obj("v1", "Node", name, {}, namespace=None, labels=labels or {})
    res = {"cpu": "64", **(gpus or {})}
    n["status"] = {"capacity": res, "allocatable": res, "conditions": [{"type": "Ready", "status": "True"}]}
    if taints:
        n["spec"]["taints"] = taints
    return n


def template(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {"app": "x"}}, "spec": spec}


def state(*objects: dict[str, Any]) -> ClusterState:
    b = StateBuilder(SourceInfo(kind="snapshot", location="test", kubernetes_version="v1.37.2"))
    b.add_all(objects)
    return b.state


def resource_slice(
    node: str, gen: int, devices: list[dict[str, Any]], driver: str = "gpu.nvidia.com"
) -> dict[str, Any]:
    """A ResourceSlice of `driver` for one node, its pool named after the node (as the NVIDIA driver does)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-{gen}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": gen, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig for an API server nobody runs: whatever gets past the offline refusals fails to connect."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return kc


def readonly_role_lists() -> set[tuple[str, str]]:
    """(apiGroup, resource) pairs the read-only role (deploy/rbac/readonly.yaml) may list."""
    path = Path(__file__).resolve().parents[2] / "deploy" / "rbac" / "readonly.yaml"
    return {
        (g, r)
        for d in yaml.safe_load_all(path.read_text())
        if d
        for rule in d.get("rules") or []
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        if "list" in rule.get("verbs", [])
    }
