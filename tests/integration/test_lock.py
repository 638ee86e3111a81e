"""The cluster lock on a real API server: one holder at a time, takeover after expiry, renewal, breaking."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import controlplane
import pytest
from faultproxy import FAULTS, LOST_RESPONSE, FaultProxy
from kubernetes import client, config

from dra_migrate.errors import ClusterError
from dra_migrate.execute.contract import LockHeld
from dra_migrate.execute.lock import (
    DIGEST_ANNOTATION,
    LOCK_ID_ANNOTATION,
    MACHINE_ANNOTATION,
    ClusterLock,
    break_lock,
    machine_id,
    micro_time,
    read_lock,
)
from dra_migrate.sim.kube import Kube, new_api_client

pytestmark = pytest.mark.cluster

NS = "kube-system"
DIGEST = "sha256:" + "c" * 64


@pytest.fixture(scope="module")
def api(control_plane: controlplane.ControlPlane) -> Iterator[Any]:
    client = new_api_client(control_plane.kubeconfig, "dra-migrate-tests")
    yield client
    client.close()


@pytest.fixture
def lease_name(kube: Kube) -> Iterator[str]:
    """A Lease name of this test's own (the control plane is shared), deleted afterwards."""
    name = f"dra-migrate-t-{uuid.uuid4().hex[:8]}"
    yield name
    kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}")


def lease(kube: Kube, name: str) -> dict[str, Any] | None:
    return kube.get_or_none(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{name}")


def seen_machine(api: Any, name: str) -> str:
    seen = read_lock(api, namespace=NS, name=name)
    return seen.machine if seen is not None else ""


def new_lock(api: Any, name: str, **kw: Any) -> ClusterLock:
    return ClusterLock(api, namespace=NS, name=name, plan_digest=kw.pop("plan_digest", DIGEST), **kw)


def test_acquire_and_release(api: Any, kube: Kube, lease_name: str) -> None:
    lock = new_lock(api, lease_name)
    info = lock.acquire()
    assert info.holder == lock.holder and info.lock_id == lock.lock_id
    obj = lease(kube, lease_name)
    assert obj is not None
    assert obj["spec"]["holderIdentity"] == lock.holder
    assert obj["spec"]["leaseDurationSeconds"] == 60
    assert obj["spec"]["renewTime"].endswith("Z") and len(obj["spec"]["renewTime"].split(".")[1]) == 7
    assert obj["metadata"]["annotations"] == {
        DIGEST_ANNOTATION: DIGEST,
        LOCK_ID_ANNOTATION: lock.lock_id,
        MACHINE_ANNOTATION: machine_id(),  # which machine: the one a crashed run's resume may take it over from
    }
    assert seen_machine(api, lease_name) == machine_id() != ""
    assert lock.holder.endswith(f"/{lock.lock_id}") and "@" in lock.holder
    seen = read_lock(api, namespace=NS, name=lease_name)
    assert seen is not None and seen.plan_digest == DIGEST and not seen.expired()
    assert lock.release() is True
    assert lease(kube, lease_name) is None
    assert read_lock(api, namespace=NS, name=lease_name) is None
    assert lock.release() is False  # nothing held any more


def test_a_second_holder_is_refused_with_the_first_ones_name(api: Any, lease_name: str) -> None:
    with new_lock(api, lease_name, holder="alice@ws1/100/aaaa") as first:
        second = new_lock(api, lease_name, holder="bob@ws2/200/bbbb", plan_digest="sha256:other")
        with pytest.raises(LockHeld) as e:
            second.acquire()
        text = str(e.value)
        assert "\n" not in text
        assert "alice@ws1/100/aaaa" in text and DIGEST in text and "expires" in text
        assert f"--lock-id {first.lock_id}" in text
        assert not second.held and first.held
    # Released: now the second may take it.
    with new_lock(api, lease_name, holder="bob@ws2/200/bbbb") as second:
        assert second.held


def test_racing_acquires_have_exactly_one_winner(api: Any, kube: Kube, lease_name: str) -> None:
    locks = [new_lock(api, lease_name) for _ in range(8)]
    start = threading.Barrier(len(locks))
    outcome: dict[int, str] = {}

    def contend(i: int) -> None:
        start.wait()
        try:
            locks[i].acquire()
            outcome[i] = "won"
        except LockHeld:
            outcome[i] = "refused"

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(locks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcome.values()) == ["refused"] * 7 + ["won"]
    (winner,) = [locks[i] for i, o in outcome.items() if o == "won"]
    obj = lease(kube, lease_name)
    assert obj is not None and obj["spec"]["holderIdentity"] == winner.holder
    assert winner.release()


def test_racing_takeovers_of_an_expired_lease_have_exactly_one_winner(api: Any, kube: Kube, lease_name: str) -> None:
    stale = new_lock(api, lease_name, holder="dead@ws/1/dead", duration_s=1)
    stale.acquire()
    time.sleep(1.2)
    locks = [new_lock(api, lease_name) for _ in range(8)]
    start = threading.Barrier(len(locks))
    won: list[ClusterLock] = []
    refused: list[str] = []

    def contend(lock: ClusterLock) -> None:
        start.wait()
        try:
            lock.acquire()
            won.append(lock)
        except LockHeld as e:
            refused.append(str(e))

    threads = [threading.Thread(target=contend, args=(lock,)) for lock in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(won) == 1 and len(refused) == 7
    obj = lease(kube, lease_name)
    assert obj is not None and obj["spec"]["holderIdentity"] == won[0].holder
    assert obj["spec"]["leaseTransitions"] == 1
    assert stale.release() is False  # the stale holder must not delete its successor's lock
    assert lease(kube, lease_name) is not None
    assert won[0].release()


def test_an_expired_lease_is_taken_over(api: Any, kube: Kube, lease_name: str) -> None:
    # A crashed apply: renewed long ago, never released.
    long_ago = micro_time(datetime.now(UTC) - timedelta(minutes=5))
    kube.create(
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
        {
            "metadata": {
                "name": lease_name,
                "annotations": {DIGEST_ANNOTATION: "sha256:old", LOCK_ID_ANNOTATION: "0ld"},
            },
            "spec": {
                "holderIdentity": "crashed@ws/1/0ld",
                "leaseDurationSeconds": 2,
                "acquireTime": long_ago,
                "renewTime": long_ago,
            },
        },
    )
    before = read_lock(api, namespace=NS, name=lease_name)
    assert before is not None and before.expired() and before.holder == "crashed@ws/1/0ld"
    started = time.monotonic()
    with new_lock(api, lease_name) as lock:
        # Not on its renewTime alone (the holder's clock): once unchanged for its duration on ours.
        assert time.monotonic() - started >= 2
        obj = lease(kube, lease_name)
        assert obj is not None
        assert obj["spec"]["holderIdentity"] == lock.holder
        assert obj["metadata"]["annotations"][LOCK_ID_ANNOTATION] == lock.lock_id
        assert obj["metadata"]["annotations"][DIGEST_ANNOTATION] == DIGEST
    assert lease(kube, lease_name) is None


def test_a_live_holder_whose_clock_is_behind_is_never_taken_over(api: Any, kube: Kube, lease_name: str) -> None:
    """A holder renewing on time whose clock runs five minutes behind ours (an in-cluster run, an operator's
    laptop that is fast): by our clock its Lease expired long ago. Taking it over on that broke a live run."""
    path = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease_name}"

    def behind() -> str:
        return micro_time(datetime.now(UTC) - timedelta(minutes=5))

    annotations = {DIGEST_ANNOTATION: "sha256:live", LOCK_ID_ANNOTATION: "l1ve"}
    spec = {
        "holderIdentity": "live@ci/1/l1ve",
        "leaseDurationSeconds": 2,
        "acquireTime": behind(),
        "renewTime": behind(),
    }
    kube.create(path.rpartition("/")[0], {"metadata": {"name": lease_name, "annotations": annotations}, "spec": spec})
    stop = threading.Event()

    def renew() -> None:  # as its holder does, every third of the duration, with its own clock
        while not stop.wait(0.5):
            current = kube.get(path)
            kube.replace(path, {**current, "spec": {**current["spec"], "renewTime": behind()}})

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        with pytest.raises(LockHeld, match="renewed while this machine watched it: its holder is alive"):
            new_lock(api, lease_name).acquire()
    finally:
        stop.set()
        renewer.join(timeout=10)
    obj = lease(kube, lease_name)
    assert obj is not None and obj["spec"]["holderIdentity"] == "live@ci/1/l1ve"


def test_renewal_keeps_it_alive_past_its_duration(api: Any, kube: Kube, lease_name: str) -> None:
    with new_lock(api, lease_name, duration_s=2, renew_every_s=0.5) as lock:
        first = lease(kube, lease_name)
        assert first is not None
        time.sleep(3.5)
        assert lock.held and not lock.lost
        lock.check()
        info = read_lock(api, namespace=NS, name=lease_name)
        assert info is not None and not info.expired() and info.lock_id == lock.lock_id
        assert info.renewed is not None and info.renewed > datetime.fromisoformat(first["spec"]["renewTime"])
        other = new_lock(api, lease_name)
        with pytest.raises(LockHeld):
            other.acquire()
    assert lease(kube, lease_name) is None


def test_a_broken_lock_is_noticed_as_lost(api: Any, lease_name: str) -> None:
    lock = new_lock(api, lease_name, duration_s=3, renew_every_s=0.2)
    with lock:
        assert break_lock(api, lock.lock_id, namespace=NS, name=lease_name, force=True) is not None
        deadline = time.monotonic() + 5
        while not lock.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock.lost
        with pytest.raises(ClusterError, match="lost the cluster lock"):
            lock.check()


def test_break_lock_needs_the_right_id(api: Any, kube: Kube, lease_name: str) -> None:
    lock = new_lock(api, lease_name)
    lock.acquire()
    with pytest.raises(ClusterError) as e:
        break_lock(api, "not-the-id", namespace=NS, name=lease_name)
    assert lock.lock_id in str(e.value)
    assert lease(kube, lease_name) is not None
    broken = break_lock(api, lock.lock_id, namespace=NS, name=lease_name, force=True)
    assert broken is not None and broken.holder == lock.holder
    assert lease(kube, lease_name) is None
    assert break_lock(api, lock.lock_id, namespace=NS, name=lease_name) is None  # nothing left to break
    # A new holder can take it at once, and the old one must not delete it.
    with new_lock(api, lease_name) as again:
        assert again.held
        assert lock.release() is False
        assert lease(kube, lease_name) is not None


@pytest.mark.parametrize("seed", range(4))
def test_faults_and_lost_answers_never_confuse_the_lock(
    control_plane: controlplane.ControlPlane, kube: Kube, lease_name: str, tmp_path: Path, seed: int
) -> None:
    """Through a proxy that fails 30% of requests — some after the server acted (a create that "failed"
    yet exists) — the lock never mistakes itself for another holder, and leaves nothing behind."""
    faults = (*FAULTS, LOST_RESPONSE)
    with FaultProxy(control_plane, rate=0.3, seed=seed, faults=faults) as proxy:
        conf = client.Configuration()
        kc = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
        config.load_kube_config(config_file=kc, client_configuration=conf)  # type: ignore[no-untyped-call]
        conf.retries = False  # only the lock's own retries
        api = client.ApiClient(conf)
        lock = new_lock(api, lease_name, duration_s=6, renew_every_s=0.3)
        try:
            lock.acquire()
        except LockHeld:
            raise
        except ClusterError:
            # Four failures in a row: allowed, but then the Lease is absent or ours, nobody else's.
            obj = lease(kube, lease_name)
            assert obj is None or obj["metadata"]["annotations"][LOCK_ID_ANNOTATION] == lock.lock_id
            return
        obj = lease(kube, lease_name)
        assert obj is not None and obj["spec"]["holderIdentity"] == lock.holder
        lock.start_renewing()
        time.sleep(2)
        assert not lock.lost, lock.lost_reason
        try:
            assert lock.release() is True
        except ClusterError:
            pass  # four failures in a row; the Lease then expires on its own
        else:
            assert lease(kube, lease_name) is None
    assert proxy.injected > 0


def test_a_holder_cut_off_from_the_api_server_stops_before_another_takes_the_lease(
    control_plane: controlplane.ControlPlane, api: Any, kube: Kube, lease_name: str, tmp_path: Path
) -> None:
    """The API server unreachable for the holder (every request dropped) while another apply can reach it:
    the holder must count its lock lost before the other takes the Lease over (client-go's RenewDeadline <
    LeaseDuration, k8s.io/client-go@v0.37.2 tools/leaderelection/leaderelection.go `renew`): never two runs
    that both believe they hold it. (With synchronised clocks the taker waits for the renewTime to look
    expired and then a whole duration more, so this passed before the renew deadline too; the overlap needed
    a taker whose clock runs ahead and hung requests: tests/unit/test_lock_renewal.py shows that one.)"""
    with FaultProxy(control_plane, rate=0.0, faults=("drop",)) as proxy:
        conf = client.Configuration()
        kc = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
        config.load_kube_config(config_file=kc, client_configuration=conf)  # type: ignore[no-untyped-call]
        conf.retries = False
        cut_off = client.ApiClient(conf)
        holder = new_lock(cut_off, lease_name, duration_s=3, renew_every_s=0.5)
        holder.acquire()
        holder.start_renewing()
        time.sleep(1.2)  # renewed a couple of times
        assert not holder.lost
        proxy.rate = 1.0  # from now on the holder reaches nothing
        lost_at: list[float] = []
        holder.on_lost(lambda _reason: lost_at.append(time.monotonic()))
        taker = new_lock(api, lease_name, duration_s=3)
        give_up = time.monotonic() + 15
        while True:  # refused while it looks renewed; then watches it unchanged for its 3 s and takes it over
            try:
                taker.acquire()
                break
            except LockHeld:
                assert time.monotonic() < give_up, "never taken over"
                time.sleep(0.1)
        taken_at = time.monotonic()
        try:
            assert holder.lost, "the cut-off holder still believes it holds the lock the other one took"
            assert lost_at and lost_at[0] < taken_at - 0.5, (lost_at, taken_at)
            with pytest.raises(ClusterError, match="could not renew"):
                holder.check()
        finally:
            taker.release()
            holder._stop.set()
