"""A problem of meaning in a plan, with the path of the field it is about, and the checker that collects
them (`validate.py`, `derived.py`). Split out of validate.py (issue 29)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.plan.durations import checked_duration

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    path: Path  # where in the plan, as keys and list indexes
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return f"{readable(self.path)}: {self.message}" if self.path else self.message


def readable(path: Path) -> str:
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out


class _Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: Path, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def mapping(self, value: Any, path: Path, keys: frozenset[str], *, required: frozenset[str] | None = None) -> bool:
        if not isinstance(value, dict):
            self.add(path, "expected a mapping")
            return False
        unknown = sorted(set(value) - keys)
        if unknown:
            self.add((*path, unknown[0]), "an unknown field")
        missing = sorted((keys if required is None else required) - set(value))
        if missing:
            self.add(path, f"missing `{missing[0]}`")
        return not unknown and not missing

    def string(self, value: Any, path: Path, *, empty_ok: bool = False) -> bool:
        if not isinstance(value, str) or (not empty_ok and not value.strip()):
            self.add(path, "expected a non-empty string" if not empty_ok else "expected a string")
            return False
        return True

    def count(self, value: Any, path: Path) -> bool:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.add(path, f"expected a count (a non-negative integer), not {value!r}")
            return False
        return True

    def strings(self, value: Any, path: Path) -> bool:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.add(path, "expected a list of non-empty strings")
            return False
        return True

    def duration(self, value: Any, path: Path, *, zero_ok: bool = False) -> None:
        try:
            checked_duration(readable(path), value, zero_ok=zero_ok)
        except InputError as e:
            self.add(path, e.message.replace(f"bad {readable(path)} ", "", 1), e.hint)
