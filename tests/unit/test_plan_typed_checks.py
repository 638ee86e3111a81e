"""The checks of a plan's meaning, its diff and drift run on the typed model (issue 29, item 2).

An edited plan's mapping is read by the codec first (`Plan.from_dict`); a field it cannot read is a
`PlanFieldError` that keeps the field's path, which `validate` reports as a `Problem` at that path (so a
refusal still names it, and `io` finds its line). Taking a mapping or the typed plan gives one answer.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState
from dra_migrate.errors import InputError
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.diff import diff_plans
from dra_migrate.plan.drift import drift
from dra_migrate.plan.fields import PlanFieldError
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.validate import recompute, summary_problems, validate

ROOT = Path(__file__).resolve().parents[2]


@cache
def _state() -> ClusterState:
    return load_snapshot(ROOT / "fixtures/clusters/demo.yaml")


def body(drain: str = "gpu") -> dict[str, Any]:
    return build_plan(_state(), PlanParams(drain=drain)).to_dict()


def pool_index(doc: dict[str, Any]) -> int:
    return next(i for i, s in enumerate(doc["stages"]) if "pool" in s)


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("gpuPods", "8", "expected a count (a non-negative integer), not '8'"),
        ("otherPods", -1, "expected a count (a non-negative integer), not -1"),
        ("canaryResource", 7, "expected a string, got int"),
    ],
)
def test_a_field_the_codec_cannot_read_is_a_problem_at_its_path(field: str, value: Any, words: str) -> None:
    doc = body()
    i = pool_index(doc)
    doc["stages"][i]["waves"][0]["nodes"][0][field] = value
    path = ("stages", i, "waves", 0, "nodes", 0, field)
    [problem] = validate(doc)
    assert problem.path == path and problem.message == words
    assert str(problem).startswith(f"stages[{i}].waves[0].nodes[0].{field}: ")
    with pytest.raises(PlanFieldError) as raised:  # the codec's typed error, with the path as data
        Plan.from_dict(doc)
    assert raised.value.at == path and isinstance(raised.value, InputError)


def test_a_timeout_the_codec_reads_is_still_checked_for_what_apply_allows() -> None:
    """`0s` is a duration (the codec reads it), not one a step can wait: the rule on the model says so."""
    doc = body()
    i = pool_index(doc)
    doc["stages"][i]["nodeSteps"][1]["timeout"] = "0s"
    problems = validate(doc)
    assert [p.path for p in problems] == [("stages", i, "nodeSteps", 1, "timeout")]
    assert "longer than 0s" in problems[0].message


def test_validate_and_recompute_answer_alike_for_the_mapping_and_the_typed_plan() -> None:
    doc = body("all")
    plan = Plan.from_dict(doc)
    assert validate(doc) == validate(plan) == [] and summary_problems(doc) == summary_problems(plan) == []
    assert recompute(doc) == doc  # a plan as built: nothing to recompute, and its shape unchanged
    lied = copy.deepcopy(doc)
    i = pool_index(lied)
    lied["applicable"] = not doc["applicable"]
    lied["stages"][i]["waves"][0]["evictedPods"] += 3
    lied["summary"]["evictedPods"] = 0
    assert {p.path[:1] for p in summary_problems(lied)} == {("applicable",)}
    assert recompute(lied) == doc


def test_diff_and_drift_of_the_typed_plan_are_those_of_its_mapping() -> None:
    a, b = body("gpu"), body("all")
    assert diff_plans(Plan.from_dict(a), Plan.from_dict(b)).to_dict() == diff_plans(a, b).to_dict()
    assert not diff_plans(a, b).empty
    assert drift(Plan.from_dict(a), _state()).to_dict() == drift(a, _state()).to_dict()
