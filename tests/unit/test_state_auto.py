"""`--state auto` (the default of apply, rollback, status and report): the journal lives in the cluster when
the tool runs in a pod on its ServiceAccount (the apply Job: a killed pod leaves no file, so the next one
must find the journal in the cluster), and in a file beside the plan otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.execute.journal import journal_path
from dra_migrate.execute.journals import AUTO, FILE, IN_CLUSTER, resolve_state
from dra_migrate.kube import config as kube_config


@pytest.fixture
def in_a_pod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A pod's environment: the API server's service variables and the mounted token, no kubeconfig anywhere."""
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr(kube_config, "SERVICE_ACCOUNT_TOKEN", token)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "plan.yaml"


def test_in_a_pod_on_its_service_account_the_journal_is_in_the_cluster(in_a_pod: Path) -> None:
    assert resolve_state(AUTO, None, in_a_pod) == IN_CLUSTER


def test_a_journal_file_beside_the_plan_is_read_where_it_is(in_a_pod: Path) -> None:
    journal_path(in_a_pod).write_text("")
    assert resolve_state(AUTO, None, in_a_pod) == FILE


def test_a_pod_given_a_kubeconfig_or_a_file_to_read_uses_a_file(in_a_pod: Path, tmp_path: Path) -> None:
    assert resolve_state(AUTO, tmp_path / "kubeconfig", in_a_pod) == FILE
    assert resolve_state(AUTO, None, in_a_pod, file_given=True) == FILE


def test_a_kubeconfig_in_home_wins_over_the_pods_credentials_as_for_kubectl(in_a_pod: Path, tmp_path: Path) -> None:
    kube = tmp_path / "home" / ".kube"
    kube.mkdir(parents=True)
    (kube / "config").write_text("apiVersion: v1\nkind: Config\n")
    assert resolve_state(AUTO, None, in_a_pod) == FILE


def test_the_service_variable_without_the_token_is_no_pod(in_a_pod: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_config, "SERVICE_ACCOUNT_TOKEN", in_a_pod.parent / "no-token")
    assert resolve_state(AUTO, None, in_a_pod) == FILE


def test_outside_a_pod_the_journal_is_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve_state(AUTO, None, tmp_path / "plan.yaml") == FILE


def test_an_explicit_state_is_kept(in_a_pod: Path) -> None:
    assert resolve_state(FILE, None, in_a_pod) == FILE
    journal_path(in_a_pod).write_text("")
    assert resolve_state(IN_CLUSTER, None, in_a_pod) == IN_CLUSTER
