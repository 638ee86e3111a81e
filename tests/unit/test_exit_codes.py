"""docs/exit-codes.md is the one exit-code table: it names every command, and each command exits as it says
for an error (1) and for success (0); 2 and 130 are tested where they are produced (test_cli_conventions,
test_conventions28, test_findings_at_scale, test_cluster_identity)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dra_migrate.cli import exitcodes
from dra_migrate.cli.main import COMMANDS
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
TABLE = (ROOT / "docs" / "exit-codes.md").read_text()
ROWS = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([a-z-]+)` \|.*$", TABLE, re.M)}
MISSING = str(ROOT / "no-such-file.yaml")


def test_the_table_names_every_command_and_nothing_else() -> None:
    assert set(ROWS) == set(COMMANDS)
    for command, row in ROWS.items():
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 5 and cells[4].startswith("interrupted"), command


# An error for each command: a missing input file, a missing argument or an unknown value.
ERRORS = {
    "inventory": ["--snapshot", MISSING],
    "snapshot": ["--kubeconfig", MISSING, "--out", "/nonexistent-dir/x.jsonl"],
    "check": ["--snapshot", MISSING],
    "explain": ["no-such-rule"],
    "generate": ["deviceclasses", "--snapshot", MISSING],
    "match": ["--snapshot", MISSING],
    "plan": ["--snapshot", MISSING],
    "show": [MISSING],
    "diff": [MISSING],
    "policy": ["check", MISSING],
    "apply": [MISSING],
    "rollback": [MISSING],
    "status": [MISSING],
    "unlock": [],
    "report": [MISSING],
    "convert": [MISSING],
    "probe": [],
    "rehearse": [MISSING],
    "twin": ["no-such-subcommand"],
    "completion": ["no-such-shell"],
    "demo": ["--fleet", "no-such-fleet"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_exits_1_on_an_error(command: str) -> None:
    r = run(command, *ERRORS[command])
    assert r.code == exitcodes.FAILED, (command, r.stderr)
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_exits_0_on_help(command: str) -> None:
    assert run(command, "--help").code == exitcodes.OK
