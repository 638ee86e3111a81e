"""SIGTERM: what Kubernetes sends a pod it deletes or evicts, and `timeout` and CI runners a job they stop;
SIGHUP: what a terminal that goes away (an SSH session dropping under an apply) sends.

It ended the process at once (Python's default): an in-cluster apply left its Lease held for the next pod
to wait out, and a half-written plan's temporary file behind. Now it stops a command as Ctrl-C does, with
one line and exit 143 (`dra_migrate/cli/interrupts.py`); apply on the real control plane:
tests/integration/test_cutover.py::test_h_sigterm_mid_wave_...
Each test is a whole process, made to signal itself at a chosen moment of the command, so the moment is
deterministic.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")

# The console script's own start (`dra_migrate.cli.entry.main`), with the snapshot read replaced by BODY.
STARTER = """
import os, signal, sys, time
import dra_migrate.cluster.snapshot as snapshot_module
def reading(*_a, **_k):
{body}
snapshot_module.load_snapshot = reading
from dra_migrate.cli.entry import main
main()
"""


def _run(starter: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", starter, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def _plan(tmp_path: Path, body: str, before: str = "") -> subprocess.CompletedProcess[str]:
    """`plan` whose snapshot read is `body`; `before` runs ahead of everything (as a parent sets dispositions)."""
    starter = before + STARTER.format(body="\n".join("    " + line for line in body.strip().splitlines()))
    return _run(starter, "plan", "--snapshot", DEMO, "--out", str(tmp_path / "plan.yaml"))


def _lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


def test_sigterm_mid_command_is_one_line_and_143_and_writes_nothing(tmp_path: Path) -> None:
    r = _plan(tmp_path, "os.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)")
    assert r.returncode == 143, r.stderr
    assert _lines(r.stderr) == ["error: terminated"], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_second_sigterm_does_not_cut_the_clean_up_short(tmp_path: Path) -> None:
    """`timeout` and a CI runner may both signal; the clean-up (apply releasing its Lease) must run whole."""
    body = """
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
finally:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.3)
    sys.stderr.write("cleaned up\\n")
"""
    r = _plan(tmp_path, body)
    assert r.returncode == 143, r.stderr
    assert _lines(r.stderr) == ["cleaned up", "error: terminated"], r.stderr


def test_sigterm_as_the_interpreter_shuts_down_is_one_line_and_143() -> None:
    """After the command, while exit callbacks run: `Terminated` raised in a callback printed a traceback."""
    starter = (
        "import atexit, os, signal, sys, time\n"
        "from dra_migrate.cli.entry import main\n"
        "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(5)))\n"
        "main()\n"
    )
    r = _run(starter, "check", "--snapshot", DEMO)
    assert r.returncode == 143, r.stderr
    assert "Traceback" not in r.stderr and _lines(r.stderr)[-1] == "error: terminated", r.stderr


def test_sighup_mid_command_is_one_line_and_129(tmp_path: Path) -> None:
    """The SSH session under `apply` dropped: the run stops as on Ctrl-C, not killed with its Lease held."""
    r = _plan(tmp_path, "os.kill(os.getpid(), signal.SIGHUP)\ntime.sleep(5)")
    assert r.returncode == 129, r.stderr
    assert _lines(r.stderr) == ["error: hung up"], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_sighup_nohup_ignores_stays_ignored(tmp_path: Path) -> None:
    """`nohup dra-migrate apply ...` asks to outlive the terminal: SIGHUP ignored before the tool starts stays so."""
    body = (
        "os.kill(os.getpid(), signal.SIGHUP)\ntime.sleep(0.3)\nsys.stderr.write('still here\\n')\nraise SystemExit(0)"
    )
    r = _plan(tmp_path, body, before="import signal\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n")
    assert r.returncode == 0 and "still here" in r.stderr, r.stderr
