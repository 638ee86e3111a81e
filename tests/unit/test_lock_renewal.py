"""The cluster lock when it cannot be renewed: the run must stop acting before anyone else may take the Lease.

Found auditing the renewal: the holder judged its lock lost only once a whole `leaseDurationSeconds` had
passed since its last renewal *returned*, and each renewal could hang for the request's 30 s read timeout.
With the API server unavailable for a minute (duration 60 s, renewals every 20 s), the run went on draining
and switching nodes up to ~80 s after its last renewal, while another apply (which takes a Lease over once it
has stayed unchanged for its duration on its own clock) could hold the lock from ~60 s on: two runs acting on
one cluster. client-go's leader election stops leading when it cannot renew within `RenewDeadline`, shorter
than `LeaseDuration` (core clients 10 s of 15 s), and bounds each request below the deadline
(k8s.io/client-go@v0.37.2 tools/leaderelection/leaderelection.go `renew`, resourcelock/interface.go
`NewFromKubeconfig`: timeout RenewDeadline/2).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from dra_migrate.execute.contract import LockLost
from dra_migrate.execute.lock import ClusterLock
from dra_migrate.testing.kube import Call, FakeApiClient, FakeResponse, status


class LeaseServer:
    """One Lease as the API server keeps it (create, get, conditional update, delete), and an outage switch:
    `down = "hang"` (requests block until the client's read timeout, capped) or `"refused"`."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down: str | None = None
        self.renewals_received: list[float] = []  # monotonic time the server applied each renewal
        self.timeouts: list[Any] = []

    def client(self) -> FakeApiClient:
        api = FakeApiClient(self.handle)
        orig = api.call_api

        def call_api(method: str, url: str, **kw: Any) -> FakeResponse:
            self.timeouts.append(kw.get("_request_timeout"))
            if self.down == "hang":
                t = kw.get("_request_timeout") or 30
                read = t[1] if isinstance(t, tuple) else t
                time.sleep(min(float(read), 8.0))
                raise ReadTimeoutError(None, url, "Read timed out.")  # type: ignore[arg-type]
            if self.down == "refused":
                raise NewConnectionError(None, "Connection refused")  # type: ignore[arg-type]
            return orig(method, url, **kw)

        api.call_api = call_api  # type: ignore[method-assign]
        return api

    def _ok(self, code: int = 200) -> FakeResponse:
        return FakeResponse(code, self.lease)

    def handle(self, call: Call) -> FakeResponse:
        body = orjson.loads(orjson.dumps(call.body)) if call.body is not None else None
        if call.method == "GET":
            return self._ok() if self.lease else FakeResponse(404, status(404, "NotFound", "not found"))
        if call.method == "POST":
            if self.lease is not None:
                return FakeResponse(409, status(409, "AlreadyExists", "exists"))
            self.version += 1
            body["metadata"].update(resourceVersion=str(self.version), uid="u1")
            self.lease = body
            return self._ok(201)
        if call.method == "PUT":
            if self.lease is None:
                return FakeResponse(404, status(404, "NotFound", "not found"))
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return FakeResponse(409, status(409, "Conflict", "modified"))
            self.version += 1
            body["metadata"]["resourceVersion"] = str(self.version)
            self.lease = body
            self.renewals_received.append(time.monotonic())
            return self._ok()
        if call.method == "DELETE":
            self.lease = None
            return FakeResponse(200, {})
        raise AssertionError(call)


def _lost_at(lock: ClusterLock, limit_s: float) -> float | None:
    lost = threading.Event()
    lock.on_lost(lambda _reason: lost.set())
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        try:
            lock.check()
        except LockLost:
            return time.monotonic()
        if lost.wait(0.02):
            return time.monotonic()
    return None


def _held_then_outage(down: str) -> tuple[LeaseServer, ClusterLock, float]:
    server = LeaseServer()
    lock = ClusterLock(server.client(), name="t", plan_digest="sha256:x", duration_s=3, renew_every_s=0.5)
    lock.acquire()
    lock.start_renewing()
    deadline = time.monotonic() + 5
    while len(server.renewals_received) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(server.renewals_received) >= 2
    server.down = down
    return server, lock, time.monotonic()


def test_an_unanswering_api_server_stops_the_run_before_the_lease_could_be_taken_over() -> None:
    server, lock, _ = _held_then_outage("hang")
    try:
        lost = _lost_at(lock, limit_s=10)
        last = server.renewals_received[-1]
        # Another apply may take the Lease once it stayed unchanged for its duration (3 s) from the moment it
        # saw the last renewal: the run must have stopped before, with room for its in-flight writes.
        assert lost is not None, "still believed held 10 s into the outage"
        assert lost - last < 3 * 0.8, f"lost {lost - last:.2f}s after the last renewal landed"
    finally:
        server.down = None
        lock._stop.set()


def test_a_refusing_api_server_stops_the_run_before_the_lease_could_be_taken_over() -> None:
    server, lock, _ = _held_then_outage("refused")
    try:
        lost = _lost_at(lock, limit_s=10)
        assert lost is not None
        assert lost - server.renewals_received[-1] < 3 * 0.8
        assert "could not renew" in lock.lost_reason
    finally:
        server.down = None
        lock._stop.set()


def test_a_renewal_request_never_waits_past_the_renew_deadline() -> None:
    """client-go bounds each lock request below the deadline (resourcelock/interface.go: RenewDeadline/2)."""
    server, lock, _ = _held_then_outage("hang")
    try:
        _lost_at(lock, limit_s=10)
        renewals = server.timeouts[2:]
        assert renewals
        for t in renewals:
            connect, read = t if isinstance(t, tuple) else (t, t)
            assert connect <= 2 and read <= 2, t  # the deadline is 2 s of the 3 s Lease
    finally:
        server.down = None
        lock._stop.set()


def test_a_short_outage_within_the_deadline_keeps_the_lock() -> None:
    server, lock, _ = _held_then_outage("refused")
    try:
        time.sleep(0.6)
        server.down = None
        assert _lost_at(lock, limit_s=2.5) is None
        lock.check()
    finally:
        lock.release()


# ----------------------------------------------------------------------------------------------------
# `unlock` (break_lock) and a live holder. Found auditing it: `unlock PLAN --lock-id ID` deleted the Lease
# whatever its state, and apply's refusal hands every operator that id. An operator who took a slow run
# (a 10-minute drain) for a stuck one broke a live lock: the next apply started while the first still
# acted, until its next renewal met the 404. Breaking a lock renewed within its duration now takes --force.


def _held_by_other(server: LeaseServer, *, renewed_s_ago: float) -> ClusterLock:
    other = ClusterLock(server.client(), name="t", plan_digest="sha256:x", duration_s=60, holder="ann@gpu-ops/4242/x")
    other.acquire()
    assert server.lease is not None
    from datetime import UTC, datetime, timedelta

    from dra_migrate.execute.lock import micro_time

    server.lease["spec"]["renewTime"] = micro_time(datetime.now(UTC) - timedelta(seconds=renewed_s_ago))
    return other


def test_unlock_refuses_a_live_lock_naming_its_holder() -> None:
    from dra_migrate.execute.contract import LockHeld
    from dra_migrate.execute.lock import break_lock

    server = LeaseServer()
    other = _held_by_other(server, renewed_s_ago=5)
    try:
        break_lock(server.client(), other.lock_id, name="t")
    except LockHeld as e:
        assert "ann@gpu-ops/4242/x" in str(e) and "--force" in (e.hint or "")
    else:
        raise AssertionError("broke a lock renewed 5 s ago without --force")
    assert server.lease is not None
    broken = break_lock(server.client(), other.lock_id, name="t", force=True)
    assert broken is not None and broken.holder == "ann@gpu-ops/4242/x"
    assert server.lease is None


def test_unlock_breaks_an_expired_lock_without_force() -> None:
    from dra_migrate.execute.lock import break_lock

    server = LeaseServer()
    other = _held_by_other(server, renewed_s_ago=61)
    broken = break_lock(server.client(), other.lock_id, name="t")
    assert broken is not None and server.lease is None
