"""`convert --sharing`: the NVIDIA DRA driver's opaque sharing config in every converted claim.

What the driver takes (dra-driver-nvidia-gpu v0.4.1 api/nvidia.com/resource/v1beta1, decoded strictly):
GpuConfig for full GPUs, MigDeviceConfig for MIG devices, each applied to its own device type when it names no
request (cmd/gpu-kubelet-plugin/device_state.go); a time-slice interval for GPUs only; an MPS thread percentage
0..100 and a pinned-memory limit of at least 1Mi. tests/integration/test_driver_config.py runs what is written
here through the driver's own decoder and validation.
"""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.convert.sharing import Sharing, sharing_of
from dra_migrate.errors import InputError
from tests.unit.cli import run

TABLE = TemplateTable.builtin()


def deployment(resource: str = "nvidia.com/gpu") -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: infer\n  namespace: ml\nspec:\n  template:\n"
        f"    spec:\n      containers:\n      - name: main\n        image: i\n        resources:\n"
        f"          limits:\n            {resource}: 1\n"
    )


def claims(text: str, **opts: Any) -> list[dict[str, Any]]:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions(**opts))
    assert not result.problems, result.problems
    return [d for d in YAML(typ="safe").load_all(out) if d and d["kind"] in ("ResourceClaim", "ResourceClaimTemplate")]


def configs(claim: dict[str, Any]) -> list[dict[str, Any]]:
    spec = claim["spec"] if claim["kind"] == "ResourceClaim" else claim["spec"]["spec"]
    return [c["opaque"] for c in spec["devices"].get("config", [])]


def test_mps_is_written_as_the_driver_reads_it_into_the_shared_claim() -> None:
    mps = Sharing("MPS", thread_percentage=25, memory_limit="10Gi")
    [claim] = claims(deployment(), shared_claim=True, sharing=mps)
    assert claim["kind"] == "ResourceClaim"
    assert configs(claim) == [
        {
            "driver": "gpu.nvidia.com",
            "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {
                    "strategy": "MPS",
                    "mpsConfig": {"defaultActiveThreadPercentage": 25, "defaultPinnedDeviceMemoryLimit": "10Gi"},
                },
            },
        }
    ]


def test_a_mig_claim_gets_a_mig_config_without_the_interval_it_cannot_take() -> None:
    """MigDeviceSharing has no timeSlicingConfig: the strict decoder would fail the claim's preparation."""
    [claim] = claims(deployment("nvidia.com/mig-1g.10gb"), sharing=Sharing("TimeSlicing", interval="Long"))
    [opaque] = configs(claim)
    assert opaque["parameters"]["kind"] == "MigDeviceConfig"
    assert opaque["parameters"]["sharing"] == {"strategy": "TimeSlicing"}
    [gpu] = claims(deployment(), sharing=Sharing("TimeSlicing", interval="Long"))
    assert configs(gpu)[0]["parameters"]["sharing"] == {
        "strategy": "TimeSlicing",
        "timeSlicingConfig": {"interval": "Long"},
    }


def test_alternatives_of_both_types_get_a_config_of_each_and_an_unknown_class_both() -> None:
    """A config naming no request applies to the devices of its own type only, so one of each is right when the
    claim may get either; naming a request instead would fail on the type it does not fit."""
    kinds = [
        [o["parameters"]["kind"] for o in configs(c)]
        for c in claims(deployment(), fallback=("mig.nvidia.com",), sharing=Sharing("MPS"))
    ]
    assert kinds == [["GpuConfig", "MigDeviceConfig"]]
    [custom] = claims(deployment(), device_class="team-gpus", sharing=Sharing("MPS"))
    assert [o["parameters"]["kind"] for o in configs(custom)] == ["GpuConfig", "MigDeviceConfig"]
    assert all(o["parameters"]["sharing"] == {"strategy": "MPS"} for o in configs(custom))


def test_without_sharing_no_config_is_written() -> None:
    [claim] = claims(deployment(), shared_claim=True)
    assert configs(claim) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((None, "Long", None, None), "--time-slice-interval needs --sharing"),
        (("time-slicing", None, 50, None), "--mps-\\* options need --sharing mps"),
        (("mps", "Short", None, None), "--time-slice-interval needs --sharing time-slicing"),
        (("mps", None, 101, None), "101 is not 0..100"),
        (("mps", None, -1, None), "-1 is not 0..100"),
        (("mps", None, None, "512Ki"), "at least 1Mi"),
        (("mps", None, None, "ten gigs"), "not a Kubernetes quantity"),
        (("mps", None, None, " 10Gi"), "not a Kubernetes quantity"),
    ],
)
def test_options_the_driver_would_refuse_are_refused_before_anything_is_written(
    args: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        sharing_of(*args)


def test_edges_the_driver_accepts_are_accepted() -> None:
    assert sharing_of("mps", None, 0, "1Mi") == Sharing("MPS", None, 0, "1Mi")
    assert sharing_of("mps", None, 100, "1.5Gi") == Sharing("MPS", None, 100, "1.5Gi")
    assert sharing_of("time-slicing", "Default", None, None) == Sharing("TimeSlicing", "Default")
    assert sharing_of(None, None, None, None) is None


def test_the_command_writes_it_and_says_which_gate_it_needs(tmp_path: Any) -> None:
    src = tmp_path / "d.yaml"
    src.write_text(deployment())
    r = run("convert", str(src), "--shared-claim", "--sharing", "mps", "--mps-thread-percentage", "50")
    assert r.code == 0, r.stderr
    assert "+# sharing MPS: refused unless the DRA kubelet plugin runs with MPSSupport=true" in r.stdout
    assert "defaultActiveThreadPercentage: 50" in r.stdout
    bad = run("convert", str(src), "--sharing", "mps", "--mps-thread-percentage", "150")
    assert bad.code != 0 and "150 is not 0..100" in bad.stderr and "Traceback" not in bad.stderr
