"""Discovery on the real API server when an aggregated API's backend is down (an APIService whose Service has no
endpoints, as a crashed metrics-server leaves it): the server's aggregated discovery marks that group version
`freshness: Stale` (k8s.io/api@v0.37.2 apidiscovery/v2/types.go), and requests to it answer 503.

A group the tool does not read (metrics.k8s.io) must not stop the read; one it reads (karpenter.sh: NodePools)
must fail it naming the group version, not read it as "Karpenter not installed"."""

from __future__ import annotations

import time
from collections.abc import Iterator

import controlplane
import pytest

from dra_migrate.sim.kube import Kube
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"


def _apiservice(group: str, version: str) -> dict[str, object]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": {
            "group": group,
            "version": version,
            "service": {"namespace": "kube-system", "name": "no-such-backend", "port": 443},
            "insecureSkipTLSVerify": True,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


@pytest.fixture
def broken(kube: Kube) -> Iterator[list[str]]:
    """APIService names the test made, deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        kube.delete(f"{APISERVICES}/{name}")


def _stale(kube: Kube, gv: str) -> bool:
    doc = kube.get(
        "/apis", accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    )
    group, _, version = gv.partition("/")
    for item in doc.get("items") or []:
        if (item.get("metadata") or {}).get("name") == group:
            return any(v.get("version") == version and v.get("freshness") == "Stale" for v in item["versions"])
    return False


def _wait_stale(kube: Kube, gv: str) -> None:
    deadline = time.monotonic() + 60
    while not _stale(kube, gv):
        assert time.monotonic() < deadline, f"{gv} never marked Stale in aggregated discovery"
        time.sleep(1)


def test_a_down_aggregated_api_the_tool_does_not_read_is_only_a_warning(
    control_plane: controlplane.ControlPlane, kube: Kube, broken: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    kube.create(APISERVICES, _apiservice("metrics.k8s.io", "v1beta1"))
    broken.append("v1beta1.metrics.k8s.io")
    _wait_stale(kube, "metrics.k8s.io/v1beta1")
    r = run("inventory", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
    assert r.code == 0, r.stderr
    assert "metrics.k8s.io/v1beta1 is unavailable" in caplog.text  # the warning names it


def test_a_down_api_holding_a_kind_the_tool_reads_fails_the_read_naming_it(
    control_plane: controlplane.ControlPlane, kube: Kube, broken: list[str]
) -> None:
    kube.create(APISERVICES, _apiservice("karpenter.sh", "v1"))
    broken.append("v1.karpenter.sh")
    _wait_stale(kube, "karpenter.sh/v1")
    r = run("inventory", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
    assert r.code == 1, (r.code, r.stdout[:300], r.stderr)
    assert "karpenter.sh/v1" in r.stderr and "NodePool" in r.stderr and "Traceback" not in r.stderr
