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


def test_every_fixture_has_consumers_and_pools() -> None:
    assert len(FIXTURES) >= 4
