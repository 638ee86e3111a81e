"""Golden inventories of every fixture, as JSON and as the table.

Regenerate on purpose only: `make golden` (DRA_MIGRATE_UPDATE_GOLDEN=1), then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "golden" / "inventory"
UPDATE = os.environ.get("DRA_MIGRATE_UPDATE_GOLDEN") == "1"


def check_golden(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual)
    assert path.exists(), f"missing golden file {path}: run `make golden`"
    assert actual == path.read_text(), f"{path.name} differs: run `make golden` if the change is intended"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_inventory_golden(fixture: Path, fmt: str) -> None:
    # Relative path so the golden files do not depend on where the checkout lives.
    r = run("inventory", "--snapshot", str(fixture.relative_to(ROOT)), "-o", fmt, env={"NO_COLOR": "1"})
    assert r.code == 0, r.stderr
    check_golden(GOLDEN / f"{fixture.stem}.{'json' if fmt == 'json' else 'txt'}", r.stdout)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_check_golden(fixture: Path, fmt: str) -> None:
    r = run("check", "--snapshot", str(fixture.relative_to(ROOT)), "-o", fmt, env={"NO_COLOR": "1"})
    assert r.code in (0, 2), r.stderr
    check_golden(ROOT / "tests" / "golden" / "check" / f"{fixture.stem}.{'json' if fmt == 'json' else 'txt'}", r.stdout)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_generate_deviceclasses_golden(fixture: Path) -> None:
    r = run("generate", "deviceclasses", "--snapshot", str(fixture.relative_to(ROOT)))
    assert r.code == 0, r.stderr
    check_golden(ROOT / "tests" / "golden" / "deviceclasses" / f"{fixture.stem}.yaml", r.stdout)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_match_golden(fixture: Path) -> None:
    r = run("match", "--snapshot", str(fixture.relative_to(ROOT)), "-o", "json")
    assert r.code == 0, r.stderr
    check_golden(ROOT / "tests" / "golden" / "match" / f"{fixture.stem}.json", r.stdout)


def test_check_exit_code_follows_blockers() -> None:
    import json

    for fixture in FIXTURES:
        r = run("check", "--snapshot", str(fixture), "-o", "json")
        blockers = json.loads(r.stdout)["summary"]["blocker"]
        assert r.code == (2 if blockers else 0), fixture.name
