"""Strict readers of the plan model's fields (`model.py`): each refuses a value of the wrong shape with an
`InputError` naming its path (`stages[2].waves[0].nodes[1].gpuPods`). Split out of model.py (issue 29)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from dra_migrate.errors import InputError
from dra_migrate.plan.wire import field_at as _at

_HINT = "regenerate the plan with dra-migrate plan (or fix the field and dra-migrate plan --rebase it)"


class PlanFieldError(InputError):
    """A field of a plan's mapping the model cannot read: `at` is its path as keys and list indexes (the
    checks of an edited plan report it as a `Problem` there, and `io` finds its line), `reason` the words
    without the path."""

    def __init__(self, path: str, reason: str, hint: str = _HINT) -> None:
        super().__init__(f"plan field `{path}`: {reason}", hint)
        self.at = _at(path)
        self.reason = reason


def _fail(path: str, what: str, hint: str = _HINT) -> PlanFieldError:
    return PlanFieldError(path, what, hint)


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    # `type(...) is dict` first: the ABC check costs ~5x more, and a plan at 10,000 nodes has ~10^5 mappings.
    if not (type(value) is dict or isinstance(value, Mapping)) or not set(map(type, value)) <= {str}:
        raise _fail(path, f"expected a mapping, got {_type_name(value)}")
    return value


def _fields(value: Any, path: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> Mapping[str, Any]:
    doc = _mapping(value, path)
    for key in required:
        if key not in doc:
            raise _fail(f"{path}.{key}" if path else key, "missing")
    unknown = [k for k in doc if k not in required and k not in optional]
    if unknown:
        raise _fail(f"{path}.{unknown[0]}" if path else unknown[0], "unknown field")
    return doc


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, got {_type_name(value)}")
    return value


def _int(value: Any, path: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _fail(path, f"expected an integer, got {_type_name(value)}")
    if value < minimum:
        raise _fail(path, f"must be at least {minimum}, got {value}")
    return value


def _count(value: Any, path: str) -> int:
    """A count of pods or devices: a non-negative integer (the words validate has always used)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail(path, f"expected a count (a non-negative integer), not {value!r}")
    return value


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, f"expected true or false, got {_type_name(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list, got {_type_name(value)}")
    return value


def _each(doc: Mapping[str, Any], key: str, path: str) -> Iterator[tuple[Any, str]]:
    """The items of the list `doc[key]`, each with its path."""
    for i, item in enumerate(_list(doc[key], f"{path}.{key}")):
        yield item, f"{path}.{key}[{i}]"


def _strs(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


_SCALARS = frozenset({str, int, bool, type(None)})  # what most values are: no ABC check for them


def _finite(value: Any, path: str) -> None:
    """NaN and infinities have no JSON form (they digest as null): refuse them anywhere. A walk without
    paths first (a plan at 10,000 nodes holds ~10^5 values); the path only for the one refused."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend(v.values())
        elif t is list or t is tuple:
            stack.extend(v)
        elif t is float:
            if not math.isfinite(v):
                break
        elif t not in _SCALARS and isinstance(v, Mapping):  # another mapping type: walked with paths below
            break
    else:
        return
    _finite_at(value, path)


def _finite_at(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(path, f"{value} is not a number apply can use")
    if isinstance(value, Mapping):
        for k, v in value.items():
            _finite_at(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _finite_at(v, f"{path}[{i}]")


def _duration(value: Any, path: str) -> str:
    from dra_migrate.plan.durations import parse_duration

    text = _str(value, path)
    try:
        parse_duration(text)
    except InputError as e:  # the words `params.checked_duration` uses, with the syntax as the hint
        raise _fail(path, f"{text!r}: not a duration", e.hint) from e
    return text


_E = TypeVar("_E", bound=StrEnum)


def _enum(cls: type[_E], value: Any, path: str) -> _E:
    text = _str(value, path)
    try:
        return cls(text)
    except ValueError:
        known = ", ".join(m.value for m in cls)
        # The hint names where actions come from: the protocol's registry, not a free-form field.
        hint = "actions are the protocol's (dra_migrate/plan/actions.py): regenerate the plan, or fix the field"
        raise _fail(path, f"unknown action {text!r} (known: {known})", hint) from None
