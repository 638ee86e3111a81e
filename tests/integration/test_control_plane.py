"""Smoke tests for the control plane started by tools/k8s/up (see conftest.control_plane)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from kubernetes import client, config
from kubernetes.client import ApiException

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def api(control_plane: controlplane.ControlPlane) -> Iterator[client.ApiClient]:
    kubeconfig = str(control_plane.kubeconfig)
    with config.new_client_from_config(config_file=kubeconfig) as api_client:  # type: ignore[no-untyped-call]
        yield api_client


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def test_version_is_v1_37_2(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    assert info.git_version == "v1.37.2"
    assert (info.major, info.minor) == ("1", "37")


def _get_json(api: client.ApiClient, path: str) -> tuple[int, Any]:
    """GET a raw API path through the client's TLS/auth handling (kubernetes>=37.0's generator API)."""
    _method, url, headers, body, _post = api.param_serialize(
        method="GET", resource_path=path, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
    )
    resp = api.call_api("GET", url, header_params=headers, body=body, _request_timeout=30)
    return resp.status, json.loads(resp.read())  # type: ignore[no-untyped-call]


def test_resource_k8s_io_v1_is_served(api: client.ApiClient) -> None:
    status, doc = _get_json(api, "/apis/resource.k8s.io/v1")
    assert status == 200
    served = {r["name"] for r in doc["resources"]}
    assert {"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"} <= served


def test_controller_manager_creates_default_service_account(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)

    def default_sa() -> Any:
        try:
            return core.read_namespaced_service_account("default", namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    sa = wait_for(f"ServiceAccount {namespace}/default", default_sa, timeout=60)
    assert sa.metadata.name == "default"


def test_audit_log_records_requests_by_user_agent(
    control_plane: controlplane.ControlPlane, api: client.ApiClient
) -> None:
    agent = f"dra-migrate-audit-test/{uuid.uuid4().hex[:8]}"
    previous, api.user_agent = api.user_agent, agent
    core = client.CoreV1Api(api)
    try:
        for _ in range(3):
            core.list_namespace(limit=1)
    finally:
        api.user_agent = previous

    def three_events() -> list[dict[str, Any]] | None:
        events = controlplane.audit_events(control_plane, agent)
        return events if len(events) >= 3 else None

    events = wait_for("3 audit events", three_events, timeout=60)
    assert len(events) == 3
    assert {e["verb"] for e in events} == {"list"}
    assert {e["stage"] for e in events} == {"ResponseComplete"}
    assert {e["user"]["username"] for e in events} == {"admin"}


def test_minted_user_is_subject_to_rbac(
    control_plane: controlplane.ControlPlane, api: client.ApiClient, tmp_path: Path
) -> None:
    group = f"dra-migrate:testers-{uuid.uuid4().hex[:8]}"
    kubeconfig = controlplane.mint_kubeconfig(control_plane, "alice", [group], tmp_path / "kc")
    rbac = client.RbacAuthorizationV1Api(api)
    with config.new_client_from_config(config_file=str(kubeconfig)) as alice:  # type: ignore[no-untyped-call]
        alice_core = client.CoreV1Api(alice)
        with pytest.raises(ApiException) as exc:
            alice_core.list_namespaced_pod("default")
        assert exc.value.status == 403
        assert 'User "alice"' in json.loads(str(exc.value.body))["message"]
        # /version is readable by every authenticated user (system:public-info-viewer).
        assert client.VersionApi(alice).get_code().git_version == "v1.37.2"

        # The certificate's O becomes a group: binding `view` to it lets alice read pods.
        binding_name = f"view-{group.rsplit('-', 1)[1]}"
        binding = client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name=binding_name),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="view"),
            subjects=[client.RbacV1Subject(kind="Group", name=group, api_group="rbac.authorization.k8s.io")],
        )
        rbac.create_namespaced_role_binding("default", binding)
        try:

            def can_list() -> bool:
                try:
                    alice_core.list_namespaced_pod("default")
                except ApiException as e:
                    if e.status == 403:
                        return False
                    raise
                return True

            wait_for("RBAC to admit alice", can_list, timeout=30)
        finally:
            rbac.delete_namespaced_role_binding(binding_name, "default")
