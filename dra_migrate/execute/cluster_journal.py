"""The apply journal in the cluster (`--state in-cluster`): ConfigMaps beside the lock's Lease.

Why ConfigMaps and not a CRD: nothing to install before the first apply, and RBAC a cluster admin reads
at a glance (create/patch ConfigMaps in one namespace). Why not one ConfigMap: an object's data is
capped at 1 MiB by the API server's validation (k8s.io/kubernetes v1.37.2 pkg/apis/core/validation/
validation.go `ValidateConfigMap`: the values' total size against `core.MaxSecretSize`, 1 MiB in
pkg/apis/core/types.go), and below that etcd refuses a request over `--max-request-bytes` (1.5 MiB by
default, go.etcd.io/etcd/server/v3 embed `DefaultMaxRequestBytes`). A 500-node apply writes thousands
of records, so the journal is a series of chunks of at most `CHUNK_BYTES` each. Every append rewrites
its whole chunk in etcd, so the chunk's size is the append's cost: measured on this project's control
plane (v1.37.2, 2 shared cores), 9.5 ms a record with 32 KiB chunks, 11.3 ms with 64 KiB, 35 ms with
256 KiB (a 300-byte record; docs/in-cluster.md). 64 KiB, 1/16 of the cap: a 500-node apply's few MB of
records make some 60 ConfigMaps, read back with one list.

Layout, in the lock's namespace: `dra-migrate-journal-<digest 16>-<chunk 00000>`, labelled
`dra-migrate.io/journal=<digest 40>` and `dra-migrate.io/chunk=<n>`, annotated with the full plan
digest; one data key per record, its `seq` zero-padded (`0000000042`), its value the record's JSON.
One journal per plan digest, as the file journal is one per plan file.

Crash safety as the file journal's: `record` returns only once the API server has stored the record
(etcd commits before it answers), so a step is recorded before it acts, and a record is whole or absent
(an object write is atomic: there is no torn line). Appends are JSON merge patches that add one key and
carry the chunk's last resourceVersion, and a new chunk is a create: of two writers exactly one
succeeds and the other gets 409 Conflict. The Lease keeps a second runner out; the condition keeps a
runner that lost its Lease from splicing its records into another's journal (`JournalConflict`). A
retried write whose first answer was lost meets its own record on re-reading and carries on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any
from urllib.parse import quote

import orjson

from dra_migrate.errors import ClusterError, InputError
from dra_migrate.execute.journal import Record, checked, now_rfc3339
from dra_migrate.kube import WRITE_RETRIES, ApiError, Kube

CHUNK_BYTES = 64 * 1024  # 1/16 of the 1 MiB ConfigMap cap; an append's cost grows with it (see above)
MAX_RECORD_BYTES = 512 * 1024  # one record alone in a chunk must still fit well under the cap
JOURNAL_LABEL = "dra-migrate.io/journal"
CHUNK_LABEL = "dra-migrate.io/chunk"
DIGEST_ANNOTATION = "dra-migrate.io/plan-digest"
_RESERVED = ("seq", "time", "event")
_TIMEOUT = (5.0, 30.0)


class JournalConflict(ClusterError):
    """Someone else wrote the in-cluster journal since this runner last did: stop, write nothing more."""


def _hex(plan_digest: str) -> str:
    hexpart = plan_digest.split(":", 1)[-1].lower()
    if len(hexpart) < 16 or any(c not in "0123456789abcdef" for c in hexpart):
        raise InputError(f"plan digest {plan_digest!r} is not a sha256 digest", "regenerate the plan")
    return hexpart


def journal_name(plan_digest: str) -> str:
    return f"dra-migrate-journal-{_hex(plan_digest)[:16]}"


def chunk_name(plan_digest: str, n: int) -> str:
    return f"{journal_name(plan_digest)}-{n:05d}"


def where(namespace: str, plan_digest: str) -> str:
    """How messages name the journal: `in-cluster journal NS/dra-migrate-journal-<digest>`."""
    return f"in-cluster journal {namespace}/{journal_name(plan_digest)}"


def _key(seq: int) -> str:
    return f"{seq:010d}"


def _cm_path(namespace: str, name: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps"
    return f"{path}/{quote(name, safe='')}" if name else path


def _chunk_records(cm: dict[str, Any], place: str) -> list[Record]:
    """A chunk's records in seq order; refuses a key or value the journal never writes (a hand edit)."""
    name = str((cm.get("metadata") or {}).get("name") or "?")
    out: list[Record] = []
    for key, value in sorted((cm.get("data") or {}).items()):
        try:
            seq = int(key)
            rec = orjson.loads(value)
            if not isinstance(rec, dict) or rec.get("seq") != seq or "event" not in rec:
                raise ValueError("not the record its key names")
        except (ValueError, orjson.JSONDecodeError) as e:
            raise InputError(
                f"{place}: ConfigMap {name} key {key!r} is not a journal record ({e})",
                "the journal was edited; restore it, or delete its ConfigMaps to start over",
            ) from e
        out.append(rec)
    return out


def _chunk_number(cm: dict[str, Any]) -> int:
    labels = (cm.get("metadata") or {}).get("labels") or {}
    try:
        return int(labels.get(CHUNK_LABEL, ""))
    except ValueError:
        return -1


def _size(cm: dict[str, Any]) -> int:
    return sum(len(v.encode()) for v in (cm.get("data") or {}).values())


def list_chunks(kube: Kube, namespace: str, plan_digest: str) -> list[dict[str, Any]]:
    """The journal's ConfigMaps, oldest chunk first (one paged list with a label selector)."""
    selector = f"{JOURNAL_LABEL}={_hex(plan_digest)[:40]}"
    items, _rv = kube.list_all(_cm_path(namespace), [("labelSelector", selector)])
    ours = [cm for cm in items if ((cm.get("metadata") or {}).get("annotations") or {}).get(DIGEST_ANNOTATION)
            == plan_digest]  # fmt: skip
    return sorted(ours, key=_chunk_number)


def _all_records(chunks: list[dict[str, Any]], place: str) -> list[Record]:
    records: list[Record] = []
    for cm in chunks:
        records.extend(_chunk_records(cm, place))
    return records


def read_cluster_journal(api_client: Any, namespace: str, plan_digest: str) -> list[Record]:
    """Every record of the plan's in-cluster journal, oldest first (none when it has none)."""
    kube = Kube(api_client, retry=WRITE_RETRIES)
    return _all_records(list_chunks(kube, namespace, plan_digest), where(namespace, plan_digest))


class ClusterJournal:
    """An open in-cluster journal, appending: the same surface as `journal.Journal` (`record`, `seq`,
    `existing`, `plan_digest`, `close`, a context manager), so the runner cannot tell them apart."""

    def __init__(
        self,
        api_client: Any,
        namespace: str,
        *,
        plan_digest: str,
        clock: Callable[[], str] = now_rfc3339,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self._kube = Kube(api_client, retry=WRITE_RETRIES)
        self.namespace = namespace
        self.plan_digest = plan_digest
        self.path = where(namespace, plan_digest)  # what messages call it (the file journal's `path`)
        self._clock = clock
        self._chunk_bytes = chunk_bytes
        chunks = list_chunks(self._kube, namespace, plan_digest)
        self.existing = checked(_all_records(chunks, self.path), self.path, plan_digest=plan_digest)
        self.repaired: str | None = None  # nothing to repair: an object write is whole or absent
        self._seq = max((int(r["seq"]) for r in self.existing), default=0)
        last = chunks[-1] if chunks else None
        self._chunk = _chunk_number(last) if last else -1
        self._rv = str((last or {}).get("metadata", {}).get("resourceVersion") or "")
        self._bytes = _size(last) if last else 0
        self._closed = False
        self._mutex = threading.Lock()  # node lanes record concurrently: seq stays a total order

    @classmethod
    def open(cls, api_client: Any, namespace: str, *, plan_digest: str, **kw: Any) -> ClusterJournal:
        return cls(api_client, namespace, plan_digest=plan_digest, **kw)

    @property
    def seq(self) -> int:
        return self._seq

    def record(self, event: str, **fields: Any) -> Record:
        """Append one record (None-valued fields left out); it is stored by the API server on return."""
        with self._mutex:
            return self._append(event, fields)

    def _append(self, event: str, fields: dict[str, Any]) -> Record:
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        clash = [k for k in _RESERVED if k in fields]
        if clash:
            raise ValueError(f"journal fields {clash} are set by the journal itself")
        digest = fields.get("planDigest")
        if digest and digest != self.plan_digest:
            raise InputError(f"{self.path}: this journal belongs to another plan (digest {self.plan_digest})")
        if event == "run-start" and not digest:
            fields["planDigest"] = self.plan_digest
        rec: Record = {"seq": self._seq + 1, "time": self._clock(), "event": event}
        rec.update((k, v) for k, v in fields.items() if v is not None)
        line = orjson.dumps(rec).decode()  # serialised first: a value orjson refuses writes nothing
        size = len(line.encode())
        if size > MAX_RECORD_BYTES:
            raise ValueError(f"journal record of {size} bytes is over {MAX_RECORD_BYTES}")
        if self._chunk < 0 or self._bytes + size > self._chunk_bytes:
            self._new_chunk(self._chunk + 1, rec["seq"], line)
        else:
            self._add(rec["seq"], line)
        self._bytes += size
        self._seq += 1
        return rec

    def _meta(self, n: int) -> dict[str, Any]:
        return {
            "name": chunk_name(self.plan_digest, n),
            "namespace": self.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "dra-migrate",
                JOURNAL_LABEL: _hex(self.plan_digest)[:40],
                CHUNK_LABEL: str(n),
            },
            "annotations": {DIGEST_ANNOTATION: self.plan_digest},
        }

    def _new_chunk(self, n: int, seq: int, line: str) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": self._meta(n), "data": {_key(seq): line}}
        try:
            cm = self._kube.request("POST", _cm_path(self.namespace), body=body, timeout=_TIMEOUT)
        except ApiError as e:
            if e.status != 409:
                raise
            cm = self._ours_or_conflict(chunk_name(self.plan_digest, n), seq, line)
        self._chunk, self._bytes = n, 0
        self._rv = str(cm["metadata"]["resourceVersion"])

    def _add(self, seq: int, line: str) -> None:
        name = chunk_name(self.plan_digest, self._chunk)
        patch = {"metadata": {"resourceVersion": self._rv}, "data": {_key(seq): line}}
        try:
            cm = self._kube.request(
                "PATCH",
                _cm_path(self.namespace, name),
                body=patch,
                content_type="application/merge-patch+json",
                timeout=_TIMEOUT,
            )
        except ApiError as e:
            if e.status != 409:
                raise
            cm = self._ours_or_conflict(name, seq, line)
        self._rv = str(cm["metadata"]["resourceVersion"])

    def _ours_or_conflict(self, name: str, seq: int, line: str) -> dict[str, Any]:
        """After a 409: our own write whose answer was lost (the record is there, as we wrote it), or
        another writer's (JournalConflict: nothing more may be written)."""
        # Read by list (one name): the journal's readers and writers need list, create and patch only.
        items, _rv = self._kube.list_all(_cm_path(self.namespace), [("fieldSelector", f"metadata.name={name}")])
        cm = items[0] if items else None
        data = (cm or {}).get("data") or {}
        newer = [k for k in data if k > _key(seq)]
        if cm is not None and data.get(_key(seq)) == line and not newer:
            return cm
        raise JournalConflict(
            f"{self.path}: another writer changed ConfigMap {self.namespace}/{name} (record {seq})",
            "another apply or rollback may be running: check `dra-migrate status` before running again",
        )

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> ClusterJournal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
