"""tools/k8s/up's health waits, run in bash on their own (the script's functions, with a stand-in curl)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

UP = Path(__file__).resolve().parents[2] / "tools" / "k8s" / "up"


def _functions() -> str:
    """log(), POLL_S and wait_healthy() as the script defines them."""
    text = UP.read_text()
    log = re.search(r"^log\(\) \{.*\}$", text, re.M)
    poll = re.search(r"^POLL_S=.*$", text, re.M)
    wait = re.search(r"^wait_healthy\(\) \{\n.*?^\}$", text, re.M | re.S)
    assert log and poll and wait, "tools/k8s/up no longer defines log, POLL_S and wait_healthy"
    return "\n".join((log.group(0), poll.group(0), wait.group(0)))


def test_a_component_is_polled_every_tenth_of_a_second_until_healthy(tmp_path: Path) -> None:
    """Four components are waited for in turn at every start of a twin (a rehearsal's, a test session's):
    each wait ends at most one poll after its component answers, half a poll on average — 1 s of a start
    at the old 0.5 s polls. The stand-in curl answers at its third call; `sleep` notes each pause."""
    component = subprocess.Popen(["sleep", "30"])  # the process wait_healthy checks is still alive
    (tmp_path / "etcd.pid").write_text(f"{component.pid}\n")
    script = f"""
set -euo pipefail
DIR={tmp_path}
TIMEOUT=30
calls=0
curl() {{ calls=$((calls + 1)); ((calls >= 3)); }}
sleep() {{ echo "$1" >> {tmp_path}/pauses; }}
{_functions()}
wait_healthy etcd http://127.0.0.1:1/health
echo "healthy after $calls calls"
"""
    try:
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    finally:
        component.kill()
        component.wait()
    assert out.returncode == 0, out.stderr
    assert "healthy after 3 calls" in out.stdout
    pauses = [float(p) for p in (tmp_path / "pauses").read_text().split()]
    assert pauses == [pytest.approx(0.1)] * 2, f"paused {pauses} between polls"
