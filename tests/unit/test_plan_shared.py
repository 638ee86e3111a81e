"""A plan of many pools states alike node steps and profiles once (issue 29, plan file format 2): the other
stages name the stage that states them (`nodeSteps: {sameAs: pool-p00}`). A 10,000-node fleet of 2,000
pools wrote the same 70 lines of steps 2,000 times (14 MB). The file reads back as the same plan by both
readers, stages may be reordered, and a name that does not lead to steps is refused with its line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from dra_migrate.errors import InputError
from dra_migrate.plan import fastyaml, stream, wire
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan
from dra_migrate.plan.outline import outline_of
from dra_migrate.plan.params import PlanParams
from tests.unit.cli import run
from tests.unit.helpers import node, state
from tests.unit.test_plan_integrity import rt_edit  # an edit as a text editor keeps the file

ROOT = Path(__file__).resolve().parents[2]


def _fleet_plan(pools: int, tmp_path: Path, name: str = "p.yaml") -> Path:
    gpu = {"nvidia.com/gpu": "8"}
    nodes = [
        node(f"gpu-{i:03d}", {"pool": f"p{i // 2:02d}", "nvidia.com/gpu.present": "true"}, gpu)
        for i in range(2 * pools)
    ]
    path = tmp_path / name
    plan_io.write_sealed(build_plan(state(*nodes), PlanParams(pool_labels=("pool",))), path)
    return path


def _pool_stages(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in doc["stages"] if "pool" in s]


def test_many_pools_state_their_steps_once_and_read_back_as_the_same_plan(tmp_path: Path) -> None:
    path = _fleet_plan(12, tmp_path)
    doc = fastyaml.load(path.read_text())
    assert doc is not None
    first, *rest = _pool_stages(doc)
    assert isinstance(first["nodeSteps"], list) and isinstance(first["profiles"], list)
    assert all(s["nodeSteps"] == {"sameAs": first["name"]} == s["profiles"] for s in rest)
    assert path.read_text().count("action: cordon") == 1
    plan = Plan.from_dict(plan_io.load(path))
    steps = [s.node_steps for s in plan.stages if s.pool is not None]
    assert len(steps) == 12 and all(s == steps[0] for s in steps)  # every stage has them, as the model
    streamed = stream.scan(path)
    assert streamed is not None and streamed == outline_of(plan_io.load(path))  # show's reader, and load's
    schema = json.loads((ROOT / "docs" / "plan-file.schema.json").read_text())
    jsonschema.validate(doc, schema)


def test_a_plan_of_a_few_pools_states_every_stages_steps(tmp_path: Path) -> None:
    """Under `SHARE_FROM` alike stages, every stage is whole, so one pool's steps are edited where they stand."""
    doc = fastyaml.load(_fleet_plan(wire.SHARE_FROM - 1, tmp_path).read_text())
    assert doc is not None
    assert all(isinstance(s["nodeSteps"], list) and isinstance(s["profiles"], list) for s in _pool_stages(doc))


def test_reordered_stages_still_name_the_stage_that_states_them(tmp_path: Path) -> None:
    """An operator moves the stage that states the steps after those that name it: rebase accepts it, and the
    rebased plan names the stage that now comes first."""
    path = _fleet_plan(10, tmp_path)
    rt_edit(path, lambda d: d["stages"].insert(len(d["stages"]), d["stages"].pop(1)))
    r = run("plan", "--rebase", str(path))
    assert r.code == 0, r.stderr
    doc = fastyaml.load(path.read_text())
    assert doc is not None
    first, *rest = _pool_stages(doc)
    assert first["name"] == "pool-p01" and isinstance(first["nodeSteps"], list)
    assert all(s["nodeSteps"] == {"sameAs": "pool-p01"} for s in rest)
    assert run("show", str(path)).code == 0


def test_an_edit_to_the_stated_steps_is_an_edit_to_every_stage_that_names_them(tmp_path: Path) -> None:
    path = _fleet_plan(10, tmp_path)
    rt_edit(path, lambda d: d["stages"][1]["nodeSteps"][1].update(timeout="40m"))
    r = run("plan", "--rebase", str(path))
    assert r.code == 0, r.stderr
    plan = Plan.from_dict(plan_io.load(path))
    drains = {s.node_steps[1].timeout for s in plan.stages if s.pool is not None}
    assert drains == {"40m"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["stages"][3].update(nodeSteps={"sameAs": "pool-nowhere"}), "'pool-nowhere' is no other stage"),
        (lambda d: d["stages"][3].update(nodeSteps={"sameAs": d["stages"][3]["name"]}), "is no other stage"),
        (lambda d: d["stages"][3].update(profiles={"sameAs": d["stages"][2]["name"]}), "is no other stage"),
        (lambda d: d["stages"].pop(1), "is no other stage that states its nodeSteps"),
        (lambda d: d["stages"][3].update(nodeSteps={"sameAs": "pool-p00", "x": 1}), "expected a list, or {sameAs"),
        (lambda d: d["stages"][3].update(nodeSteps={"sameAs": 7}), "expected a list, or {sameAs"),
        (lambda d: d["stages"][3].update(nodeSteps={"sameAs": ["pool-p00"]}), "expected a list, or {sameAs"),
    ],
    ids=[
        "unknown stage",
        "itself",
        "a stage that names another",
        "the stating stage removed",
        "extra key",
        "not a name",
        "a list",
    ],
)
def test_a_name_that_does_not_lead_to_steps_is_refused_with_its_line(
    change: Callable[[Any], None], words: str, tmp_path: Path
) -> None:
    path = _fleet_plan(10, tmp_path)
    rt_edit(path, change)
    with pytest.raises(InputError) as e:
        plan_io.load(path, verify=False)  # what rebase reads: the digests set aside, the form is not
    message = str(e.value)
    assert words in message and "\n" not in message
    assert f"{path}:" in message and message.split(f"{path}:")[1].split(":")[0].isdecimal()  # its line
    r = run("plan", "--rebase", str(path))
    assert r.code == 1 and words in r.stderr
    assert run("show", str(path)).code == 1  # and, edited, refused by every reader


def test_a_problem_in_named_steps_is_reported_where_they_are_stated() -> None:
    stages = [
        {"name": "prepare", "steps": []},
        {"name": "pool-a", "pool": "a", "nodeSteps": [{"id": "cordon"}], "nodes": []},
        {"name": "pool-b", "pool": "b", "nodeSteps": {"sameAs": "pool-a"}, "nodes": []},
    ]
    wire_doc = {"formatVersion": 2, "stages": stages}
    assert wire.wire_path(("stages", 2, "nodeSteps", 0, "timeout"), wire_doc) == (
        "stages",
        1,
        "nodeSteps",
        0,
        "timeout",
    )
    assert wire.wire_path(("stages", 1, "nodeSteps", 0), wire_doc) == ("stages", 1, "nodeSteps", 0)
    stages[2]["nodeSteps"] = {"sameAs": ["pool-a"]}  # not a name: the path stays where it was
    assert wire.wire_path(("stages", 2, "nodeSteps", 0), wire_doc) == ("stages", 2, "nodeSteps", 0)
