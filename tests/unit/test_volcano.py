"""Volcano queues that budget GPUs by device-plugin name (docs/dependents.md "Volcano queues"), on
fixtures/dependents/volcano.yaml: every field read, the capacity plugin's DeviceClass key asked for beside
each name a converted workload's claim would escape, and the quiet cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.model import Finding
from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.convert.dependents import dependent_changes
from dra_migrate.inventory.volcano import volcano_gpu_budgets
from tests.unit.helpers import state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "volcano.yaml"
QUEUE = "scheduling.volcano.sh/Queue"


@pytest.fixture(scope="module")
def found() -> dict[str, Finding]:
    return {str(f.objects[0]): f for f in assess(load_snapshot(FIXTURE)).findings if f.id == "volcano-queue-dra"}


def test_each_queue_that_budgets_gpus_by_name_only_is_told_the_key_to_add(found: dict[str, Finding]) -> None:
    assert {k: f.severity.value for k, f in found.items()} == {
        f"{QUEUE} ml-team": "warning",
        f"{QUEUE} notebooks": "warning",
        f"{QUEUE} dra-ready": "info",
    }
    ml = found[f"{QUEUE} ml-team"]
    assert "capability nvidia.com/gpu: 8, deserved nvidia.com/gpu: 4, guarantee nvidia.com/gpu: 1" in ml.message
    assert (
        'capability: "deviceclass/gpu.nvidia.com": "8", deserved: "deviceclass/gpu.nvidia.com": "4", '
        'guarantee: "deviceclass/gpu.nvidia.com": "1"' in ml.remediation
    )
    mig = found[f"{QUEUE} notebooks"]
    assert '"deviceclass/mig.nvidia.com": "18"' in mig.remediation  # both profiles are mig.nvidia.com's
    assert "flux Kustomization flux-system/queues" in mig.remediation


@pytest.mark.parametrize(
    "spec", [None, "x", {"capability": "x"}, {"guarantee": {"resource": ["x"]}}, {"deserved": None}]
)
def test_a_queue_of_any_shape_is_read_without_error(spec: Any) -> None:
    q = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q", "uid": "u"},
        "spec": spec,
    }
    assert volcano_gpu_budgets(state(q)) == []


def test_generate_dependents_writes_each_queue_whole_with_the_keys_added() -> None:
    changes = {c.target: c for c in dependent_changes(load_snapshot(FIXTURE), [])}
    assert set(changes) == {"Queue ml-team", "Queue notebooks"}
    spec = changes["Queue ml-team"].manifest["spec"]
    assert spec == {
        "reclaimable": True,  # the rest of the queue as it is
        "capability": {"cpu": "64", "nvidia.com/gpu": "8", "deviceclass/gpu.nvidia.com": "8"},
        "deserved": {"nvidia.com/gpu": "4", "deviceclass/gpu.nvidia.com": "4"},
        "guarantee": {"resource": {"nvidia.com/gpu": "1", "deviceclass/gpu.nvidia.com": "1"}},
    }
    notebooks = changes["Queue notebooks"]
    assert notebooks.manifest["spec"]["capability"]["deviceclass/mig.nvidia.com"] == "18"
    assert str(notebooks.owner) == "flux Kustomization flux-system/queues"
