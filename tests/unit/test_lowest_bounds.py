"""`make test-lowest`'s requirements: each runtime dependency of pyproject.toml at its lower bound
(tools/lowest/requirements.py, docs/testing.md "Lowest dependency versions")."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "lowest" / "requirements.py"


def _pins(pyproject: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(pyproject)], capture_output=True, text=True, check=False)


def test_every_runtime_dependency_is_pinned_to_its_lower_bound() -> None:
    r = _pins(ROOT / "pyproject.toml")
    assert r.returncode == 0, r.stderr
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = r.stdout.splitlines()
    assert len(lines) == len(declared)
    for want, got in zip(declared, lines, strict=True):
        floor = want.split(">=", 1)[1].split(",")[0].split(";")[0].strip()
        assert f"=={floor}" in got and ">=" not in got, (want, got)
        assert got.split("==")[0] == want.split(">=")[0].strip()
        assert (";" in got) == (";" in want)  # an environment marker is kept


def test_an_upper_bound_and_a_marker_are_kept(tmp_path: Path) -> None:
    p = tmp_path / "pyproject.toml"
    p.write_text('[project]\ndependencies = ["cel-python>=0.5,<0.6", "x.clib >= 0.2.8; sys_platform == \\"linux\\""]\n')
    r = _pins(p)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["cel-python==0.5,<0.6", 'x.clib==0.2.8; sys_platform == "linux"']


@pytest.mark.parametrize("dep", ["click", "click<9", "click==8.1", "click>=8.1,>=8.2", "click[extra]>=8.1"])
def test_a_dependency_with_no_single_lower_bound_is_refused(tmp_path: Path, dep: str) -> None:
    p = tmp_path / "pyproject.toml"
    p.write_text(f'[project]\ndependencies = ["tabulate>=0.9", "{dep}"]\n')
    r = _pins(p)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "click" in r.stderr
