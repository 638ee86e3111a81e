"""The cluster lock: one `coordination.k8s.io/v1` Lease that one apply or rollback holds at a time.

The Lease names the holder (`spec.holderIdentity`: `<user>@<host>/<pid>/<lock id>`), the plan
(annotation `dra-migrate.io/plan-digest`) and the lock id to break it with (`dra-migrate.io/lock-id`).
It expires `leaseDurationSeconds` after its `renewTime` unless renewed, so a crashed apply does not
block the cluster for ever.

Every write is atomic on the server: create fails with 409 AlreadyExists when another holder exists,
and updates and deletes carry the resourceVersion (and uid) they were based on, so of two racing
writers exactly one wins and the other learns it with a 409 Conflict.

A Lease renewed within its duration by this machine's clock is held: `acquire` refuses at once. One that
looks expired is not taken over on that alone, since its `renewTime` is the holder's clock: a laptop whose
clock runs minutes ahead would judge a live in-cluster run's Lease expired and break it. It is taken over
only once it has stayed unchanged for its whole duration on this machine's monotonic clock, as client-go's
leader election judges a leader gone (k8s.io/client-go tools/leaderelection/leaderelection.go,
`observedTime`): a live holder renews within that time, whatever its clock says. A Lease without holder is
free at once; a crashed run on this machine is taken over at once (`session.crashed_here`).

The holder, for its part, stops acting before anyone may take the Lease over: it counts the lock lost once
`renew_deadline_s` (two thirds of the duration, the ratio of client-go's core defaults, 10 s of 15 s) has
passed on its monotonic clock since it *sent* its last renewal that landed, each renewal request bounded
to half the deadline (as `resourcelock.NewFromKubeconfig` bounds client-go's), and `check()` judges that
deadline itself, so a renewer stuck in a request cannot leave the run believing it still holds the lock.
(k8s.io/client-go@v0.37.2 tools/leaderelection/leaderelection.go `renew`: it stops leading when it cannot
renew within RenewDeadline.) A taker waits the whole duration from when it saw that renewal, later than it
was sent: the difference, a third of the duration, is the margin for the run's requests in flight and for
clocks running at different rates.
"""

from __future__ import annotations

import functools
import getpass
import hashlib
import logging
import os
import secrets
import socket
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote

from dra_migrate.errors import ClusterError
from dra_migrate.execute.contract import LockHeld, LockLost
from dra_migrate.execute.lease import (
    DIGEST_ANNOTATION,
    LOCK_ID_ANNOTATION,
    MACHINE_ANNOTATION,
    LockInfo,
    _info,
    micro_time,
)
from dra_migrate.kube import ApiError, Kube, RetryPolicy

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = "kube-system"
DEFAULT_NAME = "dra-migrate"
DEFAULT_DURATION_S = 60
_TIMEOUT = (5.0, 30.0)  # connect, read
_ATTEMPTS = 4  # per operation, for 5xx, 429 and broken connections
RENEW_DEADLINE_FRACTION = 2 / 3  # of the Lease's duration: client-go's core clients renew within 10 s of 15 s


def _elapsed() -> float:
    """The holder's clock for its renew deadline: one that counts a suspended machine's sleep (Linux
    CLOCK_BOOTTIME; CLOCK_MONOTONIC stops while suspended). A laptop whose lid closed mid-apply must not wake
    believing it still holds a Lease that expired, and was perhaps taken over, while it slept. macOS has no
    CLOCK_BOOTTIME, and its time.monotonic() is mach_absolute_time() (CPython Python/pytime.c), which stops
    while asleep; its CLOCK_MONOTONIC_RAW is mach_continuous_time(), which counts sleep (Apple's
    mach_continuous_time documentation: "including while the system is asleep"; clock_gettime(3))."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    if sys.platform == "darwin" and hasattr(time, "CLOCK_MONOTONIC_RAW"):
        return time.clock_gettime(time.CLOCK_MONOTONIC_RAW)
    return time.monotonic()


_RENEWED_WHILE_WATCHED = (
    " (renewed while this machine watched it: its holder is alive, and an expiry that looks past means this "
    "machine's clock and the holder's differ)"
)


def new_lock_id() -> str:
    return secrets.token_hex(8)


def user_name() -> str:
    """The login name, else the uid: a container may run as a uid its image's /etc/passwd does not name (OpenShift's
    restricted-v2 SCC gives each namespace its own range), where `getpass.getuser()` raises (KeyError on Python
    3.11, OSError from 3.13)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def holder_identity(lock_id: str) -> str:
    """`<user>@<host>/<pid>/<lock id>`: who to ask, and which process."""
    return f"{user_name()}@{socket.gethostname()}/{os.getpid()}/{lock_id}"


# The lock ids this process holds: a holder naming this process's pid is a previous incarnation of it (a
# container restarted as PID 1 again: execute/session.py `crashed_here`) only when it is none of these.
HELD_HERE: set[str] = set()


@functools.cache
def machine_id() -> str:
    """A digest that names this machine, not its hostname: two laptops can share a default hostname
    (`MacBook-Pro`, `localhost`), and a run that took a live holder on the other one for its own crashed
    run would break a lock in use (execute/session.py `crashed_here`). "" when nothing names the machine."""
    try:
        with open("/etc/machine-id") as f:  # systemd machine-id(5): unique per installation, kept across boots
            found = f.read().strip()
    except OSError:
        found = ""
    if not found and sys.platform == "darwin":
        # Not uuid.getnode(): on a MacBook Pro with a T2 chip it finds the internal bridge's address, the same
        # on every such Mac (cpython#85724). The hardware UUID is the machine's own.
        found = _darwin_hardware_uuid()
        return _digest_of_machine(found, 0) if found else ""
    # uuid.getnode() may run `ip link` or `ifconfig` to find an address: only where there is no machine-id.
    return _digest_of_machine(found, 0 if found else uuid.getnode())


def _darwin_hardware_uuid() -> str:
    """macOS's hardware UUID, IOPlatformUUID of the IOPlatformExpertDevice (System Information's "Hardware
    UUID"; `ioreg -rd1 -c IOPlatformExpertDevice`), or "" when it cannot be read."""
    import re
    import subprocess

    try:
        out = subprocess.run(
            ["/usr/sbin/ioreg", "-rd1", "-c", "IOPlatformExpertDevice"],
            capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r'"IOPlatformUUID"\s*=\s*"([0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12})"', out or "")
    return f"darwin:{m.group(1).upper()}" if m else ""


def _digest_of_machine(machine_id_text: str, node: int) -> str:
    if not machine_id_text:
        if node >> 40 & 1 or not node:  # the multicast bit: uuid.getnode() made the number up (RFC 4122 §4.1.6)
            return ""
        machine_id_text = f"node:{node:012x}"  # a hardware address of this machine (no machine-id)
    return hashlib.sha256(f"dra-migrate:{machine_id_text}".encode()).hexdigest()[:16]  # the id itself stays here


# ----------------------------------------------------------------------------------------------------
# A few JSON requests on the official client's connection (it owns TLS, certificates, tokens, proxies).


class _Rest:
    """The lock's requests, through the shared REST helper (retries on 429, 5xx and broken connections).

    Every lock write is conditional (create is atomic, updates and deletes carry a resourceVersion), so
    repeating one whose answer was lost cannot overwrite someone else's: at worst it gets a 409 that the
    caller sorts out by reading the Lease back."""

    def __init__(self, api_client: Any) -> None:
        self._once = Kube(api_client)
        self._retried = self._once.with_retry(RetryPolicy(retries=_ATTEMPTS - 1, backoff_s=0.25))

    def request(
        self, method: str, path: str, body: Any = None, timeout: tuple[float, float] = _TIMEOUT
    ) -> dict[str, Any]:
        """One try (renewal: the renewer's own schedule is the retry)."""
        return self._once.request(method, path, body=body, timeout=timeout)

    def retrying(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        return self._retried.request(method, path, body=body, timeout=_TIMEOUT)

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return self.retrying("GET", path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise


def _lease_path(namespace: str, name: str = "") -> str:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases"
    return f"{path}/{quote(name, safe='')}" if name else path


def _delete_options(lease: dict[str, Any]) -> dict[str, Any]:
    meta = lease.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
    }


def read_lock(api_client: Any, *, namespace: str = DEFAULT_NAMESPACE, name: str = DEFAULT_NAME) -> LockInfo | None:
    """Who holds the lock (holder, plan digest, expiry, lock id), or None when there is no Lease."""
    lease = _Rest(api_client).get_or_none(_lease_path(namespace, name))
    return _info(lease, namespace, name) if lease else None


def break_lock(
    api_client: Any,
    lock_id: str,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    name: str = DEFAULT_NAME,
    force: bool = False,
) -> LockInfo | None:
    """Delete the Lease if its lock id is `lock_id` (`dra-migrate unlock PLAN --lock-id ID`); what it
    said, or None when there was no lock. The id guards against breaking a lock someone took since.

    Without `force`, a Lease renewed within its duration (by this machine's clock) is refused as live,
    naming its holder: its run is acting on the cluster (a 10-minute drain looks stuck but renews every
    20 s), and breaking it lets a second apply start before the first one notices at its next renewal.
    One whose holder crashed expires by itself within its duration; `--force` is for a holder known gone."""
    rest = _Rest(api_client)
    path = _lease_path(namespace, name)
    for _ in range(_ATTEMPTS):
        lease = rest.get_or_none(path)
        if lease is None:
            return None
        info = _info(lease, namespace, name)
        if info.lock_id != lock_id:
            raise ClusterError(
                f"the cluster lock's id is {info.lock_id or '(none)'}, not {lock_id}: {info.describe()}",
                f"check who holds it; to break it pass --lock-id {info.lock_id}" if info.lock_id else "",
            )
        if not force and not info.expired():
            raise LockHeld(
                f"the cluster lock is live, renewed within its {info.duration_s}s: {info.describe()}",
                "its run may still be acting on the cluster: wait for it, or for the Lease to expire if its "
                "holder is gone; pass --force only when you know its process is gone",
            )
        try:
            rest.retrying("DELETE", path, _delete_options(lease))
        except ApiError as e:
            if e.status == 404:  # gone meanwhile: nothing left to break
                return info
            if e.status == 409:  # renewed or replaced meanwhile: look again
                continue
            raise
        log.info("broke the cluster lock: %s", info.describe())
        return info
    raise ClusterError(f"the cluster lock {namespace}/{name} kept changing while breaking it", "try again")


class ClusterLock:
    """The Lease this run holds. `with ClusterLock(api, holder=..., plan_digest=...) as lock:` acquires,
    renews in the background and releases; the runner checks `lock.lost` (or `lock.check()`) between steps.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        name: str = DEFAULT_NAME,
        holder: str | None = None,
        plan_digest: str,
        duration_s: int = DEFAULT_DURATION_S,
        renew_every_s: float | None = None,
        lock_id: str | None = None,
        renew_deadline_s: float | None = None,
    ) -> None:
        if duration_s < 1:
            raise ValueError("duration_s must be at least 1")
        self.renew_deadline_s = (
            renew_deadline_s if renew_deadline_s is not None else duration_s * RENEW_DEADLINE_FRACTION
        )
        if not 0 < self.renew_deadline_s < duration_s:
            raise ValueError("renew_deadline_s must be between 0 and duration_s")  # client-go refuses it too
        self._rest = _Rest(api_client)
        self.namespace = namespace
        self.name = name
        self.lock_id = lock_id or new_lock_id()
        self.holder = holder or holder_identity(self.lock_id)
        self.plan_digest = plan_digest
        self.duration_s = duration_s
        self.renew_every_s = min(
            renew_every_s if renew_every_s is not None else duration_s / 3, self.renew_deadline_s / 2
        )
        self._path = _lease_path(namespace, name)
        self._lease: dict[str, Any] | None = None  # the Lease as we last wrote it; None when not held
        self._mutex = threading.Lock()  # one write at a time between the renewer and release()
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._lost_once = threading.Lock()
        self.lost_reason = ""
        # Monotonic time until which the lock is ours: the sending of the last renewal that landed (or of the
        # write that acquired it) plus `renew_deadline_s`.
        self._valid_until = 0.0
        self._thread: threading.Thread | None = None
        self._on_lost: list[Any] = []  # told the reason the moment the lock is lost (cancels the run's waits)

    # -- state

    @property
    def held(self) -> bool:
        return self._lease is not None and not self.lost

    @property
    def lost(self) -> bool:
        """True once renewal failed for good: someone else holds the Lease, it was broken, or it could not be
        renewed within `renew_deadline_s` (judged here too: the renewer may be stuck in a request)."""
        if not self._lost.is_set() and self._lease is not None and self._past_deadline():
            self._lose(f"could not renew it within {self.renew_deadline_s:.0f}s")
        return self._lost.is_set()

    def _past_deadline(self) -> bool:
        return _elapsed() >= self._valid_until

    def on_lost(self, callback: Any) -> None:
        """Call `callback(reason)` when the lock is lost (at once if it already is)."""
        self._on_lost.append(callback)
        if self._lost.is_set():
            callback(self.lost_reason)

    def check(self) -> None:
        """Raise LockLost if the lock was lost: the runner must not take another step without it."""
        if self.lost:
            raise LockLost(
                f"lost the cluster lock {self.namespace}/{self.name}: {self.lost_reason}",
                "another apply may be running; check `dra-migrate status` before resuming",
            )

    def info(self) -> LockInfo | None:
        return _info(self._lease, self.namespace, self.name) if self._lease else None

    # -- acquire

    def _manifest(self, now: datetime, base: dict[str, Any] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {"app.kubernetes.io/managed-by": "dra-migrate"},
            "annotations": {
                DIGEST_ANNOTATION: self.plan_digest,
                LOCK_ID_ANNOTATION: self.lock_id,
                MACHINE_ANNOTATION: machine_id(),
            },
        }
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_s,
            "acquireTime": micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": 0,
        }
        if base is not None:  # a takeover: conditioned on the version we judged expired
            meta["resourceVersion"] = (base.get("metadata") or {}).get("resourceVersion")
            spec["leaseTransitions"] = int((base.get("spec") or {}).get("leaseTransitions") or 0) + 1
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _ours(self, lease: dict[str, Any]) -> bool:
        info = _info(lease, self.namespace, self.name)
        return info.lock_id == self.lock_id and info.holder == self.holder

    def _held_by_other(self, info: LockInfo | None, why: str = "") -> LockHeld:
        if info is None:
            return LockHeld(f"the cluster lock {self.namespace}/{self.name} was taken by another apply just now")
        hint = f"wait for it to finish; if it is dead, `dra-migrate unlock PLAN --lock-id {info.lock_id}` breaks it"
        return LockHeld(f"another apply holds the cluster lock: {info.describe()}{why}", hint)

    def acquire(self) -> LockInfo:
        """Take the lock: create the Lease, or take over an expired one. Raises LockHeld naming the
        holder, its plan, its expiry and the lock id that `unlock` needs."""
        if self.held:
            info = self.info()
            assert info is not None
            return info
        for _ in range(_ATTEMPTS):
            now = datetime.now(UTC)
            sent = _elapsed()
            try:
                created = self._rest.retrying("POST", _lease_path(self.namespace), self._manifest(now))
            except ApiError as e:
                if e.status != 409:
                    raise
            else:
                return self._acquired(created, "acquired", sent)
            existing = self._rest.get_or_none(self._path)
            if existing is None:
                continue  # released between our create and our read: try again
            if self._ours(existing):
                # Our create went through but its answer was lost, and the retry met our own Lease.
                return self._acquired(existing, "acquired", sent)
            info = _info(existing, self.namespace, self.name)
            if not info.expired(now):
                raise self._held_by_other(info)
            if info.holder and info.expires is not None:
                existing = self._unchanged_for_its_duration(existing, info)
                if existing is None:
                    continue  # released while we watched: create it
                now = datetime.now(UTC)
            sent = _elapsed()
            try:
                taken = self._rest.retrying("PUT", self._path, self._manifest(now, existing))
            except ApiError as e:
                if e.status == 404:
                    continue  # deleted meanwhile: create it
                if e.status != 409:
                    raise
                # Someone else wrote it since we read it (another takeover, or the holder came back) —
                # unless that was our own PUT whose answer got lost.
                latest = self._rest.get_or_none(self._path)
                if latest is not None and self._ours(latest):
                    return self._acquired(latest, f"took over from {info.holder}", sent)
                raise self._held_by_other(_info(latest, self.namespace, self.name) if latest else None) from e
            return self._acquired(taken, f"took over the expired lock of {info.holder}", sent)
        raise ClusterError(f"the cluster lock {self.namespace}/{self.name} kept changing while acquiring it")

    def _unchanged_for_its_duration(self, lease: dict[str, Any], info: LockInfo) -> dict[str, Any] | None:
        """The Lease, once it has not changed for `leaseDurationSeconds` of our monotonic clock; None when
        it was deleted meanwhile. Raises LockHeld when it changed: its holder renewed it (alive, whatever its
        renewTime said by our clock) or someone else took it."""
        version = (lease.get("metadata") or {}).get("resourceVersion")
        log.warning(
            "the cluster lock %s/%s looks expired (held by %s, renewed %s by its clock); making sure it is "
            "abandoned: %ss without a renewal",
            self.namespace, self.name, info.holder, micro_time(info.renewed) if info.renewed else "never",
            info.duration_s,
        )  # fmt: skip
        deadline = time.monotonic() + info.duration_s
        step = min(2.0, max(0.2, info.duration_s / 10))
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(step, left))
            latest = self._rest.get_or_none(self._path)
            if latest is None:
                return None
            if (latest.get("metadata") or {}).get("resourceVersion") != version:
                now_held = _info(latest, self.namespace, self.name)
                if now_held.holder != info.holder:
                    raise self._held_by_other(now_held)  # taken over meanwhile, by another apply's own watch
                raise self._held_by_other(now_held, _RENEWED_WHILE_WATCHED)
        return lease

    def _acquired(self, lease: dict[str, Any], how: str, sent: float) -> LockInfo:
        HELD_HERE.add(self.lock_id)
        self._valid_until = sent + self.renew_deadline_s
        self._lease = lease
        self._lost.clear()
        self.lost_reason = ""
        info = _info(lease, self.namespace, self.name)
        log.info("cluster lock %s: %s", how, info.describe())
        return info

    # -- renew

    def _request_timeout(self) -> tuple[float, float]:
        """A renewal's request: at most half the deadline (client-go's `NewFromKubeconfig` sets RenewDeadline/2,
        "to keep a single hung request from forcing a leader loss"), and never past the deadline itself."""
        left = max(0.1, self._valid_until - _elapsed())
        bound = min(left, max(1.0, self.renew_deadline_s / 2))
        return (min(_TIMEOUT[0], bound), min(_TIMEOUT[1], bound))

    def renew(self) -> bool:
        """Renew once (what the background thread does). False, with `lost` set, when the lock is gone;
        ClusterError when the API server could not be asked (the caller tries again)."""
        with self._mutex:
            for _ in range(2):
                if self._lease is None or self.lost:
                    return False
                body = {**self._lease, "spec": {**self._lease["spec"], "renewTime": micro_time(datetime.now(UTC))}}
                sent = _elapsed()
                try:
                    self._lease = self._rest.request("PUT", self._path, body, self._request_timeout())
                    self._valid_until = sent + self.renew_deadline_s
                    return True
                except ApiError as e:
                    if e.status == 404:
                        return self._lose("the Lease was deleted (broken with `dra-migrate unlock`?)")
                    if e.status != 409:
                        raise
                # 409: changed since our last write. Still ours (a renewal landed but its answer was lost)?
                # Then renew from that version; otherwise someone took it over.
                try:
                    latest: dict[str, Any] | None = self._rest.request("GET", self._path, None, self._request_timeout())
                except ApiError as e:
                    if e.status != 404:
                        raise
                    latest = None
                if latest is None:
                    return self._lose("the Lease was deleted (broken with `dra-migrate unlock`?)")
                if not self._ours(latest):
                    info = _info(latest, self.namespace, self.name)
                    return self._lose(f"it is now held by {info.holder} (lock id {info.lock_id})")
                self._lease = latest
            raise ClusterError(f"the cluster lock {self.namespace}/{self.name} kept changing while renewing it")

    def _lose(self, reason: str) -> bool:
        with self._lost_once:  # the renewer and a lane's `check()` may both find it: the callbacks run once
            if self._lost.is_set():
                return False
            self.lost_reason = reason
            self._lost.set()
        log.warning("lost the cluster lock %s/%s: %s", self.namespace, self.name, reason)
        for callback in list(self._on_lost):
            callback(f"lost the cluster lock: {reason}")
        return False

    def start_renewing(self) -> None:
        """Renew every `renew_every_s` in a daemon thread until release(). Transient failures are retried
        sooner; when the Lease expires without a successful renewal, or another holder has it, `lost` is set."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        wait = self.renew_every_s
        while not self._stop.wait(wait):
            try:
                if not self.renew():
                    return
                wait = self.renew_every_s
            except ClusterError as e:
                # Judged by our own monotonic clock, from the sending of the last renewal that landed: the
                # run must stop before another apply, watching the Lease unchanged for its duration, takes it.
                left = self._valid_until - _elapsed()
                if left <= 0:
                    self._lose(f"could not renew it within {self.renew_deadline_s:.0f}s ({e.message})")
                    return
                wait = min(self.renew_every_s, left, max(0.2, getattr(e, "retry_after", 0.0) or 1.0))
                log.debug("cluster lock renewal failed: %s; retrying in %.1fs", e.message, wait)
            except Exception as e:  # a bug must not leave the runner believing it still holds the lock
                self._lose(f"renewal failed: {e!r}")
                return

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=_TIMEOUT[0] + _TIMEOUT[1] + 1)
        self._thread = None

    # -- release

    def release(self) -> bool:
        """Stop renewing and delete the Lease if we still hold it (preconditions: its uid and the
        resourceVersion we last wrote). True when it is gone; False when someone else holds it now."""
        self._stop_renewing()
        HELD_HERE.discard(self.lock_id)
        with self._mutex:
            lease, self._lease = self._lease, None
            if lease is None or self._lost.is_set():
                return False
            for _ in range(_ATTEMPTS):
                try:
                    self._rest.retrying("DELETE", self._path, _delete_options(lease))
                    log.info("cluster lock released: %s/%s", self.namespace, self.name)
                    return True
                except ApiError as e:
                    if e.status == 404:  # broken meanwhile, or our delete landed and its answer was lost
                        return True
                    if e.status != 409:
                        raise
                latest = self._rest.get_or_none(self._path)
                if latest is None or not self._ours(latest):
                    return False  # someone else's now: not ours to delete
                lease = latest  # ours, at a version whose write answer we never saw
            return False

    def __enter__(self) -> ClusterLock:
        self.acquire()
        try:
            self.start_renewing()
        except BaseException:
            self.release()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.release()
        except ClusterError as e:
            # The API server cannot be reached now (the very failure that may have stopped the run): the
            # Lease expires by itself, and a resume on this machine takes over a dead run's lock at once.
            # The run's own outcome is what the caller must see, not this.
            log.warning("could not release the cluster lock (%s); it expires in %ss", e.message, self.duration_s)
