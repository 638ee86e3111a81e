"""The core never prints (docs/architecture.md): outside cli/ it returns data, raises MigrateError and
logs; only the CLI decides what reaches stdout and stderr. (Imports are checked by `lint-imports`.)"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dra_migrate"


def print_calls(root: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                out.append(f"{rel}:{node.lineno}")
    return out


def test_nothing_outside_cli_calls_print(tmp_path: Path) -> None:
    assert print_calls() == []
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "ok.py").write_text("print('fine')\n")
    (tmp_path / "core.py").write_text("x = 1\nprint(x)\n")
    assert print_calls(tmp_path) == ["core.py:2"]
