"""`--dry-run=server` on the real control plane: `generate deviceclasses` and `convert` send every object
as a server-side dry run; the server's rejections are errors (exit 1, nothing written), and nothing is
ever persisted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import controlplane
import pytest
from ruamel.yaml import YAML

from dra_migrate.sim.kube import Kube, path_of
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
GPU = "nvidia.com/gpu"


def _deployment(namespace: str, name: str, replicas: int = 1) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources: {{limits: {{{GPU}: 1}}}}
"""


def _names(kube: Kube, api_version: str, plural: str, namespace: str = "") -> set[str]:
    items, _ = kube.list_all(path_of(api_version, plural, namespace=namespace))
    return {str(i["metadata"]["name"]) for i in items}


def test_convert_dry_run_server_persists_nothing(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "train.yaml"
    manifest.write_text(_deployment(namespace, "train"))
    before = manifest.read_text()
    r = run("convert", str(manifest), "--in-place", "--kubeconfig", str(control_plane.kubeconfig), "--dry-run=server")
    assert r.code == 0, r.stderr
    assert "2 of 2 object(s) accepted" in r.stderr and "nothing persisted" in r.stderr
    assert manifest.read_text() != before  # accepted: converted in place as without the dry run
    # The server judged a Deployment and a ResourceClaimTemplate, and stored neither.
    assert _names(kube, "apps/v1", "deployments", namespace) == set()
    assert _names(kube, "resource.k8s.io/v1", "resourceclaimtemplates", namespace) == set()


def test_convert_dry_run_server_rejections_are_errors_and_nothing_is_written(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    # Passes the offline conversion; the API server refuses replicas < 0 (apps validation) and a namespace
    # that does not exist.
    bad.write_text(_deployment(namespace, "neg", replicas=-1) + "---\n" + _deployment(f"missing-{RUN}", "lost"))
    before = bad.read_text()
    out = tmp_path / "out"
    r = run(
        "convert", str(bad), "--output-dir", str(out), "--kubeconfig", str(control_plane.kubeconfig), "--dry-run=server"
    )
    assert r.code == 1, r.stderr
    rejected = [line for line in r.stderr.splitlines() if "rejected by the API server" in line]
    assert any("Deployment " + namespace + "/neg" in line and "replicas" in line for line in rejected), r.stderr
    assert any(f"missing-{RUN}" in line for line in rejected), r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists() and bad.read_text() == before
    assert _names(kube, "apps/v1", "deployments", namespace) == set()


@pytest.fixture
def gpu_node(kube: Kube) -> Iterator[str]:
    """A Node object that advertises nvidia.com/gpu (no kubelet: the object is all `generate` reads)."""
    name = f"dryrun-gpu-{RUN}"
    kube.create(path_of("v1", "nodes"), {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}}})
    resources = {GPU: "8", "cpu": "8", "memory": "64Gi", "pods": "110"}
    kube.merge_patch(
        path_of("v1", "nodes", name, sub="status"), {"status": {"capacity": resources, "allocatable": resources}}
    )
    yield name
    kube.delete(path_of("v1", "nodes", name))


def test_generate_deviceclasses_dry_run_server_persists_nothing(
    control_plane: controlplane.ControlPlane, kube: Kube, gpu_node: str
) -> None:
    before = _names(kube, "resource.k8s.io/v1", "deviceclasses")
    r = run("generate", "deviceclasses", "--kubeconfig", str(control_plane.kubeconfig), "--dry-run=server")
    assert r.code == 0, r.stderr
    classes = [d for d in YAML(typ="safe").load_all(r.stdout) if d]
    assert classes, r.stderr  # the node's nvidia.com/gpu gets a class
    assert f"{len(classes)} of {len(classes)} object(s) accepted" in r.stderr
    assert _names(kube, "resource.k8s.io/v1", "deviceclasses") == before


def test_dry_run_server_refuses_a_snapshot(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    r = run("generate", "deviceclasses", "--snapshot", str(root / "fixtures/clusters/demo.yaml"), "--dry-run=server")
    assert r.code == 1 and "live API server" in r.stderr


_TEN = "[0,1,2,3,4,5,6,7,8,9]"
_THOUSAND = "[" + ",".join(["0"] * 1001) + "]"
_DEVICE_MAPS = "device.attributes.all(a, device.capacity['d'].all(b, device.attributes['x'].all(c, {})))"
OVER_COST = [
    "".join(f"{_TEN}.all(v{i}, " for i in range(7)) + "true" + ")" * 7,
    f"{_THOUSAND}.exists(a, {_THOUSAND}.exists(b, a != b))",
    _DEVICE_MAPS.format("device.capacity.exists(d, true)"),  # 32^4: the maps' declared most entries
]


def test_three_comprehensions_nested_over_the_device_maps_are_within_the_servers_cost_limit(
    control_plane: controlplane.ControlPlane,
) -> None:
    """The other side of the device-maps case below: one level less (32^3) the server accepts, so the
    offline refusal of four levels rests on the maps' size, not on nesting alone."""
    from dra_migrate.cluster.live import LiveCluster, LiveOptions
    from dra_migrate.dra.validate import offline_verdict, server_verdict

    expression = _DEVICE_MAPS.format("true")
    assert offline_verdict(expression)[0] != "rejected"
    verdict, message = server_verdict(LiveCluster(LiveOptions(control_plane.kubeconfig)), expression)
    assert verdict == "accepted", message


@pytest.mark.parametrize("expression", OVER_COST, ids=["7-deep", "1001x1001", "device-maps-4-deep"])
def test_what_is_refused_offline_over_the_cost_limit_the_server_refuses_too(
    control_plane: controlplane.ControlPlane, expression: str
) -> None:
    from dra_migrate.cluster.live import LiveCluster, LiveOptions
    from dra_migrate.dra.validate import offline_verdict, server_verdict

    assert offline_verdict(expression)[0] == "rejected"
    verdict, message = server_verdict(LiveCluster(LiveOptions(control_plane.kubeconfig)), expression)
    assert verdict == "rejected" and "exceeds cost limit" in message, message


def test_a_live_snapshot_keeps_the_plugins_configmap_and_drops_a_lookalike(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """Issue 28: ConfigMaps by who uses them. The live read lists ConfigMaps after the DaemonSets."""
    import json

    lookalike = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 8\n"
    plugin_json = json.dumps({"version": "v1", "flags": {"migStrategy": "single"}})
    for name, value in (("app-config", lookalike), ("dp-config", plugin_json)):
        kube.create(
            path_of("v1", "configmaps", namespace=namespace), {"metadata": {"name": name}, "data": {"k": value}}
        )
    labels = {"app": "nvdp"}
    kube.create(
        path_of("apps/v1", "daemonsets", namespace=namespace),
        {
            "metadata": {"name": "nvdp"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"never": "here"},
                        "containers": [{"name": "p", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}],
                        "volumes": [{"name": "cfg", "configMap": {"name": "dp-config"}}],
                    },
                },
            },
        },
    )
    snap = tmp_path / "live.jsonl"
    r = run("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "--out", str(snap))
    assert r.code == 0, r.stderr
    kept = {
        o["metadata"]["name"]
        for o in map(json.loads, snap.read_text().splitlines()[1:])
        if o.get("kind") == "ConfigMap" and o["metadata"].get("namespace") == namespace
    }
    assert kept == {"dp-config"}
