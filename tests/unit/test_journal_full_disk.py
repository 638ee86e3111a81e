"""The journal cannot be written (a full disk, a filesystem remounted read-only, a quota) in the middle of a wave.

Nothing may act on the cluster without its record: a step whose `start` did not reach the disk must not run,
the other lanes stop, nothing is rolled back (a rollback could not be journaled either), and the operator reads
one line naming the journal and the reason. Found auditing it: the runner stopped right, but the error was an
OSError without a file name, which the CLI re-raised: a Python traceback, no word of which file or what to do.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from test_runner import MIGRATED, Rig, make_plan

from dra_migrate.execute.journal import read_journal


class FullDisk:
    """`os.write` on the journal's file failing with ENOSPC from its `after`-th call on (half of it written
    first: a torn line); other files are left alone."""

    def __init__(self, path: Path, after: int) -> None:
        self.path = path
        self.after = after
        self.writes = 0
        self.real = os.write

    def __call__(self, fd: int, data: Any) -> int:
        if os.path.realpath(f"/proc/self/fd/{fd}") != str(self.path.resolve()):
            return self.real(fd, data)
        self.writes += 1
        if self.writes >= self.after:
            self.real(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.real(fd, data)


@pytest.mark.parametrize("after", [3, 6, 10, 17])
def test_a_full_disk_stops_the_run_before_any_unrecorded_step_and_names_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    monkeypatch.setattr(os, "write", FullDisk(rig.path, after))
    with pytest.raises(OSError) as raised:
        rig.run()
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(rig.path), "the error must name the journal"
    records = read_journal(rig.path)  # the torn last line is dropped
    started = {r["stepId"] for r in records if r["event"] == "start"}
    assert not [r for r in records if r.get("phase") == "rollback"], "nothing can be rolled back unjournaled"
    # Every node the fake cluster changed has a recorded start for that change.
    for name, state in rig.nodes().items():
        if state["unschedulable"]:
            assert f"pool-p0/{name}/cordon" in started, name
        if state["labels"].get("nvidia.com/gpu.deploy.device-plugin") == "false":
            assert any(s.startswith(f"pool-p0/{name}/") and "device-plugin" in s for s in started), (name, started)
    monkeypatch.undo()  # space freed: the same command resumes
    result = rig.run()
    assert result.ok, result.failure
    assert all(s == MIGRATED for s in rig.nodes().values())


# ----------------------------------------------------------------------------------------------------
# Ctrl-C (or SIGTERM, SIGHUP: raised on the main thread, which writes the records of a one-lane unit) landing
# while a record is written or fsync'd. Found auditing it: the journal took the KeyboardInterrupt for a failed
# write and refused every later record, so the step's `interrupted` end and the run's end were lost and the
# CLI printed an OSError traceback instead of exiting 130; landing mid-write it could leave part of a line
# that the next record followed (a malformed line mid-file: every later read refused the journal).

DIGEST = "sha256:" + "a" * 64


class InterruptOnce:
    def __init__(self, real: Any, half: bool) -> None:
        self.real, self.half, self.fired = real, half, False

    def __call__(self, fd: int, *data: Any) -> Any:
        if self.fired:
            return self.real(fd, *data)
        self.fired = True
        if self.half:  # os.write: a part of the batch reaches the file, then the signal
            self.real(fd, bytes(data[0])[: len(data[0]) // 2])
        else:  # os.fsync: the data is written, the signal lands in the fsync
            self.real(fd)
        raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_ctrl_c_during_a_records_write_leaves_whole_lines_and_a_journal_that_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from dra_migrate.execute.journal import Journal, read_records

    path = tmp_path / "plan.yaml.journal.jsonl"
    with Journal.open(path, plan_digest=DIGEST) as j:
        j.record("run-start", phase="apply", planDigest=DIGEST)
        monkeypatch.setattr(os, where, InterruptOnce(getattr(os, where), half=where == "write"))
        with pytest.raises(KeyboardInterrupt):
            j.record("start", phase="apply", stepId="pool/n1/cordon")
        j.record("end", phase="apply", stepId="pool/n1/cordon", result="interrupted", error="interrupted")
        j.record("run-end", phase="apply", result="failed")
    monkeypatch.undo()
    records = read_records(path, plan_digest=DIGEST)  # every line whole: a torn one mid-file is refused
    assert [r["event"] for r in records] == ["run-start", "start", "end", "run-end"]
    assert path.read_bytes().endswith(b"\n")


def test_the_cli_says_which_journal_could_not_be_written_and_how_to_go_on(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from dra_migrate.cli.apply import _journal_write_fails
    from dra_migrate.errors import ClusterError
    from dra_migrate.execute.journals import FileStore

    store = FileStore(tmp_path / "plan.yaml")
    session: Any = SimpleNamespace(store=store)
    with pytest.raises(ClusterError) as e, _journal_write_fails(session, "apply"):
        raise OSError(errno.ENOSPC, "No space left on device", str(store.path))
    assert str(store.path) in str(e.value) and "No space left on device" in str(e.value)
    assert "re-run apply" in (e.value.hint or "")
    with pytest.raises(OSError), _journal_write_fails(session, "apply"):  # another file's error is not ours
        raise OSError(errno.EACCES, "Permission denied", str(tmp_path / "kubeconfig"))
