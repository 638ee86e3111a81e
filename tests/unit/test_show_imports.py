"""What `show` imports to draw or print a plan the tool wrote: no YAML library, no plan model, no planning.

Issue 29 holds `show`'s peak memory to 5x the plan file: 2.9 MB at 2,000 nodes, where the modules `show`
imported were most of it (PyYAML 1.2 MB, the model, the estimate and the planning parameters ~1 MB more).
The streamed paths read the file with `plan/ownyaml.py` and draw it from `plan/outline.py`; a change that
imports one of these again fails here, not in a benchmark nobody runs. The whole reader (`io.load`) still
takes any plan that is not as the tool writes it (tests/unit/test_plan_stream.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_plan_integrity import demo

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "yaml", "ruamel", "dra_migrate.plan.model", "dra_migrate.plan.estimate", "dra_migrate.plan.params",
    "dra_migrate.plan.io", "dra_migrate.plan.fastyaml", "dra_migrate.plan.derived", "dra_migrate.checks.rules",
    "dra_migrate.inventory.placement", "hashlib",
)  # fmt: skip
RUN = """
import json, runpy, sys
sys.argv = ["dra-migrate", *sys.argv[2:]]
try:
    runpy.run_module("dra_migrate", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
with open(OUT, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _imported(tmp_path: Path, *args: str) -> tuple[int, set[str]]:
    out = tmp_path / "modules.json"
    code = RUN.replace("OUT", repr(str(out)))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code, "-", *args], env=env, cwd=ROOT, check=False, capture_output=True)
    found = json.loads(out.read_text())
    return found["code"], set(found["modules"])


@pytest.mark.parametrize("output", ["table", "wide", "json"])
def test_show_of_a_plan_as_written_imports_no_yaml_library_and_no_model(tmp_path: Path, output: str) -> None:
    plan = demo(tmp_path)
    code, modules = _imported(tmp_path, "show", str(plan), "-o", output)
    assert code in (0, None)
    # orjson (0.4 MB) only to print JSON: the digests are checked with the standard library's encoder
    avoided = HEAVY if output == "json" else (*HEAVY, "orjson")
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in avoided))
    assert heavy == []


def test_show_of_a_hand_edited_plan_takes_the_whole_reader(tmp_path: Path) -> None:
    """The other side: an edit the digests catch is refused by `io.load` (PyYAML, the model), with its line."""
    plan = demo(tmp_path)
    plan.write_text(plan.read_text().replace("soak: 5m", "soak: 6m", 1))
    code, modules = _imported(tmp_path, "show", str(plan))
    assert code == 1
    assert "dra_migrate.plan.io" in modules and "yaml" in modules
