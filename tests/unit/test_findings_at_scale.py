"""Findings an operator can act on at fleet size (issue 28, item 5): one block per rule and cause with the
objects counted, every finding in -o wide and -o json; --list-rules; explain; the ignore file; a cluster
with no GPUs says so in one line.

Hostile case: a 500-node fleet's `check` printed 58 near-identical warnings in 257 lines."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from dra_migrate.checks.catalog import all_rules
from dra_migrate.checks.explain import RULE_DOCS
from dra_migrate.checks.grouping import group_findings
from dra_migrate.checks.ignore import Acceptance, load_ignore_file, split_accepted
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")


def gang_finding(i: int) -> Finding:
    return Finding(
        "gang-capacity-after",
        Severity.WARNING,
        f"JobSet ml/job-{i} fits during gpu-l4 only if other pods are evicted",
        "check the priority of the pods on those nodes",
        (ObjectRef("JobSet", f"job-{i}", "ml"),),
    )


def test_findings_of_one_rule_and_cause_are_one_group_with_every_object() -> None:
    findings = [gang_finding(i) for i in range(58)]
    findings.append(Finding("gang-capacity-after", Severity.WARNING, "other", "another fix", ()))
    groups = group_findings(f.to_dict() for f in findings)
    assert [g.count for g in groups] == [58, 1]
    assert len(groups[0].objects) == 58  # nothing lost: JSON carries every object


def test_check_fits_a_screen_and_json_loses_nothing(tmp_path: Path) -> None:
    table = run("check", "--snapshot", DEMO)
    wide = run("check", "--snapshot", DEMO, "-o", "wide")
    data = json.loads(run("check", "--snapshot", DEMO, "-o", "json").stdout)
    assert table.code == wide.code == 2
    assert sum(g["count"] for g in data["groups"]) == len(data["findings"])
    grouped = {(g["id"], g["severity"]): g["count"] for g in data["groups"]}
    for f in data["findings"]:
        assert (f["id"], f["severity"]) in grouped
    blocks = [ln for ln in table.stdout.splitlines() if ln.split(" ")[0] in ("BLOCKER", "WARNING", "INFO")]
    assert len(blocks) == len(data["groups"])
    wide_blocks = [ln for ln in wide.stdout.splitlines() if ln.split(" ")[0] in ("BLOCKER", "WARNING", "INFO")]
    assert len(wide_blocks) == len(data["findings"])


def test_list_rules_and_explain_cover_every_registered_rule() -> None:
    ids = [r.id for r in all_rules()]
    assert set(RULE_DOCS) >= set(ids), set(ids) - set(RULE_DOCS)
    listed = run("check", "--list-rules", "-o", "name")
    assert listed.code == 0 and listed.stdout.split() == ids
    for rule_id in ids:
        r = run("explain", rule_id, "-o", "json")
        assert r.code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["id"] == rule_id and doc["whyItMatters"] and doc["fix"] and doc["when"]
    r = run("explain", "gang-capacity")
    assert r.code == 1 and "did you mean gang-capacity-after" in r.stderr


IGNORE = """- rule: dra-driver-missing
  reason: the DRA driver goes in with the change window on Friday
  expires: {expires}
- rule: gang-capacity-after
  objects: [JobSet ml/job-1]
  reason: migrated at night
"""


def test_the_ignore_file_accepts_findings_with_a_reason_until_it_expires(tmp_path: Path) -> None:
    f = tmp_path / "ignore.yaml"
    f.write_text(IGNORE.format(expires="2030-01-31"))
    acceptances = load_ignore_file(f, [r.id for r in all_rules()])
    blocker = Finding("dra-driver-missing", Severity.BLOCKER, "m", "r", ())
    kept, accepted, expired = split_accepted(
        [blocker, gang_finding(1), gang_finding(2)], acceptances, dt.date(2029, 12, 1)
    )
    assert [f.objects for f in kept] == [gang_finding(2).objects]  # only job-1 was accepted
    assert [a.finding.id for a in accepted] == ["dra-driver-missing", "gang-capacity-after"]
    assert not expired
    kept, accepted, expired = split_accepted([blocker], acceptances, dt.date(2030, 2, 1))
    assert kept == [blocker] and not accepted and [a.rule for a in expired] == ["dra-driver-missing"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- rule: no-such-rule\n  reason: x\n", "is not a rule"),
        ("- rule: dra-driver-missing\n", "reason is required"),
        ("- rule: dra-driver-missing\n  reason: x\n  expires: soon\n", "not a date"),
        ("- rule: dra-driver-missing\n  reason: x\n  until: 2030-01-01\n", "unknown key 'until'"),
        ("rule: dra-driver-missing\n", "a list"),
    ],
)
def test_a_malformed_ignore_file_is_one_line_naming_the_entry(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "ignore.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=says):
        load_ignore_file(f, [r.id for r in all_rules()])


def test_check_and_plan_honour_the_ignore_file(tmp_path: Path) -> None:
    before = json.loads(run("check", "--snapshot", DEMO, "-o", "json").stdout)
    blockers = sorted({f["id"] for f in before["findings"] if f["severity"] == "blocker"})
    f = tmp_path / "ignore.yaml"
    f.write_text("".join(f"- rule: {b}\n  reason: accepted for the test\n" for b in blockers))
    r = run("check", "--snapshot", DEMO, "--ignore-file", str(f), "-o", "json")
    after = json.loads(r.stdout)
    assert r.code == 0 and after["summary"]["blocker"] == 0
    assert {a["id"] for a in after["accepted"]} == set(blockers)
    assert all(a["reason"] == "accepted for the test" for a in after["accepted"])
    table = run("check", "--snapshot", DEMO, "--ignore-file", str(f)).stdout
    assert "Accepted risks" in table
    plan = tmp_path / "plan.yaml"
    assert run("plan", "--snapshot", DEMO, "--ignore-file", str(f), "--out", str(plan)).code == 0
    doc = plan_io.load(plan)
    assert doc["applicable"] is True
    assert {a["id"] for a in doc["review"]["acceptedRisks"]} == set(blockers)
    report = run("report", str(plan)).stdout
    assert "Accepted risks" in report and "accepted for the test" in report


def test_a_cluster_without_gpus_says_so_in_one_line_exits_0_and_writes_no_plan(tmp_path: Path) -> None:
    snap = tmp_path / "cpu.yaml"
    snap.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Node, metadata: {name: n1, uid: n1}, status: {capacity: {cpu: '8'}}}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: d, uid: u1}\n"
        "  spec: {nodeName: n1, containers: [{name: c, resources: {limits: {cpu: 1}}}]}\n"
    )
    r = run("check", "--snapshot", str(snap))
    assert r.code == 0 and r.stdout == "" and "nothing to migrate" in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.strip()]) == 1
    r = run("check", "--snapshot", str(snap), "-o", "json")  # the report's own shape, with no findings
    doc = json.loads(r.stdout)
    assert r.code == 0 and doc["nothingToMigrate"] is True and doc["findings"] == [] and doc["groups"] == []
    assert {"formatVersion", "kubernetesVersion", "summary", "capacity", "cluster"} <= set(doc)
    out = tmp_path / "plan.yaml"
    r = run("plan", "--snapshot", str(snap), "--out", str(out), "--detailed-exitcode")
    assert r.code == 0 and "nothing to migrate" in r.stderr and not out.exists()


def test_an_acceptance_covers_only_the_objects_it_names() -> None:
    a = Acceptance("gang-capacity-after", "why", ("JobSet ml/job-1",))
    assert a.covers(gang_finding(1)) and not a.covers(gang_finding(2))
