"""`dra-migrate report`: golden Markdown of the demo plan, the JSON contract, a journal with a rollback,
the diff against an older plan, the identity, and that nothing secret reaches any format."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from ruamel.yaml import YAML

from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.report.html import render_html
from dra_migrate.report.identity import PATH, who_am_i
from dra_migrate.report.layout import SECTIONS
from dra_migrate.report.model import FORMAT_VERSION, build_report, scrub
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
PLAN = "plans/demo-example.yaml"
DEMO = "fixtures/clusters/demo.yaml"
GOLDEN = ROOT / "tests" / "golden" / "report"
UPDATE = os.environ.get("DRA_MIGRATE_UPDATE_GOLDEN") == "1"

H100 = "pool-h100-pool"
NODE = "gke-demo-h100-pool-hwjlhdgm-5lfh"
ACTOR = "alice@ops-laptop/4242"


def check_golden(path: Path, actual: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
    # `make golden` does not cover this file yet: regenerate it with the variable set.
    fix = "DRA_MIGRATE_UPDATE_GOLDEN=1 pytest tests/unit/test_report.py"
    assert path.exists(), f"missing golden file {path}: run {fix}"
    assert actual == path.read_text(), f"{path.name} differs: run {fix} if the change is intended"


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # Relative paths, as a user types them: the golden file must not depend on where the checkout lives.
    monkeypatch.chdir(ROOT)


def test_golden_markdown_of_the_demo_plan() -> None:
    r = run("report", PLAN, "--snapshot", DEMO, "-o", "markdown")
    assert r.code == 0, r.stderr
    check_golden(GOLDEN / "demo.md", r.stdout)


def test_markdown_has_every_section_and_the_issue_contents() -> None:
    out = run("report", PLAN, "--snapshot", DEMO, "-o", "markdown").stdout
    for _, title in SECTIONS:
        assert f"\n## {title}\n" in out
    assert "dra-migrate 0.1.0" in out
    fingerprint_digest = plan_io.load(ROOT / PLAN)["fingerprint"]["digest"]
    assert "v1.37.2" in out and fingerprint_digest in out  # server version, fingerprint digest
    # Every consumer by name, with its pools and GPU totals.
    chat = ["ml-serving", "Deployment", "chat-api", "nvidia.com/gpu=3", "nvidia.com/gpu=1 × 3", "3", "a100-shared-pool"]
    assert chat in _rows(out)
    assert "shared-gpu-capacity-loss" in out and "keep this pool on the device plugin" in out  # remediation
    assert "```yaml\napiVersion: resource.k8s.io/v1\nkind: DeviceClass" in out
    # Capacity before and after.
    a100 = next(r[:6] for r in _rows(out) if r[:2] == ["a100-shared-pool", "nvidia.com/gpu"])
    assert a100 == ["a100-shared-pool", "nvidia.com/gpu", "64 (4x shared)", "16 (predicted)", "17", "NO"]
    assert f"estimated {plan_io.load(ROOT / PLAN)['summary']['estimatedDuration']}" in out


def test_the_plan_alone_is_a_complete_report() -> None:
    """The plan records capacity and the inventory summary at planning time (its `review`)."""
    r = run("report", PLAN, "-o", "markdown")
    assert r.code == 0, r.stderr
    assert "needs `--snapshot FILE`" not in r.stdout.split("## Inventory")[0]  # capacity is there
    assert "As recorded in the plan at planning time" in r.stdout
    a100 = next(row[:6] for row in _rows(r.stdout) if row[:2] == ["a100-shared-pool", "nvidia.com/gpu"])
    assert a100 == ["a100-shared-pool", "nvidia.com/gpu", "64 (4x shared)", "16 (predicted)", "17", "NO"]
    assert ["h100-pool", "4", "nvidia.com/gpu=32", "nvidia.com/gpu=29", "4", "-"] in _rows(r.stdout)  # pools, consumers
    assert "Not recorded" in r.stdout  # identity needs a live read
    data = json.loads(run("report", PLAN, "-o", "json").stdout)
    assert data["capacitySource"] == "plan" and data["capacityChanges"] is None
    assert data["inventory"]["source"] == "plan" and data["inventory"]["consumerCount"] == 14
    assert data["inventory"]["consumers"] == [] and data["identity"] is None
    assert data["cluster"] == {
        "name": "gke_acme-ml-demo_us-central1_demo",
        "kubernetesVersion": "v1.37.2",
        "source": "plan",
        "location": None,
        "context": None,
        "takenAt": None,
    }


def test_a_plan_without_a_review_record_says_what_it_needs(tmp_path: Path) -> None:
    body = plan_io.body_of(plan_io.load(Path(PLAN)))
    body.pop("review")
    old = tmp_path / "old.yaml"
    plan_io.write(plan_io.seal(body), old)
    r = run("report", str(old), "-o", "markdown")
    assert r.code == 0, r.stderr
    assert r.stdout.count("needs `--snapshot FILE` or a live cluster") == 2  # inventory and capacity
    data = json.loads(run("report", str(old), "-o", "json").stdout)
    assert data["inventory"] is None and data["capacity"] is None


def test_with_the_cluster_the_report_shows_what_changed_since(tmp_path: Path) -> None:
    same = json.loads(run("report", PLAN, "--snapshot", DEMO, "-o", "json").stdout)
    assert same["capacitySource"] == "snapshot" and same["capacityChanges"] == []
    assert (
        "No change: capacity and demand are as the plan recorded them" in run("report", PLAN, "--snapshot", DEMO).stdout
    )
    other = json.loads(
        run("report", PLAN, "--snapshot", "fixtures/clusters/h100-homogeneous.yaml", "-o", "json").stdout
    )
    changed = {(c["pool"], c["field"]) for c in other["capacityChanges"]}
    assert ("a100-shared-pool", "pool") in changed and ("p5-h100", "pool") in changed


def test_stages_show_applicability_and_each_steps_parameters() -> None:
    out = run("report", PLAN).stdout
    assert "**blocked by dra-driver-missing**" in out
    assert "label nvidia.com/gpu.deploy.device-plugin=false" in out  # which label is set to what
    assert "restore-label: label nvidia.com/dra-kubelet-plugin=its original value" in out
    assert "{original." not in out
    # the protect step sets an annotation, and the report must not call it a label (a reviewer would look for one)
    ca = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    assert f"annotation {ca}=true" in out and f"label {ca}" not in out
    html = run("report", PLAN, "-o", "html").stdout
    assert '<span class="badge bad">blocked by dra-driver-missing</span>' in html
    assert '<span class="badge bad">not applicable</span>' in html


def test_json_contract() -> None:
    r = run("report", PLAN, "--snapshot", DEMO, "-o", "json")
    assert r.code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["formatVersion"] == FORMAT_VERSION == 1
    assert list(data) == [
        "formatVersion",
        "tool",
        "cluster",
        "fingerprint",
        "identity",
        "plan",
        "inventory",
        "findings",
        "deviceClasses",
        "capacity",
        "summary",
        "stages",
        "capacitySource",
        "capacityChanges",
        "excludedPools",
        "strategies",
        "diff",
        "timeline",
        "verification",
        "rehearsal",
        "acceptedRisks",
    ]
    assert data["tool"] == {"name": "dra-migrate", "version": "0.1.0"}
    assert data["plan"]["digest"].startswith("sha256:") and data["plan"]["edited"] is False
    assert {c["name"] for c in data["inventory"]["consumers"]} >= {"chat-api", "llama3-finetune", "rl-sweep"}
    assert data["deviceClasses"][0]["manifest"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    a100 = next(c for c in data["capacity"] if c["pool"] == "a100-shared-pool")
    assert (a100["before"], a100["after"], a100["fits"]) == (64, 16, False)
    assert [s["name"] for s in data["stages"]] == ["prepare", H100, "pool-l4-pool", "pool-a100-shared-pool"]
    # The cluster object of every command (issue 18): the plan's name and version, where it was read now.
    assert data["cluster"] == {
        "name": "gke_acme-ml-demo_us-central1_demo",
        "kubernetesVersion": "v1.37.2",
        "source": "snapshot",
        "location": DEMO,
        "context": "gke_acme-ml-demo_us-central1_demo",
        "takenAt": "2026-11-20T10:00:00Z",
    }
    assert data["fingerprint"]["digest"].startswith("sha256:") and data["fingerprint"]["objects"]
    assert {"kind": "Pool", "namespace": None, "name": "a100-shared-pool"} in [
        o for f in data["findings"] for o in f["objects"]
    ]


def test_out_writes_the_file(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    r = run("report", PLAN, "--snapshot", DEMO, "-o", "html", "--out", str(out))
    assert r.code == 0, r.stderr
    assert r.stdout == ""
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    # Self-contained: no scripts, nothing fetched.
    assert "<script" not in text and "src=" not in text and "<link" not in text and "@import" not in text


# --- a journal with a rollback --------------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.s = 0

    def __call__(self) -> str:
        self.s += 7
        return f"2026-11-21T09:{self.s // 60:02d}:{self.s % 60:02d}Z"


def _journal(digest: str) -> list[dict[str, Any]]:
    """Apply: prepare, then the first h100 node until its canary fails; then a rollback of that node."""
    clock, seq, out = _Clock(), iter(range(1, 1000)), []

    def rec(event: str, **fields: Any) -> None:
        out.append({"seq": next(seq), "time": clock(), "event": event, "actor": ACTOR, "planDigest": digest, **fields})

    rec("run-start", phase="apply", stages=["prepare", H100], dryRun=False)
    for step, action in (
        ("prepare/create-deviceclass/gpu-extended.nvidia.com", "create-deviceclass"),
        ("prepare/confirm-dra-driver", "confirm-dra-driver"),
    ):
        rec("start", phase="apply", stage="prepare", stepId=step, action=action, target=step)
        rec("end", phase="apply", stepId=step, result="ok", before=None, after={"created": True})
    node_steps = ["cordon", "drain", "disable-device-plugin", "enable-dra-plugin", "wait-dra-ready", "canary"]
    for action in node_steps:
        sid = f"{H100}/{NODE}/{action}"
        rec("start", phase="apply", stage=H100, wave="wave-1", stepId=sid, action=action, target=f"Node {NODE}")
        if action == "canary":
            rec("end", phase="apply", stepId=sid, result="failed", error="canary pod stayed Pending for 3m")
        else:
            rec("end", phase="apply", stepId=sid, result="ok", before={"x": 1}, after={"x": 2})
    rec("run-end", phase="apply", result="failed", error=f"step {H100}/{NODE}/canary failed")
    rec("run-start", phase="rollback", steps=5)
    for action in reversed(node_steps[:-1]):
        sid = f"{H100}/{NODE}/{action}"
        rec("start", phase="rollback", stepId=sid, action=f"undo-{action}", target=f"Node {NODE}")
        rec("end", phase="rollback", stepId=sid, result="ok")
    rec("run-end", phase="rollback", result="ok")
    return out


@pytest.fixture
def journaled(tmp_path: Path) -> Path:
    """A copy of the example plan with the hand-made journal beside it."""
    plan = tmp_path / "demo.yaml"
    plan.write_bytes((ROOT / PLAN).read_bytes())
    digest = plan_io.load(plan)["digest"]
    Path(f"{plan}.journal.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in _journal(digest)))
    return plan


def _section(markdown: str, heading: str) -> str:
    start = markdown.index(heading)
    end = markdown.find("\n## ", start + len(heading))
    nxt = markdown.find("\n### ", start + len(heading))
    cut = [i for i in (end, nxt) if i != -1]
    return markdown[start : min(cut) if cut else len(markdown)]


def _rows(markdown: str) -> list[list[str]]:
    """The body rows of the GitHub tables in `markdown`, as stripped cells."""
    lines = [ln for ln in markdown.splitlines() if ln.startswith("|")]
    body = [ln for i, ln in enumerate(lines) if i > 1 and not set(ln) <= set("|-")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in body if not ln.startswith("| #")]


def test_timeline_sets_the_rollback_apart(journaled: Path) -> None:
    r = run("report", str(journaled), "-o", "markdown")  # the journal beside the plan, by default
    assert r.code == 0, r.stderr
    out = r.stdout
    assert "2 run(s), 7 step(s) applied (1 failed), 5 undone by rollbacks" in out  # 8 started, 1 failed
    runs = _section(out, "### Runs")
    assert [_rows(runs)[0][i] for i in (0, 1, 5)] == ["1", "apply", "failed"]
    assert [_rows(runs)[1][i] for i in (0, 1, 5)] == ["2", "rollback", "ok"]
    applied = _section(out, "### Applied steps")
    rollbacks = _section(out, "### Rollbacks (5 step(s) undone)")
    assert f"{H100}/{NODE}/canary" in applied and "canary pod stayed Pending for 3m" in applied
    assert "undo-" not in applied  # rollback records are not mixed into the applied steps
    assert rollbacks.count("undo-") == 5
    assert rollbacks.index("undo-enable-dra-plugin") < rollbacks.index("undo-cordon")  # as they ran
    assert ACTOR in rollbacks and "2026-11-21T09:" in rollbacks
    verdict = _section(out, "## Final verification")
    assert "Verdict: rolled-back" in verdict
    assert "Last run: rollback" in verdict
    assert [H100, "wave-1", NODE, "rolled-back", "failed"] in _rows(verdict)
    # The state the steps saw (`before`/`after`) is not copied into the report.
    assert '"x"' not in run("report", str(journaled), "-o", "json").stdout


def test_rollback_in_html_and_json(journaled: Path) -> None:
    html = run("report", str(journaled), "-o", "html").stdout
    assert '<table class="rollback">' in html
    assert html.count("undo-") == 5
    data = json.loads(run("report", str(journaled), "-o", "json").stdout)
    t = data["timeline"]
    assert [x["phase"] for x in t["runs"]] == ["apply", "rollback"]
    assert len(t["apply"]) == 8 and len(t["rollback"]) == 5
    assert all(e["result"] == "ok" for e in t["rollback"])
    failed = [e for e in t["apply"] if e["result"] == "failed"]
    assert [e["stepId"] for e in failed] == [f"{H100}/{NODE}/canary"]
    v = data["verification"]
    assert v["verdict"] == "rolled-back" and v["lastRun"]["phase"] == "rollback"


def test_a_step_that_never_ended_is_shown_as_such(tmp_path: Path) -> None:
    plan = plan_io.load(ROOT / PLAN)
    records = _journal(plan["digest"])[:6]  # run-start, prepare x2, then cordon's start: a crash
    typed = Plan.from_dict(plan)
    rep = build_report(typed, plan_path=PLAN, journal="j", records=records, tool_version="0.1.0").to_dict()
    last = rep["timeline"]["apply"][-1]
    assert last["stepId"].endswith("/cordon") and last["result"] is None and last["ended"] is None
    assert rep["timeline"]["runs"][0]["result"] is None
    assert rep["verification"]["verdict"] == "incomplete"
    assert "never ended" in render_html(rep)


def test_verified_when_every_node_passed() -> None:
    plan = plan_io.load(ROOT / PLAN)
    records: list[dict[str, Any]] = [{"seq": 1, "time": "t0", "event": "run-start", "phase": "apply"}]
    seq = 2
    for stage in plan["stages"]:
        for wave in stage.get("waves") or []:
            for n in wave["nodes"]:
                for action in ("wait-dra-ready", "canary"):
                    sid = f"{stage['name']}/{n['node']}/{action}"
                    records += [
                        {"seq": seq, "time": "t", "event": "start", "phase": "apply", "stepId": sid},
                        {"seq": seq + 1, "time": "t", "event": "end", "phase": "apply", "stepId": sid, "result": "ok"},
                    ]
                    seq += 2
    records.append({"seq": seq, "time": "t1", "event": "run-end", "phase": "apply", "result": "ok"})
    typed = Plan.from_dict(plan)
    v = build_report(typed, plan_path=PLAN, journal="j", records=records, tool_version="0").to_dict()["verification"]
    assert v["verdict"] == "verified"
    assert len(v["nodes"]) == 9 and all(n["canary"] == n["waitDraReady"] == "ok" for n in v["nodes"])


def test_missing_journal_is_an_error() -> None:
    r = run("report", PLAN, "--journal", "/nonexistent/j.jsonl")
    assert r.code == 1 and "does not exist" in r.stderr


# --- the diff, edited plans, identity -------------------------------------------------------------------


def test_against_an_older_plan(tmp_path: Path) -> None:
    older = tmp_path / "older.yaml"
    r = run("plan", "--snapshot", DEMO, "--max-unavailable", "2", "--out", str(older))
    assert r.code == 0, r.stderr
    out = run("report", PLAN, "--against", str(older), "-o", "markdown").stdout
    diff = _section(out, "## Changes against an older plan")
    assert ["parameter", "maxUnavailable", "2 -> 10%"] in _rows(diff)
    assert any(row[0] == "wave" for row in _rows(diff))
    data = json.loads(run("report", PLAN, "--against", str(older), "-o", "json").stdout)
    assert data["diff"]["identical"] is False
    assert data["diff"]["summary"]["parameters"] == [{"name": "maxUnavailable", "old": "2", "new": "10%"}]


def test_an_edited_plan_says_so(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    yaml = YAML()
    doc = yaml.load((ROOT / PLAN).read_text())
    doc["parameters"]["soak"] = "1m"  # the waves soak 5m, longer: consistent (10m would contradict them)
    with path.open("w") as fh:
        yaml.dump(doc, fh)
    assert run("report", str(path)).code == 1  # an unrebased edit is refused, as everywhere
    assert run("plan", "--rebase", str(path)).code == 0
    data = json.loads(run("report", str(path), "-o", "json").stdout)
    assert data["plan"]["edited"] is True
    assert data["plan"]["previousDigests"] == [plan_io.load(ROOT / PLAN)["digest"]]
    assert "edited and rebased" in run("report", str(path)).stdout


class _FakeKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def create(self, path: str, body: Any, query: Any = ()) -> dict[str, Any]:
        self.calls.append((path, body))
        return {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
            "status": {
                "userInfo": {
                    "username": "alice@example.com",
                    "groups": ["system:authenticated", "sre"],
                    "extra": {"authentication.kubernetes.io/credential-id": ["JTI=secret-id"]},
                }
            },
        }


def test_identity_from_a_self_subject_review() -> None:
    kube = _FakeKube()
    who = who_am_i(kube)
    assert kube.calls == [(PATH, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})]
    plan = plan_io.load(ROOT / PLAN)
    rep = build_report(Plan.from_dict(plan), plan_path=PLAN, identity=who, tool_version="0.1.0").to_dict()
    assert rep["identity"] == {
        "username": "alice@example.com",
        "groups": ["system:authenticated", "sre"],
        "via": "SelfSubjectReview",
    }
    html = render_html(rep)
    assert "alice@example.com" in html and "secret-id" not in html


# --- nothing secret -------------------------------------------------------------------------------------

PLANTED = "s3cr3t-env-value-5f1c2e"
TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"


def test_no_env_values_secrets_or_tokens_in_any_format(tmp_path: Path) -> None:
    yaml = YAML()
    snap = yaml.load((ROOT / DEMO).read_text())
    planted = 0
    for item in snap["items"]:
        spec = ((item.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in spec.get("containers") or []:
            c["env"] = [{"name": "HF_TOKEN", "value": PLANTED}, {"name": "SA", "value": TOKEN}]
            c["args"] = [f"--api-key={PLANTED}"]
            planted += 1
    assert planted
    snap["items"].append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf", "namespace": "ml-serving"},
            "data": {"token": "czNjcjN0LWVudi12YWx1ZQ=="},
            "stringData": {"token": PLANTED},
        }
    )
    path = tmp_path / "planted.yaml"
    with path.open("w") as fh:
        yaml.dump(snap, fh)
    journal = tmp_path / "j.jsonl"
    journal.write_text(
        json.dumps({"seq": 1, "time": "t", "event": "run-start", "phase": "apply", "actor": "a"})
        + "\n"
        + json.dumps(
            {
                "seq": 2,
                "time": "t",
                "event": "end",
                "phase": "apply",
                "stepId": "prepare/confirm-dra-driver",
                "result": "failed",
                "error": f"403: Authorization: Bearer {TOKEN} token={PLANTED}",
                "before": {"env": PLANTED},
            }
        )
        + "\n"
    )
    for fmt in ("markdown", "html", "json"):
        r = run("report", PLAN, "--snapshot", str(path), "--journal", str(journal), "--format", fmt)
        assert r.code == 0, r.stderr
        assert "chat-api" in r.stdout  # the consumers are there...
        assert PLANTED not in r.stdout, fmt  # ...but not their env values, args or Secrets
        assert TOKEN not in r.stdout and "czNjcjN0" not in r.stdout, fmt
        # Markdown escapes the "<" (raw, GitHub drops `<redacted>` as an unknown tag).
        redacted = {"html": "&lt;redacted&gt;", "markdown": "\\<redacted>"}.get(fmt, "<redacted>")
        assert "Bearer " + redacted in r.stdout, fmt


def test_scrub() -> None:
    assert scrub(None) is None
    assert scrub("ok") == "ok"
    assert scrub(f"Authorization: Bearer {TOKEN}") == "Authorization: Bearer <redacted>"
    assert scrub(f"got {TOKEN} back") == "got <redacted> back"
    assert scrub('{"password": "hunter2"}') == '{"password": "<redacted>"}'


# --- HTML safety ----------------------------------------------------------------------------------------


def test_html_escapes_everything() -> None:
    plan = plan_io.load(ROOT / PLAN)
    evil = "<img src=x onerror=alert(1)>"
    plan["findings"] = [
        {"id": "x", "severity": "warning", "message": evil, "objects": [evil], "remediation": f"`{evil}`"}
    ]
    plan["cluster"] = f"</title>{evil}"
    html = render_html(build_report(Plan.from_dict(plan), plan_path=evil, tool_version="0").to_dict())
    assert evil not in html and "</title><img" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_report_counts_disruption_per_gang() -> None:
    out = run("report", PLAN, "-o", "markdown").stdout
    gangs = plan_io.load(ROOT / PLAN)["summary"]["gangs"]
    assert gangs, "the demo plan has a training gang"
    assert "Disruption per gang" in out
    for g in gangs:
        row = next(r for r in _rows(out) if r and r[0] == g["gang"])
        assert row[1:] == [", ".join(g["waves"]), str(len(g["waves"]))]
