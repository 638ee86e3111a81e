"""The apply session (journal ownership before any cluster contact, staleness of what is ahead, the lock,
overrides in run-start), `status` (scrubbed, overrides shown) and the client-side rate limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_runner import DP, MIGRATED, make_plan

from dra_migrate.errors import InputError
from dra_migrate.execute.contract import LockLost
from dra_migrate.execute.journal import journal_path, read_journal
from dra_migrate.execute.runner import ApplyOptions
from dra_migrate.execute.session import ApplySession
from dra_migrate.kube import RateLimit
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.drift import Drift, ObjectChange
from dra_migrate.plan.model import Plan
from dra_migrate.testing.execute import FakeClock, FakeOps


class NoCluster:
    """Any use of it is a failure: the session must refuse before it contacts the cluster."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the cluster was contacted ({name})")


class FakeLock:
    def __init__(self, api: Any, *, namespace: str, plan_digest: str) -> None:
        self.callbacks: list[Any] = []
        self.lost = False

    def acquire(self) -> None: ...

    def release(self) -> None: ...

    def check(self) -> None:
        if self.lost:
            raise LockLost("lost")

    def on_lost(self, cb: Any) -> None:
        self.callbacks.append(cb)

    def __enter__(self) -> FakeLock:
        return self

    def __exit__(self, *exc: object) -> None: ...


def plan_file(tmp_path: Path, plan: Plan) -> Path:
    path = tmp_path / "plan.yaml"
    plan_io.write(plan.to_dict(), path)
    return path


def session(path: Path, ops: Any, **kw: Any) -> ApplySession:
    plan = Plan.from_dict(plan_io.load(path))
    return ApplySession(plan, path, ops=ops, lock_api=None, actor="t", lock_factory=FakeLock, **kw)


def test_a_journal_of_another_plan_is_refused_before_the_cluster_is_contacted(tmp_path: Path) -> None:
    path = plan_file(tmp_path, make_plan([["a"]]))
    other = {"seq": 1, "time": "t", "event": "run-start", "planDigest": "sha256:" + "f" * 64}
    journal_path(path).write_bytes(orjson.dumps(other) + b"\n")
    with pytest.raises(InputError, match="another plan"):
        session(path, NoCluster())


def test_a_journal_whose_seq_runs_backwards_is_refused(tmp_path: Path) -> None:
    plan = make_plan([["a"]])
    path = plan_file(tmp_path, plan)
    recs = [{"seq": s, "time": "t", "event": "start", "planDigest": plan.digest, "stepId": "x"} for s in (2, 1)]
    journal_path(path).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    with pytest.raises(InputError, match="seq 1 after seq 2"):
        session(path, NoCluster())


def test_apply_records_the_overrides_and_status_shows_them(tmp_path: Path) -> None:
    plan = make_plan([["a", "b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    s = session(path, ops, overrides={"drainTimeout": "5m", "parallelism": 2}, clock=ops.clock)
    result = s.apply(ApplyOptions(parallelism=2))
    assert result.ok, result.failure
    assert all(v == MIGRATED for v in ops.snapshot()["nodes"].values())
    start = read_journal(journal_path(path))[0]
    assert start["overrides"] == {"drainTimeout": "5m", "parallelism": 2}
    from cli import run

    out = run("status", str(path), "-o", "json")
    assert out.code == 0, out.stderr
    assert json.loads(out.stdout)["lastRun"]["overrides"] == {"drainTimeout": "5m", "parallelism": 2}
    table = run("status", str(path))
    assert "drainTimeout=5m" in table.stdout and "parallelism=2" in table.stdout


def test_status_scrubs_credentials_from_journal_errors(tmp_path: Path) -> None:
    plan = make_plan([["a"]])
    path = plan_file(tmp_path, plan)
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
    recs = [
        {"seq": 1, "time": "t", "event": "run-start", "phase": "apply", "planDigest": plan.digest},
        {"seq": 2, "time": "t", "event": "start", "phase": "apply", "stepId": "pool-p0/p0-a/cordon"},
        {"seq": 3, "time": "t", "event": "end", "phase": "apply", "stepId": "pool-p0/p0-a/cordon",
         "result": "failed", "error": f"403 Authorization: Bearer {token} https://admin:hunter2@proxy"},
        {"seq": 4, "time": "t", "event": "run-end", "phase": "apply", "result": "failed",
         "error": f"Authorization: Bearer {token}"},
    ]  # fmt: skip
    journal_path(path).write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    from cli import run

    for args in (("-o", "json"), ()):
        out = run("status", str(path), *args)
        assert out.code == 0, out.stderr
        assert token not in out.stdout and "hunter2" not in out.stdout
        assert "<redacted>" in out.stdout


def test_status_refuses_another_plans_journal(tmp_path: Path) -> None:
    path = plan_file(tmp_path, make_plan([["a"]]))
    other = {"seq": 1, "time": "t", "event": "run-start", "planDigest": "sha256:" + "e" * 64}
    journal_path(path).write_bytes(orjson.dumps(other) + b"\n")
    from cli import run

    out = run("status", str(path))
    assert out.code == 1 and "another plan" in out.stderr


def test_report_refuses_another_plans_journal(tmp_path: Path) -> None:
    path = plan_file(tmp_path, make_plan([["a"]]))
    other = {"seq": 1, "time": "t", "event": "run-start", "planDigest": "sha256:" + "e" * 64}
    journal_path(path).write_bytes(orjson.dumps(other) + b"\n")
    from cli import run

    out = run("report", str(path), "--format", "json")
    assert out.code == 1 and "another plan" in out.stderr, out.stderr


def _drift(**lists: Any) -> Drift:
    return Drift(plan={}, **lists)


def test_a_first_run_refuses_any_drift_and_a_resumed_run_only_drift_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan([["a"], ["b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    # Drift on node a (which the first wave changes) and a DeviceClass the prepare stage creates.
    ours = _drift(
        labels_changed=[{"node": "p0-a", "key": "k", "planned": "true", "now": "false"}],
        objects=[ObjectChange("Node", "", "p0-a", "changed", None, None),
                 ObjectChange("DeviceClass", "", "gpu", "added", None, None, group="resource.k8s.io")],
    )  # fmt: skip
    monkeypatch.setattr("dra_migrate.plan.drift.drift", lambda _plan, _state: ours)
    s = session(path, ops, clock=ops.clock)
    with pytest.raises(InputError, match="stale"):
        s.refuse_if_stale(lambda: None)  # a first run: any drift refuses
    ops.driver_installed = False  # the prepare stage fails and is rolled back: nothing is left changed
    assert s.apply(ApplyOptions()).outcome == "failed"
    s = session(path, ops, clock=ops.clock)
    assert not s.resuming, "a failed attempt that left nothing changed is a new run"
    with pytest.raises(InputError, match="stale"):
        s.refuse_if_stale(lambda: None)
    ops.driver_installed = True
    ops.fail("canary", "p0-b", "transient")
    s.apply(ApplyOptions())  # wave 1 done, then stopped in wave 2
    s = session(path, ops, clock=ops.clock)
    assert s.resuming
    s.refuse_if_stale(lambda: None)  # drift only where this run has been: resume goes on
    ahead = _drift(objects=[ObjectChange("Node", "", "p0-c", "replaced", None, None)])
    monkeypatch.setattr("dra_migrate.plan.drift.drift", lambda _plan, _state: ahead)
    with pytest.raises(InputError, match="in what is left to apply"):
        s.refuse_if_stale(lambda: None)


def test_a_plan_with_blockers_is_refused(tmp_path: Path) -> None:
    plan = make_plan([["a"]])
    finding = {"id": "x", "severity": "blocker", "message": "m", "objects": [], "remediation": "r"}
    body = {**plan_io.body_of(plan.to_dict()), "applicable": False, "findings": [finding]}
    path = tmp_path / "p.yaml"
    plan_io.write(plan_io.seal(body), path)
    with pytest.raises(InputError, match="blockers x"):
        session(path, NoCluster()).refuse_if_not_applicable()


def test_the_lock_losing_cancels_the_run(tmp_path: Path) -> None:
    plan = make_plan([["a", "b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.fail("wait_dra_ready", None, "hang", times=99)
    locks: list[FakeLock] = []

    def factory(*a: Any, **kw: Any) -> FakeLock:
        lock = FakeLock(*a, **kw)
        locks.append(lock)
        return lock

    s = ApplySession(Plan.from_dict(plan_io.load(path)), path, ops=ops, lock_api=None, actor="t",
                     lock_factory=factory, clock=ops.clock)  # fmt: skip
    import threading

    def lose() -> None:
        while ops.active.get("wait_dra_ready", 0) < 2:
            threading.Event().wait(0.001)
        locks[-1].lost = True
        for cb in locks[-1].callbacks:
            cb("lost the cluster lock: taken over")

    t = threading.Thread(target=lose)
    t.start()
    result = s.apply(ApplyOptions())
    t.join()
    assert result.outcome == "stopped" and not result.rolled_back


def test_the_rate_limit_allows_a_burst_then_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    limit = RateLimit(10, 5, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limit.acquire()
    assert not slept, "the burst goes at once"
    for _ in range(10):
        limit.acquire()
    assert sum(slept) == pytest.approx(1.0), "then 10 a second"
    off = RateLimit(-1, 0, clock=lambda: now[0], sleep=sleep)
    for _ in range(100):
        off.acquire()
    assert sum(slept) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("step", "field", "value", "named"),
    [
        (4, ("params", "devices"), "8", "devices"),  # wait-dra-ready: a string where the count goes
        (1, ("params", "scope"), "everything", "scope"),
        (2, ("params", "key"), 3, "key"),
        (0, ("inverse", "restore", "unschedulable"), "no", "unschedulable"),
        (6, ("params", "unschedulable"), "false", "unschedulable"),
        (5, ("params", "image"), None, "image"),
    ],
)
def test_steps_apply_could_not_carry_out_are_refused_before_the_cluster(
    tmp_path: Path, step: int, field: tuple[str, ...], value: Any, named: str
) -> None:
    body = plan_io.body_of(make_plan([["a"]]).to_dict())
    target: Any = body["stages"][1]["nodeSteps"][step]
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    path = tmp_path / "p.yaml"
    plan_io.write(plan_io.seal(body), path)
    with pytest.raises(InputError, match=named):
        session(path, NoCluster())


class _Resp:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status, self.headers = status, headers

    def read(self) -> bytes:
        return b'{"ok": 1}' if self.status < 300 else b'{"kind": "Status", "message": "slow down"}'


class _Client:
    class configuration:  # mimics ApiClient.configuration
        host = "https://fake.invalid"

    def __init__(self, answers: list[_Resp]) -> None:
        self.answers = answers

    def param_serialize(self, **kw: Any) -> tuple[str, str, dict[str, str], Any, None]:
        return kw["method"], kw["resource_path"], kw["header_params"], kw["body"], None

    def call_api(self, method: str, url: str, **kw: Any) -> _Resp:
        return self.answers.pop(0)


def test_429_waits_what_retry_after_says_and_each_attempt_takes_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    from dra_migrate.kube import Kube, RetryPolicy

    slept: list[float] = []
    taken = []
    limit = RateLimit(1000, 1000)
    monkeypatch.setattr(limit, "acquire", lambda: taken.append(1))
    answers = [_Resp(429, {"Retry-After": "7"}), _Resp(429, {"Retry-After": "120"}), _Resp(200, {})]
    kube = Kube(_Client(answers), retries=3, rate_limit=limit, sleep=slept.append)
    assert kube.get("/api/v1/nodes") == {"ok": 1}
    assert slept == [7.0, RetryPolicy().max_retry_after_s]  # as the server said (capped at a minute), not our backoff
    assert len(taken) == 3


def test_staleness_is_checked_once_the_lock_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Terraform's order: lock, then refresh. A second apply that loses the lock is refused by the lock,
    never by the first one's changes (they would read as drift)."""
    plan = make_plan([["a"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    order: list[str] = []

    class Held(FakeLock):
        def __enter__(self) -> FakeLock:
            order.append("lock")
            return self

    monkeypatch.setattr("dra_migrate.plan.drift.drift", lambda _plan, _state: _drift())
    s = session(path, ops, clock=ops.clock)
    s.lock_factory = Held
    assert s.apply(ApplyOptions(), read_state=lambda: order.append("read")).ok
    assert order[-2:] == ["lock", "read"]


def test_rollback_dry_run_sends_every_undo_as_a_dry_run_and_changes_nothing(tmp_path: Path) -> None:
    """`rollback --dry-run`: each undo goes to the ops as a dry run (the API server's dryRun=All), the
    rollback's drains too; no node, DeviceClass or journal record changes, and the changes name what a real
    rollback would send. A dry run that reached the ops as a real write would leave the nodes half restored."""
    plan = make_plan([["a", "b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    assert session(path, ops, clock=ops.clock).apply(ApplyOptions()).ok
    for n in ops.nodes.values():
        n.gpu_pods = 1  # scheduled through DRA since the wave
    journal = journal_path(path).read_bytes()
    migrated, classes = ops.snapshot(), dict(ops.device_classes)
    sent: list[tuple[str, bool]] = []
    for name in ("set_label", "set_unschedulable", "drain", "delete_device_class"):
        real = getattr(ops, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            sent.append((_name, kw.get("dry_run", False)))
            return _real(*args, **kw)

        setattr(ops, name, spy)
    s = session(path, ops, clock=ops.clock)
    result = s.dry_rollback(s.to_undo(None), ApplyOptions())
    assert result.ok, result.failure
    assert sent and all(dry for _, dry in sent), sent
    assert {name for name, _ in sent} == {"set_label", "set_unschedulable", "drain", "delete_device_class"}
    assert ops.snapshot() == migrated and ops.device_classes == classes
    assert all(n.gpu_pods == 1 for n in ops.nodes.values()), "a dry-run drain evicts nothing"
    assert journal_path(path).read_bytes() == journal, "a dry run writes no journal"
    restored = [c for c in result.changes if c.after.get("labels", {}).get(DP) is not None]
    assert {c.target for c in restored} == {"Node p0-a", "Node p0-b"}
    assert all(c.dry_run for c in result.changes)
    # The pods a switch back would evict, named; a dry run evicts none, so both switches of a node name them.
    evicting = {(c.target, tuple(c.before["pods"])) for c in result.changes if c.before.get("pods")}
    assert evicting == {("Node p0-a", ("ns/pod-p0-a-0",)), ("Node p0-b", ("ns/pod-p0-b-0",))}


def test_gpu_pods_pending_before_the_migration_do_not_fail_its_health_gate(tmp_path: Path) -> None:
    """A training cluster's queue: GPU pods Pending for want of free GPUs before anything was migrated. The
    gate judged every GPU pod Pending longer than its threshold, so such a cluster rolled back every first
    wave. The first apply records the backlog (server time, the newest such pod's creationTimestamp) and the
    gate leaves those pods to their queue; a pod that becomes Pending during the migration is still judged."""
    plan = make_plan([["a"], ["b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.backlog = ["ml/queued-0", "ml/queued-1"]
    result = session(path, ops, clock=ops.clock).apply(ApplyOptions())
    assert result.ok, result.failure
    assert all(v == MIGRATED for v in ops.snapshot()["nodes"].values())
    start = read_journal(journal_path(path))[0]
    assert start["pendingBacklog"] == {"pods": 2, "createdUpTo": FakeOps._BEFORE}
    gates = [r for r in read_journal(journal_path(path)) if r["event"] == "gate"]
    assert [g["result"] for g in gates] == ["ok", "ok"]


def test_a_resumed_apply_judges_pods_by_the_first_runs_backlog_not_its_own(tmp_path: Path) -> None:
    """A pod evicted by wave 1 and still Pending when apply resumes is the migration's doing: the resumed run
    must not take it for the cluster's backlog (it keeps the first run's record, not a new reading)."""
    plan = make_plan([["a"], ["b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    ops.fail("set_unschedulable", "p0-b", "transient")  # stops at wave 2's first step, after wave 1's gate
    first = session(path, ops, clock=ops.clock).apply(ApplyOptions())
    assert first.outcome == "stopped", first.failure
    ops.pending = ["ml/evicted-by-wave-1"]
    again = session(path, ops, clock=ops.clock).apply(ApplyOptions())
    assert again.outcome == "failed" and "ml/evicted-by-wave-1" in (again.failure or ""), again.failure
    starts = [r for r in read_journal(journal_path(path)) if r["event"] == "run-start"]
    assert [s["pendingBacklog"] for s in starts] == [{"pods": 0, "createdUpTo": None}] * 2


def test_a_journal_from_before_the_backlog_record_judges_every_pending_pod(tmp_path: Path) -> None:
    from dra_migrate.execute.runner import Backlog

    records = [{"event": "run-start", "phase": "apply", "seq": 1}]
    assert Backlog.of_journal(records) == Backlog(0, None), "as that run did: no backlog left out"
    assert Backlog.of_journal([{"event": "run-start", "phase": "apply", "dryRun": True}]) is None
    assert Backlog.of_journal([]) is None


def test_status_says_a_failed_rollback_left_steps_to_undo_and_which_failure_was_an_undo(tmp_path: Path) -> None:
    """A rollback that failed half-way was shown as a failed apply step, its steps left to undo only in `-o json`,
    and an interrupted undo told the operator to resume with apply."""
    plan = make_plan([["a", "b"]])
    path = plan_file(tmp_path, plan)
    ops = FakeOps.for_plan(plan, FakeClock())
    s = session(path, ops, clock=ops.clock)
    assert s.apply(ApplyOptions()).ok
    ops.fail("set_label", "p0-b", "permanent", times=99)
    s = session(path, ops, clock=ops.clock)
    assert not s.rollback(s.to_undo(None), ApplyOptions()).ok
    from cli import run

    table = run("status", str(path))
    assert table.code == 0, table.stderr
    assert "failed: the undo of pool-p0/p0-b/" in table.stdout, table.stdout
    assert "left to undo:" in table.stdout and "run rollback again" in table.stdout, table.stdout
