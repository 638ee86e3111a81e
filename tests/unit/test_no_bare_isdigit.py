"""No `str.isdigit()` alone guards a number read from input. It is true of "²" (int() refuses it: a
count of "²" crashed `inventory` with a traceback) and of an Arabic-Indic one, U+0661 (no Kubernetes
quantity). The product uses `isdecimal()` where a digit string goes on to int(), or `isascii() and
isdigit()` where it must be a quantity as Kubernetes spells one."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dra_migrate"


def _guarded(test: ast.BoolOp, call: ast.Call) -> bool:
    """`x.isascii() and x.isdigit()`: the isdigit call is in an `and` beside an isascii call."""
    return any(
        isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "isascii" for v in test.values
    ) and any(v is call for v in test.values)


def bare_isdigit_calls(root: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {
            id(v)
            for node in ast.walk(tree)
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And)
            for v in node.values
            if isinstance(v, ast.Call) and _guarded(node, v)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "isdigit"
                and id(node) not in guarded
            ):
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_no_number_is_read_through_a_bare_isdigit(tmp_path: Path) -> None:
    assert bare_isdigit_calls() == []
    (tmp_path / "ok.py").write_text("def f(v):\n    return v.isascii() and v.isdigit() or v.isdecimal()\n")
    (tmp_path / "bad.py").write_text("def f(v):\n    return int(v) if v.isdigit() else 0\n")
    assert bare_isdigit_calls(tmp_path) == ["bad.py:2"]
    assert "²".isdigit() and not "²".isdecimal()  # the digit the rule is for
