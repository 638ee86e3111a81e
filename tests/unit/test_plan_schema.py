"""The published JSON Schemas (docs/plan-*.schema.json) are what the code generates, and every fixture's
plan, as the file holds it and as `show -o json` prints it, satisfies them (issue 29 item 1)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan import fastyaml, schema
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.view import plan_json
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").rglob("*.yaml"))  # platforms/ too
PLANS = [*sorted((ROOT / "tests" / "golden" / "plans").glob("*.yaml")), ROOT / "plans" / "demo-example.yaml"]


@pytest.mark.parametrize("name", list(schema.SCHEMAS))
def test_docs_hold_the_generated_schema(name: str) -> None:
    published = ROOT / "docs" / name
    assert published.read_text() == schema.render(schema.SCHEMAS[name]), (
        f"docs/{name} is stale: python -m dra_migrate.plan.schema docs/"
    )
    validator: Any = jsonschema.Draft202012Validator
    validator.check_schema(json.loads(published.read_text()))


def _validators() -> tuple[Any, Any]:
    return (
        jsonschema.Draft202012Validator(schema.file_schema()),
        jsonschema.Draft202012Validator(schema.show_schema()),
    )


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.relative_to(ROOT / "fixtures").as_posix() for f in FIXTURES])
def test_every_fixture_plan_satisfies_both_schemas(fixture: Path) -> None:
    file_v, show_v = _validators()
    sealed = plan_io.seal(build_plan(load_snapshot(fixture), PlanParams(drain="all", max_unavailable="2")).to_dict())
    file_v.validate(fastyaml.load(plan_io.dumps(sealed)))
    show_v.validate(plan_json(sealed))


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.name)
def test_committed_plans_and_show_output_satisfy_the_schemas(path: Path) -> None:
    file_v, show_v = _validators()
    file_v.validate(fastyaml.load(path.read_text()))
    r = run("show", str(path), "-o", "json")
    assert r.code == 0, r.stderr
    show_v.validate(json.loads(r.stdout))


def test_the_file_schema_refuses_what_the_reader_refuses() -> None:
    file_v, _ = _validators()
    doc = fastyaml.load((ROOT / "tests" / "golden" / "plans" / "demo.yaml").read_text())
    assert doc is not None
    stage = next(s for s in doc["stages"] if "pool" in s)
    changes: list[Callable[[Any], None]] = [
        lambda d: next(s for s in d["stages"] if "pool" in s)["nodes"][0].append(1),  # an extra column
        lambda d: next(s for s in d["stages"] if "pool" in s)["nodes"][0].__setitem__(4, -1),  # negative pods
        lambda d: next(s for s in d["stages"] if "pool" in s)["nodeSteps"][0].update(action="reboot"),
        lambda d: d.update(force=True),
        lambda d: d.update(formatVersion=1),
    ]
    for change in changes:
        bad = copy.deepcopy(doc)
        change(bad)
        assert not file_v.is_valid(bad)
    assert stage["nodes"]
