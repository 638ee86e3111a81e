"""Generated DeviceClasses pass the real API server's validation; check and match read live clusters."""

from __future__ import annotations

import json
from pathlib import Path

import controlplane
import pytest
from ruamel.yaml import YAML

from dra_migrate.dra.deviceclasses import DeviceClassProposal
from dra_migrate.sim.kube import ApiError, Kube
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").glob("*.yaml"))
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_generated_classes_pass_server_side_validation(kube: Kube, fixture: Path) -> None:
    r = run("generate", "deviceclasses", "--snapshot", str(fixture))
    assert r.code == 0, r.stderr
    docs = [d for d in YAML(typ="safe").load_all(r.stdout) if d]
    for doc in docs:
        # dryRun=All: full validation and admission (CEL compiled, cost estimated), nothing stored.
        created = kube.request("POST", CLASSES, query=[("dryRun", "All")], body=doc)
        assert created["spec"]["extendedResourceName"] == doc["spec"]["extendedResourceName"]
    assert all(d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "dra-migrate" for d in docs)


def test_the_api_server_rejects_what_our_validation_would(kube: Kube) -> None:
    """The dry-run above must be able to fail: a selector that does not compile is refused."""
    bad = DeviceClassProposal("bad.example.com", "example.com/gpu", "device.driver == ", "broken").manifest()
    with pytest.raises(ApiError) as err:
        kube.request("POST", CLASSES, query=[("dryRun", "All")], body=bad)
    assert err.value.status == 422


def test_check_and_match_read_a_live_cluster(control_plane: controlplane.ControlPlane) -> None:
    for args in (["check"], ["match"], ["generate", "deviceclasses"]):
        r = run(
            *args, "--kubeconfig", str(control_plane.kubeconfig), *(["-o", "json"] if args[0] != "generate" else [])
        )
        assert r.code in (0, 2), r.stderr
    r = run("check", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
    report = json.loads(r.stdout)
    assert report["kubernetesVersion"] == "v1.37.2"
    ids = {f["id"] for f in report["findings"]}
    assert "k8s-version-unsupported" not in ids and "extended-resource-unavailable" not in ids
