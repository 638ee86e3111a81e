"""What a rehearsal reads from the twin's journal (waves, stalls, Pending pods, durations unscaled), the
rehearsal file the report accepts (of this plan only), and the report's "Rehearsal on a twin" section.

The rehearsal itself runs on a private control plane: tests/integration/test_rehearse.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.rehearse.model import _waves_of, load_rehearsal, real_correction
from tests.unit.cli import run

HALF = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "half-migrated.yaml"

PLAN = "plans/demo-example.yaml"
T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
NODE_A, NODE_B = "gpu-a", "gpu-b"
REASON = "0/12 nodes are available: 3 Insufficient nvidia.com/gpu."


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def step(t0: float, t1: float, stage: str, wave: str, node: str, action: str, **end: Any) -> list[dict[str, Any]]:
    sid = f"{stage}/{node}/{action}"
    return [
        {"event": "start", "phase": "apply", "stage": stage, "wave": wave, "node": node, "stepId": sid, "time": at(t0)},
        {"event": "end", "phase": "apply", "stepId": sid, "time": at(t1), "result": "ok", **end},
    ]


def test_waves_are_read_from_the_journal_and_unscaled() -> None:
    scale = 0.1
    records = [
        *step(0, 2, "pool-a", "wave-1", NODE_A, "drain"),
        *step(2, 4, "pool-a", "wave-1", NODE_A, "canary"),
        {"event": "gate", "stage": "pool-a", "wave": "wave-1", "result": "ok", "pending": [], "time": at(5)},
        *step(
            10,
            13,
            "pool-a",
            "wave-2",
            NODE_B,
            "drain",
            result="failed",
            error="drain of node gpu-b: blocked",
            details={"budgets": ["ml/keep-one"], "pods": ["ml/trainer-0", "ml/trainer-1"]},
        ),
        {"event": "start", "phase": "rollback", "stepId": f"pool-a/{NODE_B}/drain", "time": at(14)},
        {"event": "end", "phase": "rollback", "stepId": f"pool-a/{NODE_B}/drain", "result": "ok", "time": at(15)},
    ]
    one, two = _waves_of(records, scale, {}, real_s=1.5)
    # Wave 1: 5 s of scaled time is 50 s, less what its canary ran at real speed (1.5 s, not 15 s).
    assert (one.stage, one.wave, one.result, one.gate) == ("pool-a", "wave-1", "ok", "ok")
    assert one.seconds == pytest.approx(50 - real_correction(1.5, scale)) == pytest.approx(36.5)
    assert one.canaries == [{"node": NODE_A, "result": "ok"}]
    # Wave 2: the stall names both pods and the budget; the rollback marks it; no canary, no correction.
    assert two.result == "rolled-back" and two.gate is None
    assert two.stalled_drains == [
        {"pod": "ml/trainer-0", "budgets": ["ml/keep-one"]},
        {"pod": "ml/trainer-1", "budgets": ["ml/keep-one"]},
    ]
    assert two.seconds == pytest.approx(50.0)
    assert two.error == "drain of node gpu-b: blocked"


def test_pending_pods_of_a_failed_gate_carry_the_reason_seen() -> None:
    records = [
        *step(0, 1, "pool-a", "wave-1", NODE_A, "drain"),
        {"event": "gate", "stage": "pool-a", "wave": "wave-1", "result": "failed", "pending": ["ml/a", "ml/b"],
         "time": at(2)},
    ]  # fmt: skip
    reasons = {"ml/a": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}
    [w] = _waves_of(records, 1.0, reasons, real_s=0)
    assert w.result == "failed" and w.gate == "failed"
    assert w.pending_pods == [{"pod": "ml/a", "reason": reasons["ml/a"]}, {"pod": "ml/b", "reason": "unknown"}]


def rehearsal_of(digest: str) -> dict[str, Any]:
    return {
        "formatVersion": 1,
        "plan": {"digest": digest},
        "result": "failed",
        "failure": "wave pool-h100-pool/wave-1 failed",
        "timeScale": 0.1,
        "rehearsedDuration": "6m10s",
        "rehearsedSeconds": 370.0,
        "estimatedDuration": "5m40s",
        "waves": [
            {"stage": "prepare", "wave": None, "result": "ok", "seconds": 1.0, "stalledDrains": [], "pendingPods": [],
             "canaries": [], "gate": None, "error": None},
            {"stage": "pool-h100-pool", "wave": "wave-1", "result": "rolled-back", "seconds": 369.0,
             "stalledDrains": [{"pod": "inference/chat-api-7d9", "budgets": ["inference/chat-api-pdb"]}],
             "pendingPods": [{"pod": "ml/llama-0", "reason": REASON}],
             "canaries": [], "gate": "failed", "error": "drain stalled"},
        ],
        "endState": {"nodesMigrated": 0, "nodes": 12, "nodeStates": [],
                     "capacity": [{"pool": "h100-pool", "resource": "nvidia.com/gpu", "after": 24, "demand": 8,
                                   "fits": True}]},
        "unreproduced": ["ResourceClaims' allocations are not copied: the twin's scheduler allocates anew"],
    }  # fmt: skip


def write(tmp_path: Path, data: Any, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def demo_digest() -> str:
    return str(plan_io.load(Path(PLAN))["digest"])


def test_the_rehearsal_of_this_plan_is_accepted(tmp_path: Path) -> None:
    data = rehearsal_of(demo_digest())
    assert load_rehearsal(write(tmp_path, data), demo_digest()) == data


def test_a_rehearsals_text_is_scrubbed_before_a_report_carries_it(tmp_path: Path) -> None:
    """The report handed to change review copied a rehearsal's failure, errors and scheduler reasons as written:
    a twin's API error quoting a token (or a file written by hand) reached the HTML unscrubbed."""
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
    data = rehearsal_of(demo_digest())
    data["failure"] = f"wave-1: 401 Authorization: Bearer {token}"
    data["waves"][1]["error"] = f"GET https://admin:hunter2@twin.invalid/api failed: token={token}"
    data["waves"][1]["pendingPods"][0]["reason"] = f"webhook said bearer {token}"
    loaded = load_rehearsal(write(tmp_path, data), demo_digest())
    text = json.dumps(loaded)
    assert token not in text and "hunter2" not in text, text
    assert loaded["waves"][1]["stalledDrains"] == data["waves"][1]["stalledDrains"], "the rest kept as written"
    assert loaded["plan"] == data["plan"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(plan={"digest": "sha256:" + "0" * 64}), "another plan"),
        (lambda d: d.pop("plan"), "lacks plan"),
        (lambda d: d.update(formatVersion=2), "formatVersion 2"),
        (lambda d: d.update(result="maybe"), "result must be ok or failed"),
        (lambda d: d["waves"].append({"stage": "x"}), r"waves\[2\] is not a wave"),
        (lambda d: d["waves"][1].update(stalledDrains="none"), r"waves\[1\] is not a wave"),
        (lambda d: d.pop("waves"), "lacks waves"),
    ],
)
def test_a_rehearsal_that_is_not_of_this_plan_or_not_one_is_refused(tmp_path: Path, change: Any, message: str) -> None:
    data = rehearsal_of(demo_digest())
    change(data)
    with pytest.raises(InputError, match=message):
        load_rehearsal(write(tmp_path, data), demo_digest())


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '"ok"'])
def test_a_rehearsal_file_that_is_not_a_rehearsal_object_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(InputError):
        load_rehearsal(write(tmp_path, text), demo_digest())


def test_the_report_shows_the_rehearsal_section(tmp_path: Path) -> None:
    path = write(tmp_path, rehearsal_of(demo_digest()))
    md = run("report", PLAN, "--rehearsal", str(path))
    assert md.code == 0, md.stderr
    section = md.stdout.split("## Rehearsal on a twin", 1)[1].split("\n## ", 1)[0]
    assert "result FAILED" in section and "rehearsed 6m10s" in section and "estimate 5m40s" in section
    assert "inference/chat-api-7d9" in section and "inference/chat-api-pdb" in section
    assert "ml/llama-0" in section and "Insufficient nvidia.com/gpu" in section
    assert "rolled-back" in section and "0 of 12 GPU node(s) migrated" in section
    assert "ResourceClaims' allocations are not copied" in section
    html = run("report", PLAN, "--rehearsal", str(path), "-o", "html")
    assert html.code == 0, html.stderr
    assert 'id="rehearsal"' in html.stdout and "rehearsal: failed" in html.stdout
    data = json.loads(run("report", PLAN, "--rehearsal", str(path), "-o", "json").stdout)
    assert data["rehearsal"]["waves"][1]["stalledDrains"][0]["budgets"] == ["inference/chat-api-pdb"]


def test_without_a_rehearsal_the_section_says_how_to_make_one() -> None:
    md = run("report", PLAN)
    assert md.code == 0, md.stderr
    section = md.stdout.split("## Rehearsal on a twin", 1)[1].split("\n## ", 1)[0]
    assert "dra-migrate rehearse PLAN" in section and "--rehearsal" in section
    assert json.loads(run("report", PLAN, "-o", "json").stdout)["rehearsal"] is None


def test_the_report_refuses_another_plans_rehearsal_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, rehearsal_of("sha256:" + "0" * 64))
    r = run("report", PLAN, "--rehearsal", str(path))
    assert r.code == 1 and r.stdout == ""
    [line, *_hint] = [x for x in r.stderr.splitlines() if x.strip()]
    assert "another plan" in line and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}, True),
        ({"spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"nvidia.com/mig-1g.10gb": 1}}}]}}}},
         True),
        ({"spec": {"template": {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}}}},
         True),
        # A CRD nests its templates deeper (PyTorchJob replica specs): found all the same.
        ({"spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
            {"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}}}}, True),
        ({"spec": {"template": {"spec": {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}}},
         False),
        ({"spec": {"template": {"spec": {"resourceClaims": []}}}}, False),
        ({"metadata": {"labels": {"nvidia.com/gpu": "true"}}}, False),  # a label is not a request
    ],
)  # fmt: skip
def test_which_workloads_the_twin_recreates(obj: dict[str, Any], expected: bool) -> None:
    from dra_migrate.sim.load import uses_devices

    assert uses_devices(obj) is expected


def test_the_api_round_trips_of_a_waves_slowest_node_count_at_their_real_length() -> None:
    """A time-scaled twin scales the cluster's components, not the API server's answers: 2 s of round trips at
    scale 0.01 counted as 200 s made a wave of a loaded twin look slow (the excess over the estimate)."""
    scale = 0.01
    records = [
        *step(0, 1, "pool-a", "wave-1", NODE_A, "drain", requestSeconds=0.25),
        *step(1, 3, "pool-a", "wave-1", NODE_A, "wait-dra-ready", requestSeconds=0.5),
        *step(0, 2, "pool-a", "wave-1", NODE_B, "drain", requestSeconds=1.5),  # more requests, a shorter lane
    ]
    (wave,) = _waves_of(records, scale, {}, real_s=0.0)
    # The wave waited for gpu-a's lane (3 s): its 0.75 s of round trips count as 0.75 s, not 75 s.
    assert wave.real_s == pytest.approx(0.75)
    assert wave.seconds == pytest.approx(300 - real_correction(0.75, scale)) == pytest.approx(225.75)
    assert wave.to_dict()["realSeconds"] == 0.8
    # A journal without the field (an older run): nothing but the canaries is taken off.
    plain = [{k: v for k, v in r.items() if k != "requestSeconds"} for r in records]
    assert _waves_of(plain, scale, {}, real_s=0.0)[0].seconds == pytest.approx(300)


def test_the_twins_plan_is_of_the_twin_not_of_the_cluster_it_was_made_from() -> None:
    """A plan made from a live read records that cluster; the executor runs the rehearsal's copy on the twin,
    whose other-cluster check refused it (test_rehearse test_d failed so) unless the copy names the twin."""
    from dataclasses import replace

    from dra_migrate.cluster.identity import ClusterIdentity, refuse_other_cluster
    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.plan.model import plan_identity
    from dra_migrate.rehearse.run import twin_floor_s, twin_plan

    body = plan_io.body_of(plan_io.load(Path(PLAN)))
    operators = ClusterIdentity("uid-operator", "https://prod:6443", "prod")
    plan = Plan.from_dict(plan_io.seal({**body, "clusterIdentity": operators.to_dict()}))
    state = load_snapshot(Path("fixtures/clusters/demo.yaml"))
    state.source = replace(state.source, cluster_uid="uid-twin", kind="live", location="https://127.0.0.1:1")
    derived = twin_plan(plan, state, 0.1)
    assert plan_identity(derived) == state.source.identity
    refuse_other_cluster(plan_identity(derived), "the twin's plan", state.source.identity, "the twin")
    assert derived.digest and derived.digest != plan.digest
    # Time-scaled: every soak and timeout of the twin's copy at most the reviewed plan's (or its floor).
    scaled = {s.name: s for s in derived.pool_stages()}
    for stage in plan.pool_stages():
        twin = scaled[stage.name]
        assert all(a.soak_s <= max(b.soak_s, 1) for a, b in zip(twin.waves, stage.waves, strict=True))
        floor = twin_floor_s(max(len(w.nodes) for w in stage.waves))
        floored = [max(b.timeout_s, floor) for b in stage.node_steps]
        assert all(a.timeout_s <= b for a, b in zip(twin.node_steps, floored, strict=True))
        assert any(a.timeout_s < b.timeout_s for a, b in zip(twin.node_steps, stage.node_steps, strict=True))


def test_a_run_the_twin_stopped_is_an_error_not_a_failed_rehearsal() -> None:
    """The executor stops (outcome "stopped", to resume later) on a transient error: on the twin, its own API
    server not answering in time. That says nothing of the plan; reported as a failed rehearsal (exit 2) it
    read as a plan that fails, with apply's hint to resume. A failed step or gate is still the verdict."""
    from dra_migrate.errors import ClusterError
    from dra_migrate.execute.runner import FAILED, RESUME_HINT, STOPPED, RunResult
    from dra_migrate.rehearse.run import refuse_unfinished

    stopped = RunResult(
        ok=False, outcome=STOPPED, failure=f"s/w1/n1/drain: timed out ({RESUME_HINT}; nothing was rolled back)"
    )
    with pytest.raises(ClusterError) as e:
        refuse_unfinished(stopped)
    assert e.value.message.endswith("not a verdict on the plan: s/w1/n1/drain: timed out")
    assert "resume" not in str(e.value)
    refuse_unfinished(RunResult(ok=False, outcome=FAILED, failure="s/w1/n1/drain: budget"))
    refuse_unfinished(RunResult(ok=True))


def test_rehearse_takes_applys_drain_timeout_and_parallelism_time_scaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apply --drain-timeout lets a drain wait out a budget past the plan's timeout, and --parallelism runs a
    wave a few nodes at a time. A rehearsal without them failed a drain apply would finish, and evicted a
    wave's pods at once where apply takes a few nodes at a time: it did not rehearse the run apply makes."""
    import dra_migrate.rehearse.run as run_mod
    from dra_migrate.execute.runner import ApplyOptions

    plan_file = tmp_path / "plan.yaml"
    made = run("plan", "--snapshot", str(HALF), "--out", str(plan_file), "--force")
    assert made.code == 0, made.stderr
    seen: dict[str, Any] = {}

    def fake(plan: Any, state: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise InputError("stop here", "")

    monkeypatch.setattr(run_mod, "rehearse", fake)
    r = run("rehearse", str(plan_file), "--snapshot", str(HALF), "--drain-timeout", "30m", "--parallelism", "2")
    assert r.code == 1 and "stop here" in r.stderr, r.stderr
    assert seen["drain_timeout_s"] == 1800.0 and seen["parallelism"] == 2

    plan = Plan.from_dict(plan_io.load(plan_file))
    floor = run_mod.twin_floor_s(run_mod.largest_wave(plan))
    opts = run_mod.apply_options(plan, 0.1, 120.0, 3600.0, 2)
    assert opts == ApplyOptions(pending_threshold_s=12.0, parallelism=2, timeouts={"drain": max(floor, 360.0)})
    assert run_mod.apply_options(plan, 0.01, 120.0, 600.0, None).timeouts == {"drain": float(floor)}
    assert run_mod.apply_options(plan, 0.1, 120.0, None, None).timeouts == {}


def test_a_cluster_on_another_kubernetes_minor_than_the_twins_is_said_unreproduced() -> None:
    """The twin's control plane is v1.37.2 whatever the cluster runs; a 1.35 cluster's scheduler and feature
    defaults (DRAExtendedResource alpha, off) are not the twin's, and the rehearsal must not pass for them."""
    from dra_migrate.cluster.state import ClusterState, SourceInfo
    from dra_migrate.rehearse.run import _unreproduced
    from dra_migrate.sim.load import LoadReport

    def said(version: str | None) -> list[str]:
        state = ClusterState(source=SourceInfo("snapshot", "x.yaml", kubernetes_version=version))
        return [u for u in _unreproduced(state, LoadReport()) if "control plane is Kubernetes" in u]

    (line,) = said("v1.35.3-gke.100")
    assert "v1.37.2" in line and "v1.35.3-gke.100" in line
    assert said("v1.37.0") == [] and said(None) == []
