"""A terminal or pipe whose encoding cannot hold every character the tool prints (`dra_migrate/cli/streams.py`).

Found by running the commands under `PYTHONIOENCODING=ascii` and `latin-1` (a legacy locale's): `show`,
`check`, `inventory`, `report` and `explain` printed their output up to the first middle dot,
multiplication sign or ellipsis, then "internal error: UnicodeEncodeError" and exit 1. Whole processes:
the encoding is the process's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dra_migrate.cli.streams import ERRORS, PLAIN, tolerate_narrow_encodings

ROOT = Path(__file__).resolve().parents[2]
PLAN = str(ROOT / "plans" / "demo-example.yaml")
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")

COMMANDS = {
    "show": ["show", PLAN],
    "show -o json": ["show", PLAN, "-o", "json"],
    "check": ["check", "--snapshot", DEMO],
    "inventory": ["inventory", "--snapshot", DEMO],
    "report": ["report", PLAN],
    "explain": ["explain", "gang-workload-split"],
}


def _run(args: list[str], encoding: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": encoding, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "dra_migrate", *args], capture_output=True, env=env)


def _plain(text: str) -> str:
    return "".join(PLAIN.get(ch, ch) if ord(ch) > 127 else ch for ch in text)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_prints_whole_under_a_narrow_encoding(name: str, encoding: str) -> None:
    wide = _run(COMMANDS[name], "utf-8")
    narrow = _run(COMMANDS[name], encoding)
    assert narrow.returncode == wide.returncode, narrow.stderr.decode(encoding)
    assert b"internal error" not in narrow.stderr
    assert any(ord(ch) > 127 for ch in wide.stdout.decode()), "the output holds no character to test with"
    text = narrow.stdout.decode(encoding)
    if name.endswith("json"):  # a JSON document still, holding the same data
        assert json.loads(text).keys() == json.loads(wide.stdout).keys()
    else:  # every line, each character as wide as the terminal may show it
        assert len(text.splitlines()) == len(wide.stdout.decode().splitlines())
    if encoding == "ascii":
        assert text == _plain(wide.stdout.decode())


def test_what_has_no_plain_form_is_an_escape_a_json_reader_takes_back() -> None:
    import codecs

    tolerate_narrow_encodings()  # registers the handler (idempotent)
    text = json.dumps({"message": "3 of ٣ · done…"}, ensure_ascii=False)
    narrow = codecs.encode(text, "ascii", ERRORS).decode("ascii")
    assert narrow == '{"message": "3 of \\u0663 - done..."}'
    assert json.loads(narrow) == {"message": "3 of ٣ - done..."}
