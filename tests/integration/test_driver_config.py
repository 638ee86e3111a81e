"""`convert --sharing` writes what the NVIDIA DRA driver accepts, judged by the driver's own code.

tools/nvidia/configcheck is compiled against sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 (tools/nvidia/build,
part config-check) and does to each opaque config what the kubelet plugin does when it prepares a claim: the
strict decoder, Normalize, Validate, and the MPS daemon's per-device memory limits. Every config the command
writes, over each sharing option and each kind of claim (full GPU, MIG, GPU-or-MIG alternatives, a custom
class), is accepted with the kubelet plugin's feature gates on and refused without them, as the claim's
comment says; and the option values the command refuses are exactly those the driver refuses.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.convert.sharing import GPU_CONFIG, Sharing, opaque_configs, sharing_of
from dra_migrate.errors import InputError

pytestmark = pytest.mark.nvidia

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("DRA_MIGRATE_NVIDIA_CACHE") or Path.home() / ".cache" / "dra-migrate" / "nvidia")
CHECK = CACHE / "tools" / "dra-config-check"
GATES = "TimeSlicingSettings=true,MPSSupport=true"


@pytest.fixture(scope="module")
def driver_check() -> Path:
    """The checker, built when missing (a no-op when cached); a failed build fails the tests that need it."""
    build = subprocess.run([str(ROOT / "tools" / "nvidia" / "build"), "config-check"], check=False)
    if build.returncode != 0 or not CHECK.exists():
        pytest.fail(f"tools/nvidia/build config-check failed (exit {build.returncode}); run it to see why")
    return CHECK


def verdicts(check: Path, params: list[dict[str, Any]], gates: str = GATES) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(check), *(["-feature-gates", gates] if gates else [])],
        input=json.dumps(params).encode(),
        capture_output=True,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


def deployment(resource: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: infer\nspec:\n  template:\n    spec:\n"
        f"      containers:\n      - name: main\n        image: i\n        resources:\n          limits:\n"
        f"            {resource}: 2\n"
    )


SHARINGS = [
    Sharing("TimeSlicing"),
    Sharing("TimeSlicing", interval="Long"),
    Sharing("MPS"),
    Sharing("MPS", thread_percentage=50),
    Sharing("MPS", thread_percentage=0, memory_limit="1Mi"),
    Sharing("MPS", thread_percentage=100, memory_limit="40Gi"),
]
CLAIMS: list[tuple[str, dict[str, Any]]] = [
    ("nvidia.com/gpu", {}),
    ("nvidia.com/gpu", {"shared_claim": True}),
    ("nvidia.com/mig-1g.10gb", {}),
    ("nvidia.com/gpu", {"fallback": ("mig.nvidia.com",)}),
    ("nvidia.com/gpu", {"device_class": "team-gpus"}),
]


def written(sharing: Sharing) -> list[dict[str, Any]]:
    """Every opaque parameters object `convert` writes with `sharing`, over the kinds of claim."""
    found = []
    for resource, opts in CLAIMS:
        out, result = convert_text(
            deployment(resource), "d.yaml", TemplateTable.builtin(), ConvertOptions(**opts, sharing=sharing)
        )
        assert not result.problems, result.problems
        for doc in YAML(typ="safe").load_all(out):
            if doc and doc["kind"] in ("ResourceClaim", "ResourceClaimTemplate"):
                spec = doc["spec"] if doc["kind"] == "ResourceClaim" else doc["spec"]["spec"]
                found += [c["opaque"]["parameters"] for c in spec["devices"]["config"]]
    return found


@pytest.mark.parametrize(
    "sharing", SHARINGS, ids=lambda s: f"{s.strategy}-{s.interval}-{s.thread_percentage}-{s.memory_limit}"
)
def test_every_config_written_is_accepted_by_the_driver_with_its_gate(driver_check: Path, sharing: Sharing) -> None:
    params = written(sharing)
    assert {p["kind"] for p in params} == {"GpuConfig", "MigDeviceConfig"}
    assert verdicts(driver_check, params) == [{"ok": True}] * len(params)
    refused = verdicts(driver_check, params, gates="")
    assert all(not v["ok"] and sharing.gate in v["error"] for v in refused), refused


@pytest.mark.parametrize(
    ("threads", "memory"),
    [(100, None), (101, None), (0, None), (-1, None), (None, "1Mi"), (None, "1048575"), (None, "512Ki"),
     (None, "1.5Gi"), (None, "0"), (None, "10G")],
)  # fmt: skip
def test_the_values_refused_are_the_values_the_driver_refuses(
    driver_check: Path, threads: int | None, memory: str | None
) -> None:
    """Our check neither lets through what the node would refuse when a pod starts nor refuses what it takes."""
    try:
        sharing_of("mps", None, threads, memory)
        ours = True
    except InputError:
        ours = False
    raw = opaque_configs(Sharing("MPS", thread_percentage=threads, memory_limit=memory), [GPU_CONFIG])
    [params] = json.loads(json.dumps([c["opaque"]["parameters"] for c in raw]))
    [theirs] = verdicts(driver_check, [params])
    assert ours == theirs["ok"], theirs
