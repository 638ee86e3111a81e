"""What runs on an operator's macOS laptop: each test simulates macOS on this Linux machine (sys.platform,
attributes macOS's Python lacks or has) and fails on the code before its fix (docs/usage.md "Platforms")."""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.errors import InputError
from dra_migrate.execute import lock
from dra_migrate.execute.journal import Journal
from dra_migrate.fileio import write_text_atomic
from tests.unit.cli import run

# A clock id only for this test: what the code passes on to clock_gettime is what is checked.
DARWIN_CLOCK_MONOTONIC_RAW = 1004


def test_lease_deadline_clock_counts_a_macos_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """A laptop whose lid closed mid-apply must wake knowing its Lease expired while it slept. macOS has no
    CLOCK_BOOTTIME, and Python's time.monotonic() there is mach_absolute_time(), which stops while the
    machine sleeps (CPython Python/pytime.c; Apple's mach_absolute_time docs); CLOCK_MONOTONIC_RAW is
    mach_continuous_time(), which counts it (Apple's mach_continuous_time docs; clock_gettime(3))."""
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(time, "CLOCK_MONOTONIC_RAW", DARWIN_CLOCK_MONOTONIC_RAW, raising=False)
    slept = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # mach_absolute_time: nothing while asleep

    def clock_gettime(clock: int) -> float:
        assert clock == DARWIN_CLOCK_MONOTONIC_RAW
        return 1000.0 + slept[0]

    monkeypatch.setattr(time, "clock_gettime", clock_gettime)
    before = lock._elapsed()
    slept[0] = 3600.0  # an hour with the lid closed
    assert lock._elapsed() - before == pytest.approx(3600.0)


def test_lease_deadline_clock_on_linux_is_boottime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "CLOCK_BOOTTIME", 7, raising=False)
    asked: list[int] = []
    monkeypatch.setattr(time, "clock_gettime", lambda clock: asked.append(clock) or 5.0)
    assert lock._elapsed() == 5.0
    assert asked == [7]


# ---- durability: macOS's fsync(2) leaves data in the drive's cache -----------------------------------------


class SyncCalls:
    """os.fsync and fcntl.fcntl as called, with macOS's F_FULLFSYNC failing when `full_fails`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, full_fails: bool = False) -> None:
        import fcntl

        self.calls: list[tuple[str, int]] = []
        self.full_fails = full_fails
        real_fsync, real_fcntl = os.fsync, fcntl.fcntl

        def fsync(fd: int) -> None:
            self.calls.append(("fsync", fd))
            real_fsync(fd)

        def fcntl_(fd: int, cmd: int, *args: Any) -> Any:
            if cmd == DARWIN_F_FULLFSYNC:
                self.calls.append(("F_FULLFSYNC", fd))
                if self.full_fails:
                    raise OSError(errno.ENOTSUP, "Operation not supported")
                return 0
            return real_fcntl(fd, cmd, *args)

        monkeypatch.setattr(sys, "platform", "darwin")
        monkeypatch.setattr(fcntl, "F_FULLFSYNC", DARWIN_F_FULLFSYNC, raising=False)
        monkeypatch.setattr(fcntl, "fcntl", fcntl_)
        monkeypatch.setattr(os, "fsync", fsync)

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.calls]


# macOS <sys/fcntl.h>: #define F_FULLFSYNC 51 ("fsync + ask the drive to flush to the media").
DARWIN_F_FULLFSYNC = 51


def test_journal_records_reach_the_media_on_macos(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On macOS fsync() flushes to the drive, which may hold the data in its cache and write it later, out of
    order; F_FULLFSYNC asks it to flush (Apple fsync(2), fcntl(2)). A step journaled as started, then the
    battery dying: resume and rollback must find the record."""
    calls = SyncCalls(monkeypatch)
    with Journal.open(tmp_path / "plan.yaml.journal.jsonl", plan_digest="sha256:" + "0" * 64) as j:
        calls.calls.clear()
        j.record("run-start", phase="apply", actor="alice@mac")
    assert "F_FULLFSYNC" in calls.kinds()


def test_plan_file_reaches_the_media_on_macos(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = SyncCalls(monkeypatch)
    write_text_atomic(tmp_path / "plan.yaml", "x: 1\n")
    assert calls.kinds() == ["F_FULLFSYNC"]
    assert (tmp_path / "plan.yaml").read_text() == "x: 1\n"


def test_full_fsync_refused_by_the_filesystem_falls_back_to_fsync(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An SMB or FUSE mount may refuse F_FULLFSYNC (ENOTSUP): fsync, as before, not an error."""
    calls = SyncCalls(monkeypatch, full_fails=True)
    write_text_atomic(tmp_path / "plan.yaml", "x: 1\n")
    assert calls.kinds() == ["F_FULLFSYNC", "fsync"]


def test_linux_keeps_plain_fsync(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = SyncCalls(monkeypatch)
    monkeypatch.setattr(sys, "platform", "linux")
    write_text_atomic(tmp_path / "plan.yaml", "x: 1\n")
    assert calls.kinds() == ["fsync"]


# ---- the twin (rehearse, twin build) is Linux-only: refused in one line, before anything is read or run ----

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"


def _only_linux_line(stderr: str) -> bool:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return len(lines) == 1 and lines[0].startswith("error") and "Linux only" in lines[0] and "darwin" in lines[0]


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("ran on macOS: the twin's scripts read /proc and its watchdog needs PR_SET_PDEATHSIG")


def test_rehearse_on_macos_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    assert run("plan", "--snapshot", str(DEMO), "--out", str(plan)).code == 0
    import dra_migrate.rehearse.run

    monkeypatch.setattr(dra_migrate.rehearse.run, "rehearse", _never)
    monkeypatch.setattr(sys, "platform", "darwin")
    r = run("rehearse", str(plan), "--snapshot", str(DEMO))
    assert r.code == 1 and _only_linux_line(r.stderr), r.stderr


def test_twin_build_on_macos_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_migrate.rehearse.twin

    monkeypatch.setattr(dra_migrate.rehearse.twin.subprocess, "run", _never)
    monkeypatch.setattr(sys, "platform", "darwin")
    r = run("twin", "build")
    assert r.code == 1 and _only_linux_line(r.stderr), r.stderr


def test_the_twin_and_kwok_refuse_to_start_on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core refuses too (python -m dra_migrate.sim, a library caller), not only the CLI."""
    from dra_migrate.rehearse import twin
    from dra_migrate.sim.kwok import KwokFleet

    monkeypatch.setattr(twin.subprocess, "run", _never)
    monkeypatch.setattr(twin.subprocess, "Popen", _never)
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(InputError, match="Linux only"):
        twin.Twin.start()
    with pytest.raises(InputError, match="Linux only"):
        KwokFleet.start(object.__new__(KwokFleet))


# ---- case-insensitive filesystems (APFS, HFS+ by default; NTFS under WSL's /mnt/c) -----------------------


def test_convert_takes_one_file_given_by_two_names_once(tmp_path: Path) -> None:
    """On a case-insensitive APFS volume `Deploy.yaml` and `deploy.yaml` are one file, and Path.resolve() keeps
    the case it was given (realpath(3) on macOS does not fold it): the file was converted twice. A hard link
    is two names for one file on this machine too."""
    from dra_migrate.convert.files import find_files

    first = tmp_path / "Deploy.yaml"
    first.write_text("kind: ConfigMap\n")
    os.link(first, tmp_path / "deploy-link.yaml")
    found = find_files([first, tmp_path / "deploy-link.yaml"])
    assert [f for f, _ in found] == [first]


def test_convert_refuses_outputs_that_differ_only_in_case(tmp_path: Path) -> None:
    """`a/Job.yaml` and `b/job.yaml` written under one --output-dir: on macOS the second replaced the first
    silently; refused wherever it runs (a directory made on Linux is read on a Mac too)."""
    from dra_migrate.convert.files import check_output_paths

    pairs = [(tmp_path / "a" / "Job.yaml", Path("Job.yaml")), (tmp_path / "b" / "job.yaml", Path("job.yaml"))]
    with pytest.raises(InputError, match="would both be written to"):
        check_output_paths(pairs, tmp_path / "out")


def test_journal_on_a_filesystem_without_locks_is_refused_in_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A plan kept on a share that cannot flock (a Mac's SMB or AFP home directory: ENOTSUP; NFS without lockd:
    ENOLCK) raised a bare OSError without a file name, which the CLI shows as a traceback."""
    import fcntl

    def refuse(fd: int, op: int) -> None:
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(fcntl, "flock", refuse)
    path = tmp_path / "plan.yaml.journal.jsonl"
    with pytest.raises(InputError, match=r"cannot lock journal .*plan\.yaml\.journal\.jsonl.*Operation not supported"):
        Journal.open(path, plan_digest="sha256:" + "0" * 64)


# ---- the machine a Lease names ------------------------------------------------------------------------------

# The address uuid.getnode() finds first on a MacBook Pro with a T2 chip: its internal bridge interface, the same
# on every such Mac (cpython#85724, "uuid.uuid1() on certain Macs does not generate unique IDs").
T2_BRIDGE = 0xACDE48001122
IOREG_OUT = """+-o J316sAP  <class IOPlatformExpertDevice, id 0x100000229, registered, matched, active, busy 0>
    {{
      "IOPlatformSerialNumber" = "C02XXXXXXXXX"
      "IOPlatformUUID" = "{uuid}"
      "model" = <"MacBookPro18,1">
    }}
"""


def _mac_machine_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, platform_uuid: str | None) -> str:
    import subprocess
    import uuid

    monkeypatch.setattr(sys, "platform", "darwin")
    real_open = open

    def no_machine_id(path: Any, *args: Any, **kwargs: Any) -> Any:  # macOS has no /etc/machine-id
        if str(path) == "/etc/machine-id":
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(lock, "open", no_machine_id, raising=False)  # found before the builtin
    monkeypatch.setattr(uuid, "getnode", lambda: T2_BRIDGE)

    def ioreg(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert args[0].endswith("ioreg"), args
        if platform_uuid is None:
            raise FileNotFoundError(2, "No such file or directory", args[0])
        return subprocess.CompletedProcess(args, 0, IOREG_OUT.format(uuid=platform_uuid), "")

    monkeypatch.setattr(subprocess, "run", ioreg)
    return str(lock.machine_id.__wrapped__())


def test_two_macs_sharing_a_bridge_address_are_two_machines(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two MacBook Pros called `MacBook-Pro` (the default) applying one plan: with one machine id, a resume on
    the second took the first's live lock over as its own crashed run's (execute/session.py `crashed_here`)."""
    a = _mac_machine_id(monkeypatch, tmp_path, "3F2504E0-4F89-11D3-9A0C-0305E82C3301")
    b = _mac_machine_id(monkeypatch, tmp_path, "9C5B94B1-35AD-49BB-B118-8E8FC24ABF80")
    assert a and b and a != b
    assert a == _mac_machine_id(monkeypatch, tmp_path, "3F2504E0-4F89-11D3-9A0C-0305E82C3301")  # stable


def test_a_mac_without_its_hardware_uuid_names_no_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No IOPlatformUUID: nothing names the machine (its lock expires rather than being taken over), never the
    shared bridge address."""
    assert _mac_machine_id(monkeypatch, tmp_path, None) == ""


# ---- the Linux-only scripts (the twin's control plane, the real-node and NVIDIA tiers) ------------------------

LINUX_ONLY_SCRIPTS = ["tools/k8s/up", "tools/k8s/build", "tools/k8s/node", "tools/realnode/build",
                      "tools/nvidia/stack", "tools/nvidia/build"]  # fmt: skip


@pytest.mark.parametrize("script", LINUX_ONLY_SCRIPTS)
def test_linux_only_scripts_refuse_on_macos_in_one_line(script: str, tmp_path: Path) -> None:
    """Run on a Mac (uname -s: Darwin, and none of apt-get, go, etcd, /proc), each said nothing useful or
    failed midway at whatever it reached first; it now refuses before doing anything."""
    import shutil
    import subprocess

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uname").write_text('#!/bin/sh\n[ "$1" = -m ] && echo arm64 || echo Darwin\n')
    (bin_dir / "uname").chmod(0o755)
    bash = shutil.which("bash")
    assert bash
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "DRA_MIGRATE_K8S_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([bash, str(root / script), "up", str(tmp_path / "dir")], env=env, capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert "Linux only" in lines[0] and "Darwin" in lines[0], r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]  # nothing made
