"""The twin's control plane dies with the rehearsal (rehearse/twin.py `Twin.start`), also when it is stopped
while the plane is starting (a stand-in tools/k8s/up launches a component, then is still starting when the
rehearsal gets Ctrl-C or SIGTERM) and when the rehearsal is killed outright (its watchdog runs down)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

UP = """\
#!/usr/bin/env bash
mkdir -p "$1" && touch "$1/.dra-migrate-k8s"
sleep 300 </dev/null >/dev/null 2>&1 &
echo $! > "$1/etcd.pid"
sleep 60
"""
UP_AND_RUNNING = """\
#!/usr/bin/env bash
mkdir -p "$1" && touch "$1/.dra-migrate-k8s"
sleep 300 </dev/null >/dev/null 2>&1 &
echo $! > "$1/etcd.pid"
echo "$1/kubeconfig"
"""
DOWN = """\
#!/usr/bin/env bash
for f in "$1"/*.pid; do kill -TERM "$(cat "$f")" 2>/dev/null; done
rm -rf "$1"
"""
KILLED = textwrap.dedent(
    """
    import time
    import dra_migrate.rehearse.twin as twin

    twin.binary_dir = lambda into: into
    with twin.Twin.start(timeout=120):
        print("up", flush=True)
        time.sleep(300)
    """
)
CHILD = textwrap.dedent(
    """
    import dra_migrate.rehearse.twin as twin
    from dra_migrate.rehearse.run import _terminated_as_exit

    twin.binary_dir = lambda into: into
    with _terminated_as_exit():
        twin.Twin.start(timeout=120)
    """
)


def _tools(tmp_path: Path, up: str) -> tuple[Path, dict[str, str]]:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, body in (("up", up), ("down", DOWN)):
        (tools / name).write_text(body)
        (tools / name).chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return tmp, {**os.environ, "DRA_MIGRATE_TOOLS": str(tools), "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_rehearsal_stopped_while_its_control_plane_starts_leaves_no_component_running(
    tmp_path: Path, signum: int
) -> None:
    """Stopped while tools/k8s/up was still starting the plane, the rehearsal killed `up` (subprocess.run
    kills its child on any exception) before its own trap could stop what it had launched, and never ran
    tools/k8s/down: etcd and the API server kept running, orphaned, their ports and memory held."""
    tmp, env = _tools(tmp_path, UP)
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env, start_new_session=True)
    pid = 0
    try:
        deadline = time.monotonic() + 30
        while not pid and time.monotonic() < deadline:
            found = list(tmp.glob("dra-migrate-twin-*/k8s/etcd.pid"))
            text = found[0].read_text().strip() if found else ""
            pid = int(text) if text else 0
            time.sleep(0.05)
        assert pid and _alive(pid), "the stand-in control plane did not start"
        child.send_signal(signum)
        assert child.wait(timeout=30) != 0
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "a component of the twin's control plane outlived the rehearsal"
        assert not list(tmp.glob("dra-migrate-twin-*")), "the twin's scratch directory is left behind"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
def test_a_rehearsal_killed_outright_takes_its_control_plane_with_it(tmp_path: Path) -> None:
    """SIGKILL (or the out-of-memory killer) runs no cleanup in the rehearsal, and the components tools/k8s/up
    launched are not its children: they ran on, orphaned, with their ports, memory and etcd data. Its watchdog
    child is told by the kernel and runs tools/k8s/down, and the scratch directory goes."""
    tmp, env = _tools(tmp_path, UP_AND_RUNNING)
    child = subprocess.Popen([sys.executable, "-c", KILLED], env=env, stdout=subprocess.PIPE, start_new_session=True)
    pid = 0
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"up"
        (found,) = tmp.glob("dra-migrate-twin-*/k8s/etcd.pid")
        pid = int(found.read_text().strip())
        assert _alive(pid)
        child.kill()
        child.wait(timeout=10)
        deadline = time.monotonic() + 10
        while (_alive(pid) or list(tmp.glob("dra-migrate-twin-*"))) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "a component of the twin's control plane outlived the killed rehearsal"
        assert not list(tmp.glob("dra-migrate-twin-*")), "the twin's scratch directory is left behind"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)
