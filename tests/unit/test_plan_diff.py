"""`dra-migrate diff`: semantic plan diffs (summary first, no ordering or digest noise) and drift.

Modified clusters are the demo fixture loaded, edited and written to a tmp dir. Golden outputs live
in tests/golden/diff/ (regenerate on purpose: `make golden`, DRA_MIGRATE_UPDATE_GOLDEN=1).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.diff import diff_plans
from dra_migrate.plan.drift import drift
from dra_migrate.plan.fields import PlanFieldError
from dra_migrate.plan.params import DEVICE_PLUGIN_LABEL
from tests.unit.cli import Result, run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").glob("*.yaml"))
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
GOLDEN = ROOT / "tests" / "golden" / "diff"
UPDATE = os.environ.get("DRA_MIGRATE_UPDATE_GOLDEN") == "1"

H100_FIRST = "gke-demo-h100-pool-hwjlhdgm-5lfh"  # planned in pool-h100-pool/wave-1
H100_LAST = "gke-demo-h100-pool-hwjlhdgm-7tpk"
L4 = "gke-demo-l4-pool-99mw65kz-fx2d"
L4_OTHER = "gke-demo-l4-pool-99mw65kz-mv74"
NEW_L4 = "gke-demo-l4-pool-99mw65kz-new1"


# --- helpers -------------------------------------------------------------------------------------


@cache
def _demo_doc() -> dict[str, Any]:
    doc: dict[str, Any] = YAML(typ="safe").load(DEMO.read_text())
    return doc


def demo_doc() -> dict[str, Any]:
    """A fresh, editable copy of the demo snapshot."""
    return copy.deepcopy(_demo_doc())


def item(doc: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    for o in doc["items"]:
        if o.get("kind") == kind and o["metadata"]["name"] == name:
            return dict(o)
    raise AssertionError(f"{kind} {name} not in the fixture")


def write_snapshot(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


def remove_node(doc: dict[str, Any], name: str) -> None:
    doc["items"] = [o for o in doc["items"] if not (o.get("kind") == "Node" and o["metadata"]["name"] == name)]


def add_node_like(doc: dict[str, Any], template: str, name: str) -> None:
    node = copy.deepcopy(item(doc, "Node", template))
    node["metadata"].update(name=name, uid="0000-new-node", resourceVersion="2000000")
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    doc["items"].append(node)


def set_label(doc: dict[str, Any], node: str, key: str, value: str) -> None:
    item(doc, "Node", node)["metadata"]["labels"][key] = value


def gpu_request(doc: dict[str, Any], namespace: str, name: str, count: str) -> None:
    for o in doc["items"]:
        meta = o["metadata"]
        if o.get("kind") == "Deployment" and meta["name"] == name and meta.get("namespace") == namespace:
            for c in o["spec"]["template"]["spec"]["containers"]:
                for section in ("requests", "limits"):
                    if "nvidia.com/gpu" in (c.get("resources") or {}).get(section, {}):
                        c["resources"][section]["nvidia.com/gpu"] = count
            return
    raise AssertionError(f"Deployment {namespace}/{name} not in the fixture")


def make_plan(snapshot: Path, out: Path, *args: str) -> Path:
    r = run("plan", "--snapshot", str(snapshot), "--out", str(out), *args)
    assert r.code == 0, r.stderr
    return out


def diff_json(*args: str) -> tuple[Result, dict[str, Any]]:
    r = run("diff", *args, "-o", "json")
    assert r.code in (0, 2), r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return r, data


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
    assert path.exists(), f"missing golden file {path}: run `make golden`"
    assert actual == path.read_text(), f"{name} differs: run `make golden` if the change is intended"


def empty_summary(summary: dict[str, Any]) -> bool:
    def empty(v: Any) -> bool:
        return all(empty(x) for x in v.values()) if isinstance(v, dict) else not v

    return empty(summary)


# --- plan against plan ---------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_two_plans_of_the_same_cluster_are_identical(fixture: Path, tmp_path: Path) -> None:
    a = make_plan(fixture, tmp_path / "a.yaml")
    b = make_plan(fixture, tmp_path / "b.yaml")
    r, data = diff_json(str(a), str(b))
    assert r.code == 0
    assert data["identical"] is True
    assert empty_summary(data["summary"]) and data["details"] == []
    table = run("diff", str(a), str(b))
    assert table.code == 0 and "No differences" in table.stdout


def test_plans_as_read_are_not_walked_again_for_nan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`diff` of two plans `io.load` read does not walk every value for NaN again: the readers refused it
    (a quarter of diff's own work at 2,000 nodes). A plan made in memory still is checked."""
    from dra_migrate.plan import model

    a = make_plan(DEMO, tmp_path / "a.yaml")
    calls: list[str] = []
    walk = model._finite
    monkeypatch.setattr(model, "_finite", lambda v, p: calls.append(p) or walk(v, p))
    diff_plans(plan_io.load(a), plan_io.load(a), read=True)
    assert calls == []
    diff_plans(plan_io.load(a), plan_io.load(a))
    assert len(calls) == 2
    bad = plan_io.load(a)
    bad["summary"]["nan"] = float("nan")
    with pytest.raises(PlanFieldError, match="not a number"):
        diff_plans(bad, plan_io.load(a))


def test_max_unavailable_moves_nodes_between_waves(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(DEMO, tmp_path / "b.yaml", "--max-unavailable", "2")
    r, data = diff_json(str(a), str(b))
    assert r.code == 2 and data["identical"] is False
    s = data["summary"]
    assert s["parameters"] == [{"name": "maxUnavailable", "old": "10%", "new": "2"}]
    moved = {m["node"]: (m["from"], m["to"]) for m in s["nodes"]["moved"]}
    # h100-pool's four nodes, one per wave, become two waves of two.
    assert moved["gke-demo-h100-pool-hwjlhdgm-swrp"] == ("pool-h100-pool/wave-2", "pool-h100-pool/wave-1")
    assert moved[H100_LAST] == ("pool-h100-pool/wave-4", "pool-h100-pool/wave-2")
    assert H100_FIRST not in moved  # stayed in wave-1
    assert {"stage": "pool-h100-pool", "wave": "wave-4"} in s["waves"]["removed"]
    assert s["nodes"]["added"] == [] and s["nodes"]["removed"] == [] and s["stages"]["moved"] == []
    # A node that changes wave is one detail (its wave), not a removal plus an addition.
    paths = {d["path"]: d for d in data["details"]}
    assert paths[f"stages[pool-h100-pool].nodes[{H100_LAST}].wave"]["new"] == "wave-2"
    assert not any(d["path"].endswith(f"nodes[{H100_LAST}]") for d in data["details"])


def test_soak_changes_parameters_and_waves_not_nodes(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(DEMO, tmp_path / "b.yaml", "--soak", "10m")
    r, data = diff_json(str(a), str(b))
    assert r.code == 2
    s = data["summary"]
    assert s["parameters"] == [{"name": "soak", "old": "5m", "new": "10m"}]
    assert s["nodes"]["moved"] == [] and s["waves"]["added"] == [] and s["waves"]["removed"] == []
    soaks = [d for d in data["details"] if d["path"].endswith(".soakAfter")]
    assert soaks and all(d == {**d, "change": "changed", "old": "5m", "new": "10m"} for d in soaks)


def test_order_moves_stages(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(DEMO, tmp_path / "b.yaml", "--order", "a100-shared-pool")
    r, data = diff_json(str(a), str(b))
    assert r.code == 2
    s = data["summary"]
    assert s["parameters"] == [{"name": "order", "old": [], "new": ["a100-shared-pool"]}]
    # The fewest moves: a100 jumps ahead; h100 and l4 keep their relative order.
    assert s["stages"]["moved"] == [{"stage": "pool-a100-shared-pool", "from": 4, "to": 2}]
    assert s["nodes"]["moved"] == []
    reordered = [d for d in data["details"] if d["change"] == "reordered"]
    assert [d["path"] for d in reordered] == ["stages"]
    assert not any(d["path"].startswith("summary.pools") for d in data["details"])  # said once, by `stages`


def test_a_changed_cluster_shows_nodes_added_removed_and_original_labels(tmp_path: Path) -> None:
    doc = demo_doc()
    remove_node(doc, H100_LAST)
    add_node_like(doc, L4, NEW_L4)
    set_label(doc, H100_FIRST, DEVICE_PLUGIN_LABEL, "false")
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(write_snapshot(doc, tmp_path / "changed.json"), tmp_path / "b.yaml")
    r, data = diff_json(str(a), str(b))
    assert r.code == 2
    s = data["summary"]
    assert s["nodes"]["removed"] == [{"node": H100_LAST, "stage": "pool-h100-pool", "wave": "wave-4"}]
    assert [n["node"] for n in s["nodes"]["added"]] == [NEW_L4]
    assert s["nodes"]["added"][0]["stage"] == "pool-l4-pool"
    assert {"stage": "pool-h100-pool", "wave": "wave-4"} in s["waves"]["removed"]
    paths = {d["path"]: d for d in data["details"]}
    label = paths[f"stages[pool-h100-pool].nodes[{H100_FIRST}].original.labels[{DEVICE_PLUGIN_LABEL}]"]
    assert (label["change"], label["old"], label["new"]) == ("changed", "true", "false")
    assert paths[f"fingerprint.objects[Node {NEW_L4}]"]["change"] == "added"
    assert paths[f"fingerprint.objects[Node {H100_LAST}]"]["change"] == "removed"


def _reordered(plan: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(plan_io.body_of(plan))
    body["findings"] = list(reversed(body["findings"]))
    body["fingerprint"] = {**body["fingerprint"], "objects": list(reversed(body["fingerprint"]["objects"]))}
    for stage in body["stages"]:
        for wave in stage.get("waves") or []:
            wave["nodes"] = list(reversed(wave["nodes"]))
        for step in stage.get("nodeSteps") or []:
            step["params"] = dict(reversed(list(step["params"].items())))  # key order is no change either
    return plan_io.seal(body)


def test_ordering_noise_and_digests_are_not_differences(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml", "--max-unavailable", "50%")
    plan = plan_io.load(a)
    assert len(plan["findings"]) > 1 and any(len(w["nodes"]) > 1 for s in plan["stages"] for w in s.get("waves", []))
    shuffled = _reordered(plan)
    assert shuffled["digest"] != plan["digest"]
    b = tmp_path / "b.yaml"
    plan_io.write(shuffled, b)
    assert b.read_text() != a.read_text()
    r, data = diff_json(str(a), str(b))
    assert r.code == 0, data
    assert data["identical"] and data["details"] == []


def test_resource_versions_are_not_plan_differences(tmp_path: Path) -> None:
    doc = demo_doc()
    for o in doc["items"]:
        o["metadata"]["resourceVersion"] = str(int(o["metadata"].get("resourceVersion") or 0) + 7)
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(write_snapshot(doc, tmp_path / "bumped.json"), tmp_path / "b.yaml")
    assert plan_io.load(a)["fingerprint"]["digest"] != plan_io.load(b)["fingerprint"]["digest"]
    assert diff_plans(plan_io.load(a), plan_io.load(b)).empty


def test_stage_and_step_reorders_are_reported_once(tmp_path: Path) -> None:
    plan = plan_io.load(make_plan(DEMO, tmp_path / "a.yaml"))
    body = copy.deepcopy(plan_io.body_of(plan))
    pool = body["stages"][1]
    pool["nodeSteps"] = [pool["nodeSteps"][1], pool["nodeSteps"][0], *pool["nodeSteps"][2:]]
    d = diff_plans(plan, plan_io.seal(body))
    assert not d.empty
    assert [(x.path, x.change) for x in d.details] == [(f"stages[{pool['name']}].nodeSteps", "reordered")]


def test_an_edited_plan_is_refused(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = tmp_path / "b.yaml"
    b.write_text(a.read_text().replace("soak: 5m", "soak: 1m"))
    r = run("diff", str(a), str(b))
    assert r.code == 1 and "edited" in r.stderr


def test_plan_b_and_a_source_are_exclusive(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    r = run("diff", str(a), str(a), "--snapshot", str(DEMO))
    assert r.code == 1 and "not both" in r.stderr


def test_markdown_output(tmp_path: Path) -> None:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    b = make_plan(DEMO, tmp_path / "b.yaml", "--max-unavailable", "2")
    r = run("diff", str(a), str(b), "-o", "markdown")
    assert r.code == 2
    assert r.stdout.startswith("## Plan diff\n")
    assert r.stdout.index("## Summary") < r.stdout.index("## Nodes") < r.stdout.index("## Details")
    assert "| parameters.maxUnavailable " in r.stdout


# --- plan against the cluster: drift ------------------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.stem for f in FIXTURES])
def test_a_plan_holds_against_its_own_snapshot(fixture: Path, tmp_path: Path) -> None:
    plan = make_plan(fixture, tmp_path / "p.yaml")
    r, data = diff_json(str(plan), "--snapshot", str(fixture))
    assert r.code == 0, data
    assert data["holds"] is True and data["summary"]["total"] == 0 and data["objects"] == []


def test_resource_version_only_changes_are_not_drift(tmp_path: Path) -> None:
    plan = make_plan(DEMO, tmp_path / "p.yaml")
    doc = demo_doc()
    for o in doc["items"]:
        o["metadata"]["resourceVersion"] = str(int(o["metadata"].get("resourceVersion") or 0) + 7)
    r, data = diff_json(str(plan), "--snapshot", str(write_snapshot(doc, tmp_path / "now.json")))
    assert r.code == 0, data
    assert data["holds"] is True
    fingerprinted = len(plan_io.load(plan)["fingerprint"]["objects"])
    assert data["summary"]["statusOnly"] == fingerprinted
    assert {o["change"] for o in data["statusOnly"]} == {"status only"}
    text = run("diff", str(plan), "--snapshot", str(tmp_path / "now.json"))
    assert text.code == 0 and "still holds" in text.stdout and "status only" in text.stdout


def drifted_demo(tmp_path: Path) -> Path:
    """The demo cluster after a week: one node gone, one new, a label flipped, a GPU request doubled, a new
    GPU Deployment, and a node whose resourceVersion moved with nothing else."""
    doc = demo_doc()
    remove_node(doc, H100_LAST)
    add_node_like(doc, L4, NEW_L4)
    set_label(doc, H100_FIRST, DEVICE_PLUGIN_LABEL, "false")
    gpu_request(doc, "ml-serving", "chat-api", "2")
    extra = copy.deepcopy(item(doc, "Deployment", "chat-api"))
    extra["metadata"].update(name="chat-api-canary", uid="0000-new-deployment", resourceVersion="2000001")
    doc["items"].append(extra)
    node = item(doc, "Node", L4_OTHER)
    node["metadata"]["resourceVersion"] = "9999999"
    return write_snapshot(doc, tmp_path / "now.json")


def test_drift_reports_each_change(tmp_path: Path) -> None:
    plan = make_plan(DEMO, tmp_path / "p.yaml")
    r, data = diff_json(str(plan), "--snapshot", str(drifted_demo(tmp_path)))
    assert r.code == 2
    assert data["holds"] is False
    assert data["nodes"]["removed"] == [
        {"node": H100_LAST, "pool": "h100-pool", "stage": "pool-h100-pool", "wave": "wave-4", "reason": "deleted"}
    ]
    assert data["nodes"]["added"] == [{"node": NEW_L4, "pool": "l4-pool"}]
    assert data["labelsChanged"] == [
        {"node": H100_FIRST, "key": DEVICE_PLUGIN_LABEL, "planned": "true", "now": "false"}
    ]
    changed = {(c["kind"], c["namespace"], c["name"]): c for c in data["consumers"]["changed"]}
    assert changed[("Deployment", "ml-serving", "chat-api")]["change"] == "changed"
    assert list(changed) == [("Deployment", "ml-serving", "chat-api")]
    changed_gpu = changed[("Deployment", "ml-serving", "chat-api")]["gpu"]
    assert changed_gpu["nvidia.com/gpu"] % 2 == 0 and changed_gpu["nvidia.com/gpu"] > 0
    # The copy asks what the edited chat-api asks (2 GPUs per pod, times its replicas).
    assert [(c["name"], c["gpu"]) for c in data["consumers"]["added"]] == [("chat-api-canary", changed_gpu)]
    objects = {(o["kind"], o["name"]): o["change"] for o in data["objects"]}
    assert objects[("Node", H100_LAST)] == "removed"
    assert objects[("Node", NEW_L4)] == "added"
    assert objects[("Node", H100_FIRST)] == "changed"
    assert objects[("Deployment", "chat-api")] == "changed"
    # The node whose resourceVersion alone moved is no drift: status only.
    assert ("Node", L4_OTHER) not in objects
    assert [o["name"] for o in data["statusOnly"]] == [L4_OTHER]
    assert data["serverVersion"] is None


def test_drift_sees_a_replaced_node_and_a_new_server_version(tmp_path: Path) -> None:
    plan = make_plan(DEMO, tmp_path / "p.yaml")
    doc = demo_doc()
    item(doc, "Node", L4)["metadata"]["uid"] = "0000-recreated"
    snap = write_snapshot(doc, tmp_path / "now.json")
    r, data = diff_json(str(plan), "--snapshot", str(snap), "--kubernetes-version", "v1.38.0")
    assert r.code == 2
    assert data["serverVersion"] == {"planned": "v1.37.2", "now": "v1.38.0"}
    assert [(o["name"], o["change"]) for o in data["objects"]] == [(L4, "replaced")]


def test_drift_core_api(tmp_path: Path) -> None:
    plan = plan_io.load(make_plan(DEMO, tmp_path / "p.yaml"))
    assert drift(plan, load_snapshot(DEMO)).holds
    moved = load_snapshot(drifted_demo(tmp_path))
    assert not drift(plan, moved).holds


# --- golden outputs ------------------------------------------------------------------------------


def _golden_case(kind: str, tmp_path: Path) -> Callable[[str], Result]:
    a = make_plan(DEMO, tmp_path / "a.yaml")
    if kind == "plans":
        b = make_plan(DEMO, tmp_path / "b.yaml", "--max-unavailable", "2", "--soak", "10m", "--order", "l4-pool")
        return lambda fmt: run("diff", str(a), str(b), "-o", fmt, env={"NO_COLOR": "1"})
    snap = drifted_demo(tmp_path)
    return lambda fmt: run("diff", str(a), "--snapshot", str(snap), "-o", fmt, env={"NO_COLOR": "1"})


@pytest.mark.parametrize("kind", ["plans", "drift"])
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_golden(kind: str, fmt: str, tmp_path: Path) -> None:
    r = _golden_case(kind, tmp_path)(fmt)
    assert r.code == 2, r.stderr
    # The drift's `cluster.location` is the snapshot read now, under the test's own directory.
    check_golden(f"{kind}.{'json' if fmt == 'json' else 'txt'}", r.stdout.replace(str(tmp_path), "$TMP"))


def test_lists_of_scalars_are_reported_as_deepdiff_reports_them() -> None:
    """`listdiff` answers for ordered lists of scalars without DeepDiff: on random lists (repeated items,
    other lengths, None / NaN / "", numbers of one type) it gives exactly the changes the installed DeepDiff
    gives for the same lists; lists mixing 1 / 1.0 / True (difflib's hashing takes them for one value, and
    DeepDiff 9.2 answers them otherwise than 9.1 did) are left to DeepDiff, so the answer is DeepDiff's
    whichever is installed (this test failed with deepdiff 9.2.1 when the fast path took them)."""
    import random

    from dra_migrate.plan import diff as plan_diff
    from dra_migrate.plan import listdiff

    rng = random.Random(29)
    nan = float("nan")
    words = [f"pool-a/wave-{i}" for i in range(6)]
    one_numeric: list[list[Any]] = [
        words,
        [*words[:3], None, ""],
        [*words[:2], 0, 1, 2],
        [*words[:2], 1.0, 0.0, nan, float("nan")],
        [*words[:2], True, False, None],
    ]
    mixed: list[Any] = [*words[:3], 1, 1.0, True, False, 0, None, nan, float("nan"), ""]
    cases = []
    for i in range(3000):
        pool = one_numeric[i % len(one_numeric)] if i % 3 else mixed
        old = [rng.choice(pool) for _ in range(rng.randint(0, 8))]
        new = [rng.choice(pool) for _ in range(rng.randint(0, 8))]
        if i % 5 == 0 and old:  # an edit of the old list: the alignments difflib finds
            new = list(old)
            new[rng.randrange(len(new))] = rng.choice(pool)
            new.insert(rng.randint(0, len(new)), rng.choice(pool))
        cases.append((["summary", "gangs", i, "waves"], old, new))
    fast = [c for c in cases if listdiff.handled(c[1], c[2])]
    assert all(listdiff.handled(old, new) for i, (_, old, new) in enumerate(cases) if i % 3)
    assert not all(listdiff.handled(old, new) for _, old, new in cases[::3])  # mixed numbers: DeepDiff's
    ours = plan_diff._list_changes(cases)
    theirs = plan_diff._deepdiff_changes(cases)
    assert len(theirs) > 3000  # the lists do differ, in every way DeepDiff reports
    assert {d.change for _, d in theirs} == {"added", "removed", "changed"}
    assert sorted(map(repr, ours)) == sorted(map(repr, theirs))
    assert sorted(map(repr, plan_diff._list_changes(fast))) == sorted(map(repr, plan_diff._deepdiff_changes(fast)))


def test_a_diff_of_two_replans_imports_no_deepdiff(tmp_path: Path) -> None:
    """Lists of scalars (gangs' waves) no longer need DeepDiff's 0.2 s of imports (issue 29's `diff`)."""
    import subprocess
    import sys

    a = [["summary", "gangs", 0, "waves"], ["w-1", "w-5"], ["w-1", "w-3", "w-4"]]
    code = (
        "import sys; from dra_migrate.plan import diff as d; "
        f"found = d._list_changes([({a[0]!r}, {a[1]!r}, {a[2]!r})]); "
        "assert [x.change for _, x in found] == ['changed', 'added'], found; "
        "assert 'deepdiff' not in sys.modules, 'deepdiff imported'"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
