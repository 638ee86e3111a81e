"""deploy/apf.yaml on the real API server: the tool's ServiceAccount is classified into its own priority level,
and the server's metrics count its requests (what rehearse reports as apiRequests)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import controlplane
import pytest

from dra_migrate.kube import ApiError
from dra_migrate.rehearse.apf import NAME, RequestMeter, scrape, tool_identity
from dra_migrate.sim.kube import Kube, new_api_client

pytestmark = pytest.mark.cluster


def test_the_tools_requests_are_classified_into_its_flowschema(
    control_plane: controlplane.ControlPlane, kube: Kube, tmp_path: Path
) -> None:
    kubeconfig = tool_identity(kube, control_plane.kubeconfig, tmp_path)
    schema = kube.get(f"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/{NAME}")
    level = kube.get(f"/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/{NAME}")
    tool = Kube(new_api_client(kubeconfig, "dra-migrate-test"))
    before = scrape(kube)["tool"]
    resp = tool._send("GET", "/api/v1/nodes", [("limit", 1)], None, None, 10)
    resp.read()
    assert resp.status == 200
    # The API server names the schema and level that classified the request (KEP-1040).
    assert resp.getheaders().get("X-Kubernetes-PF-FlowSchema-UID") == schema["metadata"]["uid"]
    assert resp.getheaders().get("X-Kubernetes-PF-PriorityLevel-UID") == level["metadata"]["uid"]
    # The admin (system:masters) is exempt: not counted as the tool.
    resp = kube._send("GET", "/api/v1/nodes", [("limit", 1)], None, None, 10)
    resp.read()
    assert resp.getheaders().get("X-Kubernetes-PF-FlowSchema-UID") != schema["metadata"]["uid"]
    meter = RequestMeter(kube, every_s=0.5)
    meter.start()
    for _ in range(5):
        tool.get("/api/v1/namespaces")
    meter.stop()
    assert scrape(kube)["tool"] - before >= 6
    summary = meter.summary(migrated_nodes=5)
    assert summary["toolRequests"] >= 5 and summary["toolRequestsPerMigratedNode"] >= 1.0
    assert summary["toolRejected429"] == 0


@pytest.fixture(autouse=True)
def _no_twin_grant_left(kube: Kube) -> Iterator[None]:
    """tool_identity binds the tool's ServiceAccount to cluster-admin, as only the private twin does; the
    control plane is shared, so the grant goes with the test (test_in_cluster_manifests checks that the
    same ServiceAccount gets nothing beyond deploy/)."""
    yield
    with contextlib.suppress(ApiError):
        kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NAME}-twin")
