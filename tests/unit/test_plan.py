"""Plans: deterministic, digested, refused when edited, and every step undoable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import expand
from dra_migrate.plan.params import DEVICE_PLUGIN_LABEL, DRA_LABEL, PlanParams, parse_duration
from dra_migrate.plan.steps import node_steps
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").glob("*.yaml"))
EXAMPLE = ROOT / "plans" / "demo-example.yaml"
UPDATE = os.environ.get("DRA_MIGRATE_UPDATE_GOLDEN") == "1"


def plan_text(fixture: Path, *args: str, tmp: Path) -> str:
    out = tmp / f"{fixture.stem}.yaml"
    r = run("plan", "--snapshot", str(fixture.relative_to(ROOT)), "--out", str(out), *args)
    assert r.code == 0, r.stderr
    return out.read_text()


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_golden_plans_are_deterministic(fixture: Path, tmp_path: Path) -> None:
    first = plan_text(fixture, tmp=tmp_path)
    (tmp_path / "again").mkdir()
    assert plan_text(fixture, tmp=tmp_path / "again") == first  # byte-identical
    golden = ROOT / "tests" / "golden" / "plans" / f"{fixture.stem}.yaml"
    if UPDATE:
        golden.write_text(first)
    assert first == golden.read_text(), f"{golden.name} differs: run `make golden` if intended"


def test_the_example_plan_in_plans_is_current(tmp_path: Path) -> None:
    text = plan_text(ROOT / "fixtures" / "clusters" / "demo.yaml", tmp=tmp_path)
    if UPDATE:
        EXAMPLE.write_text(text)
    assert text == EXAMPLE.read_text(), "plans/demo-example.yaml is stale: run `make golden`"


def test_plan_loads_and_shows(tmp_path: Path) -> None:
    plan_text(FIXTURES[0], tmp=tmp_path)
    path = tmp_path / f"{FIXTURES[0].stem}.yaml"
    plan = plan_io.load(path)
    assert plan["formatVersion"] == 2
    r = run("show", str(path))
    assert r.code == 0 and r.stdout.startswith("Plan\n")
    assert "Disruption per wave" in r.stdout


def demo_plan(tmp_path: Path, *args: str) -> Path:
    plan_text(ROOT / "fixtures" / "clusters" / "demo.yaml", *args, tmp=tmp_path)
    return tmp_path / "demo.yaml"


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def test_an_edited_stage_is_refused_with_its_line(tmp_path: Path) -> None:
    path = demo_plan(tmp_path)
    edit(path, "soakAfter: 5m", "soakAfter: 1m")  # first in the first pool stage
    stage_line = line_of(path, "- name: pool-h100-pool")
    r = run("show", str(path))
    assert r.code == 1
    assert f"{path}:{stage_line}:" in r.stderr and "stages/pool-h100-pool" in r.stderr and "--rebase" in r.stderr


def test_an_edited_parameter_is_refused(tmp_path: Path) -> None:
    path = demo_plan(tmp_path)
    edit(path, "drain: gpu", "drain: all")
    with pytest.raises(InputError) as e:
        plan_io.load(path)
    assert f":{line_of(path, 'parameters:')}:" in str(e.value) and "`parameters`" in str(e.value)


def test_a_forged_digest_is_refused(tmp_path: Path) -> None:
    path = demo_plan(tmp_path)
    text = path.read_text()
    digest_line = next(ln for ln in text.splitlines() if ln.startswith("digest: "))
    path.write_text(text.replace(digest_line, "digest: sha256:" + "0" * 64))
    with pytest.raises(InputError, match="digest does not match"):
        plan_io.load(path)


def test_schema_problems_name_the_key(tmp_path: Path) -> None:
    path = demo_plan(tmp_path)
    edit(path, "applicable: false", "applicable: maybe")
    with pytest.raises(InputError, match=r":\d+: `applicable` has the wrong type"):
        plan_io.load(path)
    path.write_text("stages: []\n")
    with pytest.raises(InputError, match="missing `formatVersion`"):
        plan_io.load(path)


def test_rebase_accepts_an_intended_edit_and_records_it(tmp_path: Path) -> None:
    path = demo_plan(tmp_path)
    original_digest = plan_io.load(path)["digest"]
    edit(path, "soakAfter: 5m", "soakAfter: 15m")
    r = run("plan", "--rebase", str(path))
    assert r.code == 0, r.stderr
    plan = plan_io.load(path)
    assert plan["edited"] == {"previousDigests": [original_digest]}
    assert "edited and rebased" in run("show", str(path)).stdout
    edit(path, "soakAfter: 15m", "soakAfter: 0s")  # a further edit is refused again
    assert run("show", str(path)).code == 1


def test_order_waves_and_soak(tmp_path: Path) -> None:
    path = demo_plan(tmp_path, "--order", "a100-shared-pool", "--max-unavailable", "2", "--soak", "0s")
    plan = plan_io.load(path)
    assert [s["name"] for s in plan["stages"]] == ["prepare", "pool-a100-shared-pool", "pool-h100-pool", "pool-l4-pool"]
    h100 = plan["stages"][2]
    assert [len(w["nodes"]) for w in h100["waves"]] == [2, 2]
    assert {w["soakAfter"] for w in h100["waves"]} == {"0s"}
    # Least-loaded nodes first: the first wave evicts no more than the second.
    assert h100["waves"][0]["evictedPods"] <= h100["waves"][1]["evictedPods"]


def test_bad_parameters_are_one_line_errors(tmp_path: Path) -> None:
    demo = str(ROOT / "fixtures" / "clusters" / "demo.yaml")
    for args, words in (
        (["--order", "nope"], "nope: no such pool"),
        (["--max-unavailable", "0"], "max-unavailable"),
        (["--soak", "5 minutes"], "duration"),
    ):
        r = run("plan", "--snapshot", demo, "--out", str(tmp_path / "x.yaml"), *args)
        assert r.code == 1 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.yaml").exists()


def test_wave_size() -> None:
    p = PlanParams()
    assert [p.wave_size(n) for n in (1, 9, 10, 25)] == [1, 1, 1, 2]  # the larger of 1 node and 10%
    assert PlanParams(max_unavailable="50%").wave_size(5) == 2
    assert parse_duration("1h30m") == 5400 and parse_duration("0s") == 0


def test_blockers_make_a_plan_not_applicable() -> None:
    demo = load_snapshot(ROOT / "fixtures" / "clusters" / "demo.yaml")
    assert build_plan(demo, PlanParams()).to_dict()["applicable"] is False
    half = load_snapshot(ROOT / "fixtures" / "clusters" / "half-migrated.yaml")
    plan = build_plan(half, PlanParams()).to_dict()
    assert plan["applicable"] is True
    # Nodes already on DRA need no steps: only the device-plugin pool is planned.
    assert [s.get("pool") for s in plan["stages"]] == [None, "gpu-h100"]


# --- every step has an inverse that restores the original values exactly ------------------------------

LABEL_VALUES = st.one_of(st.none(), st.sampled_from(["true", "false", "", "paused"]))


def apply(node: dict[str, Any], action: str, params: dict[str, Any]) -> None:
    """A model of what each step does to a node (labels and cordon state)."""
    if action in ("cordon", "uncordon", "set-unschedulable"):
        node["unschedulable"] = bool(params["unschedulable"])
    elif action in ("set-label", "restore-label"):
        if params["value"] is None:
            node["labels"].pop(params["key"], None)
        else:
            node["labels"][params["key"]] = params["value"]
    elif action not in ("drain", "wait-dra-ready", "canary", "none", "delete-pod"):
        raise AssertionError(f"unmodelled action {action}")


@settings(max_examples=300, deadline=None)
@given(
    unschedulable=st.booleans(),
    dp=LABEL_VALUES,
    dra=LABEL_VALUES,
    other=st.dictionaries(st.sampled_from(["a", "b", "team"]), st.text(max_size=3), max_size=3),
    done=st.integers(min_value=0, max_value=7),
)
def test_steps_then_inverses_restore_every_label_and_cordon(
    unschedulable: bool, dp: str | None, dra: str | None, other: dict[str, str], done: int
) -> None:
    labels = dict(other)
    for key, value in ((DEVICE_PLUGIN_LABEL, dp), (DRA_LABEL, dra)):
        if value is not None:
            labels[key] = value
    before = {"unschedulable": unschedulable, "labels": dict(labels)}
    node = {"unschedulable": unschedulable, "labels": dict(labels)}
    stage = {"name": "pool-p", "nodeSteps": [s.to_dict() for s in node_steps(PlanParams())]}
    entry = {
        "node": "n",
        "gpuPods": 1,
        "otherPods": 0,
        "expectedDevices": 8,
        "resources": ["nvidia.com/gpu"],
        "canaryResource": "nvidia.com/gpu",
        "original": {"unschedulable": unschedulable, "labels": {DEVICE_PLUGIN_LABEL: dp, DRA_LABEL: dra}},
    }
    steps = expand(stage, entry)
    for step in steps[:done]:  # a run that stopped after `done` steps (done == 7: all of them)
        apply(node, step["action"], step["params"])
    for step in reversed(steps[:done]):  # rollback: inverses in reverse order
        if step["inverse"]:
            apply(node, step["inverse"]["action"], step["inverse"]["restore"])
    assert node == before
