"""The example policies (dra_migrate/policy/examples) evaluated by the real OPA engine against plans made
from fixtures, through `dra-migrate policy check` (docs/policy.md). Needs the pinned OPA: `make opa`
(tools/opa/build, a no-op when cached)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.policy.engine import EXAMPLES, OPA_VERSION, evaluate, find_opa

ROOT = Path(__file__).resolve().parents[2]
CLUSTERS = ROOT / "fixtures" / "clusters"


@pytest.fixture(scope="module", autouse=True)
def opa() -> Path:
    try:
        return find_opa()
    except Exception as e:  # the tier needs the real engine: say how to get it, never fake it
        pytest.fail(f"{e}: run `make opa` (tools/opa/build) first")


def write_plan(tmp: Path, fixture: Path, name: str, **params: Any) -> Path:
    body = build_plan(load_snapshot(fixture), PlanParams(**params)).to_dict()
    path = tmp / f"{name}.yaml"
    plan_io.write(plan_io.seal(body), path)
    return path


def policy_check(plan: Path, policies: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dra_migrate", "policy", "check", str(plan), "--policy", str(policies), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_the_pinned_engine_is_the_one_used(opa: Path) -> None:
    verdict = evaluate({"findings": [], "stages": []}, EXAMPLES, opa=opa)
    assert verdict.passed and verdict.engine == f"opa {OPA_VERSION}"


def test_a_clean_plan_passes(tmp_path: Path) -> None:
    # half-migrated: no blocker; its one pool to migrate (gpu-h100, 4 nodes) in waves of 1, not production
    plan = write_plan(tmp_path, CLUSTERS / "half-migrated.yaml", "clean", max_unavailable="1")
    out = policy_check(plan, EXAMPLES, "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["deny"] == []


def test_a_wave_over_ten_percent_of_its_pool_is_denied(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, CLUSTERS / "half-migrated.yaml", "wide", max_unavailable="50%")
    out = policy_check(plan, EXAMPLES, "-o", "json")
    assert out.returncode == 2, out.stderr
    deny = json.loads(out.stdout)["deny"]
    assert deny and all("drains 2 of pool" in m and "more than 10%" in m for m in deny)


def test_a_plan_with_a_blocker_and_a_short_production_soak_is_denied(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ROOT / "fixtures" / "dependents" / "cluster.yaml", "dep", pool_labels=("pool",))
    out = policy_check(plan, EXAMPLES)
    assert out.returncode == 2
    assert "DENY  blocker kueue-dra-support" in out.stdout
    assert "DENY  pool-train/wave-1 soaks 5m on production pool train (at least 30m)" in out.stdout
    # The quota step is in the plan, so the quota rule is quiet; its GitOps-owned twin is not required.
    assert "gets no DRA limit" not in out.stdout
    longer = write_plan(
        tmp_path, ROOT / "fixtures" / "dependents" / "cluster.yaml", "dep30", pool_labels=("pool",), soak="30m"
    )
    assert "soaks" not in policy_check(longer, EXAMPLES).stdout


def test_a_plan_without_its_quota_step_is_denied(tmp_path: Path) -> None:
    """A hand-edited plan that dropped the set-quota step: the quota-continuity policy catches it."""
    body = build_plan(
        load_snapshot(ROOT / "fixtures" / "dependents" / "cluster.yaml"), PlanParams(pool_labels=("pool",))
    ).to_dict()
    from dra_migrate.plan.view import plan_json

    doc = plan_json(body)
    doc["stages"][0]["steps"] = [s for s in doc["stages"][0]["steps"] if s["action"] != "set-quota"]
    verdict = evaluate(doc, EXAMPLES)
    assert "ResourceQuota team-a/gpu gets no DRA limit before the first wave" in verdict.deny
    assert not any("team-b" in m for m in verdict.deny)  # Argo CD's: its repository adds it


def test_thresholds_come_from_the_policy_data(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "plan.rego").write_text((EXAMPLES / "plan.rego").read_text())
    (policies / "data.json").write_text(json.dumps({"dramigrate_settings": {"max_wave_percent": 50}}))
    plan = write_plan(tmp_path, CLUSTERS / "half-migrated.yaml", "wide", max_unavailable="50%")
    assert policy_check(plan, policies).returncode == 0


def test_a_broken_policy_is_an_error_not_a_pass(tmp_path: Path) -> None:
    (tmp_path / "bad.rego").write_text("package dramigrate\n\ndeny contains msg if { msg := 1 + }\n")
    plan = write_plan(tmp_path, CLUSTERS / "half-migrated.yaml", "clean", max_unavailable="1")
    out = policy_check(plan, tmp_path)
    assert out.returncode == 1 and "bad.rego:3" in out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = policy_check(plan, empty)
    assert out.returncode == 1 and "no .rego file" in out.stderr
