"""Partial migrations (issue 18 item 3): `plan --pools/--exclude-pools`, blockers scoped to a pool or
the cluster, a stage that can be applied beside a blocked pool, and what was left out and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cli import exitcodes
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.scope import stage_blockers
from tests.unit.cli import run
from tests.unit.helpers import unreachable_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
HALF = ROOT / "fixtures" / "clusters" / "half-migrated.yaml"


@pytest.fixture(scope="module")
def demo_with_dra_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo fleet with the NVIDIA DRA kubelet plugin installed: the cluster-wide blocker gone, only
    a100-shared-pool's capacity blocker (time-slicing x4 cannot fit on whole devices) is left."""
    # YAML 1.2 as the tool reads it (PyYAML's 1.1 would turn a label value `yes` into a boolean).
    demo, half = (YAML(typ="safe").load(f.read_text()) for f in (DEMO, HALF))
    plugin = next(
        o
        for o in half["items"]
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-dra-driver-gpu-kubelet-plugin"
    )
    demo["items"].append(plugin)
    out = tmp_path_factory.mktemp("fleet") / "demo-dra.json"
    out.write_text(json.dumps(demo))
    return out


def _plan(tmp_path: Path, snapshot: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "plan.yaml"
    r = run("plan", "--snapshot", str(snapshot), "--out", str(out), "--force", *args, "-o", "json")
    if r.code not in (0, 2):
        return r.code, {}, r.stderr
    return r.code, plan_io.load(out), r.stdout


def test_a_pools_blocker_blocks_only_its_stage(tmp_path: Path, demo_with_dra_driver: Path) -> None:
    code, plan, stdout = _plan(tmp_path, demo_with_dra_driver, "--detailed-exitcode")
    assert code == exitcodes.ACTION_NEEDED  # changes present (--detailed-exitcode, as Terraform)
    assert plan["applicable"] is False
    blocker = next(f for f in plan["findings"] if f["severity"] == "blocker")
    assert blocker["id"] == "shared-gpu-capacity-loss"
    assert blocker["scope"] == "pool" and blocker["pools"] == ["a100-shared-pool"]
    stages = {s["name"]: s for s in json.loads(stdout)["stages"]}
    assert stages["pool-a100-shared-pool"]["blockedBy"] == ["shared-gpu-capacity-loss"]
    assert stages["pool-a100-shared-pool"]["applicable"] is False
    for name in ("prepare", "pool-h100-pool", "pool-l4-pool"):
        assert stages[name]["applicable"] is True and stages[name]["blockedBy"] == []
    # The same answer from the plan file alone, as apply must compute it for --stage.
    by_name = {s["name"]: s for s in plan["stages"]}
    assert stage_blockers(plan["findings"], by_name["pool-h100-pool"]["pool"]) == []
    assert stage_blockers(plan["findings"], "a100-shared-pool") == ["shared-gpu-capacity-loss"]
    assert stage_blockers(plan["findings"], None) == []


def test_a_cluster_wide_blocker_blocks_every_stage(tmp_path: Path) -> None:
    code, plan, stdout = _plan(tmp_path, DEMO, "--exclude-pools", "a100-shared-pool")
    assert code == 0
    blocker = next(f for f in plan["findings"] if f["id"] == "dra-driver-missing")
    assert blocker["scope"] == "cluster"
    assert all("dra-driver-missing" in s["blockedBy"] for s in json.loads(stdout)["stages"])


def test_exclude_pools_makes_the_rest_applicable_and_says_why(tmp_path: Path, demo_with_dra_driver: Path) -> None:
    code, plan, _ = _plan(tmp_path, demo_with_dra_driver, "--exclude-pools", "a100-shared-pool", "--detailed-exitcode")
    assert code == exitcodes.ACTION_NEEDED  # Terraform's --detailed-exitcode: changes present
    assert plan["applicable"] is True
    assert [s["name"] for s in plan["stages"]] == ["prepare", "pool-h100-pool", "pool-l4-pool"]
    assert plan["summary"]["pools"] == ["h100-pool", "l4-pool"]
    left = plan["review"]["excludedPools"]
    assert [x["pool"] for x in left] == ["a100-shared-pool"]
    assert "--exclude-pools" in left[0]["reason"]
    # kept, not lost: the pool's own findings (its time-slicing capacity, its GPU DaemonSet)
    assert [f["id"] for f in left[0]["findings"]] == ["shared-gpu-capacity-loss", "gpu-daemonset"]
    assert not [f for f in plan["findings"] if f["severity"] == "blocker"]
    shown = run("show", str(tmp_path / "plan.yaml")).stdout
    assert "left out: pool a100-shared-pool" in shown and "shared-gpu-capacity-loss" in shown


def test_pools_plans_only_those(tmp_path: Path) -> None:
    code, plan, _ = _plan(tmp_path, DEMO, "--pools", "l4-pool")
    assert code == 0
    assert [s.get("pool") for s in plan["stages"]] == [None, "l4-pool"]
    left = {x["pool"]: x["reason"] for x in plan["review"]["excludedPools"]}
    assert set(left) == {"h100-pool", "a100-shared-pool"}
    assert all("--pools" in r for r in left.values())


def test_already_migrated_pools_are_left_out_with_the_reason(tmp_path: Path) -> None:
    code, plan, _ = _plan(tmp_path, HALF)
    assert code == 0
    left = {x["pool"]: x["reason"] for x in plan["review"]["excludedPools"]}
    assert "gpu-h100-dra" in left and "DRA" in left["gpu-h100-dra"]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--pools", "nope"], "nope"),
        (["--exclude-pools", "l4-pool,nope"], "nope"),
        (["--pools", "l4-pool", "--exclude-pools", "l4-pool"], "l4-pool"),
        (["--pools", "l4-pool,,h100-pool"], "empty"),
        (["--exclude-pools", ""], "empty"),
    ],
)
def test_bad_pool_selections_are_refused_before_anything_is_written(
    tmp_path: Path, args: list[str], names: str
) -> None:
    out = tmp_path / "plan.yaml"
    r = run("plan", "--snapshot", str(DEMO), "--out", str(out), *args)
    assert r.code == exitcodes.FAILED
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0]
    assert not out.exists()


def test_the_selection_is_recorded_in_the_parameters(tmp_path: Path) -> None:
    _, plan, _ = _plan(tmp_path, DEMO, "--pools", "l4-pool,h100-pool")
    assert plan["parameters"]["pools"] == ["l4-pool", "h100-pool"]
    assert plan["parameters"]["excludePools"] == []


def test_stage_blockers_rule() -> None:
    findings = [
        {"id": "a", "severity": "blocker", "scope": "cluster", "pools": []},
        {"id": "b", "severity": "blocker", "scope": "pool", "pools": ["p1"]},
        {"id": "c", "severity": "warning", "scope": "cluster", "pools": []},
        {"id": "d", "severity": "blocker"},  # a plan made before scopes: cluster-wide, the safe reading
    ]
    assert stage_blockers(findings, "p1") == ["a", "b", "d"]
    assert stage_blockers(findings, "p2") == ["a", "d"]
    assert stage_blockers(findings, None) == ["a", "d"]
    assert stage_blockers(findings[1:3], "p2") == []


def test_the_review_section_records_capacity_and_inventory(tmp_path: Path) -> None:
    _, plan, _ = _plan(tmp_path, DEMO)
    review = plan["review"]
    assert {c["pool"] for c in review["capacity"]} == {"a100-shared-pool", "h100-pool", "l4-pool"}
    assert review["inventory"]["consumers"] == 14
    assert {p["name"] for p in review["inventory"]["pools"]} >= {"a100-shared-pool", "h100-pool", "l4-pool"}
    # The review is digested like the rest: an edit is refused.
    text = (tmp_path / "plan.yaml").read_text().replace("demand: 17", "demand: 1", 1)
    (tmp_path / "edited.yaml").write_text(text)
    r = run("show", str(tmp_path / "edited.yaml"))
    assert r.code == exitcodes.FAILED and "edited" in r.stderr


def test_apply_stage_runs_an_applicable_stage_beside_a_blocked_pool(tmp_path: Path, demo_with_dra_driver: Path) -> None:
    """The refusal is offline (before the cluster is contacted): a blocked stage is refused naming its
    blocker; the stages no blocker stops get past it, to the cluster (unreachable here)."""
    code, _, _ = _plan(tmp_path, demo_with_dra_driver)
    assert code == 0
    plan, kc = str(tmp_path / "plan.yaml"), str(unreachable_kubeconfig(tmp_path))
    whole = run("apply", plan, "--kubeconfig", kc, "--yes")
    assert whole.code == exitcodes.FAILED and "is not applicable" in whole.stderr
    blocked = run("apply", plan, "--kubeconfig", kc, "--yes", "--stage", "pool-a100-shared-pool", "--dry-run")
    assert blocked.code == exitcodes.FAILED
    assert "stage pool-a100-shared-pool is not applicable: blockers shared-gpu-capacity-loss" in blocked.stderr
    for args in (["--until", "pool-l4-pool"], ["--stage", "prepare"], ["--stage", "pool-h100-pool", "--dry-run"]):
        r = run("apply", plan, "--kubeconfig", kc, "--yes", *args)
        assert r.code == exitcodes.FAILED, r.stderr
        assert "not applicable" not in r.stderr, (args, r.stderr)  # past the refusal: it tried the cluster
        assert "127.0.0.1" in r.stderr or "connect" in r.stderr.lower() or "unreachable" in r.stderr.lower(), r.stderr
