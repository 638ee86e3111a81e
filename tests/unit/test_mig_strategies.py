"""MIG strategies side by side (`mig-strategy-class-overlap`): under `single` the device plugin advertises a
profile's instances as nvidia.com/gpu, so the nvidia.com/gpu class selects them; under `mixed` the same profile is
nvidia.com/mig-<profile>. A DeviceClass selects devices, not nodes: once both are migrated, a whole-GPU pod could be
given a mixed node's slice, which the device plugin never did. Nothing said so."""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from tests.unit.helpers import node
from tests.unit.test_checks import findings, make

POOL = "cloud.google.com/gke-nodepool"


def _node(name: str, strategy: str, product: str, capacity: dict[str, str]) -> dict[str, Any]:
    labels = {POOL: name, "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1",
              "nvidia.com/gpu.product": product, "nvidia.com/mig.strategy": strategy}  # fmt: skip
    return node(name, labels, capacity)


SINGLE = _node("single-1", "single", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", {"nvidia.com/gpu": "7"})


def test_a_profile_served_as_whole_gpus_and_as_mig_slices_is_warned() -> None:
    mixed = _node(
        "mixed-1", "mixed", "NVIDIA-A100-SXM4-40GB", {"nvidia.com/mig-1g.5gb": "4", "nvidia.com/mig-3g.20gb": "1"}
    )
    # the premise: the nvidia.com/gpu class selects the profile's MIG devices, wherever they are
    [gpu] = [
        p for p in assess(make(SINGLE, mixed)).generation.proposals if p.extended_resource_name == "nvidia.com/gpu"
    ]
    assert "1g.5gb" in str(gpu.manifest())
    [f] = findings(make(SINGLE, mixed), "mig-strategy-class-overlap")
    assert f.severity.value == "warning" and "1g.5gb" in f.message
    assert [o.name for o in f.objects] == ["single-1", "mixed-1"]


def test_no_overlap_no_warning() -> None:
    other = _node("mixed-2", "mixed", "NVIDIA-A100-SXM4-40GB", {"nvidia.com/mig-3g.20gb": "2"})
    whole = _node("whole-1", "none", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/gpu": "8"})
    assert findings(make(SINGLE, other, whole), "mig-strategy-class-overlap") == []
    mixed = _node("mixed-1", "mixed", "NVIDIA-A100-SXM4-40GB", {"nvidia.com/mig-1g.5gb": "4"})
    assert findings(make(mixed, whole), "mig-strategy-class-overlap") == [], "no single-strategy node: no overlap"
