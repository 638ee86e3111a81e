"""Which version each optional kind is listed at on a live cluster (cluster/live.py `kinds_to_read`).

A CRD's versions come and go: Kueue v0.17 keeps v1beta1 only as deprecated, and a release that drops it serves
its queues at v1beta2 alone. The tool listed optional kinds at the table's version only, so such a cluster's
ClusterQueues were never read, and nothing said so.
"""

from __future__ import annotations

import logging

import pytest

from dra_migrate.cluster.kinds import ALL_KINDS, version_priority
from dra_migrate.cluster.live import kinds_to_read
from dra_migrate.cluster.templates import TemplateTable

BASE = {"v1": frozenset({"pods", "nodes"}), "apps/v1": frozenset({"deployments"})}


def read(served: dict[str, frozenset[str]]) -> dict[str, str]:
    return {k.key: k.api_version for k in kinds_to_read(served, TemplateTable.builtin())}


def test_a_kind_served_only_at_a_newer_version_is_read_there_and_said(caplog: pytest.LogCaptureFixture) -> None:
    served = {**BASE, "kueue.x-k8s.io/v1beta2": frozenset({"clusterqueues", "localqueues", "resourceflavors"})}
    with caplog.at_level(logging.WARNING):
        kinds = read(served)
    assert kinds["kueue.x-k8s.io/ClusterQueue"] == "kueue.x-k8s.io/v1beta2"
    assert kinds["kueue.x-k8s.io/LocalQueue"] == "kueue.x-k8s.io/v1beta2"
    assert "ClusterQueue is not served at v1beta1" in caplog.text and "read at v1beta2" in caplog.text


def test_the_tables_version_wins_while_it_is_served() -> None:
    served = {
        **BASE,
        "kueue.x-k8s.io/v1beta1": frozenset({"clusterqueues"}),
        "kueue.x-k8s.io/v1beta2": frozenset({"clusterqueues"}),
    }
    assert read(served)["kueue.x-k8s.io/ClusterQueue"] == "kueue.x-k8s.io/v1beta1"


def test_of_several_other_versions_the_highest_is_read_and_only_where_the_plural_is_served() -> None:
    served = {
        **BASE,
        "kueue.x-k8s.io/v1alpha1": frozenset({"clusterqueues", "cohorts"}),
        "kueue.x-k8s.io/v1": frozenset({"clusterqueues"}),
        "kueue.x-k8s.io/v1beta2": frozenset({"clusterqueues", "localqueues"}),
        "other.example.com/v1": frozenset({"resourceflavors"}),  # another group's plural of the same name
    }
    kinds = read(served)
    assert kinds["kueue.x-k8s.io/ClusterQueue"] == "kueue.x-k8s.io/v1"
    assert kinds["kueue.x-k8s.io/LocalQueue"] == "kueue.x-k8s.io/v1beta2"
    assert "kueue.x-k8s.io/ResourceFlavor" not in kinds, "not served in its group at any version"


def test_built_in_kinds_are_listed_at_their_version_whatever_discovery_says() -> None:
    kinds = read(BASE)
    assert all(kinds[k.key] == k.api_version for k in ALL_KINDS if not k.optional)


def test_kubernetes_version_priority() -> None:
    order = ["foo", "v1alpha1", "v1alpha2", "v2alpha1", "v1beta1", "v1beta2", "v1", "v2", "v10"]
    assert sorted(reversed(order), key=version_priority) == order
