"""Plan integrity under hostile and sloppy edits (issue 11 items 1, 2, 4, 9, 10).

Every edit that could change what apply does is refused on load (the digest covers the whole body,
order included, and loading refuses what YAML could smuggle past it); `plan --rebase` accepts an edit
only when the plan still means something apply can carry out, recomputes what follows from the rest,
and shows the change; `show`/`diff --allow-edited` display an edited plan marked UNTRUSTED.
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.drift import drift
from dra_migrate.plan.fingerprint import dependencies
from dra_migrate.plan.params import DEVICE_PLUGIN_LABEL, DRA_LABEL, PlanParams
from dra_migrate.plan.validate import summary_problems, validate
from dra_migrate.plan.wire import NODE_COLUMNS
from tests.unit import helpers as h
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
FIXTURES = sorted((ROOT / "fixtures" / "clusters").glob("*.yaml"))
# Each example loads a whole plan (~0.1 s); DRA_MIGRATE_HYPOTHESIS_EXAMPLES=2000 for a longer hunt.
EXAMPLES = int(os.environ.get("DRA_MIGRATE_HYPOTHESIS_EXAMPLES", "60"))


@cache
def _plan_text(*args: str) -> str:
    """The demo plan as `dra-migrate plan` writes it (made once per argument list)."""
    body = build_plan(load_snapshot(DEMO), PlanParams(**dict(zip(args[::2], args[1::2], strict=True)))).to_dict()
    return plan_io.dumps(plan_io.seal(body))


def demo(tmp_path: Path, name: str = "p.yaml", **params: str) -> Path:
    path = tmp_path / name
    path.write_text(_plan_text(*(x for kv in sorted(params.items()) for x in kv)))
    return path


def rt_edit(path: Path, change: Callable[[Any], None]) -> None:
    """Edit the plan as a text editor would keep it (comments, order and quoting kept)."""
    yaml = YAML(typ="rt")
    yaml.width = 4096
    doc = yaml.load(path.read_text())
    change(doc)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    path.write_text(buf.getvalue())


def text_edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, count))


def refused(path: Path, *words: str) -> str:
    with pytest.raises(InputError) as e:
        plan_io.load(path)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    return msg


def line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def swap(seq: Any, i: int, j: int) -> None:
    seq[i], seq[j] = seq[j], seq[i]


def pool_stage(doc: Any, n: int = 0) -> Any:
    return [s for s in doc["stages"] if "pool" in s][n]


def node_step(stage: Any, step_id: str) -> Any:
    """A stage's per-node step by its id (a pool's steps may begin with `protect`: no index is fixed)."""
    return next(s for s in stage["nodeSteps"] if s["id"] == step_id)


COL = {c: i for i, c in enumerate(NODE_COLUMNS)}  # a node row's columns (format 2)


def row(doc: Any, n: int = 0, stage: int = 0) -> Any:
    """The n-th node row of a pool stage, as a reviewer edits it in the file."""
    return pool_stage(doc, stage)["nodes"][n]


def rows_of(doc: Any, wave: str, stage: int = 0) -> list[Any]:
    return [r for r in pool_stage(doc, stage)["nodes"] if r[COL["wave"]] == wave]


def first_row_line(path: Path) -> str:
    return next(ln for ln in path.read_text().splitlines() if ln.startswith("  - [") and ", wave-" in ln)


# --- 1. the digest covers the whole meaning ---------------------------------------------------------


def test_moving_prepare_after_a_pool_stage_is_refused_with_the_stages_line(tmp_path: Path) -> None:
    path = demo(tmp_path)
    rt_edit(path, lambda d: swap(d["stages"], 0, 1))
    refused(path, f"{path}:{line_of(path, 'stages:')}:", "reordered", "--rebase")


@pytest.mark.parametrize(
    "what",
    ["pool stages", "waves", "nodes of a wave", "per-node steps", "prepare steps", "fingerprint objects", "findings"],
)
def test_any_reorder_changes_the_digest(tmp_path: Path, what: str) -> None:
    path = demo(tmp_path, max_unavailable="2")
    edits: dict[str, Callable[[Any], None]] = {
        "pool stages": lambda d: swap(d["stages"], 1, 2),
        "waves": lambda d: swap(pool_stage(d)["waves"], 0, 1),
        "nodes of a wave": lambda d: swap(pool_stage(d)["nodes"], 0, 1),
        "per-node steps": lambda d: swap(pool_stage(d)["nodeSteps"], 0, 1),
        "prepare steps": lambda d: swap(d["stages"][0]["steps"], 0, 1),
        "fingerprint objects": lambda d: swap(d["fingerprint"]["objects"], 0, 1),
        "findings": lambda d: swap(d["findings"], 0, 1),
    }
    rt_edit(path, edits[what])
    refused(path, "edited")


def test_equal_files_give_equal_digests_whatever_the_formatting(tmp_path: Path) -> None:
    path = demo(tmp_path)
    digest = plan_io.load(path)["digest"]
    text = path.read_text()
    # Comments, quoting style, flow style and indentation of a list do not change the meaning.
    text = text.replace("devicePluginOff: 'false'", 'devicePluginOff: "false"  # a comment', 1)
    text = text.replace("  order: []\n", "  order: [ ]\n", 1)
    text = "# reviewed by ops\n" + text.replace("formatVersion: 2\n", "formatVersion: 2   \n", 1)
    text = text.replace("  nodeColumns: [node, uid,", "  nodeColumns: [ node,  uid,", 1)
    path.write_text(text)
    assert plan_io.load(path)["digest"] == digest


@pytest.mark.parametrize("token", [".nan", ".NaN", ".inf", "-.inf", "+.Inf"])
def test_nan_and_infinities_are_refused_with_their_line(tmp_path: Path, token: str) -> None:
    path = demo(tmp_path)
    needle = first_row_line(path)
    assert "['true', null]" in needle
    line = line_of(path, needle)
    text_edit(path, needle, needle.replace("['true', null]", f"['true', {token}]"))
    refused(path, f"{path}:{line}:", "NaN or infinity")
    # Even if the digests are recomputed by hand (canonical JSON has no NaN: it would digest as null).
    body = plan_io.body_of(plan_io.load_for_review(demo(tmp_path, "q.yaml")).plan)
    body["stages"][1]["waves"][0]["nodes"][0]["original"]["labels"][DRA_LABEL] = float("nan")
    with pytest.raises(InputError, match="no canonical form"):
        plan_io.seal(body)


@pytest.mark.parametrize(
    "old, new, words",
    [
        # an anchor that could make one node's row another's
        ("  nodes:\n  - [", "  nodes:\n  - &o [", "anchors"),
        ("    timeout: 30s\n", "    timeout: &n 30s\n", "anchors"),
        ("  soak: 5m\n", "  soak: 5m\n  <<: {drain: all}\n", "merge keys"),
        ("  drain: gpu\n", "  drain: !!str gpu\n", "tags"),
        ("  drain: gpu\n", "  drain: !!binary Z3B1\n", "tags"),
        ("  order: []\n", "  order: !!set {a}\n", "tags"),
        ("  soak: 5m\n", "  soak: 2024-01-01\n", "date"),
        ("  soak: 5m\n", "  soak: 5m\n  7: x\n", "not a string"),
        ("  nodes: 9\n", "  nodes: 99999999999999999999\n", "out of range"),
    ],
)
def test_yaml_tricks_are_refused(tmp_path: Path, old: str, new: str, words: str) -> None:
    path = demo(tmp_path)
    text_edit(path, old, new)
    refused(path, words)


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    path = demo(tmp_path)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    path.write_text(path.read_text() + bomb)
    refused(path, "anchors")


def test_very_deep_nesting_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("formatVersion: 1\nx: " + "[" * 60_000 + "]" * 60_000 + "\n")
    refused(path, "not a valid plan file")
    path.write_text("formatVersion: 1\nx:\n" + "".join(" " * i + "- \n" for i in range(1, 3000)))
    refused(path)


@pytest.mark.parametrize(
    "old, new",
    [
        ("wave-1, 0, 1, 2, 8, false, [", "wave-1, 0, '1', 2, 8, false, ["),  # "1" for 1 (a row's gpuPods)
        ("  draOn: 'true'\n", "  draOn: true\n"),  # true for "true"
        ("      count: 1\n", "      count: 1.0\n"),  # 1.0 for 1
        (", 8, false, [", ", 8, 0, ["),  # 0 for false (a node row's original cordon)
        ("  nodes: 9\n", "  nodes: 0x9\n"),  # same number, other spelling: the value is the same, but summary...
    ],
)
def test_type_changes_are_refused(tmp_path: Path, old: str, new: str) -> None:
    path = demo(tmp_path)
    text_edit(path, old, new)
    if new.endswith("0x9\n"):  # 0x9 is the integer 9: same meaning, same digest
        assert plan_io.load(path)["summary"]["nodes"] == 9
        return
    refused(path, "edited")


def test_duplicates_and_unknown_keys_are_refused(tmp_path: Path) -> None:
    path = demo(tmp_path)
    text_edit(path, "  drain: gpu\n", "  drain: gpu\n  drain: all\n")
    refused(path, f"{path}:{line_of(path, 'drain: all')}:", "duplicate key")

    path = demo(tmp_path, "dup-stage.yaml")
    rt_edit(path, lambda d: d["stages"].append(copy.deepcopy(d["stages"][1])))
    refused(path, "appears twice")

    path = demo(tmp_path, "extra-top.yaml")
    path.write_text(path.read_text() + "force: true\n")
    refused(path, f"{path}:{line_of(path, 'force: true')}:", "unknown section `force`")

    path = demo(tmp_path, "extra-step.yaml")
    rt_edit(path, lambda d: pool_stage(d)["nodeSteps"][1]["params"].update(force=True))
    refused(path, "edited", "stages/pool-h100-pool")


def test_a_plan_resealed_by_hand_is_still_checked(tmp_path: Path) -> None:
    """A forger who recomputes the digests: every load refuses a false `applicable`; review and rebase
    refuse what the plan means wrongly."""
    good = plan_io.load(demo(tmp_path))
    body = copy.deepcopy(plan_io.body_of(good))
    body["applicable"] = True
    path = tmp_path / "forged.yaml"
    plan_io.write(plan_io.seal(body), path)
    refused(path, "applicable")
    for change, words in (
        (lambda b: swap(b["stages"], 0, 1), "first stage must be `prepare`"),
        (lambda b: b["stages"][1]["waves"][0]["nodes"][0].update(gpuPods=-1), "non-negative"),
        (lambda b: node_step(b["stages"][1], "drain")["params"].update(scope="some"), "nodeSteps["),
    ):
        body = copy.deepcopy(plan_io.body_of(good))
        change(body)
        plan_io.write(plan_io.seal(body), path)
        with pytest.raises(InputError, match=re.escape(words)):
            plan_io.load_for_review(path)
        r = run("plan", "--rebase", str(path))
        assert r.code == 1 and words in r.stderr


def test_old_digest_scheme_and_missing_digests_are_refused(tmp_path: Path) -> None:
    path = demo(tmp_path)
    rt_edit(path, lambda d: d.pop("digests"))
    refused(path, "no digest")


# --- 2. rebase validates meaning -----------------------------------------------------------------


def rebase(path: Path, *extra: str) -> Any:
    return run("plan", "--rebase", str(path), *extra)


def test_rebase_recomputes_applicable_summary_and_evicted_pods(tmp_path: Path) -> None:
    path = demo(tmp_path)
    original = plan_io.load(path)

    def lie(d: Any) -> None:
        d["applicable"] = True  # the demo has blockers
        d["summary"]["evictedPods"] = 0
        d["summary"]["estimatedDuration"] = "1s"
        pool_stage(d)["waves"][0]["evictedPods"] = 0

    rt_edit(path, lie)
    r = rebase(path)
    assert r.code == 0, r.stderr
    plan = plan_io.load(path)
    assert plan["applicable"] is False
    assert plan["summary"] == original["summary"]
    assert plan["stages"][1]["waves"][0]["evictedPods"] == original["stages"][1]["waves"][0]["evictedPods"]
    # what rebase recomputed is shown on stderr, before it writes
    assert "applicable" in r.stderr and "summary.evictedPods" in r.stderr and r.stdout == ""


def test_rebase_shows_the_semantic_diff_against_the_original(tmp_path: Path) -> None:
    original = demo(tmp_path, "orig.yaml")
    path = demo(tmp_path)
    rt_edit(path, lambda d: swap(d["stages"], 1, 2))
    r = rebase(path, "--against", str(original))
    assert r.code == 0, r.stderr
    assert "edited since it was made: stages" in r.stderr and "against the original plan" in r.stderr
    assert "reordered" in r.stderr and "summary.pools" not in r.stderr.split("Details")[0]
    other = tmp_path / "other.yaml"
    other.write_text(_plan_text("drain", "all"))
    rt_edit(path, lambda d: d["stages"][1]["waves"][0].update(soakAfter="9m"))
    r = rebase(path, "--against", str(other))
    assert r.code == 1 and "is not the plan" in r.stderr


HOSTILE_EDITS: list[tuple[str, Callable[[Any], None], str]] = [
    ("prepare moved", lambda d: swap(d["stages"], 0, 2), "first stage must be `prepare`"),
    ("prepare twice", lambda d: d["stages"].append({**copy.deepcopy(d["stages"][0])}), "appears twice"),
    ("step order", lambda d: swap(pool_stage(d)["nodeSteps"], 0, 1), "in this order"),
    ("step dropped", lambda d: pool_stage(d)["nodeSteps"].remove(node_step(pool_stage(d), "wait-dra-ready")),
     "in this order"),
    ("inverse other key",
     lambda d: node_step(pool_stage(d), "enable-dra-plugin")["inverse"]["restore"].update(key="example.com/other"),
     "restore"),
    ("inverse other value",
     lambda d: node_step(pool_stage(d), "disable-device-plugin")["inverse"]["restore"].update(value="true"), "restore"),
    ("inverse gone", lambda d: pool_stage(d)["nodeSteps"][0].update(inverse=None), "inverse"),
    ("original of another label",
     lambda d: row(d).__setitem__(COL["labels"], {"example.com/x": "1"}), "exactly the labels"),
    ("original cordon as text", lambda d: row(d).__setitem__(COL["unschedulable"], "no"), "true or false"),
    ("timeout 30 s", lambda d: pool_stage(d)["nodeSteps"][0].update(timeout="30 s"), "not a duration"),
    ("timeout -5m", lambda d: pool_stage(d)["nodeSteps"][1].update(timeout="-5m"), "not a duration"),
    ("timeout 1e9h", lambda d: pool_stage(d)["nodeSteps"][1].update(timeout="1e9h"), "not a duration"),
    ("timeout 0s", lambda d: pool_stage(d)["nodeSteps"][1].update(timeout="0s"), "longer than 0s"),
    ("timeout 300h", lambda d: d["stages"][0]["steps"][0].update(timeout="300h"), "longer than 24h"),
    ("soak 5 minutes", lambda d: pool_stage(d)["waves"][0].update(soakAfter="5 minutes"), "not a duration"),
    ("empty label key", lambda d: node_step(pool_stage(d), "disable-device-plugin")["params"].update(key=""),
     "label key"),
    ("invalid label key",
     lambda d: node_step(pool_stage(d), "enable-dra-plugin")["params"].update(key="Nvidia.com/dra plugin"),
     "label key"),
    ("empty label value", lambda d: node_step(pool_stage(d), "enable-dra-plugin")["params"].update(value=""),
     "label value"),
    ("invalid label value", lambda d: node_step(pool_stage(d), "enable-dra-plugin")["params"].update(value="on!"),
     "label value"),
    ("unknown action", lambda d: pool_stage(d)["nodeSteps"][4].update(action="reboot"), "protocol"),
    ("unknown prepare action", lambda d: d["stages"][0]["steps"][0].update(action="reboot"), "unknown action"),
    ("drain scope", lambda d: node_step(pool_stage(d), "drain")["params"].update(scope="some"), "parameters say"),
    ("drain parameter", lambda d: d["parameters"].update(drain="everything"), "--drain"),
    ("label parameter", lambda d: d["parameters"].update(draLabel="bad key"), "label key"),
    ("steps disagree with parameters",
     lambda d: d["parameters"].update(canaryImage="registry.k8s.io/pause:3.9"), "parameters say"),
    ("negative count", lambda d: row(d).__setitem__(COL["gpuPods"], -2), "non-negative"),
    ("count as text", lambda d: row(d).__setitem__(COL["expectedDevices"], "8"), "non-negative"),
    ("node twice", lambda d: pool_stage(d)["nodes"].insert(1, copy.deepcopy(row(d))), "planned twice"),
    ("empty wave",
     lambda d: pool_stage(d).update(nodes=[r for r in pool_stage(d)["nodes"] if r[COL["wave"]] != "wave-1"]),
     "without nodes"),
    ("unknown field", lambda d: pool_stage(d)["nodeSteps"][1].update(force=True), "unknown field"),
    ("extra node column", lambda d: row(d).append(True), "columns"),
    ("node columns renamed", lambda d: pool_stage(d)["nodeColumns"].__setitem__(0, "name"), "nodeColumns"),
    ("row of no wave", lambda d: row(d).__setitem__(COL["wave"], "wave-x"), "no wave"),
    ("rows out of wave order", lambda d: swap(pool_stage(d)["nodes"], 0, -1), "grouped by wave"),
    ("uid not the fingerprint's", lambda d: row(d).__setitem__(COL["uid"], "1234"), "fingerprint"),
    ("profile out of range", lambda d: row(d).__setitem__(COL["profile"], 7), "profile"),
    # hypothesis found it: 3.5 billion pods made the summary's estimate allocate a list per pod (MemoryError)
    ("pods no node runs", lambda d: row(d).__setitem__(COL["gpuPods"], 3_557_079_108), "more than any node runs"),
    ("wave name a list", lambda d: pool_stage(d)["waves"][0].__setitem__("name", []), "wave name"),
    ("gang wave gone", lambda d: rename_wave(pool_stage(d), "wave-1", "wave-x"), "is not in the plan"),
    ("bad severity", lambda d: d["findings"][0].update(severity="meh"), "severity"),
    ("deviceclass inverse",
     lambda d: d["stages"][0]["steps"][0]["inverse"]["restore"].update(name="other"), "delete DeviceClass"),
]  # fmt: skip


def rename_wave(stage: Any, old: str, new: str) -> None:
    next(w for w in stage["waves"] if w["name"] == old)["name"] = new
    for r in stage["nodes"]:
        if r[COL["wave"]] == old:
            r[COL["wave"]] = new


@pytest.mark.parametrize("name, change, words", HOSTILE_EDITS, ids=[e[0] for e in HOSTILE_EDITS])
def test_rebase_refuses_what_apply_could_not_carry_out(
    tmp_path: Path, name: str, change: Callable[[Any], None], words: str
) -> None:
    path = demo(tmp_path)
    rt_edit(path, change)
    before = path.read_bytes()
    r = rebase(path)
    assert r.code == 1, f"{name}: accepted\n{r.stderr}"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr
    assert f"{path}:" in lines[0]
    assert path.read_bytes() == before  # nothing written
    assert run("show", "--allow-edited", str(path)).code == 1  # not even shown as acceptable


def test_rebase_accepts_legitimate_edits(tmp_path: Path) -> None:
    path = demo(tmp_path)

    def edit(d: Any) -> None:
        swap(d["stages"], 1, 2)  # another pool order
        pool_stage(d)["waves"][0]["soakAfter"] = "1h"
        last = pool_stage(d, 1)["waves"].pop()["name"]  # the last wave's node joins the one before
        for r in rows_of(d, last, stage=1):
            r[COL["wave"]] = pool_stage(d, 1)["waves"][-1]["name"]
        d["parameters"]["maxUnavailable"] = "2"  # which the parameters must then allow (plan/consistency.py)
        d["parameters"]["drain"] = "all"  # a parameter changed together with its steps
        for s in d["stages"][1:]:
            node_step(s, "drain")["params"]["scope"] = "all"
        node_step(pool_stage(d), "drain")["timeout"] = "45m"  # one pool needs a longer drain

    rt_edit(path, edit)
    r = rebase(path)
    assert r.code == 0, r.stderr
    plan = plan_io.load(path)
    assert plan["summary"]["waves"] == 8 and plan["summary"]["pools"][0] == "l4-pool"
    assert plan["summary"]["evictedPods"] > plan_io.load(demo(tmp_path, "orig.yaml"))["summary"]["evictedPods"]
    assert summary_problems(plan) == []


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_rebase_of_an_untouched_plan_changes_nothing_but_edited(fixture: Path, tmp_path: Path) -> None:
    """validate's summary and applicability are the builder's: they never disagree on a real plan."""
    for params in (PlanParams(), PlanParams(drain="all", max_unavailable="2", soak="0s")):
        body = build_plan(load_snapshot(fixture), params).to_dict()
        path = tmp_path / "p.yaml"
        plan_io.write(plan_io.seal(body), path)
        assert validate(plan_io.load(path)) == [] and summary_problems(plan_io.load(path)) == []
        rebased = plan_io.rebase(path)
        assert plan_io.body_of(rebased) == {**body, "edited": {"previousDigests": [plan_io.seal(body)["digest"]]}}


# --- show / diff --allow-edited; apply never -------------------------------------------------------


def test_show_and_diff_display_an_edited_plan_marked_untrusted(tmp_path: Path) -> None:
    original = demo(tmp_path, "orig.yaml")
    path = demo(tmp_path)
    text_edit(path, "soakAfter: 5m", "soakAfter: 15m")
    assert run("show", str(path)).code == 1
    r = run("show", "--allow-edited", str(path))
    assert r.code == 0
    assert r.stdout.startswith("EDITED, NOT REBASED, UNTRUSTED") and "stages/pool-h100-pool" in r.stdout
    assert "UNTRUSTED" in r.stderr
    data = json.loads(run("show", "--allow-edited", "-o", "json", str(path)).stdout)
    assert "UNTRUSTED" in data["untrusted"] and data["summary"]["estimatedDuration"] != "1h5m45s"
    d = run("diff", "--allow-edited", str(original), str(path))
    assert d.code == 2 and d.stdout.startswith("EDITED, NOT REBASED, UNTRUSTED") and "soakAfter" in d.stdout
    dj = json.loads(run("diff", "--allow-edited", "-o", "json", str(original), str(path)).stdout)
    assert len(dj["untrusted"]) == 1
    # an intact plan shows as always, with no mark
    clean = run("show", "--allow-edited", str(original))
    assert clean.code == 0 and clean.stdout.startswith("Plan\n") and "UNTRUSTED" not in clean.stderr
    # apply has no such door: the edited plan is refused before any cluster is contacted
    a = run("apply", str(path), "--kubeconfig", str(tmp_path / "none"), "--dry-run")
    assert a.code == 1 and "edited" in a.stderr


# --- 3. fingerprint keys carry the API group ---------------------------------------------------------


def _two_jobs(batch_gpus: str = "1") -> Any:
    def tmpl(gpus: str) -> dict[str, Any]:
        return h.template(h.pod_spec(h.container(limits={"nvidia.com/gpu": gpus})))

    batch = h.obj("batch/v1", "Job", "train", {"template": tmpl(batch_gpus)})
    batch["metadata"]["uid"] = "uid-batch"
    volcano = h.obj("batch.volcano.sh/v1alpha1", "Job", "train", {"tasks": [{"replicas": 1, "template": tmpl("1")}]})
    volcano["metadata"]["uid"] = "uid-volcano"
    node = h.node("gpu-1", labels={DEVICE_PLUGIN_LABEL: "true"}, gpus={"nvidia.com/gpu": "8"})
    node["metadata"]["uid"] = "uid-node"
    return h.state(batch, volcano, node)


def test_fingerprint_keeps_same_named_objects_of_two_api_groups_apart() -> None:
    state = _two_jobs()
    jobs = [o for o in dependencies(state, assess(state)) if o["kind"] == "Job"]
    assert sorted(o["group"] for o in jobs) == ["batch", "batch.volcano.sh"]


def test_a_change_to_one_job_does_not_hide_behind_the_other_groups_job() -> None:
    planned = build_plan(_two_jobs("1"), PlanParams()).to_dict()
    found = drift(planned, _two_jobs("2"))
    changed = [(o.kind, o.group, o.change) for o in found.objects]
    assert changed == [("Job", "batch", "changed")]
    assert [(c["group"], c["change"]) for c in found.consumers_changed] == [("batch", "changed")]
    assert not found.holds
    assert drift(planned, _two_jobs("1")).holds


# --- 4. plan-time refusal of values apply could not carry out ---------------------------------------


@pytest.mark.parametrize(
    "args, option",
    [
        (["--dra-label", ""], "--dra-label"),
        (["--dra-label", "nvidia.com/dra kubelet"], "--dra-label"),
        (["--device-plugin-label", "a/b/c"], "--device-plugin-label"),
        (["--device-plugin-label", "UPPER.example.com/x"], "--device-plugin-label"),
        (["--device-plugin-label", DRA_LABEL], "--device-plugin-label"),
        (["--pool-label", "-bad"], "--pool-label"),
        (["--soak", "-5m"], "--soak"),
        (["--soak", "30 s"], "--soak"),
        (["--soak", "1e9h"], "--soak"),
        (["--soak", "25h"], "--soak"),
        (["--max-unavailable", "+5"], "--max-unavailable"),
        (["--order", ","], None),
    ],
)
def test_plan_refuses_option_values_apply_could_not_carry_out(tmp_path: Path, args: list[str], option: str) -> None:
    out = tmp_path / "x.yaml"
    r = run("plan", "--snapshot", str(DEMO), "--out", str(out), *args)
    if option is None:  # an empty --order is no order: the default
        assert r.code == 0, r.stderr
        return
    assert r.code == 1 and option in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "field, value",
    [("soak", 5), ("drainTimeout", "0s"), ("readyTimeout", "48h"), ("draOn", ""), ("order", "a"), ("poolLabels", [1])],
)
def test_plan_parameters_from_a_file_are_checked_like_options(field: str, value: Any) -> None:
    d = PlanParams().to_dict()
    d[field] = value
    with pytest.raises(InputError):
        PlanParams.from_dict(d)


# --- 5. property-based: any input is a plan or one line of InputError -----------------------------


def _load_or_input_error(path: Path) -> None:
    try:
        plan = plan_io.load(path)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(plan, dict)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_any_bytes_load_or_fail_with_one_line(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any.yaml"
    path.write_bytes(data)
    _load_or_input_error(path)


_TOKENS = ["", " ", "\n", ":", "- ", "&a ", "*a", "!!", "<<: ", "{", "}", "[", "]", ".nan", "~", "'", '"', "\t",
           "? ", "|", ">", "#", "%YAML 1.1\n", "---\n", "...\n", "\x00", "\ufeff", "é", "1e9", "null"]  # fmt: skip


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.floats(min_value=0, max_value=1, exclude_max=True), st.integers(0, 8), st.sampled_from(_TOKENS)),
        min_size=1,
        max_size=4,
    )
)
def test_any_mutation_of_a_golden_plan_loads_or_fails_with_one_line(
    tmp_path: Path, edits: list[tuple[float, int, str]]
) -> None:
    text = _plan_text()
    for where, cut, token in edits:
        i = int(where * len(text))
        text = text[:i] + token + text[i + cut :]
    path = tmp_path / "mutated.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _load_or_input_error(path)
    try:
        review = plan_io.load_for_review(path)
    except InputError:
        return
    assert isinstance(review.plan, dict)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path_choice=st.integers(0, 10_000),
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 10**12),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    ),
)
def test_any_value_swapped_into_a_plan_rebases_or_fails_with_one_line(
    tmp_path: Path, path_choice: int, value: Any
) -> None:
    """Structure-aware mutation: one value anywhere in the plan replaced by anything; rebase (which
    re-digests, so only meaning stands between the edit and apply) either accepts or says one line."""
    base = plan_io.load_for_review(demo(tmp_path)).plan
    body = copy.deepcopy(plan_io.body_of(base))
    slots: list[tuple[Any, Any]] = []
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        for k, v in node.items() if isinstance(node, dict) else enumerate(node):
            slots.append((node, k))
            if isinstance(v, dict | list):
                stack.append(v)
    container, key = slots[path_choice % len(slots)]
    container[key] = value
    path = tmp_path / "swapped.yaml"
    path.write_text(plan_io.dumps({**body, "digests": base["digests"], "digest": base["digest"]}))
    try:
        plan = plan_io.rebase(path)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert validate(plan) == []
