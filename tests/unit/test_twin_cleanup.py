"""The twin's control plane dies with the rehearsal, also when it is stopped while the plane is starting
(rehearse/twin.py `Twin.start`): a stand-in tools/k8s/up launches a component, then is still starting when
the rehearsal gets Ctrl-C or SIGTERM."""

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
DOWN = """\
#!/usr/bin/env bash
for f in "$1"/*.pid; do kill -TERM "$(cat "$f")" 2>/dev/null; done
rm -rf "$1"
"""
CHILD = textwrap.dedent(
    """
    import dra_migrate.rehearse.twin as twin
    from dra_migrate.rehearse.run import _terminated_as_exit

    twin.binary_dir = lambda into: into
    with _terminated_as_exit():
        twin.Twin.start(timeout=120)
    """
)


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
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, body in (("up", UP), ("down", DOWN)):
        (tools / name).write_text(body)
        (tools / name).chmod(0o755)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "DRA_MIGRATE_TOOLS": str(tools), "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
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
