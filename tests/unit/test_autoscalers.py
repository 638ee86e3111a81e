"""Autoscalers that scale on what a migration changes (docs/dependents.md "Autoscalers"), on
fixtures/dependents/autoscalers.yaml: KEDA triggers and HPA metrics that read nvidia_com_gpu or per-pod DCGM
series, what each does with an empty result, and the quiet cases (DCGM by Hostname, CPU, KEDA's own HPA)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.autoscalers import gpu_scalers
from tests.unit.helpers import state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "autoscalers.yaml"


@pytest.fixture(scope="module")
def fleet() -> ClusterState:
    return load_snapshot(FIXTURE)


def test_every_scaler_on_a_changing_series_is_found_and_no_other(fleet: ClusterState) -> None:
    found = {
        (a.kind.rpartition("/")[2], a.name, a.place): (a.target, a.terms, a.per_pod_dcgm, a.empty_is_zero)
        for a in gpu_scalers(fleet)
    }
    assert found == {
        ("ScaledObject", "chat", "trigger prometheus gpu-util query"): ("Deployment/chat", (), True, True),
        ("ScaledJob", "batch-embed", "trigger prometheus 0 query"): ("Job", ("nvidia_com_gpu",), False, False),
        ("HorizontalPodAutoscaler", "embeddings", "Pods metric"): ("StatefulSet/embeddings", (), True, False),
        ("HorizontalPodAutoscaler", "rerank", "External metric"): ("Deployment/rerank", (), True, False),
    }


def test_findings_say_what_the_autoscaler_will_do_and_who_owns_it(fleet: ClusterState) -> None:
    found = {str(f.objects[0]): f for f in assess(fleet).findings if f.id == "gpu-metric-autoscaling"}
    chat = found["keda.sh/ScaledObject serving/chat"]
    assert "scales Deployment/chat" in chat.message and "down to its minimum" in chat.message
    assert "flux Kustomization flux-system/serving" in chat.remediation
    assert "stops scaling" in found["autoscaling/HorizontalPodAutoscaler serving/embeddings"].message
    assert "stops scaling" in found["keda.sh/ScaledJob batch/batch-embed"].message  # ignoreNullValues: 'false'
    assert set(found) == {
        "keda.sh/ScaledObject serving/chat",
        "keda.sh/ScaledJob batch/batch-embed",
        "autoscaling/HorizontalPodAutoscaler serving/embeddings",
        "autoscaling/HorizontalPodAutoscaler serving/rerank",
    }


@pytest.mark.parametrize(
    "spec",
    [None, "x", {"triggers": "no"}, {"triggers": [None, {"metadata": "no"}]}, {"metrics": [None, {"type": 3}]}],
)
def test_an_autoscaler_of_any_shape_is_read_without_error(spec: Any) -> None:
    objs = [
        {"apiVersion": api, "kind": kind, "metadata": {"name": "a", "namespace": "n", "uid": f"u-{kind}"}, "spec": spec}
        for api, kind in (("keda.sh/v1alpha1", "ScaledObject"), ("autoscaling/v2", "HorizontalPodAutoscaler"))
    ]
    assert gpu_scalers(state(*objs)) == []
