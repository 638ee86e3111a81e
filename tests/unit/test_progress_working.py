"""Progress for slow commands (issue 29 item 3): a line on a terminal only once the work has taken
longer than the threshold, cleared when it ends; nothing when stderr is not a terminal."""

from __future__ import annotations

import ast
import io
import time
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cli.progress import Working
from tests.unit.cli import run


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_slow_command_says_what_it_is_doing_on_a_terminal() -> None:
    tty = _Tty()
    with Working("reading plans/x.yaml", after_s=0.02, every_s=0.01, stream=tty):
        time.sleep(0.2)
    out = tty.getvalue()
    assert "reading plans/x.yaml: 0s" in out and out.endswith("\r\033[K")  # drawn, then cleared


def test_a_quick_command_and_a_pipe_stay_silent() -> None:
    tty = _Tty()
    with Working("reading", after_s=5, stream=tty):
        pass
    assert tty.getvalue() == ""
    pipe = io.StringIO()
    with Working("reading", after_s=0, every_s=0.01, stream=pipe):
        time.sleep(0.05)
    assert pipe.getvalue() == ""


# Every command that reads a snapshot reads it through `cli.options.load_state`; each says so on a terminal
# when the reading is slow, and the commands whose own work is slow at fleet size say what that work is.
DEMO = "fixtures/clusters/demo.yaml"
PLAN = "plans/demo-example.yaml"
READERS = {
    "inventory": ["inventory", "--snapshot", DEMO],
    "check": ["check", "--snapshot", DEMO],
    "generate deviceclasses": ["generate", "deviceclasses", "--snapshot", DEMO],
    "generate dependents": ["generate", "dependents", "--snapshot", DEMO],
    "match": ["match", "--snapshot", DEMO],
    "plan": ["plan", "--snapshot", DEMO, "--out", "{tmp}/p.yaml"],
    "diff": ["diff", PLAN, "--snapshot", DEMO],
    "report": ["report", PLAN, "--snapshot", DEMO],
}


def _slowed(monkeypatch: pytest.MonkeyPatch, module: str, name: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    real = getattr(mod, name)

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # long enough for the progress thread, whose threshold is 0 here, to draw once
        return real(*args, **kwargs)

    monkeypatch.setattr(mod, name, slow)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from dra_migrate.cli import progress

    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "is_terminal", lambda stream: True)


@pytest.mark.parametrize("command", READERS)
def test_every_command_that_reads_a_snapshot_says_so_on_a_terminal(
    command: str, terminal: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _slowed(monkeypatch, "dra_migrate.cluster.snapshot", "load_snapshot")
    args = [a.format(tmp=tmp_path) for a in READERS[command]]
    result = run(*args)
    assert f"reading {DEMO}: 0s" in result.stderr, (command, result.code, result.stderr[-300:])
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("command", "module", "name", "says"),
    [
        ("inventory", "dra_migrate.inventory.model", "build_inventory", "building the inventory"),
        ("check", "dra_migrate.checks.run", "assess", "checking"),
    ],
)
def test_a_slow_command_says_what_it_is_working_out(
    command: str, module: str, name: str, says: str, terminal: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slowed(monkeypatch, module, name)
    result = run(*READERS[command])
    assert f"\r\033[K{says}: 0s" in result.stderr, result.stderr[-300:]


# Every command that reads a plan reads it through `cli.options.read_plan` (or, for show's tables, streams
# it through plan/stream.py under the same line). Each runs up to the reading: a missing snapshot or policy
# directory stops it after, which is all this looks at.
PLAN_READERS = {
    "show": ["show", PLAN],
    "show -o json": ["show", PLAN, "-o", "json"],
    "status": ["status", PLAN],
    "diff": ["diff", PLAN, PLAN],
    "apply": ["apply", PLAN, "--snapshot", DEMO],
    "rollback": ["rollback", PLAN, "--snapshot", DEMO],
    "report": ["report", PLAN],
    "rehearse": ["rehearse", PLAN, "--snapshot", "{tmp}/missing.yaml"],
    "policy check": ["policy", "check", PLAN, "--policy", "{tmp}/missing"],
}


@pytest.mark.parametrize("command", PLAN_READERS)
def test_every_command_that_reads_a_plan_says_so_on_a_terminal(
    command: str, terminal: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _slowed(monkeypatch, "dra_migrate.plan.io", "load")
    _slowed(monkeypatch, "dra_migrate.plan.stream", "outline")
    result = run(*[a.format(tmp=tmp_path) for a in PLAN_READERS[command]])
    assert f"reading {PLAN}: 0s" in result.stderr, (command, result.code, result.stderr[-300:])
    assert "Traceback" not in result.stderr


PLAN_IO_READS = {"load", "load_for_review"}  # plan/io.py, as `plan_io.load(...)`
READS = {"load_snapshot", "outline"}  # cluster/snapshot.py and plan/stream.py, imported by name


def _reads_outside_working(tree: ast.AST) -> list[int]:
    """Lines that call a reader of a plan or a snapshot outside a `with Working(...)` block."""
    found: list[int] = []

    def visit(node: ast.AST, covered: bool) -> None:
        if isinstance(node, ast.With):
            covered = covered or any(
                isinstance(i.context_expr, ast.Call) and getattr(i.context_expr.func, "id", "") == "Working"
                for i in node.items
            )
        if isinstance(node, ast.Call) and not covered:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            module = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            if (module == "plan_io" and name in PLAN_IO_READS) or (not module and name in READS):
                found.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, covered)

    visit(tree, False)
    return found


def test_no_command_reads_a_plan_or_a_snapshot_but_under_a_progress_line() -> None:
    """The behaviour above, for the commands of tomorrow too: in cli/, every call that reads a plan file or
    a snapshot sits in a `with Working(...)` block (cli.options.read_plan and load_state are two)."""
    cli = Path(__file__).resolve().parents[2] / "dra_migrate" / "cli"
    bare = {
        f"{path.name}:{line}": path.read_text().splitlines()[line - 1].strip()
        for path in sorted(cli.glob("*.py"))
        for line in _reads_outside_working(ast.parse(path.read_text()))
    }
    assert not bare, bare


def test_convert_says_what_it_is_doing_on_a_terminal(terminal: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream of 3,000 Deployments takes half a minute to convert."""
    _slowed(monkeypatch, "dra_migrate.cli.convert", "convert_files")
    result = run("convert", "fixtures/manifests")
    assert "converting " in result.stderr and " file(s): 0s" in result.stderr, result.stderr[-300:]
