"""What a journal line must be before any reader acts on it: one JSON object, valid UTF-8, no key given
twice, a known `event`, and every field the tool reads of the type the runner writes.

`status`, resume (`apply`), `rollback` and `report` all read the journal through `journal._scan`, which
calls `check_line` on every line: a malformed journal is refused with one line naming the file, the line
and the key, before anything is printed or done. Fields the tool does not read are let through (a later
version may add some). A last line cut short by a crash is not malformed but torn (`is_torn`), and is
dropped and repaired as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from dra_migrate.cluster.jsondup import duplicate_key
from dra_migrate.errors import InputError

HINT = "the journal was damaged or edited; restore it, or move it aside to start over"

# Every event the runner writes (execute/runner.py `_record`, and the lock's hand-over record).
EVENTS = frozenset({"run-start", "run-end", "start", "end", "gate", "rollback-incomplete", "lock"})
PHASES = frozenset({"apply", "rollback"})


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_map(v: Any) -> bool:
    return isinstance(v, dict)


# field -> (check, what it must be). null is accepted for every field but `seq` and `event`.
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "time": (_is_str, "a string (RFC 3339 time)"),
    "phase": (lambda v: isinstance(v, str) and v in PHASES, "apply or rollback"),  # a list is unhashable
    "stage": (_is_str, "a string"),
    "wave": (_is_str, "a string"),
    "node": (_is_str, "a string"),
    "stepId": (_is_str, "a string"),
    "action": (_is_str, "a string"),
    "target": (_is_str, "a string"),
    "result": (_is_str, "a string"),
    "error": (_is_str, "a string"),
    "actor": (_is_str, "a string"),
    "planDigest": (_is_str, "a string"),
    "holder": (_is_str, "a string"),
    "lockId": (_is_str, "a string"),
    "dryRun": (_is_bool, "true or false"),
    "steps": (_is_count, "a count"),
    "stages": (_is_strings, "a list of strings"),
    "pending": (_is_strings, "a list of strings"),
    "left": (_is_strings, "a list of strings"),
    "rollbackLeft": (_is_strings, "a list of strings"),
    "overrides": (_is_map, "a map"),
    "cluster": (_is_map, "a map"),
    "pendingBacklog": (_is_map, "a map"),
}


def _refuse(where: str, what: str) -> InputError:
    return InputError(f"{where}: {what}", HINT)


def check_line(line: bytes, where: str) -> dict[str, Any]:
    """The record on one whole line, or an InputError naming `where` (file:line) and the key at fault."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _refuse(where, f"not UTF-8 text (byte {e.start + 1})") from e
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise _refuse(where, f"not a journal record (invalid JSON: {e.msg} at column {e.pos + 1})") from e
    if not isinstance(doc, dict):
        raise _refuse(where, f"not a journal record (a JSON {type(doc).__name__}, not an object)")
    dup = duplicate_key(line, doc)
    if dup is not None:
        raise _refuse(where, f"the key {dup!r} appears twice in one record")
    seq = doc.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise _refuse(where, f"`seq` is {_shown(seq)}, not a positive integer")
    event = doc.get("event")
    if not isinstance(event, str):
        raise _refuse(where, f"`event` is {_shown(event)}, not a string")
    if event not in EVENTS:
        raise _refuse(where, f"unknown record kind `event: {event}` (known: {', '.join(sorted(EVENTS))})")
    for key, (ok, must) in FIELDS.items():
        value = doc.get(key)
        if value is not None and not ok(value):
            raise _refuse(where, f"`{key}` is {_shown(value)}, not {must}")
    return doc


def refuse_gaps(seqs: Sequence[int], where: Path | str) -> None:
    """Every writer numbers its records 1, 2, 3, ... with no gap (`journal.Journal` and `cluster_journal.
    ClusterJournal` number a record as they write it; a torn last line's number is reused). A gap is records
    lost (a line cut out, an in-cluster chunk deleted), and what is left would read as a shorter history: a
    partial run as a whole one, a failed step's end or a rollback gone. `seqs` strictly increase (checked first)."""
    previous = 0
    for seq in seqs:
        if seq != previous + 1:
            lost = f"record {previous + 1} is" if seq == previous + 2 else f"records {previous + 1} to {seq - 1} are"
            after = f"seq {previous} is followed by seq {seq}" if previous else f"the first record has seq {seq}"
            raise InputError(
                f"{where}: {lost} missing ({after}): the journal lost records (a line cut out, a chunk deleted)",
                "restore the journal (or its ConfigMaps) from a backup; a report or status from what is left "
                "would present part of the run as all of it",
            )
        previous = seq


def _shown(value: Any) -> str:
    if value is None:
        return "missing"
    text = orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."


def is_torn(line: bytes) -> bool:
    """Whether a last line is a write cut short by a crash: a prefix of a record (its JSON ends early,
    perhaps inside a UTF-8 sequence), or zero bytes where blocks reached the disk out of order. A whole
    line that is wrong in any other way is damage or an edit, and is refused like any other line."""
    body = line.rstrip(b"\x00")
    if not body.strip():
        return True
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            return False
        body = body[: e.start]
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError as e:
        return e.msg == "unexpected end of data" or e.pos >= len(body)
    return False
