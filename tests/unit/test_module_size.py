"""Modules stay small enough to read: any module of dra_migrate/ over MAX_LINES lines must say why at its
top, in a docstring line `Size: <reason>` (docs/architecture.md, "Module size")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dra_migrate"
MAX_LINES = 600


def oversized(root: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    """Modules over `limit` lines whose docstring gives no `Size:` reason, with their line counts."""
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines <= limit:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        reasons = [
            line for line in doc.splitlines() if line.strip().startswith("Size:") and line.split(":", 1)[1].strip()
        ]
        if not reasons:
            out.append(f"{path.relative_to(root.parent)} ({lines} lines)")
    return out


def test_no_module_is_over_the_limit_without_a_reason() -> None:
    over = oversized()
    assert not over, (
        f"over {MAX_LINES} lines with no 'Size: <reason>' line in the module docstring (split them, or say "
        "why they must stay whole): " + ", ".join(over)
    )


@pytest.mark.parametrize(
    ("doc", "flagged"),
    [
        ('"""A module."""\n', True),
        ('"""A module.\n\nSize: one state machine; splitting it would scatter its transitions.\n"""\n', False),
        ('"""A module.\n\nSize:\n"""\n', True),  # a reason, not just the word
        ('x = 1\n"""Size: not the docstring"""\n', True),
    ],
)
def test_the_check_itself(tmp_path: Path, doc: str, flagged: bool) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "small.py").write_text('"""Small."""\n' + "x = 1\n" * 10)
    (pkg / "big.py").write_text(doc + "x = 1\n" * 20)
    assert oversized(pkg, limit=15) == (["pkg/big.py (" + str(doc.count(chr(10)) + 20) + " lines)"] if flagged else [])
