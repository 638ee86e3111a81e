"""The edits a change review makes to a plan, end to end: rebase, then apply on the fakes (docs/plan.md
"Edits").

A node's recorded `original` values are what its inverses restore: rollback and the uncordon step write them
back. An edit to them (or a node changed since the plan) would make rollback switch the device plugin off, or
leave the node cordoned, on a node the migration was to leave as it found it. Rebase against the original plan
refuses such an edit; apply, before a wave's first step, refuses a node whose live values are not the ones
its inverses would restore.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.errors import InputError
from dra_migrate.execute.journal import Journal, journal_path, read_journal
from dra_migrate.execute.runner import ApplyOptions, Runner
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.wire import NODE_COLUMNS
from dra_migrate.testing.execute import FakeClock, FakeOps
from tests.unit.cli import run
from tests.unit.test_plan_integrity import demo, row, rt_edit

DP = "nvidia.com/gpu.deploy.device-plugin"
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"
COL = {c: i for i, c in enumerate(NODE_COLUMNS)}


def _edited_original(d: Any) -> None:
    row(d)[COL["labels"]][0] = "false"  # the device plugin's label: rollback would switch it off


def _edited_cordon(d: Any) -> None:
    row(d)[COL["unschedulable"]] = True  # the uncordon step and rollback would leave the node cordoned


@pytest.mark.parametrize("edit", [_edited_original, _edited_cordon], ids=["label", "unschedulable"])
def test_rebase_against_the_original_refuses_an_edit_of_what_rollback_restores(tmp_path: Path, edit: Any) -> None:
    original = demo(tmp_path, "orig.yaml")
    path = demo(tmp_path)
    rt_edit(path, edit)
    before = path.read_bytes()
    r = run("plan", "--rebase", str(path), "--against", str(original))
    assert r.code == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "original" in lines[0] and "rollback" in lines[0], r.stderr
    assert f"{path}:" in lines[0] and row_name(path) in lines[0]
    assert path.read_bytes() == before


def row_name(path: Path) -> str:
    names: list[str] = []
    rt_edit(path, lambda d: names.append(str(row(d)[COL["node"]])))
    return names[0]


def test_rebase_without_the_original_says_it_cannot_check_recorded_values(tmp_path: Path) -> None:
    path = demo(tmp_path)
    rt_edit(path, _edited_original)
    r = run("plan", "--rebase", str(path))
    assert r.code == 0, r.stderr
    warning = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and "--against" in warning[0] and "original" in warning[0], r.stderr


def _plan(edit: Any) -> tuple[Plan, Plan]:
    """The demo plan as made, and as edited then rebased (sealed anew)."""
    body = build_plan(load_snapshot(DEMO), PlanParams(soak="0s")).to_dict()
    made = Plan.from_dict(plan_io.seal(body))
    edited = copy.deepcopy(body)
    edit(edited)
    return made, Plan.from_dict(plan_io.seal(edited))


def _first_in_place_node(d: dict[str, Any]) -> dict[str, Any]:
    stage = next(s for s in d["stages"] if s.get("pool") and s.get("strategy", "in-place") == "in-place")
    node: dict[str, Any] = stage["waves"][0]["nodes"][0]
    return node


@pytest.mark.parametrize(
    "field, value", [("labels", {DP: "false"}), ("unschedulable", True)], ids=["label", "unschedulable"]
)
def test_apply_refuses_a_node_whose_live_values_are_not_what_rollback_would_restore(
    tmp_path: Path, field: str, value: Any
) -> None:
    def edit(d: dict[str, Any]) -> None:
        original = _first_in_place_node(d)["original"]
        original[field] = {**original[field], **value} if isinstance(value, dict) else value

    made, edited = _plan(edit)
    ops = FakeOps.for_plan(made, FakeClock())  # the cluster as it is: the plan's record was edited
    stage = next(s for s in edited.pool_stages() if s.strategy == "in-place")
    node = stage.waves[0].nodes[0].node
    before = copy.deepcopy(ops.nodes[node])
    with Journal.open(tmp_path / "j.jsonl", plan_digest=edited.digest) as j:
        result = Runner(edited, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until=stage.name), set())
    assert not result.ok and result.failure is not None
    assert node in result.failure and "rollback" in result.failure and "\n" not in result.failure, result.failure
    assert ops.nodes[node] == before, "nothing changed on the node"
    assert not result.rolled_back


def test_apply_of_an_unedited_plan_is_not_refused_by_the_check(tmp_path: Path) -> None:
    made, _ = _plan(lambda d: None)
    ops = FakeOps.for_plan(made, FakeClock())
    stage = next(s for s in made.pool_stages() if s.strategy == "in-place")
    with Journal.open(tmp_path / "j.jsonl", plan_digest=made.digest) as j:
        result = Runner(made, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until=stage.name), set())
    assert result.ok, result.failure


# --- merging or deleting a wave a gang runs in ---------------------------------------------------------


def _merge_first_waves(d: Any) -> None:
    """The h100 stage's wave-1 merged into wave-2 (its node moved, the wave deleted), maxUnavailable with it."""
    stage = next(s for s in d["stages"] if s.get("name") == "pool-h100-pool")
    stage["waves"].pop(0)
    for r in stage["nodes"]:
        if r[COL["wave"]] == "wave-1":
            r[COL["wave"]] = "wave-2"
    d["parameters"]["maxUnavailable"] = "2"


def test_merging_a_gangs_wave_rebases_against_the_original_and_follows_the_gang(tmp_path: Path) -> None:
    original = demo(tmp_path, "orig.yaml")
    gangs = plan_io.load(original)["summary"]["gangs"]
    assert {"gang": "PyTorchJob ml-training/llama3-finetune",
            "waves": ["pool-h100-pool/wave-1", "pool-h100-pool/wave-2"]} in gangs  # fmt: skip
    path = demo(tmp_path)
    rt_edit(path, _merge_first_waves)
    r = run("plan", "--rebase", str(path), "--against", str(original))
    assert r.code == 0, r.stderr
    rebased = plan_io.load(path)
    assert {"gang": "PyTorchJob ml-training/llama3-finetune", "waves": ["pool-h100-pool/wave-2"]} in rebased["summary"][
        "gangs"
    ]
    assert rebased["edited"]["previousDigests"] == [plan_io.load(original)["digest"]]


def test_merging_a_gangs_wave_without_the_original_says_to_give_it(tmp_path: Path) -> None:
    path = demo(tmp_path)
    rt_edit(path, _merge_first_waves)
    r = run("plan", "--rebase", str(path))
    lines = r.stderr.strip().splitlines()
    assert r.code == 1 and len(lines) == 1 and "--against" in lines[0], r.stderr


def test_the_merged_wave_is_what_apply_runs(tmp_path: Path) -> None:
    original = demo(tmp_path, "orig.yaml")
    path = demo(tmp_path)
    rt_edit(path, _merge_first_waves)
    assert run("plan", "--rebase", str(path), "--against", str(original)).code == 0
    plan = Plan.from_dict(plan_io.load(path))
    moved = Plan.from_dict(plan_io.load(original)).stages[1].waves[0].nodes[0].node
    ops = FakeOps.for_plan(plan, FakeClock())
    untouched = {n: copy.deepcopy(v) for n, v in ops.nodes.items() if "h100" not in n}
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until="pool-h100-pool"), set())
    assert result.ok, result.failure
    waves = {r["wave"] for r in read_journal(tmp_path / "j.jsonl") if r.get("node") == moved and r["event"] == "start"}
    assert waves == {"wave-2"}
    assert {n: v for n, v in ops.nodes.items() if n in untouched} == untouched


# --- messages of the ordinary edits: one line, saying what to do ----------------------------------------


def _moved_row_left_in_place(d: Any) -> None:
    row(d)[COL["wave"]] = "wave-3"  # its row stays first, before wave-2's


def _emptied_wave(d: Any) -> None:
    stage = next(s for s in d["stages"] if s.get("name") == "pool-h100-pool")
    stage["nodes"][0][COL["wave"]] = "wave-2"  # wave-1's only node moved: the wave left without nodes


@pytest.mark.parametrize(
    "edit, words",
    [(_moved_row_left_in_place, ("move the row", "wave-3")), (_emptied_wave, ("wave-1", "delete"))],
    ids=["row out of its wave", "wave left empty"],
)
def test_an_ordinary_edit_left_half_done_says_how_to_finish_it(tmp_path: Path, edit: Any, words: Any) -> None:
    path = demo(tmp_path)
    rt_edit(path, edit)
    r = run("plan", "--rebase", str(path))
    lines = r.stderr.strip().splitlines()
    assert r.code == 1 and len(lines) == 1, r.stderr
    assert all(w in lines[0] for w in words) and "regenerate" not in lines[0], lines[0]


# --- the prepare stage's DeviceClasses ----------------------------------------------------------------------


def _without_the_deviceclass(d: Any) -> None:
    steps = d["stages"][0]["steps"]
    steps[:] = [s for s in steps if s["action"] != "create-deviceclass"]


def test_deleting_a_deviceclass_the_planned_nodes_need_is_refused_against_the_original(tmp_path: Path) -> None:
    """The builder creates a DeviceClass only where none maps the resource: without it, once a node's device
    plugin is off, no pod requesting nvidia.com/gpu (the canary first) can be scheduled there."""
    original = demo(tmp_path, "orig.yaml")
    path = demo(tmp_path)
    rt_edit(path, _without_the_deviceclass)
    r = run("plan", "--rebase", str(path), "--against", str(original))
    lines = r.stderr.strip().splitlines()
    assert r.code == 1 and len(lines) == 1, r.stderr
    assert "gpu-extended.nvidia.com" in lines[0] and "nvidia.com/gpu" in lines[0] and "put" in lines[0], lines[0]


def test_deleting_a_deviceclass_with_every_stage_that_needs_it_is_accepted(tmp_path: Path) -> None:
    original = demo(tmp_path, "orig.yaml")
    path = demo(tmp_path)

    def edit(d: Any) -> None:
        _without_the_deviceclass(d)
        d["stages"][1:] = []  # no pool stage left: nothing needs the class
        d["summary"].pop("gangs", None)

    rt_edit(path, edit)
    r = run("plan", "--rebase", str(path), "--against", str(original))
    assert r.code == 0 or "DeviceClass" not in r.stderr, r.stderr


# --- an edit of a plan a journal has partly applied -----------------------------------------------------


class _ByDigest:
    """A journal store keyed by plan digest, as the in-cluster one (ConfigMaps per digest) is."""

    def __init__(self, records: dict[str, list[Any]]) -> None:
        self.by_digest = records

    def where(self, plan_digest: str) -> str:
        return f"configmaps of {plan_digest[:19]}"

    def records(self, plan_digest: str) -> list[Any]:
        return list(self.by_digest.get(plan_digest, []))

    def open(self, plan_digest: str) -> Any:
        raise AssertionError("nothing is opened before the session is refused")


def _partly_applied(tmp_path: Path) -> tuple[Path, Plan, list[Any]]:
    """The demo plan with its prepare stage applied (journal beside it), then edited and rebased in place."""
    path = demo(tmp_path)
    made = Plan.from_dict(plan_io.load(path))
    ops = FakeOps.for_plan(made, FakeClock())
    with Journal.open(journal_path(path), plan_digest=made.digest) as j:
        assert Runner(made, ops, j, actor="t", clock=ops.clock).apply(ApplyOptions(until="prepare"), set()).ok
    rt_edit(path, lambda d: pool_stage_named(d, "pool-h100-pool")["waves"][0].update(soakAfter="30m"))
    assert run("plan", "--rebase", str(path)).code == 0
    return path, Plan.from_dict(plan_io.load(path)), read_journal(journal_path(path))


def pool_stage_named(d: Any, name: str) -> Any:
    return next(s for s in d["stages"] if s.get("name") == name)


def _session(plan: Plan, path: Path, store: Any = None) -> Any:
    from dra_migrate.execute.session import ApplySession

    ops = FakeOps.for_plan(plan, FakeClock())
    return ApplySession(plan, path, ops=ops, lock_api=None, actor="t", store=store)


def test_applying_a_plan_rebased_after_a_partial_apply_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    path, edited, _ = _partly_applied(tmp_path)
    with pytest.raises(InputError) as e:
        _session(edited, path)
    text = f"{e.value.message} {e.value.hint}"
    assert "\n" not in text and "rebased" in text and "rollback" in text, text


def test_a_journal_kept_by_digest_does_not_silently_start_the_edited_plan_afresh(tmp_path: Path) -> None:
    path, edited, records = _partly_applied(tmp_path)
    previous = edited.edited["previousDigests"][-1] if edited.edited else ""
    store = _ByDigest({previous: records})
    with pytest.raises(InputError) as e:
        _session(edited, path, store)
    assert "rebased" in e.value.message and previous[:19] in e.value.message, e.value.message
    # a journal the old plan fully rolled back does not hold the edited one
    _session(edited, path, _ByDigest({previous: _rolled_back(records)}))


def _rolled_back(records: list[Any]) -> list[Any]:
    """The records of a run whose steps were all then rolled back."""
    seq = max(r["seq"] for r in records)
    out = list(records)
    for r in records:
        if r["event"] == "end" and r.get("stepId"):
            seq += 1
            out.append({**r, "seq": seq, "phase": "rollback", "result": "ok"})
    return out
