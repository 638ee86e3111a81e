"""What the cluster lock's Lease says: its annotations, its times, and `LockInfo` read from it (execute/lock.py
takes, renews and breaks it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

DIGEST_ANNOTATION = "dra-migrate.io/plan-digest"
LOCK_ID_ANNOTATION = "dra-migrate.io/lock-id"
MACHINE_ANNOTATION = "dra-migrate.io/machine"  # machine_id(): which machine the holder runs on


def micro_time(t: datetime) -> str:
    """A Lease MicroTime: RFC 3339 in UTC with microseconds."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


@dataclass(frozen=True)
class LockInfo:
    """What a Lease says about its holder."""

    namespace: str
    name: str
    holder: str
    plan_digest: str
    lock_id: str
    renewed: datetime | None
    duration_s: int
    uid: str
    resource_version: str
    machine: str = ""  # `machine_id()` of the holder's machine; "" when it did not say (or could not tell)

    @property
    def expires(self) -> datetime | None:
        return self.renewed + timedelta(seconds=self.duration_s) if self.renewed else None

    def expired(self, now: datetime | None = None) -> bool:
        """A Lease without holder or renew time is free; otherwise it expires duration after its renewal."""
        if not self.holder or self.expires is None:
            return True
        return (now or datetime.now(UTC)) >= self.expires

    def describe(self, now: datetime | None = None) -> str:
        now = now or datetime.now(UTC)
        if self.expires is None:
            when = "no expiry recorded"
        else:
            left = (self.expires - now).total_seconds()
            stamp = self.expires.strftime("%Y-%m-%dT%H:%M:%SZ")
            when = f"expires {stamp} (in {left:.0f}s)" if left > 0 else f"expired {stamp}"
        return (
            f"Lease {self.namespace}/{self.name} held by {self.holder or '(nobody)'}, "
            f"plan {self.plan_digest or '(unknown)'}, {when}, lock id {self.lock_id or '(none)'}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "holder": self.holder,
            "planDigest": self.plan_digest,
            "lockId": self.lock_id,
            "renewTime": micro_time(self.renewed) if self.renewed else None,
            "expires": micro_time(self.expires) if self.expires else None,
            "leaseDurationSeconds": self.duration_s,
        }


def _info(lease: dict[str, Any], namespace: str, name: str) -> LockInfo:
    meta = lease.get("metadata") or {}
    spec = lease.get("spec") or {}
    ann = meta.get("annotations") or {}
    return LockInfo(
        namespace=namespace,
        name=name,
        holder=str(spec.get("holderIdentity") or ""),
        plan_digest=str(ann.get(DIGEST_ANNOTATION) or ""),
        lock_id=str(ann.get(LOCK_ID_ANNOTATION) or ""),
        renewed=_parse_time(spec.get("renewTime")) or _parse_time(spec.get("acquireTime")),
        duration_s=int(spec.get("leaseDurationSeconds") or 0),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        machine=str(ann.get(MACHINE_ANNOTATION) or ""),
    )
