"""Cluster identity (issue 28, item 4): snapshots, plans and journals record which cluster they are of, and
report, diff, status, rehearse and apply refuse to mix two clusters with one line naming both.

Hostile case: a plan made from cluster A and a snapshot of cluster B went into one report without a word,
and `diff` called every difference drift.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dra_migrate.cluster.identity import ClusterIdentity, refuse_other_cluster
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.errors import InputError
from dra_migrate.execute.journal import journal_path
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.drift import drift
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
UID_A = "0c7a1d2e-aaaa-4f00-8000-000000000001"
UID_B = "0c7a1d2e-bbbb-4f00-8000-000000000002"


def snapshot_of(tmp_path: Path, uid: str, name: str) -> Path:
    text = DEMO.read_text().replace("\nmetadata:\n  context:", f"\nmetadata:\n  clusterUID: {uid}\n  context:", 1)
    assert f"clusterUID: {uid}" in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b = snapshot_of(tmp_path, UID_A, "a"), snapshot_of(tmp_path, UID_B, "b")
    plan = tmp_path / "plan.yaml"
    r = run("plan", "--snapshot", str(a), "--out", str(plan))
    assert r.code == 0, r.stderr
    return a, b, plan


def one_line_naming_both(stderr: str) -> bool:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error")]
    return len(lines) == 1 and UID_A in lines[0] and UID_B in lines[0] and "--allow-other-cluster" in lines[0]


def test_snapshot_and_plan_record_the_cluster(two: tuple[Path, Path, Path]) -> None:
    a, _, plan = two
    assert load_snapshot(a).source.identity.uid == UID_A
    recorded = plan_io.load(plan)["clusterIdentity"]
    assert recorded["uid"] == UID_A and recorded["server"] == "https://34.118.224.17"
    assert recorded["context"] == "gke_acme-ml-demo_us-central1_demo"


def test_the_identity_is_digested(two: tuple[Path, Path, Path]) -> None:
    _, _, plan = two
    plan.write_text(plan.read_text().replace(UID_A, UID_B))
    with pytest.raises(InputError):
        plan_io.load(plan)


def test_diff_refuses_another_clusters_state_instead_of_calling_it_drift(two: tuple[Path, Path, Path]) -> None:
    a, b, plan = two
    assert run("diff", str(plan), "--snapshot", str(a)).code == 0
    r = run("diff", str(plan), "--snapshot", str(b))
    assert r.code == 1 and one_line_naming_both(r.stderr), r.stderr
    assert r.stdout == ""
    assert run("diff", str(plan), "--snapshot", str(b), "--allow-other-cluster").code == 0


def test_diff_of_two_plans_of_two_clusters_is_refused_unless_allowed(two: tuple[Path, Path, Path]) -> None:
    _, b, plan = two
    other = plan.with_name("other.yaml")
    assert run("plan", "--snapshot", str(b), "--out", str(other)).code == 0
    r = run("diff", str(plan), str(other))
    assert r.code == 1 and one_line_naming_both(r.stderr), r.stderr
    assert run("diff", str(plan), str(other), "--allow-other-cluster").code in (0, 2)


def test_report_refuses_a_snapshot_or_older_plan_of_another_cluster(two: tuple[Path, Path, Path]) -> None:
    a, b, plan = two
    assert run("report", str(plan), "--snapshot", str(a)).code == 0
    r = run("report", str(plan), "--snapshot", str(b))
    assert r.code == 1 and one_line_naming_both(r.stderr), r.stderr
    assert run("report", str(plan), "--snapshot", str(b), "--allow-other-cluster").code == 0
    other = plan.with_name("other.yaml")
    assert run("plan", "--snapshot", str(b), "--out", str(other)).code == 0
    r = run("report", str(plan), "--against", str(other))
    assert r.code == 1 and one_line_naming_both(r.stderr), r.stderr


def test_rehearse_refuses_another_clusters_state_before_building_a_twin(two: tuple[Path, Path, Path]) -> None:
    _, b, plan = two
    r = run("rehearse", str(plan), "--snapshot", str(b))
    assert r.code == 1 and UID_A in r.stderr and UID_B in r.stderr, r.stderr


def test_apply_refuses_a_plan_of_another_cluster(two: tuple[Path, Path, Path]) -> None:
    """apply's staleness check (session.refuse_if_stale, under the lock) goes through drift."""
    a, b, plan = two
    doc = plan_io.load(plan)
    drift(doc, load_snapshot(a))
    with pytest.raises(InputError, match="--allow-other-cluster") as e:
        drift(doc, load_snapshot(b))
    assert UID_A in str(e.value) and UID_B in str(e.value)


def test_status_refuses_a_journal_that_ran_on_another_cluster(two: tuple[Path, Path, Path]) -> None:
    _, _, plan = two
    digest = plan_io.load(plan)["digest"]
    record = {
        "seq": 1,
        "time": "2026-01-01T00:00:00Z",
        "event": "run-start",
        "phase": "apply",
        "planDigest": digest,
        "cluster": {"uid": UID_B, "server": "https://10.9.9.9", "context": "other"},
    }
    journal_path(plan).write_bytes(orjson.dumps(record) + b"\n")
    r = run("status", str(plan))
    assert r.code == 1 and UID_A in r.stderr and UID_B in r.stderr, r.stderr
    record["cluster"] = {"uid": UID_A}
    journal_path(plan).write_bytes(orjson.dumps(record) + b"\n")
    assert run("status", str(plan)).code == 0


def test_inputs_that_do_not_know_their_cluster_are_not_refused() -> None:
    known = ClusterIdentity(UID_A, "https://a", "a")
    refuse_other_cluster(known, "x", ClusterIdentity(None, None, "b"), "y")
    refuse_other_cluster(None, "x", known, "y")
    with pytest.raises(InputError) as e:
        refuse_other_cluster(known, "the plan", ClusterIdentity(UID_B, "https://b", "b"), "the cluster read")
    assert "\n" not in str(e.value) and "a (https://a" in str(e.value) and "b (https://b" in str(e.value)
