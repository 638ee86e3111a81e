"""A plan made from a `dra-migrate snapshot` file holds against the live cluster it was taken from.

`snapshot` redacts env values, args, commands and probe commands (cluster/redact.py); the plan's fingerprint
hashed each GPU consumer's spec as the snapshot held it, and `diff`/`apply` hashed the live spec, values and all:
every consumer with an env value (nearly all of them: NCCL_DEBUG, a model path) was "changed", and the plan
"NO LONGER HOLDS" the moment it was made. The documented workflow (snapshot, plan --snapshot, apply) could not
apply. A consumer whose spec differs only in what a snapshot redacts is not drift; any other change still is.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from dra_migrate.cluster.redact import SnapshotFilter
from tests.unit.test_plan_diff import demo_doc, diff_json, gpu_request, make_plan, write_snapshot


def _as_snapshot_writes_it(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["items"] = list(SnapshotFilter(keep_env=False).stream(out["items"]))
    return out


def test_a_plan_from_a_redacted_snapshot_is_no_drift_against_the_live_objects(tmp_path: Path) -> None:
    live = demo_doc()
    redacted = _as_snapshot_writes_it(live)
    assert "<redacted>" in json.dumps(redacted)  # the fixture's consumers do carry env values and args
    plan = make_plan(write_snapshot(redacted, tmp_path / "snap.json"), tmp_path / "plan.yaml")
    r, d = diff_json(str(plan), "--snapshot", str(write_snapshot(live, tmp_path / "live.json")))
    assert r.code == 0, d["summary"]
    assert d["holds"] and not d["objects"] and not d["consumers"]["changed"]


def test_a_real_change_to_a_consumer_is_still_drift(tmp_path: Path) -> None:
    live = demo_doc()
    plan = make_plan(write_snapshot(_as_snapshot_writes_it(live), tmp_path / "snap.json"), tmp_path / "plan.yaml")
    gpu_request(live, "ml-serving", "chat-api", "4")
    r, d = diff_json(str(plan), "--snapshot", str(write_snapshot(live, tmp_path / "live.json")))
    assert r.code == 2 and not d["holds"]
    assert [c["name"] for c in d["consumers"]["changed"]] == ["chat-api"]


def test_an_env_change_against_a_plan_of_the_whole_specs_is_still_drift(tmp_path: Path) -> None:
    """A plan made from the live objects (or a --keep-env snapshot) hashed their values: as strict as before."""
    live = demo_doc()
    plan = make_plan(write_snapshot(live, tmp_path / "snap.json"), tmp_path / "plan.yaml")
    for o in live["items"]:
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "chat-api":
            o["spec"]["template"]["spec"]["containers"][0].setdefault("env", []).append({"name": "X", "value": "y"})
    r, d = diff_json(str(plan), "--snapshot", str(write_snapshot(live, tmp_path / "live.json")))
    assert r.code == 2 and [c["name"] for c in d["consumers"]["changed"]] == ["chat-api"]
