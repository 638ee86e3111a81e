"""Snapshot formats in, the ClusterSnapshot format out, and what a snapshot leaves out."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.redact import REDACTED, SnapshotFilter, for_snapshot
from dra_migrate.cluster.snapshot import load_snapshot, snapshot_header, write_snapshot
from dra_migrate.cluster.state import SourceInfo
from tests.unit.cli import run
from tests.unit.helpers import container, node, obj, pod, pod_spec, template

GPU = "nvidia.com/gpu"


def objects() -> list[dict[str, Any]]:
    dep = obj(
        "apps/v1", "Deployment", "llm", {"replicas": 2, "template": template(pod_spec(container(requests={GPU: 1})))}
    )
    return [
        node("gpu-1", {"nvidia.com/gpu.present": "true"}, {GPU: "8"}),
        dep,
        pod("bare", pod_spec(container(limits={GPU: 2}))),
    ]


def totals(path: Path, *extra: str) -> dict[str, Any]:
    r = run("inventory", "--snapshot", str(path), "-o", "json", *extra)
    assert r.code == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_kubectl_list_json(tmp_path: Path) -> None:
    f = tmp_path / "dump.json"
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects()}))
    inv = totals(f, "--kubernetes-version", "v1.36.1")
    assert [c["name"] for c in inv["consumers"]] == ["llm", "bare"]  # by namespace, kind, name
    assert inv["cluster"]["kubernetesVersion"] == "v1.36.1"


def test_multi_document_yaml_and_directory(tmp_path: Path) -> None:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe")
    d = tmp_path / "dir"
    d.mkdir()
    nodes, *rest = objects()
    with (d / "a-nodes.yaml").open("w") as fh:
        yaml.dump(nodes, fh)
    with (d / "b-workloads.yaml").open("w") as fh:
        yaml.dump_all(rest, fh)
    (d / "notes.txt").write_text("ignored")
    inv = totals(d)
    assert {c["name"] for c in inv["consumers"]} == {"bare", "llm"}
    assert inv["cluster"]["kubernetesVersion"] is None  # a plain dump says nothing of its server


@pytest.mark.parametrize("fmt", ["jsonl", "json", "yaml"])
def test_cluster_snapshot_round_trip(tmp_path: Path, fmt: str) -> None:
    source = SourceInfo(
        kind="live",
        location="https://k8s.example:6443",
        context="prod",
        kubernetes_version="v1.37.2",
        taken_at="2026-11-30T09:00:00Z",
        served_apis=("v1", "resource.k8s.io/v1"),
    )
    buf = io.BytesIO()
    assert write_snapshot(buf, snapshot_header(source, "0.1.0"), iter(objects()), fmt) == 3
    f = tmp_path / f"snap.{fmt}"
    f.write_bytes(buf.getvalue())
    state = load_snapshot(f)
    assert state.source.kubernetes_version == "v1.37.2"
    assert state.source.context == "prod"
    assert state.source.taken_at == "2026-11-30T09:00:00Z"
    assert state.source.served_apis == ("v1", "resource.k8s.io/v1")
    assert len(state.of("Node")) == 1 and len(state.of("apps/Deployment")) == 1 and len(state.of("Pod")) == 1
    # --kubernetes-version overrides what the snapshot says.
    assert load_snapshot(f, kubernetes_version="v1.35.4").source.kubernetes_version == "v1.35.4"


def test_snapshot_redacts_env_and_args_everywhere() -> None:
    c = container(
        requests={GPU: 1},
        env=[
            {"name": "TOKEN", "value": "s3cret"},
            {"name": "REF", "valueFrom": {"secretKeyRef": {"name": "x", "key": "y"}}},
        ],
        args=["--password", "s3cret"],
    )
    dep = obj("apps/v1", "Deployment", "d", {"template": template(pod_spec(c))})
    dep["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    dep["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": '{"s3cret": 1}', "keep": "me"}
    wf = obj(
        "argoproj.io/v1alpha1",
        "Workflow",
        "w",
        {"templates": [{"name": "t", "container": {"image": "i", "args": ["s3cret"]}}]},
    )
    out = [for_snapshot(json.loads(json.dumps(o)), keep_env=False) for o in (dep, wf)]
    text = json.dumps(out)
    assert "s3cret" not in text
    assert REDACTED in text
    assert "managedFields" not in text and "last-applied" not in text and '"keep": "me"' in text
    assert "secretKeyRef" in text  # a reference names no secret value
    kept = for_snapshot(json.loads(json.dumps(dep)), keep_env=True)
    assert kept is not None and "s3cret" in json.dumps(kept["spec"])


def _cm(name: str, ns: str = "gpu-operator") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns},
        "data": {
            "any": "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n"
        },
    }


def _filtered(*objs: dict[str, Any]) -> list[dict[str, Any]]:
    return list(SnapshotFilter(keep_env=False).stream(json.loads(json.dumps(o)) for o in objs))


def test_snapshot_keeps_device_plugin_configmaps_only_when_named() -> None:
    # A ConfigMap merely shaped like a device-plugin config is not kept; ClusterPolicy or a device-plugin
    # DaemonSet naming it is what makes it one. The ConfigMaps come first, as a live list returns them.
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"db": "password=1"}}
    assert _filtered(other) == []
    lookalike = _cm("lookalike", "apps")
    assert [o["metadata"]["name"] for o in _filtered(_cm("ts"), lookalike)] == []
    cp = obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", {"devicePlugin": {"config": {"name": "ts"}}}, None)
    cp["status"] = {"namespace": "gpu-operator"}
    got = _filtered(_cm("ts"), lookalike, _cm("ts", "elsewhere"), cp)
    assert [(o["kind"], o["metadata"].get("namespace")) for o in got] == [
        ("ClusterPolicy", None),
        ("ConfigMap", "gpu-operator"),
    ]
    ds = obj(
        "apps/v1",
        "DaemonSet",
        "nvidia-device-plugin",
        {
            "template": template(
                pod_spec(
                    container("plugin", image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
                    volumes=[{"name": "cfg", "configMap": {"name": "dp-config"}}],
                )
            )
        },
        namespace="kube-system",
    )
    got = _filtered(_cm("dp-config", "kube-system"), lookalike, ds)
    assert [o["metadata"]["name"] for o in got] == ["nvidia-device-plugin", "dp-config"]


def test_snapshot_redacts_every_container_on_every_template_path_with_or_without_image() -> None:
    model = {
        "modelFormat": {"name": "huggingface"},
        "args": ["--hf-token", "hf_s3cret"],
        "command": ["python", "-c", "s3cret"],
        "env": [{"name": "HF_TOKEN", "value": "hf_s3cret"}],
        "resources": {"limits": {GPU: 1}},
    }
    isvc = obj("serving.kserve.io/v1beta1", "InferenceService", "llm", {"predictor": {"model": model}})
    wf = obj(
        "argoproj.io/v1alpha1",
        "Workflow",
        "w",
        {"templates": [{"name": "t", "script": {"image": "python", "source": "print('s3cret')"}}]},
    )
    bare = pod("p", pod_spec(container(command=["sh", "-c", "curl -u admin:s3cret x"])))
    bare["spec"]["ephemeralContainers"] = [{"name": "debug", "command": ["s3cret"]}]
    out = [for_snapshot(json.loads(json.dumps(o)), keep_env=False) for o in (isvc, wf, bare)]
    text = json.dumps(out)
    assert "s3cret" not in text, text
    cp = obj(
        "nvidia.com/v1",
        "ClusterPolicy",
        "cp",
        {
            "driver": {
                "manager": {
                    "env": [
                        {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "x"},
                        {"name": "HTTPS_PROXY", "value": "http://u:s3cret@proxy:3128"},
                    ]
                }
            }
        },
        None,
    )
    kept = for_snapshot(json.loads(json.dumps(cp)), keep_env=False)
    assert kept is not None
    env = kept["spec"]["driver"]["manager"]["env"]
    assert env[0]["value"] == "x" and "s3cret" not in json.dumps(env)  # operator settings kept, credentials not


def test_templates_file_adds_a_crd(tmp_path: Path) -> None:
    t = tmp_path / "templates.yaml"
    t.write_text("""- kind: example.com/TrainingRun
  apiVersion: example.com/v1
  plural: trainingruns
  roles:
  - {each: "spec.workers[]", template: template, form: podTemplate, replicas: [{path: replicas, default: 1}]}
""")
    run_obj = obj(
        "example.com/v1",
        "TrainingRun",
        "tr",
        {"workers": [{"replicas": 3, "template": template(pod_spec(container(requests={GPU: 2})))}]},
    )
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [objects()[0], run_obj]}))
    assert totals(f)["cluster"]["skipped"] == {"example.com/TrainingRun": 1}
    inv = totals(f, "--templates", str(t))
    assert [(c["kind"], c["totals"]) for c in inv["consumers"]] == [("TrainingRun", {GPU: 6})]


def test_bad_templates_file_is_one_line(tmp_path: Path) -> None:
    t = tmp_path / "templates.yaml"
    t.write_text("- kind: example.com/X\n  roles: []\n")
    f = tmp_path / "s.json"
    f.write_text(json.dumps(objects()[0]))
    r = run("inventory", "--snapshot", str(f), "--templates", str(t))
    assert r.code == 1
    assert r.stderr.startswith("error: ") and "roles" in r.stderr and len(r.stderr.strip().splitlines()) == 1
