"""Discovery of a live cluster (cluster/live.py `LiveCluster.discover`, `kinds_to_read`) when some API group
cannot say what it serves: an aggregated API whose backend is down (metrics-server: 503 ServiceUnavailable),
which aggregated discovery marks `freshness: Stale` (k8s.io/api@v0.37.2 apidiscovery/v2/types.go).

client-go goes on with the groups that answered and names the ones that did not
(k8s.io/client-go@v0.37.2 discovery/discovery_client.go `ErrGroupDiscoveryFailed`,
discovery/aggregated_discovery.go `StaleGroupVersionError`). Before, one group's 503 failed the whole read,
and a stale group's kinds were read as "not installed": an inventory without them, presented as complete.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dra_migrate.cluster.live import LiveCluster, kinds_to_read
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.errors import ClusterError
from dra_migrate.kube import Kube, RetryPolicy
from dra_migrate.testing.kube import Call, FakeApiClient, FakeResponse, status


def _cluster(answers: dict[str, FakeResponse]) -> tuple[LiveCluster, FakeApiClient]:
    def answer(call: Call) -> FakeResponse:
        return answers.get(call.path) or FakeResponse(404, status(404, "NotFound", "not found"))

    client = FakeApiClient(answer)
    cluster = LiveCluster.__new__(LiveCluster)
    cluster.kube = Kube(client, retry=RetryPolicy(retries=1, backoff_s=0.0), sleep=lambda _s: None)
    return cluster, client


def _resources(*names: str) -> FakeResponse:
    return FakeResponse(200, {"kind": "APIResourceList", "resources": [{"name": n} for n in names]})


def _legacy(unavailable: str) -> dict[str, FakeResponse]:
    groups = ["apps/v1", "kueue.x-k8s.io/v1beta1", "metrics.k8s.io/v1beta1"]
    answers = {
        "/api": FakeResponse(200, {"kind": "APIVersions", "versions": ["v1"]}),
        "/apis": FakeResponse(
            200, {"kind": "APIGroupList", "groups": [{"versions": [{"groupVersion": gv}]} for gv in groups]}
        ),
        "/api/v1": _resources("pods", "nodes"),
        "/apis/apps/v1": _resources("deployments"),
        "/apis/kueue.x-k8s.io/v1beta1": _resources("clusterqueues", "localqueues"),
        "/apis/metrics.k8s.io/v1beta1": _resources("pods", "nodes"),
    }
    answers[f"/apis/{unavailable}"] = FakeResponse(
        503, status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    )
    return answers


def test_an_unavailable_aggregated_api_the_tool_does_not_read_leaves_the_others_discovered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster, _ = _cluster(_legacy("metrics.k8s.io/v1beta1"))
    with caplog.at_level(logging.WARNING):
        served = cluster.discover()
        kinds = {k.key for k in kinds_to_read(served, TemplateTable.builtin(), cluster.unavailable)}
    assert served["kueue.x-k8s.io/v1beta1"] == {"clusterqueues", "localqueues"}
    assert "metrics.k8s.io/v1beta1" in cluster.unavailable and "kueue.x-k8s.io/ClusterQueue" in kinds
    assert "metrics.k8s.io/v1beta1" in caplog.text


def test_an_unavailable_group_the_tool_reads_fails_the_read_naming_it() -> None:
    cluster, _ = _cluster(_legacy("kueue.x-k8s.io/v1beta1"))
    served = cluster.discover()
    with pytest.raises(ClusterError) as e:
        kinds_to_read(served, TemplateTable.builtin(), cluster.unavailable)
    assert "kueue.x-k8s.io/v1beta1" in str(e.value) and "503" in str(e.value)
    assert "ClusterQueue" in str(e.value) and e.value.hint


def _aggregated(stale: str) -> dict[str, FakeResponse]:
    def group(name: str, version: str, *resources: str) -> dict[str, Any]:
        v: dict[str, Any] = {"version": version, "resources": [{"resource": r} for r in resources]}
        if f"{name}/{version}" == stale:
            v = {"version": version, "resources": [], "freshness": "Stale"}
        return {"metadata": {"name": name}, "versions": [v]}

    return {
        "/api": FakeResponse(200, {"kind": "APIGroupDiscoveryList", "items": [group("", "v1", "pods", "nodes")]}),
        "/apis": FakeResponse(
            200,
            {
                "kind": "APIGroupDiscoveryList",
                "items": [
                    group("apps", "v1", "deployments"),
                    group("kueue.x-k8s.io", "v1beta1", "clusterqueues"),
                    group("metrics.k8s.io", "v1beta1", "pods", "nodes"),
                ],
            },
        ),
    }


def test_a_stale_group_in_aggregated_discovery_is_not_read_as_not_installed() -> None:
    cluster, _ = _cluster(_aggregated("kueue.x-k8s.io/v1beta1"))
    served = cluster.discover()
    with pytest.raises(ClusterError) as e:
        kinds_to_read(served, TemplateTable.builtin(), cluster.unavailable)
    assert "kueue.x-k8s.io/v1beta1" in str(e.value) and "Stale" in str(e.value)


def test_a_stale_group_the_tool_does_not_read_is_only_noted() -> None:
    cluster, _ = _cluster(_aggregated("metrics.k8s.io/v1beta1"))
    served = cluster.discover()
    kinds = {k.key for k in kinds_to_read(served, TemplateTable.builtin(), cluster.unavailable)}
    assert "kueue.x-k8s.io/ClusterQueue" in kinds and "metrics.k8s.io/v1beta1" in cluster.unavailable


def _agg(with_kueue: bool) -> dict[str, FakeResponse]:
    groups = [{"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": []}]}]
    if with_kueue:
        resources = [{"resource": "clusterqueues"}]
        groups.append(
            {"metadata": {"name": "kueue.x-k8s.io"}, "versions": [{"version": "v1beta1", "resources": resources}]}
        )
    core = {"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [{"resource": "nodes"}]}]}
    return {
        "/api": FakeResponse(200, {"kind": "APIGroupDiscoveryList", "items": [core]}),
        "/apis": FakeResponse(200, {"kind": "APIGroupDiscoveryList", "items": groups}),
    }


@pytest.mark.parametrize("removed", [True, False])
def test_a_crd_removed_between_discovery_and_its_list_is_read_as_gone_only_if_discovery_agrees(removed: bool) -> None:
    """`helm upgrade` of an operator replaces its CRDs; one removed after discovery answers its list 404. Discovery
    is asked again: no longer served, its objects went with it; still served (an API server behind the load
    balancer that has not caught up), the 404 fails the read."""
    from dra_migrate.cluster.kinds import KINDS_BY_KEY
    from dra_migrate.kube import ApiError

    state = {"discoveries": 0}

    def answer(call: Call) -> FakeResponse:
        if call.path in ("/api", "/apis"):
            state["discoveries"] += call.path == "/apis"
            return _agg(state["discoveries"] == 1 or not removed)[call.path]
        return FakeResponse(404, status(404, "NotFound", "the server could not find the requested resource"))

    cluster = LiveCluster.__new__(LiveCluster)
    cluster.kube = Kube(FakeApiClient(answer), retry=RetryPolicy(retries=0))
    served = cluster.discover()
    kind = [k for k in kinds_to_read(served, TemplateTable.builtin()) if k.key == "kueue.x-k8s.io/ClusterQueue"]
    assert kind == [KINDS_BY_KEY["kueue.x-k8s.io/ClusterQueue"]]
    if removed:
        assert list(cluster.list_kind(kind[0])) == []
    else:
        with pytest.raises(ApiError):
            list(cluster.list_kind(kind[0]))
