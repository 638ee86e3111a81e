"""--feature-gate: a gate no check reads is said to be ignored (a misspelt one named), never silently taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.checks.context import READ_GATES, unread_gates
from tests.unit.cli import run

SNAPSHOT = "fixtures/clusters/h100-homogeneous.yaml"


def test_a_gate_no_check_reads_is_named_and_a_near_miss_gets_its_likely_name() -> None:
    assert unread_gates({g: True for g in READ_GATES}) == []
    (typo,) = unread_gates({"DRAExtendedResources": True})
    assert "DRAExtendedResources" in typo and "did you mean DRAExtendedResource?" in typo
    (other,) = unread_gates({"InPlacePodVerticalScaling": False})
    assert "ignored" in other and "did you mean" not in other


@pytest.mark.parametrize("command", ["check", "plan"])
def test_check_and_plan_warn_on_stderr_and_still_run(command: str, tmp_path: Path) -> None:
    extra = ["-o", "json"] + (["--out", str(tmp_path / "p.yaml")] if command == "plan" else [])
    r = run(command, "--snapshot", SNAPSHOT, "--feature-gate", "GenericWorkloads=true", *extra)
    assert "warning: --feature-gate GenericWorkloads is not one this tool reads" in r.stderr
    assert "did you mean GenericWorkload?" in r.stderr
    assert "GenericWorkloads" not in r.stdout  # stdout stays data
    clean = run(command, "--snapshot", SNAPSHOT, "--feature-gate", "GenericWorkload=true", *extra[:2],
                *(["--out", str(tmp_path / "q.yaml")] if command == "plan" else []))  # fmt: skip
    assert "warning: --feature-gate" not in clean.stderr
    assert r.code == clean.code


def test_plan_refuses_a_malformed_gate_before_reading_the_cluster(tmp_path: Path) -> None:
    r = run("plan", "--snapshot", str(tmp_path / "absent.yaml"), "--feature-gate", "DRAExtendedResource=yes")
    assert r.code == 1
    assert "bad --feature-gate" in r.stderr and "absent.yaml" not in r.stderr
