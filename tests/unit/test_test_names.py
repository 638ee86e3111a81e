"""Test modules have unique basenames across tests/: pytest imports them by basename (no packages), and two of
one name stop the whole run at collection ("import file mismatch"), which only the full run shows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)
    assert not [n for n, k in names.items() if k > 1], [n for n, k in names.items() if k > 1]
