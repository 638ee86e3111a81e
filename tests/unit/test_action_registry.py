"""The action registry (`plan/actions.py`) is the only list of step actions (issue 29): adding one is a
change to the registry and its executor function (`execute/actions.py`) only.

An AST scan of dra_migrate/ and tools/ finds every place that names an action (or an inverse action) by
its string where code decides or lists something by it: a comparison (`step.action == "drain"`), a
mapping key (`{"drain": ...}`), a member of a literal tuple, list or set (`("await-pool", ...)`),
`action=` and the action of a `Step(...)`/`Inverse(...)`. (A subscript is not one: `params["drain"]`
is the drain parameter.) Outside the
registry each of those must go through `Action`/`InverseAction` or `ACTIONS`. The scan is proved not to
pass vacuously: it flags each planted form, and it flags the registry itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from dra_migrate.execute import actions as executor
from dra_migrate.plan import actions as registry
from dra_migrate.plan.actions import ACTIONS, PROVISION_ACTIONS, Action, InverseAction
from dra_migrate.plan.schema import file_schema, show_schema

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "dra_migrate" / "plan" / "actions.py"
# `none` is every other enum's word too (CEL types, modes): the inverse actions with a name of their own.
NAMES = frozenset(a.value for a in Action) | frozenset(a.value for a in InverseAction if a is not InverseAction.NONE)
_CTORS = {"Step": 1, "Inverse": 0}  # the positional argument that is the action


def _is_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES


def _literals(node: ast.AST) -> Iterator[ast.AST]:
    """The node, or the elements of a literal collection it is."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        yield from node.elts
    else:
        yield node


def hard_coded(source: str) -> list[tuple[int, str]]:
    """(line, name) of every action named by its string in a deciding or listing position."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        candidates: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                candidates += _literals(side)
        elif isinstance(node, ast.Dict):
            candidates += [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            candidates += node.elts
        elif isinstance(node, ast.Call):
            candidates += [k.value for k in node.keywords if k.arg == "action"]
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            at = _CTORS.get(str(name))
            if at is not None and len(node.args) > at:
                candidates.append(node.args[at])
        found += [(c.lineno, c.value) for c in candidates if _is_name(c)]  # type: ignore[attr-defined]
    return sorted(set(found))


def _sources() -> list[Path]:
    files = sorted((ROOT / "dra_migrate").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py"))
    return files + [p for p in (ROOT / "tools").rglob("*") if p.is_file() and not p.suffix and _is_python(p)]


def _is_python(path: Path) -> bool:
    try:
        return path.read_text().startswith("#!/usr/bin/env python")
    except (UnicodeDecodeError, OSError):
        return False


def test_the_scan_flags_every_planted_form() -> None:
    planted = """
if step.action == "drain": pass
if step.get("action") in ("await-pool", "canary-pool"): pass
costs = {"cordon": 3, **{"set-label": 2}}
kinds = ["canary", "uncordon"]
Step("wait", "wait-dra-ready", "Node", {}, "", "1m", Inverse("restore-label", {}))
make(action="set-quota")
"""
    flagged = {name for _, name in hard_coded(planted)}
    assert flagged == {
        "drain", "await-pool", "canary-pool", "cordon", "set-label", "canary", "uncordon", "wait-dra-ready",
        "restore-label", "set-quota",
    }  # fmt: skip
    # What is not an action's use: a step's id, a container's name, prose.
    assert hard_coded('Step("drain", Action.DRAIN)\nCONTAINER = "canary"\nlog("drain")\np["drain"]\n') == []


def test_the_scan_sees_the_registry_itself() -> None:
    """Run on the registry, the scan finds every action: it recognises the names where they are listed."""
    source = REGISTRY.read_text().replace("Action.", "").replace(' = "', ' == "')
    assert {name for _, name in hard_coded(source)} >= {a.value for a in Action}


def test_no_module_but_the_registry_names_an_action() -> None:
    files = _sources()
    assert len(files) > 100  # the whole package was scanned
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name!r} (use Action/InverseAction or plan.actions.ACTIONS)"
        for path in files
        if path != REGISTRY
        for line, name in hard_coded(path.read_text())
    ]
    assert offenders == []


def test_everything_that_lists_actions_is_derived_from_the_registry() -> None:
    # Every action has an executor function and an inverse rule, and nothing else.
    assert set(executor.ACTIONS) == set(ACTIONS) == set(Action)
    # The schema's enum is the registry's.
    for schema in (file_schema(), show_schema()):
        assert schema["$defs"]["step"]["properties"]["action"]["enum"] == [a.value for a in Action]
    # The provision stage's steps are the registry's, in its order.
    assert tuple(a for a in Action if ACTIONS[a].provision) == PROVISION_ACTIONS
    # The generated reference lists each action once, with its summary.
    page = (ROOT / "docs" / "actions.md").read_text()
    for a in Action:
        assert page.count(f"| `{a.value}` |") == 1, a
        assert registry.ACTIONS[a].summary in page
