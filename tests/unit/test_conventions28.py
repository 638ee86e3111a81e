"""Conventions of issue 28 item 6: `--out` names the format when `-o` is absent, `rollback` without a
journal is "nothing to do" (exit 0, as documented)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "plan.yaml"
    assert run("plan", "--snapshot", DEMO, "--out", str(path)).code == 0
    return path


def test_report_out_html_without_o_writes_html(plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run("report", str(plan), "--out", str(out))
    assert r.code == 0, r.stderr
    assert out.read_text().lstrip().lower().startswith("<!doctype html")
    md = tmp_path / "r.md"
    assert run("report", str(plan), "--out", str(md)).code == 0
    assert md.read_text().startswith("#")


def test_an_o_that_contradicts_the_out_extension_is_refused(plan: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run("report", str(plan), "-o", "markdown", "--out", str(out))
    assert r.code == 1 and "two formats" in r.stderr and not out.exists()
    # An extension that names no format leaves -o (or the default) in charge.
    other = tmp_path / "r.report"
    assert run("report", str(plan), "-o", "html", "--out", str(other)).code == 0
    assert "<html" in other.read_text().lower()


def test_rollback_without_a_journal_is_nothing_to_do(plan: Path) -> None:
    r = run("rollback", str(plan), "--yes")
    assert r.code == 0, r.stderr
    assert "nothing to roll back" in r.stderr


# What the console script runs (`from dra_migrate.cli.entry import main; main()`), with a mark the test
# waits for once the entry module (stdlib imports only) is in: its first statement installs the handler.
def entry_check(starter: str) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of `check` on the demo fleet, run through `starter` (Python code
    that imports the entry module and calls its main, as the console script does)."""
    import os
    import sys

    return [sys.executable, "-c", starter, "check", "--snapshot", DEMO], {**os.environ, "PYTHONPATH": str(ROOT)}


STARTER = (
    "import sys; from dra_migrate.cli.entry import main; sys.stderr.write('started\\n'); sys.stderr.flush(); main()"
)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.4, 1.0])
def test_ctrl_c_at_any_moment_start_up_included_is_one_line_and_130(delay: float) -> None:
    """A real SIGINT to a real process, from the first instant of the tool's code (its imports) to the middle
    of the work. Python's own start-up before that (importing `site`, ~50 ms) is the interpreter's: a
    SIGINT there is a fatal error no program can catch; the test starts once the interpreter runs code."""
    import signal
    import subprocess
    import time

    argv, env = entry_check(STARTER)
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stderr is not None and proc.stderr.readline() == "started\n"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode in (0, 2):  # finished before the signal: nothing to judge at this delay
        return
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    # What the command said before the signal stands (at 0.4 s, under load, `check` had printed its `next:`
    # hint and the signal came as the interpreter shut down); the interrupt is the one error, said last.
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1] == "error: interrupted" and [ln for ln in lines if ln.startswith("error:")] == lines[-1:], err


def test_ctrl_c_after_the_command_while_the_interpreter_shuts_down_is_one_line_and_130() -> None:
    """The last moment: the command is done and the interpreter is shutting down (an atexit callback stands
    for its thread joins). Python's handler there printed a KeyboardInterrupt traceback from the callback,
    or the process died by SIGINT (-2, seen once in `test_ctrl_c_at_any_moment...` at 0.4 s)."""
    import signal
    import subprocess

    # Registered after the entry module, as the command's own libraries register theirs (logging's flush):
    # it runs before the entry module's last callback (`_ignore_the_last_instant`, below).
    starter = (
        "import atexit, sys, time\n"
        "from dra_migrate.cli.entry import main\n"
        "atexit.register(lambda: (sys.stderr.write('shutting down\\n'), sys.stderr.flush(), time.sleep(5)))\n"
        "main()\n"
    )
    argv, env = entry_check(starter)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    assert proc.stderr is not None
    while (line := proc.stderr.readline()) != "shutting down\n":  # the command's own log lines first
        assert line, "the process ended before its shutdown"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["error: interrupted"], err


def test_ctrl_c_in_the_last_instant_of_the_exit_leaves_the_commands_exit_code() -> None:
    """After the exit callbacks CPython resets a Python SIGINT handler to the default while no Python code
    runs: a Ctrl-C there killed the process by SIGINT (-2; `test_ctrl_c_at_any_moment...` at 0.4 s, twice).
    The entry module's last callback ignores SIGINT from then on. A callback registered before the entry
    module runs after it: it stands for that last instant, sends itself SIGINT and lingers."""
    import subprocess
    import sys

    starter = (
        "import atexit, os, signal, sys, time\n"
        "def last():\n"
        "    sys.stderr.write('ignored\\n' if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 'handled\\n')\n"
        "    sys.stderr.flush(); os.kill(os.getpid(), signal.SIGINT); time.sleep(0.5)\n"
        "atexit.register(last)\n"
        "from dra_migrate.cli.entry import main\n"
        "main()\n"
    )
    argv, env = entry_check(starter)
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True, timeout=60, check=False
    )
    alone = subprocess.run(
        [sys.executable, "-m", "dra_migrate", "check", "--snapshot", DEMO],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.stderr.splitlines()[-1] == "ignored", done.stderr
    assert done.returncode == alone.returncode != 130, done.stderr
    assert "interrupted" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("soak: 5m", "soak: 10m", "less than parameters.soak 10m"),  # parameters edited, waves not
        ("drainTimeout: 10m", "drainTimeout: 20m", "shorter than parameters.drainTimeout 20m"),
    ],
)
def test_rebase_refuses_an_edit_that_contradicts_the_rest_of_the_plan(
    plan: Path, tmp_path: Path, old: str, new: str, says: str
) -> None:
    edited = tmp_path / "edited.yaml"
    text = plan.read_text()
    assert old in text
    edited.write_text(text.replace(old, new, 1))
    r = run("plan", "--rebase", str(edited))
    assert r.code == 1, r.stderr
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert len(line) == 1 and says in line[0] and f"{edited}:" in line[0], r.stderr
    # Consistent edits go through: a longer soak on one wave is more caution, not a contradiction.
    agreeing = tmp_path / "agreeing.yaml"
    agreeing.write_text(text.replace("soakAfter: 5m", "soakAfter: 15m", 1))
    assert run("plan", "--rebase", str(agreeing)).code == 0


def test_a_wave_grown_past_max_unavailable_contradicts_the_parameters(plan: Path) -> None:
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.consistency import contradictions

    body = plan_io.body_of(plan_io.load(plan))
    assert contradictions(body) == []
    stage = next(s for s in body["stages"] if s.get("pool") and len(s["waves"]) > 1)
    stage["waves"][0]["nodes"] += stage["waves"].pop(1)["nodes"]  # one wave takes the next one's nodes
    problems = contradictions(body)
    assert problems and "more than parameters.maxUnavailable" in problems[0].message


def test_ctrl_c_while_a_late_import_makes_a_class_is_interrupted_not_an_internal_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Caught by `test_ctrl_c_at_any_moment...` (2 in 100 runs): a Ctrl-C as a command imports a module late
    lands in a dataclass field's `__set_name__`, and Python 3.11 reports it as a RuntimeError, which read as
    "internal error", exit 1. Here the interrupt is raised in that very place, as the snapshot is read."""
    import dra_migrate.cluster.snapshot as snapshot_module

    class Field:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    def reading(*_: object, **__: object) -> None:
        type("Made", (), {"shape": Field()})  # what `@dataclass class NodeDevices` does on import

    monkeypatch.setattr(snapshot_module, "load_snapshot", reading)
    r = run("inventory", "--snapshot", DEMO)
    assert r.code == 130, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == ["error: interrupted"], r.stderr
