"""`diff`'s details walk mappings and lists of mappings itself (issue 29: DeepDiff's bookkeeping made a
diff of two 2,000-node plans cost ~3x loading them). What it reports must stay exactly what DeepDiff
reported over the whole plan, and DeepDiff must not run for the bulk of a plan (its nodes and waves).
"""

from __future__ import annotations

import copy
import random
from typing import Any

import deepdiff
import pytest
from deepdiff.helper import NotPresent

from dra_migrate.plan import diff

_CHANGE = diff._CHANGE


def _reference(a: dict[str, Any], b: dict[str, Any]) -> list[diff.Detail]:
    """The details as computed before: one DeepDiff over the two whole views."""
    va, vb = diff._differing(diff._view(a), diff._view(b))
    tree = deepdiff.DeepDiff(
        va, vb, view="tree", threshold_to_diff_deeper=0,
        ignore_order_func=lambda level: level.path() == "root['summary']['pools']",
    )  # fmt: skip
    found: list[tuple[list[Any], diff.Detail]] = []
    for report, levels in tree.items():
        change = _CHANGE.get(report)
        if change is None:
            continue
        for level in levels:
            seg = level.path(output_format="list")
            old = None if isinstance(level.t1, NotPresent) else level.t1
            new = None if isinstance(level.t2, NotPresent) else level.t2
            found.append((seg, diff.Detail(diff._path(seg), change, old, new)))
    found.extend(diff._reorders(a, b))
    order = diff._stage_rank(diff._stage_order(a), diff._stage_order(b))
    found.sort(key=lambda item: diff._detail_key(item[0], item[1], order))
    return [d for _, d in found]


def _plan(rng: random.Random, nodes: int) -> dict[str, Any]:
    waves = [{"name": f"wave-{w + 1}", "evictedPods": rng.randint(0, 9), "nodes": []} for w in range(3)]
    for i in range(nodes):
        waves[rng.randrange(3)]["nodes"].append(
            {"node": f"n{i}", "gpuPods": rng.randint(0, 4), "labels": {"a": "1"}, "devices": [{"n": i}]}
        )
    return {
        "parameters": {"maxUnavailable": "10%", "soak": "5m"},
        "findings": [{"id": "x", "severity": "warning", "objects": ["Pod a/b"], "message": "m"}],
        "summary": {
            "pools": ["p1", "p2"],
            "gangs": [{"gang": f"g{i}", "waves": ["p1/wave-1", "p1/wave-2"][: 1 + i % 2]} for i in range(6)],
            "nested": [[1, 2], [3, {"k": "v"}]],
        },
        "stages": [
            {"name": "prepare", "steps": [{"id": "s1", "action": "create", "params": {"v": [1, 2, 3]}}]},
            {"name": "p1", "pool": "p1", "nodeSteps": [{"id": "cordon"}, {"id": "drain"}], "waves": waves},
        ],
    }


def _mutate(rng: random.Random, plan: dict[str, Any]) -> None:
    """One random edit of the kinds plans differ by: values, types, lengths, moves, list contents."""
    summary, stage = plan["summary"], plan["stages"][1]
    choice = rng.randrange(12)
    if choice == 0:  # a node moves to another wave
        src, dst = rng.sample(stage["waves"], 2)
        if src["nodes"]:
            dst["nodes"].append(src["nodes"].pop(rng.randrange(len(src["nodes"]))))
    elif choice == 1:
        summary["gangs"][rng.randrange(len(summary["gangs"]))]["waves"].append("p1/wave-3")
    elif choice == 2:
        summary["gangs"].insert(rng.randrange(len(summary["gangs"]) + 1), {"gang": "new", "waves": []})
    elif choice == 3 and summary["gangs"]:
        summary["gangs"].pop(rng.randrange(len(summary["gangs"])))
    elif choice == 4:
        summary["pools"].reverse()  # order-free: no change
    elif choice == 5:
        summary["pools"].append("p3")
    elif choice == 6:
        summary["nested"][1][1] = rng.choice([{"k": "w"}, ["k"], None, 1.0, 1, True, "v"])
    elif choice == 7:
        summary["nested"].append([rng.randint(0, 3)])
    elif choice == 8:
        plan["parameters"]["soak"] = rng.choice(["5m", "10m", None, 5, {"m": 5}])
    elif choice == 9:
        plan["stages"][0]["steps"][0]["params"]["v"] = rng.choice([[1, 3], [3, 2, 1], [1, 2, 3, 4], [], "x"])
    elif choice == 10:
        wave = rng.choice(stage["waves"])
        for n in wave["nodes"][:2]:
            n["devices"].append({"n": -1}) if rng.random() < 0.5 else n.pop("labels", None)
    else:
        plan["findings"].append({"id": "y", "severity": "blocker", "objects": [], "message": "n"})


@pytest.mark.parametrize("seed", range(60))
def test_details_are_what_deepdiff_reported(seed: int) -> None:
    rng = random.Random(seed)
    a = _plan(rng, 40)
    b = copy.deepcopy(a)
    for _ in range(rng.randint(1, 6)):
        _mutate(rng, b)
    assert diff.details(a, b) == _reference(a, b)
    assert diff.details(b, a) == _reference(b, a)


def test_nodes_moving_between_waves_do_not_run_deepdiff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk of a plan (its nodes and waves) is compared without DeepDiff: one change per moved node."""
    rng = random.Random(1)
    a = _plan(rng, 600)
    b = copy.deepcopy(a)
    w1, w2, _ = b["stages"][1]["waves"]
    moved = len(w1["nodes"])
    w2["nodes"].extend(w1["nodes"])
    w1["nodes"] = []
    calls = []
    init = deepdiff.DeepDiff.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(deepdiff.DeepDiff, "__init__", counting)  # the class itself: every importer's name
    found = diff.details(a, b)
    assert calls == []
    assert len(found) == moved and all(d.path.endswith(".wave") and d.change == "changed" for d in found)


def test_many_changed_lists_of_scalars_need_no_deepdiff_and_the_rest_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """summary.gangs of a large plan: a list of wave names per gang, each of which may differ, compared in
    order without DeepDiff (`plan/listdiff.py`); what is left to DeepDiff (summary.pools, compared as a
    set) costs its fixed price once, not once per list."""
    rng = random.Random(2)
    a = _plan(rng, 10)
    a["summary"]["gangs"] = [{"gang": f"g{i}", "waves": ["p1/wave-1", "p1/wave-2"]} for i in range(300)]
    b = copy.deepcopy(a)
    for g in b["summary"]["gangs"]:
        g["waves"] = ["p1/wave-2"]
    calls = []
    init = deepdiff.DeepDiff.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("view") == "tree":  # a call of ours, not one DeepDiff makes inside another
            calls.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(deepdiff.DeepDiff, "__init__", counting)
    found = diff.details(a, b)
    assert calls == []
    assert len(found) == 300 and {d.change for d in found} == {"removed"}
    a["summary"]["pools"], b["summary"]["pools"] = ["p1", "p2"], ["p2", "p3"]
    found = diff.details(a, b)
    assert len(calls) == 1
    assert len(found) == 302 and found == _reference(a, b)
