"""Paths that are not regular files: what a shell hands a command for `<(...)`, `/dev/stdout` or a link.

Outputs (every writer goes through `fileio.atomic_writer`): a symlink, a pipe, a directory.

Found by pointing each command's `--out` at what an operator's shell may hand it: `report --out /dev/full`,
run as root, renamed a regular file over the device node (the same would have replaced `/dev/null`, or the
`/dev/stdout` symlink, for every process on the machine), said "wrote /dev/full" and exited 0; a plan kept
as a symlink (`current.yaml -> plans/...`) was replaced by a regular file, leaving the file it named as it was.
The hostile cases here use a FIFO and a symlink to one, never a real device, so that a regression cannot
damage the machine the tests run on.

Inputs: `convert <(helm template x chart/)` said "/dev/fd/63: no such file or directory", `check --ignore-file
<(...)` that it "does not exist", and `show <(git show main:plan.yaml)` that it was "not a plan" (the streamed
reader read the pipe, then the whole-file reader found it empty). A pipe is read once, as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from dra_migrate.fileio import atomic_writer, write_text_atomic
from tests.unit.cli import run
from tests.unit.test_text_encodings import IGNORE

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "demo-example.yaml"
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"
MANIFEST = ROOT / "fixtures" / "manifests" / "pod.yaml"


class Drain:
    """Reads a FIFO to its end on a thread, as the other side of a shell pipe would."""

    def __init__(self, fifo: Path) -> None:
        self.data = b""
        self._thread = threading.Thread(target=self._read, args=(fifo,), daemon=True)
        self._thread.start()

    def _read(self, fifo: Path) -> None:
        with open(fifo, "rb") as fh:
            self.data = fh.read()

    def wait(self) -> bytes:
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the writer never closed the FIFO"
        return self.data


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _is_fifo(path: Path) -> bool:
    return stat.S_ISFIFO(os.lstat(path).st_mode)


def test_a_fifo_is_written_as_a_stream_and_stays_a_fifo(fifo: Path) -> None:
    reader = Drain(fifo)
    write_text_atomic(fifo, "one\ntwo\n")
    assert reader.wait() == b"one\ntwo\n"
    assert _is_fifo(fifo)
    assert [p.name for p in fifo.parent.iterdir()] == ["pipe"]  # no temporary file left beside it


def test_a_symlink_to_a_fifo_is_written_through_as_dev_stdout_is(tmp_path: Path, fifo: Path) -> None:
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    reader = Drain(fifo)
    write_text_atomic(link, "report\n")
    assert reader.wait() == b"report\n"
    assert link.is_symlink() and _is_fifo(fifo)


def test_a_symlink_stays_a_symlink_and_the_file_it_names_is_replaced(tmp_path: Path) -> None:
    real = tmp_path / "plans" / "2026-12-06.yaml"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "current.yaml"
    link.symlink_to(Path("plans") / "2026-12-06.yaml")  # relative, as a repository keeps it
    write_text_atomic(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(Path("plans") / "2026-12-06.yaml")
    assert real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["2026-12-06.yaml"]


def test_a_symlink_to_a_file_not_there_yet_creates_it(tmp_path: Path) -> None:
    link = tmp_path / "latest.md"
    link.symlink_to(tmp_path / "reports" / "r.md")
    write_text_atomic(link, "# report\n")
    assert link.is_symlink() and (tmp_path / "reports" / "r.md").read_text() == "# report\n"


def test_a_directory_is_refused_by_its_own_name(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError) as e, atomic_writer(tmp_path) as fh:
        fh.write(b"x")
    assert e.value.filename == str(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_writer(path) as fh:
        fh.write(b"half")
        raise RuntimeError("crash mid-write")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plan.yaml"]


def test_report_out_a_pipe_writes_the_report_into_it(fifo: Path) -> None:
    reader = Drain(fifo)
    r = run("report", str(PLAN), "--out", str(fifo))
    assert r.code == 0, r.stderr
    assert reader.wait().decode().startswith("# Migration report")
    assert _is_fifo(fifo)


def test_report_out_a_directory_is_one_line_naming_it(tmp_path: Path) -> None:
    r = run("report", str(PLAN), "--out", str(tmp_path))
    assert r.code == 1
    (line,) = [x for x in r.stderr.splitlines() if x.strip()]
    assert line.startswith(f"error: cannot use {tmp_path}: ") and ".tmp" not in line
    assert list(tmp_path.iterdir()) == []


def test_plan_force_through_a_symlink_rewrites_the_plan_it_names(tmp_path: Path) -> None:
    real = tmp_path / "plans" / "first.yaml"
    assert run("plan", "--snapshot", str(DEMO), "--out", str(real)).code in (0, 2)
    link = tmp_path / "current.yaml"
    link.symlink_to(real)
    r = run("plan", "--snapshot", str(DEMO), "--out", str(link), "--force", "--max-unavailable", "2")
    assert r.code in (0, 2), r.stderr
    assert link.is_symlink()
    assert yaml.safe_load(real.read_text())["parameters"]["maxUnavailable"] != "10%"  # the new plan's


class Fed:
    """What a shell's `<(cat FILE)` hands a command: `/dev/fd/N`, the read end of a pipe a writer fills.
    Opened again after its end, it reads empty (as bash's does), so a reader that reads twice is caught."""

    def __init__(self, data: bytes) -> None:
        self.fd, write_end = os.pipe()
        self.path = f"/dev/fd/{self.fd}"
        self._thread = threading.Thread(target=self._feed, args=(write_end, data), daemon=True)
        self._thread.start()

    @staticmethod
    def _feed(fd: int, data: bytes) -> None:
        # A reader that closes early breaks the pipe: what it read is what the test checks.
        with contextlib.suppress(BrokenPipeError), os.fdopen(fd, "wb") as fh:
            fh.write(data)

    def close(self) -> None:
        os.close(self.fd)
        self._thread.join(timeout=10)


@pytest.fixture
def fed() -> Iterator[Callable[[bytes], str]]:
    pipes: list[Fed] = []

    def make(data: bytes) -> str:
        pipes.append(Fed(data))
        return pipes[-1].path

    yield make
    for p in pipes:
        p.close()


@pytest.mark.parametrize("output", ["table", "json"])  # the table is read by the streaming reader
def test_show_reads_a_plan_from_a_pipe_as_from_its_file(fed: Callable[[bytes], str], output: str) -> None:
    from_file = run("show", str(PLAN), "-o", output)
    pipe = fed(PLAN.read_bytes())
    from_pipe = run("show", pipe, "-o", output)
    assert from_pipe.code == from_file.code == 0, from_pipe.stderr
    assert from_pipe.stdout.replace(pipe, str(PLAN)) == from_file.stdout


def test_an_ignore_file_is_read_from_a_pipe(tmp_path: Path, fed: Callable[[bytes], str]) -> None:
    (tmp_path / "ignore.yaml").write_text(IGNORE)
    from_file = run("check", "--snapshot", str(DEMO), "--ignore-file", str(tmp_path / "ignore.yaml"), "-o", "json")
    from_pipe = run("check", "--snapshot", str(DEMO), "--ignore-file", fed(IGNORE.encode()), "-o", "json")
    assert from_pipe.code == from_file.code, from_pipe.stderr
    accepted = json.loads(from_pipe.stdout)["accepted"]
    assert accepted and accepted == json.loads(from_file.stdout)["accepted"]


def _body(diff: str) -> list[str]:
    return [ln for ln in diff.splitlines() if not ln.startswith(("--- ", "+++ "))]


def test_convert_reads_manifests_from_a_pipe(fed: Callable[[bytes], str]) -> None:
    from_file = run("convert", str(MANIFEST))
    from_pipe = run("convert", fed(MANIFEST.read_bytes()))
    assert from_pipe.code == from_file.code == 0, from_pipe.stderr
    assert "ResourceClaimTemplate" in from_pipe.stdout
    assert _body(from_pipe.stdout) == _body(from_file.stdout)


@pytest.mark.parametrize("where", [["--in-place"], ["--output-dir", "OUT"]])
def test_convert_refuses_to_rewrite_or_name_a_pipe(
    tmp_path: Path, fed: Callable[[bytes], str], where: list[str]
) -> None:
    args = [str(tmp_path / "out") if a == "OUT" else a for a in where]
    r = run("convert", fed(MANIFEST.read_bytes()), *args)
    assert r.code == 1
    (line,) = [x for x in r.stderr.splitlines() if x.strip()]
    assert "is a pipe, not a file" in line and "convert -" in line
    assert list(tmp_path.iterdir()) == []


def _process(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """A whole process: `-` is the process's stdin (`/dev/stdin`), which an in-process runner does not replace."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dra_migrate", *args], input=stdin, capture_output=True, env=env)


def test_a_command_that_only_reads_a_plan_reads_it_from_stdin() -> None:
    from_file = run("show", str(PLAN))
    from_stdin = _process("show", "-", stdin=PLAN.read_bytes())
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout.decode() == from_file.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["apply", "-", "--kubeconfig", "nowhere"], "apply keeps the plan's journal beside its file"),
        (["status", "-"], "status keeps the plan's journal beside its file"),
        (["diff", "-", "-"], "stdin can be read once"),
        (["rehearse", "-", "--snapshot", "-"], "stdin can be read once"),
    ],
)
def test_stdin_where_it_cannot_serve_is_one_line_saying_what_to_do(args: list[str], says: str) -> None:
    r = _process(*args, stdin=PLAN.read_bytes())
    assert r.returncode == 1
    (line,) = [x for x in r.stderr.decode().splitlines() if x.strip()]
    assert says in line and "file" in line


KUBECONFIG = b"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: "aGVsbG8="}
users:
- name: u
  user: {token: "abc"}
contexts:
- name: piped
  context: {cluster: c, user: u}
current-context: piped
"""


def test_a_kubeconfig_from_a_pipe_serves_every_reader_of_it(fed: Callable[[bytes], str]) -> None:
    """`--kubeconfig <(sops -d kubeconfig.enc)` keeps the credentials off disk. A command reads its kubeconfig
    several times (its check, the current context, one API client per purpose): the second read of the pipe
    was empty, and the client said it found no configuration."""
    from dra_migrate.cluster.kubeconfig import check_kubeconfig
    from dra_migrate.kube.config import current_context, new_api_client

    path = fed(KUBECONFIG)
    check_kubeconfig(path)
    assert current_context(path) == "piped"
    hosts = [new_api_client(path).configuration.host for _ in range(3)]
    assert hosts == ["https://10.0.0.1:6443"] * 3
