"""The apply journal: append-only JSONL beside the plan, one record when a step starts and one when it ends.

Every record is flushed and fsync'd before `record` returns, so a step the runner started is on disk
before it acts on the cluster, and what the journal says happened did happen (or was about to). A crash
mid-write leaves at most a torn last line, which reading ignores and reopening repairs. The journal is
what `status` prints and what resume starts from (`Progress`).

Records: `seq` (1, 2, ... continuing across runs), `time` (RFC 3339 UTC: the only wall-clock data),
`event` ("run-start", "start", "end", "run-end", "lock", "gate", ...) and the caller's fields, e.g.
`phase` ("apply"|"rollback"), `stage`, `wave`, `stepId`, `action`, `target`, `result`
("ok"|"failed"|"skipped"|"dry-run"), `before`, `after`, `error`, `actor`, `planDigest`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import orjson

from dra_migrate.cluster.identity import ClusterIdentity, refuse_other_cluster
from dra_migrate.errors import InputError
from dra_migrate.execute.journal_check import EVENTS, check_line, is_torn, refuse_gaps
from dra_migrate.fileio import sync_to_media
from dra_migrate.secrets import scrub

log = logging.getLogger(__name__)

SUFFIX = ".journal.jsonl"
_RESERVED = ("seq", "time", "event")

Record = dict[str, Any]


def journal_path(plan_path: Path) -> Path:
    """`<plan>.journal.jsonl`, beside the plan: plan.yaml -> plan.yaml.journal.jsonl."""
    return plan_path.with_name(plan_path.name + SUFFIX)


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class _Scan:
    records: list[Record]
    good_bytes: int  # length of the prefix made of whole, valid lines
    torn: bytes  # what follows it: b"" or a torn last line
    torn_line: int  # its 1-based line number (0 when nothing is torn)


def _scan(data: bytes, path: Path) -> _Scan:
    """Parse the journal's bytes. Only the last line may be torn (a crash mid-write: `is_torn`); any other
    malformed line, the last one included, means the file was damaged or edited, and resuming from it
    would be a guess: refused with one line naming the file, the line and the key (`check_line`)."""
    records: list[Record] = []
    lines = data.split(b"\n")
    # split() leaves b"" after a final newline; a non-empty last piece has no newline: a write cut short.
    offset = 0
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if last and not line:
            break
        # The final line, or the final line before a trailing newline with nothing after it, was the last
        # write: a crash can leave it torn (even newline-terminated, if blocks reached disk out of order).
        final = last or (i == len(lines) - 2 and not lines[-1])
        if final and is_torn(line):
            return _Scan(records, offset, data[offset:], i + 1)
        records.append(check_line(line, f"{path}:{i + 1}"))
        offset += len(line) + (0 if last else 1)
    return _Scan(records, offset, b"", 0)


def read_journal(path: Path) -> list[Record]:
    """Every record, oldest first; a torn last line is left out. Missing file: no records."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise InputError(f"cannot read journal {path}: {e.strerror}") from e
    return _scan(data, path).records


def read_records(
    path: Path, *, plan_digest: str, require_owner: bool = True, cluster: ClusterIdentity | None = None
) -> list[Record]:
    """The journal of the plan whose digest is `plan_digest`, validated: every record is well-formed
    (`JournalRecord.from_dict`), `seq` strictly increases, and no record belongs to another plan. Refuses
    anything else with one line: a journal is one plan's history, and resuming, rolling back or
    reporting from someone else's would act on steps this plan never took. `require_owner`: refuse a
    journal in which no record names its plan (every journal apply writes does); `report` reads such a
    hand-made one, as it cannot belong to another plan either. `cluster`: the plan's cluster; a run that
    recorded another cluster is refused, naming both."""
    return checked(read_journal(path), path, plan_digest=plan_digest, require_owner=require_owner, cluster=cluster)


def checked(
    records: list[Record],
    where: Path | str,
    *,
    plan_digest: str,
    require_owner: bool = True,
    cluster: ClusterIdentity | None = None,
) -> list[Record]:
    """`read_records`' checks on records read from anywhere (the file, or the in-cluster journal)."""
    validate(records, where, plan_digest=plan_digest, require_owner=require_owner)
    for r in records:
        if r.get("event") == "run-start" and "cluster" in r:
            refuse_other_cluster(
                cluster, "the plan", ClusterIdentity.from_dict(r["cluster"]), f"{where} (record {r.get('seq')})"
            )
    return records


def validate(
    records: Sequence[Record], path: Path | str, *, plan_digest: str, require_owner: bool = True
) -> list[JournalRecord]:
    typed: list[JournalRecord] = []
    previous, owned = 0, False
    for i, r in enumerate(records):
        rec = JournalRecord.from_dict(r, f"{path}: record {i + 1}")
        if rec.seq <= previous:
            raise InputError(
                f"{path}: record {i + 1} has seq {rec.seq} after seq {previous} (the journal was edited or spliced)",
                "restore the journal, or move it aside to start over",
            )
        previous = rec.seq
        if rec.plan_digest is not None:
            if rec.plan_digest != plan_digest:
                raise InputError(
                    f"{path}: this journal belongs to another plan (record {rec.seq} has digest {rec.plan_digest}, "
                    f"this plan {plan_digest})",
                    "use the plan it was written for, or move the journal aside to start over",
                )
            owned = True
        typed.append(rec)
    refuse_gaps([rec.seq for rec in typed], path)
    if typed and not owned and require_owner:
        raise InputError(f"{path}: no record names the plan it belongs to", "move the journal aside to start over")
    return typed


@dataclass(frozen=True)
class JournalRecord:
    """One record, typed: what the runner writes, `status` and `report` read."""

    seq: int
    time: str
    event: str
    phase: str | None = None
    stage: str | None = None
    wave: str | None = None
    step_id: str | None = None
    action: str | None = None
    result: str | None = None
    error: str | None = None
    plan_digest: str | None = None
    dry_run: bool = False

    @classmethod
    def from_dict(cls, r: Record, where: str = "journal record") -> JournalRecord:
        def text(key: str) -> str | None:
            value = r.get(key)
            if value is not None and not isinstance(value, str):
                raise InputError(f"{where}: `{key}` is not a string", "restore the journal, or move it aside")
            return value

        seq = r.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise InputError(f"{where}: `seq` is not a positive integer", "restore the journal, or move it aside")
        event = text("event")
        if not event:
            raise InputError(f"{where}: no `event`", "restore the journal, or move it aside")
        return cls(
            seq=seq,
            time=text("time") or "",
            event=event,
            phase=text("phase"),
            stage=text("stage"),
            wave=text("wave"),
            step_id=text("stepId"),
            action=text("action"),
            result=text("result"),
            error=text("error"),
            plan_digest=text("planDigest"),
            dry_run=r.get("dryRun") is True,
        )


def _digest_of(records: Iterable[Record]) -> str | None:
    for r in records:
        if r.get("planDigest"):
            return str(r["planDigest"])
    return None


class Journal:
    """An open journal, appending. Use `Journal.open(path, plan_digest=...)`, preferably in a `with`."""

    def __init__(
        self,
        path: Path,
        fh: BinaryIO,
        existing: list[Record],
        plan_digest: str | None,
        repaired: str | None,
        clock: Callable[[], str],
    ) -> None:
        self.path = path
        self._fh = fh
        self.existing = existing  # the records that were there when it was opened
        self.plan_digest = plan_digest
        self.repaired = repaired  # what opening repaired (a torn last line), None when nothing
        self._clock = clock
        self._seq = max((int(r.get("seq") or 0) for r in existing), default=0)
        # Node lanes of a wave record concurrently. `_mutex` numbers and queues a record (no I/O under it):
        # `seq` is a total order and the file holds the records in it. `_io` is the one writer: it writes
        # and fsyncs every record queued so far at once (group commit), so the lanes that ended a step
        # together wait for one fsync instead of queueing for one each. Before, each record held the one
        # mutex through its write and fsync — and, after the fsync, through re-taking the interpreter from
        # the wave's other threads: on a 2,000-node rehearsal a lane spent up to 0.7 s (p90) between its
        # steps queued on it, 80 lanes ending a step at once.
        self._mutex = threading.Lock()
        self._io = threading.Lock()
        self._queued: list[bytes] = []  # serialised records not yet written, in `seq` order
        self._durable = self._seq  # the last seq written and fsync'd
        self._broken: BaseException | None = None  # a write or fsync that failed: nothing more is recorded
        self._size = os.fstat(fh.fileno()).st_size  # the bytes of acknowledged records (opening flushed them)

    @classmethod
    def open(cls, path: Path, *, plan_digest: str | None = None, clock: Callable[[], str] = now_rfc3339) -> Journal:
        """Open for append, creating the file. Refuses a journal that belongs to another plan; drops a
        torn last line left by a crash (and says so in `repaired` and a warning log)."""
        created = not path.exists()
        try:
            fh = open(path, "r+b" if not created else "x+b")  # noqa: SIM115 - owned by the Journal
        except OSError as e:
            raise InputError(f"cannot open journal {path}: {e.strerror}") from e
        try:
            _lock_file(fh, path)
            data = fh.read()
            scan = _scan(data, path)
            recorded = _digest_of(scan.records)
            if plan_digest and recorded and recorded != plan_digest:
                raise InputError(
                    f"{path}: this journal belongs to another plan (digest {recorded}, this plan {plan_digest})",
                    "use the plan it was written for, or move the journal aside to start over",
                )
            repaired = None
            if scan.torn:
                repaired = f"dropped a torn last line (line {scan.torn_line}, {len(scan.torn)} bytes)"
                log.warning("journal %s: %s, left by an interrupted write", path, repaired)
                fh.truncate(scan.good_bytes)
                sync_to_media(fh.fileno())
            fh.seek(0, os.SEEK_END)
            if scan.records and not scan.torn and not data.endswith(b"\n"):
                # A whole record whose newline never reached the disk: keep it, end its line.
                repaired = "completed the last line (its newline was missing)"
                log.warning("journal %s: %s", path, repaired)
                fh.write(b"\n")
                fh.flush()
                sync_to_media(fh.fileno())
            if created:
                _fsync_dir(path.parent)
        except BaseException:
            fh.close()
            raise
        return cls(path, fh, scan.records, plan_digest or recorded, repaired, clock)

    def record(self, event: str, **fields: Any) -> Record:
        """Append one record (None-valued fields left out) and make it durable before returning it.
        Safe to call from several threads: records get consecutive `seq`s in the order they are written;
        records made at the same time share one write and one fsync (each returns once its own is on disk)."""
        with self._mutex:
            rec = self._queue(event, fields)
        self._sync(int(rec["seq"]))
        return rec

    def _sync(self, seq: int) -> None:
        """Until the record `seq` is written and fsync'd: by this thread, with every record queued before and
        after it so far, or already by the thread that held the writer before."""
        with self._io:
            if self._durable >= seq:
                return  # written with an earlier thread's batch
            if self._broken is not None:
                raise self._error(self._broken, "an earlier write failed; nothing more is recorded")
            with self._mutex:
                lines, last = self._queued, self._seq
                self._queued = []
            try:
                interrupt = self._write_durably(b"".join(lines))
            except OSError as e:
                # Records of this batch may be on disk in part (a torn last line, which reopening repairs);
                # none of them is acknowledged, nor any later one: the run stops on this error.
                self._broken = e
                raise self._error(e) from e
            self._durable = last
        if interrupt is not None:
            raise interrupt  # the batch is whole on disk: now the Ctrl-C (or SIGTERM) may go on

    def _write_durably(self, data: bytes) -> KeyboardInterrupt | None:
        """Append `data` at the end of the acknowledged records and fsync it. A Ctrl-C (or SIGTERM, SIGHUP:
        cli/interrupts.py raises them on the main thread, which writes the records of a one-lane unit) is
        held until the batch is whole on disk and returned: raised mid-write it would leave a part of a line
        that the next batch followed (a malformed line mid-file, refused on every later read), and the
        records of the interrupted step and of the run's end could not be written after it."""
        fd = self._fh.fileno()
        start = self._size
        if os.lseek(fd, 0, os.SEEK_END) != start:  # a batch cut short by a second interrupt: not acknowledged
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
        interrupt: KeyboardInterrupt | None = None
        while True:
            try:
                # The file position, not a counter, says how much is written: it is right whenever we stop.
                while (done := os.lseek(fd, 0, os.SEEK_CUR) - start) < len(data):
                    os.write(fd, data[done:])
                sync_to_media(fd)
                break
            except KeyboardInterrupt as e:
                interrupt = interrupt or e
        self._size = start + len(data)
        return interrupt

    def _error(self, e: BaseException, why: str = "") -> OSError:
        """An OSError naming the journal (the CLI says which file and why, not a traceback)."""
        errno_ = e.errno if isinstance(e, OSError) else None
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        return OSError(errno_, f"{reason} ({why})" if why else reason, str(self.path))

    def _queue(self, event: str, fields: dict[str, Any]) -> Record:
        if self._fh.closed:
            raise ValueError(f"journal {self.path} is closed")
        if self._broken is not None:
            raise self._error(self._broken, "an earlier write failed; nothing more is recorded")
        if event not in EVENTS:
            raise ValueError(f"unknown journal event {event!r}")
        clash = [k for k in _RESERVED if k in fields]
        if clash:
            raise ValueError(f"journal fields {clash} are set by the journal itself")
        digest = fields.get("planDigest")
        if digest and self.plan_digest and digest != self.plan_digest:
            raise InputError(f"{self.path}: this journal belongs to another plan (digest {self.plan_digest})")
        if event == "run-start" and self.plan_digest and not digest:
            fields["planDigest"] = self.plan_digest
        rec: Record = {"seq": self._seq + 1, "time": self._clock(), "event": event}
        rec.update((k, v) for k, v in fields.items() if v is not None)
        # Serialise before queueing, so a value orjson cannot encode leaves no partial line behind.
        line = orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)
        self._queued.append(line)
        self._seq += 1
        if digest and not self.plan_digest:
            self.plan_digest = str(digest)
        return rec

    @property
    def seq(self) -> int:
        """The seq of the last record written and fsync'd (0 for an empty journal)."""
        return self._durable

    def close(self) -> None:
        self._fh.close()  # closing drops the flock too

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _lock_file(fh: BinaryIO, path: Path) -> None:
    """One writer per journal on this machine (the cluster lock guards the cluster, not this file)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: nothing to lock with
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as e:
        raise InputError(
            f"journal {path} is open in another process", "wait for the other apply or rollback to finish"
        ) from e
    except OSError as e:  # a filesystem that cannot lock: a Mac's SMB or AFP share (ENOTSUP), NFS without lockd
        hint = "keep the plan (its journal beside it) on a local disk, or apply as the in-cluster Job"
        raise InputError(f"cannot lock journal {path}: {e.strerror or e}", hint) from e


def _fsync_dir(directory: Path) -> None:
    """Make a new file's directory entry durable too (the file's own fsync does not cover it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories; the records themselves are synced
        pass
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------------
# Progress: what the records say about each step.

DONE, STARTED, FAILED, ROLLED_BACK = "done", "started", "failed", "rolled-back"
# Ended without reaching its goal and without failing: stopped by a transient failure, by the failure of
# another node of its wave, or by the lock's loss. Resume runs it again; a rollback undoes it.
INTERRUPTED = "interrupted"
# An end `result`, not a status: the step's precondition failed before it changed anything (StepRefused). The
# step is left as it was before that start (as a dry run's is), so nothing undoes it; resume runs it again.
REFUSED = "refused"


@dataclass(frozen=True)
class StepStatus:
    step_id: str
    status: str  # "done" | "started" (a crash between start and end) | "failed" | "interrupted" | "rolled-back"
    phase: str  # of the record that set it: "apply" | "rollback"
    seq: int
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stepId": self.step_id, "status": self.status, "phase": self.phase, "seq": self.seq}
        if self.error:
            out["error"] = scrub(self.error)  # errors quote servers and proxies: never print their credentials
        return out


@dataclass(frozen=True)
class NodeProgress:
    """The steps of one node of a stage (node None: the stage's own steps, e.g. `prepare`)."""

    stage: str
    node: str | None
    done: tuple[str, ...]
    current: str | None
    failed: tuple[str, ...]
    remaining: tuple[str, ...]  # not done and not current (failed ones included: resume retries them)

    @property
    def total(self) -> int:
        return len(self.done) + len(self.remaining) + (1 if self.current else 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "node": self.node,
            "done": list(self.done),
            "current": self.current,
            "failed": list(self.failed),
            "remaining": list(self.remaining),
        }


@dataclass(frozen=True)
class StageProgress:
    stage: str
    nodes: tuple[NodeProgress, ...]

    @property
    def done(self) -> int:
        return sum(len(n.done) for n in self.nodes)

    @property
    def total(self) -> int:
        return sum(n.total for n in self.nodes)

    @property
    def current(self) -> str | None:
        return next((n.current for n in self.nodes if n.current), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "done": self.done,
            "total": self.total,
            "current": self.current,
            "nodes": [n.to_dict() for n in self.nodes],
        }


def stage_and_node(step_id: str) -> tuple[str, str | None]:
    """Plan step ids are "<stage>/<node>/<action>" in pool stages and "prepare/<action>[/<target>]"."""
    parts = step_id.split("/")
    if parts[0] == "prepare" or len(parts) < 3:
        return parts[0], None
    return parts[0], parts[1]


@dataclass
class Progress:
    """Each step's latest status, from a journal's records (oldest first).

    Only `start` and `end` records with a `stepId` count. Records of a dry run (an `end` with result
    "dry-run", or anything in a run whose `run-start` says `dryRun: true`) changed nothing and are skipped.
    An `end` with result "skipped" means the step's goal already held: done.
    """

    steps: dict[str, StepStatus] = field(default_factory=dict)
    runs: int = 0
    last_seq: int = 0

    @classmethod
    def from_records(cls, records: Iterable[Record | JournalRecord]) -> Progress:
        """From records as read (dicts, typed here: a malformed one is an InputError) or already typed."""
        p = cls()
        dry_run = False
        before_start: dict[str, StepStatus | None] = {}  # a step's status before its open `start`
        for i, raw in enumerate(records):
            r = raw if isinstance(raw, JournalRecord) else JournalRecord.from_dict(raw, f"journal record {i + 1}")
            p.last_seq = max(p.last_seq, r.seq)
            if r.event == "run-start":
                p.runs += 1
                dry_run = r.dry_run
                continue
            step_id = r.step_id
            if dry_run or not step_id or r.event not in ("start", "end"):
                continue
            if r.event == "start":
                before_start[step_id] = p.steps.get(step_id)
            elif r.result in ("dry-run", REFUSED):
                # Its start did not know it would be a dry run, or refused: forget that too.
                prev = before_start.pop(step_id, None)
                if prev is None:
                    p.steps.pop(step_id, None)
                else:
                    p.steps[step_id] = prev
                continue
            phase = r.phase or "apply"
            status = _status_of(r.event, phase, r.result)
            if status is None:
                continue
            p.steps[step_id] = StepStatus(step_id, status, phase, r.seq, r.error or None)
        return p

    @classmethod
    def of_journal(cls, path: Path) -> Progress:
        return cls.from_records(read_journal(path))

    def status(self, step_id: str) -> str | None:
        s = self.steps.get(step_id)
        return s.status if s else None

    def done_steps(self, phase: str = "apply") -> set[str]:
        """Steps whose latest record finished them in `phase`: applied ("done") or undone ("rolled-back")."""
        want = DONE if phase == "apply" else ROLLED_BACK
        return {k for k, s in self.steps.items() if s.status == want and s.phase == phase}

    @property
    def current(self) -> StepStatus | None:
        """The step started last and never ended (the one a crash interrupted), if any."""
        started = [s for s in self.steps.values() if s.status == STARTED]
        return max(started, key=lambda s: s.seq) if started else None

    @property
    def failed(self) -> list[StepStatus]:
        return sorted((s for s in self.steps.values() if s.status == FAILED), key=lambda s: s.seq)

    def summary(self, step_ids: Sequence[str], phase: str = "apply") -> list[StageProgress]:
        """Per stage, then per node, in plan order: done / current / remaining of the plan's steps."""
        done = self.done_steps(phase)
        groups: dict[tuple[str, str | None], list[str]] = {}
        for step_id in step_ids:
            groups.setdefault(stage_and_node(step_id), []).append(step_id)
        stages: dict[str, list[NodeProgress]] = {}
        for (stage, node), ids in groups.items():
            current = next((i for i in ids if self.status(i) == STARTED and self.steps[i].phase == phase), None)
            stages.setdefault(stage, []).append(
                NodeProgress(
                    stage=stage,
                    node=node,
                    done=tuple(i for i in ids if i in done),
                    current=current,
                    failed=tuple(i for i in ids if self.status(i) == FAILED and self.steps[i].phase == phase),
                    remaining=tuple(i for i in ids if i not in done and i != current),
                )
            )
        return [StageProgress(stage, tuple(nodes)) for stage, nodes in stages.items()]


def _status_of(event: str, phase: str, result: Any) -> str | None:
    if event == "start":
        return STARTED
    if result == "failed":
        return FAILED
    if result == "interrupted":
        return INTERRUPTED
    if result in ("ok", "skipped", None):
        return ROLLED_BACK if phase == "rollback" else DONE
    return None
