"""The typed plan model: every plan file round-trips byte-identically, and wrong shapes are refused by path."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Action, Plan, PoolStage, PrepareStage, expand

ROOT = Path(__file__).resolve().parents[2]
PLANS = [*sorted((ROOT / "tests" / "golden" / "plans").glob("*.yaml")), ROOT / "plans" / "demo-example.yaml"]


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.name)
def test_every_plan_file_round_trips_byte_identically(path: Path) -> None:
    typed = Plan.from_dict(plan_io.load(path))
    assert plan_io.dumps(typed.to_dict()) == path.read_text()
    assert Plan.from_dict(typed.to_dict()) == typed


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    return plan_io.load(ROOT / "tests" / "golden" / "plans" / "demo.yaml")


def test_stages_are_typed(demo: dict[str, Any]) -> None:
    plan = Plan.from_dict(demo)
    assert isinstance(plan.stages[0], PrepareStage)
    assert all(isinstance(s, PoolStage) for s in plan.stages[1:])
    assert plan.stages[0].steps[0].action == Action.CREATE_DEVICECLASS


def test_steps_for_a_node_equal_the_dict_expansion(demo: dict[str, Any]) -> None:
    plan = Plan.from_dict(demo)
    for i, stage in enumerate(plan.stages):
        if not isinstance(stage, PoolStage):
            continue
        for w, wave in enumerate(stage.waves):
            for n, node in enumerate(wave.nodes):
                typed = [s.to_dict() for s in stage.steps_for(node)]
                raw = demo["stages"][i]["waves"][w]["nodes"][n]
                assert typed == expand(demo["stages"][i], raw)


def _set(doc: dict[str, Any], path: list[Any], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    if value is _DELETE:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        (["stages", 1, "waves", 0, "nodes", 0, "gpuPods"], "2", "stages[1].waves[0].nodes[0].gpuPods"),
        (["stages", 1, "waves", 0, "nodes", 0, "gpuPods"], True, "stages[1].waves[0].nodes[0].gpuPods"),
        (["stages", 1, "waves", 0, "nodes", 0, "expectedDevices"], -1, "expectedDevices"),
        (["stages", 1, "waves", 0, "nodes", 0, "original", "unschedulable"], "no", "original.unschedulable"),
        (["stages", 1, "waves", 0, "nodes", 0, "original", "labels", "x"], 3, "original.labels.x"),
        (["stages", 1, "waves", 0, "nodes", 0, "node"], "", "nodes[0].node"),
        (["stages", 1, "nodeSteps", 2, "action"], "set-labels", "stages[1].nodeSteps[2].action"),
        (["stages", 1, "nodeSteps", 1, "timeout"], "30 s", "stages[1].nodeSteps[1].timeout"),
        (["stages", 1, "nodeSteps", 0, "inverse", "action"], "unset", "nodeSteps[0].inverse.action"),
        (["stages", 1, "nodeSteps", 0, "params"], [], "nodeSteps[0].params"),
        (["stages", 1, "waves", 0, "soakAfter"], 5, "waves[0].soakAfter"),
        (["stages", 1, "waves", 0, "nodes"], {}, "waves[0].nodes"),
        (["stages", 0, "steps", 0, "extra"], 1, "stages[0].steps[0].extra"),
        (["stages", 0, "steps", 0, "id"], _DELETE, "stages[0].steps[0].id"),
        (["stages", 1, "waves", 0, "nodes", 0, "original", "labels", "y"], float("nan"), "original.labels.y"),
        (["summary", "x"], float("inf"), "summary.x"),
        (["applicable"], "yes", "applicable"),
        (["formatVersion"], 3, "formatVersion"),
        (["stages2"], [], "stages2"),
        (["stages"], {}, "stages"),
    ],
)
def test_a_wrong_field_is_refused_naming_its_path(
    demo: dict[str, Any], path: list[Any], value: Any, named: str
) -> None:
    doc = copy.deepcopy(demo)
    _set(doc, path, value)
    with pytest.raises(InputError) as e:
        Plan.from_dict(doc)
    assert named in e.value.message


def test_a_stage_named_twice_is_refused(demo: dict[str, Any]) -> None:
    doc = copy.deepcopy(demo)
    doc["stages"][2]["name"] = doc["stages"][1]["name"]
    with pytest.raises(InputError, match="appears twice"):
        Plan.from_dict(doc)


def test_a_node_planned_twice_is_refused(demo: dict[str, Any]) -> None:
    doc = copy.deepcopy(demo)
    pool = doc["stages"][1]
    pool["waves"][1]["nodes"].append(copy.deepcopy(pool["waves"][0]["nodes"][0]))
    with pytest.raises(InputError, match=re.escape("already planned at stages[1].waves[0].nodes[0]")):
        Plan.from_dict(doc)


def test_a_step_id_twice_in_a_stage_is_refused(demo: dict[str, Any]) -> None:
    doc = copy.deepcopy(demo)
    doc["stages"][1]["nodeSteps"][1]["id"] = doc["stages"][1]["nodeSteps"][0]["id"]
    with pytest.raises(InputError, match="appears twice"):
        Plan.from_dict(doc)
