"""Which ConfigMaps are read: the device plugin's own, by who uses them, never by how the text looks
(issue 28: ConfigMaps were kept because their text looked like a device-plugin config)."""

from __future__ import annotations

import json
from typing import Any

from dra_migrate.cluster.redact import SnapshotFilter
from dra_migrate.cluster.state import SourceInfo, StateBuilder
from dra_migrate.inventory.operator import sharing_configs
from tests.unit.helpers import container, obj, pod_spec, template

# An application's own ConfigMap that mentions GPUs, even in the device plugin's own format.
LOOKALIKE = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 8\n"
# The plugin's real config, in JSON (the plugin reads JSON as well as YAML) and with no sharing at all.
PLUGIN_JSON = json.dumps({"version": "v1", "flags": {"migStrategy": "single"}})


def _cm(name: str, ns: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def _helm_plugin(config: str, image: str = "nvcr.io/nvidia/k8s-device-plugin:v0.18.0") -> dict[str, Any]:
    """The k8s-device-plugin Helm chart's DaemonSet: its config through a projected volume."""
    volumes = [{"name": "available-configs", "projected": {"sources": [{"configMap": {"name": config}}]}}]
    spec = {"template": template(pod_spec(container("plugin", image=image), volumes=volumes))}
    return obj("apps/v1", "DaemonSet", "nvdp", spec, namespace="nvidia")


def _operator_plugin(config: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GPU Operator's plugin DaemonSet from a mirrored image (nothing in its name or image says
    device plugin): its ownerReference to the ClusterPolicy and its `app` label say whose it is."""
    cp = obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", {}, None)
    volumes = [{"name": "cfg", "configMap": {"name": config}}]
    spec = {"template": template(pod_spec(container("p", image="registry.corp/gpu/plugin:1"), volumes=volumes))}
    ds = obj("apps/v1", "DaemonSet", "gpu-plugin", spec, namespace="gpu-operator", owner=cp,
             labels={"app": "nvidia-device-plugin-daemonset"})  # fmt: skip
    return cp, ds


def _snapshot(*objs: dict[str, Any]) -> list[tuple[str, str]]:
    got = SnapshotFilter(keep_env=False).stream(json.loads(json.dumps(o)) for o in objs)
    return [(o["kind"], o["metadata"]["name"]) for o in got]


def _state_configmaps(*objs: dict[str, Any]) -> list[str]:
    b = StateBuilder(SourceInfo(kind="snapshot", location="t"))
    b.add_all(json.loads(json.dumps(o)) for o in objs)
    return sorted(cm["metadata"]["name"] for cm in b.state.of("ConfigMap"))


def test_a_configmap_that_mentions_gpus_but_no_plugin_uses_is_dropped_by_writer_and_reader() -> None:
    app = _cm("train-config", "ml", {"plugin.yaml": LOOKALIKE})
    used = _cm("dp-config", "nvidia", {"default": PLUGIN_JSON})
    ds = _helm_plugin("dp-config")
    assert ("ConfigMap", "train-config") not in _snapshot(app, used, ds)
    assert _state_configmaps(app, used, ds) == ["dp-config"]
    # No device plugin at all: no ConfigMap is anyone's config, however it reads.
    assert _snapshot(app) == []
    assert _state_configmaps(app) == []
    b = StateBuilder(SourceInfo(kind="snapshot", location="t"))
    b.add_all([app])
    assert sharing_configs(b.state, []) == []  # not reported as a time-slicing config in use


def test_the_plugins_own_config_is_kept_though_its_text_looks_like_nothing() -> None:
    used = _cm("dp-config", "nvidia", {"default": PLUGIN_JSON})
    # In either order: a dump lists ConfigMaps before DaemonSets.
    for objs in ((used, _helm_plugin("dp-config")), (_helm_plugin("dp-config"), used)):
        assert ("ConfigMap", "dp-config") in _snapshot(*objs)
        assert _state_configmaps(*objs) == ["dp-config"]
    b = StateBuilder(SourceInfo(kind="snapshot", location="t"))
    b.add_all([used, _helm_plugin("dp-config")])
    [config] = sharing_configs(b.state, [])
    got = (config.config_map, config.key, config.mig_strategy, config.error)
    assert got == ("dp-config", "default", "single", None)


def test_the_operators_plugin_is_known_by_ownership_not_by_image() -> None:
    cp, ds = _operator_plugin("plugin-cfg")
    used = _cm("plugin-cfg", "gpu-operator", {"any": PLUGIN_JSON})
    other_ns = _cm("plugin-cfg", "elsewhere", {"any": PLUGIN_JSON})
    assert _state_configmaps(used, other_ns, cp, ds) == ["plugin-cfg"]
    assert [k for k in _snapshot(used, other_ns, cp, ds) if k[0] == "ConfigMap"] == [("ConfigMap", "plugin-cfg")]
    # The same DaemonSet without the operator's ownership is some other DaemonSet: its ConfigMap is not read.
    del ds["metadata"]["ownerReferences"]
    assert _state_configmaps(used, ds) == []


def test_a_configmap_an_unrelated_daemonset_mounts_is_not_read() -> None:
    volumes = [{"name": "cfg", "configMap": {"name": "fluent"}}]
    spec = {"template": template(pod_spec(container("log", image="fluent/fluent-bit:3"), volumes=volumes))}
    ds = obj("apps/v1", "DaemonSet", "logging", spec, namespace="nvidia")
    assert _state_configmaps(_cm("fluent", "nvidia", {"k": LOOKALIKE}), ds) == []
