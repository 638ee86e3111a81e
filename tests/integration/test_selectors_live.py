"""Selectors the tool writes or accepts, on the real v1.37.2 API server (issue 11 item 8, issue 14 item 5).

Every generated DeviceClass is created for real (then deleted) with device-plugin patterns whose product
names hold spaces, dots, dashes, quotes and regex metacharacters; a converted manifest's --selector passes
the server's validation; the server-side validation (dra_migrate.dra.validate) agrees with the offline
verdict where the offline evaluator gives one and settles the selectors it refuses.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import controlplane
import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.live import LiveCluster, LiveOptions
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.dra.cel import compile_selector
from dra_migrate.dra.cel.literals import cel_string
from dra_migrate.dra.deviceclasses import DeviceClassProposal, _propose
from dra_migrate.dra.validate import validate_selectors
from dra_migrate.inventory.model import Inventory
from dra_migrate.sim.kube import ApiError, Kube
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
RUN = uuid.uuid4().hex[:6]
PRODUCTS = [
    "NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-40GB",
    "Tesla T4.v2",
    "NVIDIA*H100?",
    "weird 'quote\" (x)[y]{2}|+^$ back\\slash",
]


def _custom_proposals() -> list[DeviceClassProposal]:
    custom = {f"nvidia.com/custom-{i}-{RUN}": ("gpus", p) for i, p in enumerate(PRODUCTS)}
    custom[f"nvidia.com/mig-custom-{RUN}"] = ("mig", "1g.10gb*")
    inv = Inventory.__new__(Inventory)  # the custom-pattern branch of _propose reads no inventory
    out = [_propose(name, inv, custom) for name in custom]
    return [p for p in out if p is not None]


def test_every_generated_class_is_created_by_the_api_server(kube: Kube) -> None:
    proposals = _custom_proposals()
    assert len(proposals) == len(PRODUCTS) + 1
    for p in proposals:
        compile_selector(p.selector)  # the offline check accepts it too
        manifest = p.manifest()
        manifest["metadata"]["name"] = f"{p.name}-{RUN}"[:63].strip(".-")
        created = kube.request("POST", CLASSES, body=manifest)
        try:
            assert created["spec"]["selectors"][0]["cel"]["expression"] == p.selector
        finally:
            kube.request("DELETE", f"{CLASSES}/{created['metadata']['name']}")


def test_the_regex_escape_the_issue_names_is_rejected_by_both(kube: Kube) -> None:
    bad = "device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA\\.H100')"
    body = DeviceClassProposal(f"bad-{RUN}.example.com", "example.com/gpu", bad, "").manifest()
    with pytest.raises(ApiError) as err:
        kube.request("POST", CLASSES, query=[("dryRun", "All")], body=body)
    assert err.value.status == 422
    with pytest.raises(Exception, match="invalid escape"):
        compile_selector(bad)


def test_a_converted_selector_passes_server_side_validation(kube: Kube, namespace: str) -> None:
    regex = cel_string("^NVIDIA A100-SXM4\\.40GB$")
    selector = f"device.attributes['gpu.nvidia.com'].productName.matches({regex})"
    manifest = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
        "        resources:\n          limits:\n            nvidia.com/gpu: 1\n"
    )
    text, result = convert_text(manifest, "job.yaml", TemplateTable.builtin(), ConvertOptions(None, (), selector))
    assert not result.problems
    docs = [d for d in YAML(typ="safe").load_all(text) if d]
    templates = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    assert templates and selector in _strings(templates[0])
    for t in templates:
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaimtemplates"
        kube.request("POST", path, query=[("dryRun", "All")], body=t)


def _strings(value: object) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_server_side_validation_agrees_and_settles_refusals(control_plane: controlplane.ControlPlane) -> None:
    cluster = LiveCluster(LiveOptions(control_plane.kubeconfig, None))
    verdicts = {
        v.expression: v
        for v in validate_selectors(
            cluster,
            [
                "device.driver == 'gpu.nvidia.com'",
                "device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA\\.H100')",
                "type(device.attributes['dra.example.com'].val1) == int",  # refused offline: cost
                "['a', 1] == []",
            ],
        )
    }
    assert not any(v.disagrees for v in verdicts.values()), verdicts
    assert verdicts["device.driver == 'gpu.nvidia.com'"].server == "accepted"
    refused = verdicts["type(device.attributes['dra.example.com'].val1) == int"]
    assert (refused.offline, refused.server) == ("refused", "rejected")
    assert "cost limit" in refused.server_message
    assert verdicts["['a', 1] == []"].server == "rejected"


def test_cli_uses_the_server_verdict(
    control_plane: controlplane.ControlPlane, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = tmp_path / "job.yaml"
    text = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: t\nspec:\n  template:\n    spec:\n"
        "      containers:\n      - name: c\n        image: x\n        resources:\n          limits:\n"
        "            nvidia.com/gpu: 1\n"
    )
    manifest.write_text(text)
    kubeconfig = str(control_plane.kubeconfig)
    refused = "type(device.attributes['dra.example.com'].val1) == int"  # offline: no verdict; server: 422
    r = run("convert", str(manifest), "--in-place", "--selector", refused, "--kubeconfig", kubeconfig)
    assert r.code == 1 and "rejected by the API server" in r.stderr and "cost limit" in r.stderr
    assert manifest.read_text() == text  # nothing written on bad input
    refused_ok = "['x', 'y'].exists(s, s == 'x')"
    r = run("convert", str(manifest), "--selector", refused_ok, "--kubeconfig", kubeconfig)
    assert r.code == 0, r.stderr
    with caplog.at_level("WARNING", logger="dra_migrate"):
        r = run("generate", "deviceclasses", "--kubeconfig", kubeconfig)
    assert r.code == 0, r.stderr
    assert not [rec for rec in caplog.records if "the offline check says" in rec.getMessage()]
