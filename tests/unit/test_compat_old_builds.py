"""An operator upgrades dra-migrate in the middle of a migration: plans and a journal written by earlier
builds (tests/unit/data/compat, made by old commits; its README says how) read by this one.

A plan this version cannot verify is refused with one line naming the command that regenerates it, never as
a hand edit (which sends the reader to `plan --rebase`, which refuses it too); one it reads is read whole,
and its journal's step states, failures and rollbacks mean what they meant to the run that wrote them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.execute.backlog import Backlog
from dra_migrate.execute.journal import read_journal
from dra_migrate.execute.progress import progress_of
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.drift import drift
from dra_migrate.plan.model import Plan
from tests.unit.cli import run

DATA = Path(__file__).parent / "data" / "compat"
ROOT = Path(__file__).parents[2]
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
NODE = "gke-demo-h100-pool-hwjlhdgm-7tpk"
POD = ("Pod", "research", "cuda-debug-jsmith")
READ = ("plan-b407c04-format1.yaml", "plan-159b71c-format2.yaml")


@pytest.fixture
def old_release(tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    shutil.copy(DATA / "plan-0.1.0.yaml", path)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("show", "{p}"),
        ("show", "{p}", "-o", "json"),
        ("show", "{p}", "--allow-edited"),
        ("status", "{p}"),
        ("diff", "{p}", "{p}"),
        ("diff", "{p}", "--snapshot", str(DEMO)),
        ("report", "{p}", "--out", "{p}.md"),
        ("rollback", "{p}", "--yes", "--dry-run"),
        ("apply", "{p}", "--dry-run"),
        ("plan", "--rebase", "{p}"),
    ],
    ids=lambda a: " ".join(x for x in a if "{" not in x and "/" not in x),
)
def test_a_0_1_0_plan_is_refused_in_one_line_naming_the_command_that_regenerates_it(
    old_release: Path, args: tuple[str, ...]
) -> None:
    before = old_release.read_bytes()
    r = run(*(a.replace("{p}", str(old_release)) for a in args), env={"KUBECONFIG": "/nonexistent"})
    assert r.code == 1, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert "0.1.0 release (2026-11-30)" in line and "dra-migrate plan --kubeconfig" in line, line
    # not an edit: rebase cannot convert it (its canary step's params are not the ones this version writes)
    assert "edited" not in line and "rebase" not in line, line
    assert old_release.read_bytes() == before  # nothing rewritten


@pytest.mark.parametrize("name", READ)
def test_plans_of_later_builds_are_read_whole(tmp_path: Path, name: str) -> None:
    path = tmp_path / "plan.yaml"
    shutil.copy(DATA / name, path)
    plan = Plan.from_dict(plan_io.load(path))
    assert [n.node for _s, _w, n in plan.nodes()] == [NODE]
    for args in (("show", str(path)), ("status", str(path)), ("show", str(path), "-o", "json")):
        r = run(*args)
        assert r.code == 0, r.stderr
        assert NODE in r.stdout


@pytest.mark.parametrize("name", READ)
def test_a_plan_of_an_earlier_build_shows_no_drift_on_an_object_that_did_not_change(name: str) -> None:
    """Its bare pod's uid and resourceVersion are the cluster's now, so the pod did not change (the API
    server moves resourceVersion with every write); its content hash differs only because this build keeps
    more of a pod (`schedulerName`, cluster/state.py POD_SPEC_KEYS). A resumed apply of it was refused as
    stale ("Pod research/cuda-debug-jsmith changed")."""
    plan = Plan.from_dict(plan_io.load(DATA / name))
    d = drift(plan, load_snapshot(DEMO))
    changed = {(o.kind, o.namespace, o.name) for o in d.objects}
    assert POD not in changed, d.objects
    assert not [c for c in d.consumers_changed if c["name"] == POD[2]], d.consumers_changed


def test_a_journal_of_an_earlier_build_reads_as_its_run_left_the_cluster(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    shutil.copy(DATA / "plan-b407c04-format1.yaml", path)
    journal = tmp_path / "plan.yaml.journal.jsonl"
    shutil.copy(DATA / "plan-b407c04-format1.yaml.journal.jsonl", journal)
    plan = Plan.from_dict(plan_io.load(path))
    records = read_journal(journal)
    assert len(records) == 24
    p = progress_of(plan, records)
    step = f"pool-h100-pool/{NODE}/" + "{}"
    applied = {"prepare/create-deviceclass/gpu-extended.nvidia.com", "prepare/confirm-dra-driver"}
    applied |= {step.format(a) for a in ("cordon", "drain")}
    assert p.done_steps("apply") == applied  # what resume skips, and rollback undoes
    assert p.undoable() == applied
    rolled = {step.format(a) for a in ("wait-dra-ready", "enable-dra-plugin", "disable-device-plugin")}
    assert p.done_steps("rollback") == rolled
    # Its run-starts have no pendingBacklog: that run's health gate judged every Pending GPU pod, as the
    # next run does (Backlog() holds no pod and no creation time).
    assert Backlog.of_journal(records) == Backlog()
    r = run("status", str(path), "-o", "json")
    assert r.code == 0, r.stderr
    doc = orjson.loads(r.stdout)
    assert (doc["runs"], doc["steps"], doc["done"], doc["rolledBack"], doc["failed"]) == (2, 9, 4, 3, [])
    assert doc["lastRun"]["phase"] == "rollback" and doc["lastRun"]["result"] == "ok"
    assert doc["cluster"]["name"] == "gke_acme-ml-demo_us-central1_demo"


def test_a_pod_that_did_change_is_still_drift_under_an_earlier_builds_hash() -> None:
    """The earlier hashes are accepted only for what those builds did not keep: a changed GPU request is a
    change with or without a moved resourceVersion (a hand-edited snapshot keeps it)."""
    plan = Plan.from_dict(plan_io.load(DATA / "plan-b407c04-format1.yaml"))
    for bump in (False, True):
        state = load_snapshot(DEMO)
        pod = next(p for p in state.of("Pod") if p["metadata"]["name"] == POD[2])
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
        if bump:
            pod["metadata"]["resourceVersion"] = "9999999"
        changed = {(o.kind, o.namespace, o.name): o.change for o in drift(plan, state).objects}
        assert changed.get(POD) == "changed", (bump, changed)


def test_every_pod_spec_key_kept_is_one_earlier_builds_hashed_or_one_added_since() -> None:
    """A key added to what a pod keeps changes every Pod's content hash: it must be listed as added, or
    every plan made before it reads as drifted on its bare GPU pods."""
    from dra_migrate.cluster.state import POD_SPEC_KEYS
    from dra_migrate.plan.fingerprint import POD_SPEC_KEYS_ADDED, POD_SPEC_KEYS_BEFORE

    assert set(POD_SPEC_KEYS) == set(POD_SPEC_KEYS_BEFORE) | set(POD_SPEC_KEYS_ADDED)
    assert not set(POD_SPEC_KEYS_BEFORE) & set(POD_SPEC_KEYS_ADDED)
