"""Kueue must count the ResourceClaimTemplates `convert` writes: their class is the NVIDIA driver's
(gpu.nvidia.com, mig.nvidia.com with a profile selector; convert/claims.py `alternatives_for`), and Kueue looks a
template's class up in `resources.deviceClassMappings`, making the workload inadmissible when it is not there
(sigs.k8s.io/kueue@v0.17.0 pkg/dra/claims.go `GetResourceRequestsForResourceClaimTemplates`: "DeviceClass %s is
not mapped in DRA configuration"), and refuses a request with CEL selectors outright (`countDevicesPerClass`:
"CEL selectors are not supported"). A class maps to one resource name only (pkg/config/validation.go
`validateDeviceClassMappings`: "device class already mapped to resource")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_migrate.checks.model import Finding
from dra_migrate.checks.run import assess
from tests.unit.helpers import container, node, obj, pod, pod_spec, state

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "dependents" / "cluster.yaml"


def _kueue(gates: str) -> dict[str, Any]:
    c = {"name": "m", "image": "registry.k8s.io/kueue/kueue:v0.17.0", "args": [f"--feature-gates={gates}"]}
    return obj(
        "apps/v1",
        "Deployment",
        "kueue-controller-manager",
        {"template": {"spec": {"containers": [c]}}},
        namespace="kueue-system",
    )


def _queue(*names: str) -> dict[str, Any]:
    resources = [{"name": n, "nominalQuota": 4} for n in names]
    return obj(
        "kueue.x-k8s.io/v1beta1",
        "ClusterQueue",
        "q",
        {"resourceGroups": [{"flavors": [{"name": "f", "resources": resources}]}]},
        namespace=None,
    )


def _found(*names: str, gates: str = "DynamicResourceAllocation=true") -> list[Finding]:
    labels = {"pool": "p", "nvidia.com/gpu.present": "true", "nvidia.com/mig.strategy": "mixed"}
    n = node("gpu-1", labels, {name: "7" for name in names})
    pods = [pod(f"p{i}", pod_spec(container(requests={name: "1"}))) for i, name in enumerate(names)]
    s = state(n, *pods, _kueue(gates), _queue(*names))
    return [f for f in assess(s, pool_labels=("pool",)).findings if f.id == "kueue-dra-support"]


def test_the_mapping_names_the_class_converted_templates_claim() -> None:
    (f,) = _found("nvidia.com/gpu")
    assert "{name: nvidia.com/gpu, deviceClassNames: [gpu-extended.nvidia.com, gpu.nvidia.com]}" in f.remediation


def test_generate_maps_the_class_converted_templates_claim() -> None:
    from tests.unit.cli import run

    r = run("generate", "dependents", "--snapshot", str(FIXTURE), "-o", "json")
    assert r.code == 0, r.stderr
    change = next(c for c in json.loads(r.stdout)["changes"] if c["target"] == "Kueue Configuration")
    assert change["manifest"]["resources"]["deviceClassMappings"] == [
        {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu-extended.nvidia.com", "gpu.nvidia.com"]}
    ]


def test_converted_mig_workloads_are_inadmissible_and_said_so() -> None:
    """mig.nvidia.com serves every profile (one class maps to one name) and convert's claim selects the
    profile with CEL, which Kueue refuses: no mapping makes them admissible."""
    (f,) = _found("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb")
    assert "mig.nvidia.com" not in f.remediation.split("deviceClassMappings")[1]
    assert "CEL selectors" in f.message and "nvidia.com/mig-1g.10gb" in f.message


def test_with_every_gate_on_the_mapping_is_still_to_confirm() -> None:
    """The gates say nothing of the Configuration's deviceClassMappings, which converted templates need."""
    found = _found("nvidia.com/gpu", gates="DynamicResourceAllocation=true,DRAExtendedResources=true")
    assert [f.severity.value for f in found] == ["info"]
    assert "gpu.nvidia.com" in found[0].remediation
