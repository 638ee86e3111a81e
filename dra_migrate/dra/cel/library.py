"""The functions a DRA selector may call: the Kubernetes quantity, semver, regex and lists libraries and
cel-go's strings extension (version 2), as Python functions for celpy."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from celpy import celtypes

from dra_migrate.dra.cel.values import Quantity, Semver, _as_int64, parse_quantity, parse_semver

# ---------------------------------------------------------------------------------------------------
# Runtime functions. celpy calls `x.f(a)` as f(x, a); one Python function serves every receiver type of a
# name and raises TypeError (celpy's "no such overload") for the others.


def _b(v: bool) -> celtypes.BoolType:
    return celtypes.BoolType(v)


def _i(v: int) -> celtypes.IntType:
    return celtypes.IntType(v)


def _s(v: str) -> celtypes.StringType:
    return celtypes.StringType(v)


def _overload(name: str, *args: Any) -> TypeError:
    return TypeError(f"no such overload: {name}({', '.join(type(a).__name__ for a in args)})")


def _quantity(s: Any) -> Quantity:
    if not isinstance(s, str):
        raise _overload("quantity", s)
    return parse_quantity(str(s))


def _is_quantity(s: Any) -> celtypes.BoolType:
    try:
        _quantity(s)
    except ValueError:
        return _b(False)
    return _b(True)


def _semver(s: Any, normalize: Any = False) -> Semver:
    if not isinstance(s, str) or not isinstance(normalize, bool | celtypes.BoolType):
        raise _overload("semver", s, normalize)
    return parse_semver(str(s), bool(normalize))


def _is_semver(s: Any, normalize: Any = False) -> celtypes.BoolType:
    try:
        _semver(s, normalize)
    except ValueError:
        return _b(False)
    return _b(True)


def _compare(name: str, a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.compare(b)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise _overload(name, a, b)


def _compare_to(a: Any, b: Any) -> celtypes.IntType:
    return _i(_compare("compareTo", a, b))


def _is_greater_than(a: Any, b: Any) -> celtypes.BoolType:
    return _b(_compare("isGreaterThan", a, b) == 1)


def _is_less_than(a: Any, b: Any) -> celtypes.BoolType:
    return _b(_compare("isLessThan", a, b) == -1)


def _q_arith(name: str, sign: int) -> Callable[[Any, Any], Quantity]:
    def op(a: Any, b: Any) -> Quantity:
        if isinstance(a, Quantity) and isinstance(b, Quantity):
            return Quantity(a.value + sign * b.value)
        if isinstance(a, Quantity) and isinstance(b, celtypes.IntType):
            return Quantity(a.value + sign * int(b))
        raise _overload(name, a, b)

    return op


def _q_unary(name: str, fn: Callable[[Quantity], Any]) -> Callable[[Any], Any]:
    def op(a: Any) -> Any:
        if not isinstance(a, Quantity):
            raise _overload(name, a)
        return fn(a)

    return op


def _as_integer(q: Quantity) -> celtypes.IntType:
    v = _as_int64(q)
    if v is None:
        raise ValueError("cannot convert value to integer")
    return _i(v)


def _semver_part(name: str, index: int) -> Callable[[Any], celtypes.IntType]:
    def op(a: Any) -> celtypes.IntType:
        if not isinstance(a, Semver):
            raise _overload(name, a)
        return _i((a.major, a.minor, a.patch)[index])

    return op


def _str_args(name: str, *args: Any) -> list[str]:
    if not all(isinstance(a, str) for a in args):
        raise _overload(name, *args)
    return [str(a) for a in args]


def _ints(name: str, *args: Any) -> list[int]:
    if not all(isinstance(a, celtypes.IntType) for a in args):
        raise _overload(name, *args)
    return [int(a) for a in args]


def _lower_ascii(s: Any) -> celtypes.StringType:
    (v,) = _str_args("lowerAscii", s)
    return _s("".join(c.lower() if c.isascii() else c for c in v))


def _upper_ascii(s: Any) -> celtypes.StringType:
    (v,) = _str_args("upperAscii", s)
    return _s("".join(c.upper() if c.isascii() else c for c in v))


def _char_at(s: Any, i: Any) -> celtypes.StringType:
    (v,), (n,) = _str_args("charAt", s), _ints("charAt", i)
    if not 0 <= n <= len(v):
        raise IndexError(f"index out of range: {n}")
    return _s(v[n : n + 1])


def _index_of(s: Any, sub: Any, offset: Any = None) -> celtypes.IntType:
    # cel-go v0.29.2 ext/strings.go indexOfOffset: a negative offset is an error; past the end, the empty
    # string is found at the end and anything else is not found (-1).
    if isinstance(s, celtypes.ListType) and offset is None:
        return _i(next((i for i, x in enumerate(s) if x == sub), -1))
    v, needle = _str_args("indexOf", s, sub)
    start = _ints("indexOf", offset)[0] if offset is not None else 0
    if start < 0:
        raise IndexError(f"index out of range: {start}")
    if not needle:
        return _i(min(start, len(v)))
    if start >= len(v):
        return _i(-1)
    return _i(v.find(needle, start))


def _last_index_of(s: Any, sub: Any, offset: Any = None) -> celtypes.IntType:
    # ext/strings.go lastIndexOfOffset: as indexOf, searching backwards from the offset.
    if isinstance(s, celtypes.ListType) and offset is None:
        return _i(max((i for i, x in enumerate(s) if x == sub), default=-1))
    v, needle = _str_args("lastIndexOf", s, sub)
    if offset is None:
        return _i(v.rfind(needle))
    end = _ints("lastIndexOf", offset)[0]
    if end < 0:
        raise IndexError(f"index out of range: {end}")
    if not needle:
        return _i(min(end, len(v)))
    if end >= len(v):
        return _i(-1)
    return _i(v.rfind(needle, 0, min(end, len(v) - len(needle)) + len(needle)))


def _replace(s: Any, old: Any, new: Any, n: Any = None) -> celtypes.StringType:
    v, o, r = _str_args("replace", s, old, new)
    count = _ints("replace", n)[0] if n is not None else -1
    return _s(v.replace(o, r, count))


def _split(s: Any, sep: Any, n: Any = None) -> celtypes.ListType:
    v, d = _str_args("split", s, sep)
    limit = _ints("split", n)[0] if n is not None else -1
    if limit == 0:
        return celtypes.ListType([])
    if limit < 0:
        parts = v.split(d) if d else list(v)
    else:
        parts = v.split(d, limit - 1) if d else [*v[: limit - 1], v[limit - 1 :]]
    return celtypes.ListType([_s(p) for p in parts])


def _substring(s: Any, start: Any, end: Any = None) -> celtypes.StringType:
    (v,) = _str_args("substring", s)
    a = _ints("substring", start)[0]
    b = _ints("substring", end)[0] if end is not None else len(v)
    if not 0 <= a <= b <= len(v):
        raise IndexError(f"index out of range: {a}, {b}")
    return _s(v[a:b])


def _trim(s: Any) -> celtypes.StringType:
    (v,) = _str_args("trim", s)
    return _s(v.strip())


def _join(items: Any, sep: Any = "") -> celtypes.StringType:
    if not isinstance(items, celtypes.ListType) or not all(isinstance(x, str) for x in items):
        raise _overload("join", items, sep)
    return _s(str(sep).join(str(x) for x in items))


def _find(s: Any, pattern: Any) -> celtypes.StringType:
    import re2  # type: ignore[import-untyped]  # cel-python's dependency; RE2 is what Go's regexp implements

    v, p = _str_args("find", s, pattern)
    m = re2.search(p, v)
    return _s(m.group(0) if m else "")


def _find_all(s: Any, pattern: Any, n: Any = None) -> celtypes.ListType:
    import re2

    v, p = _str_args("findAll", s, pattern)
    limit = _ints("findAll", n)[0] if n is not None else -1
    found = [m.group(0) for m in re2.finditer(p, v)]
    return celtypes.ListType([_s(x) for x in (found if limit < 0 else found[:limit])])


def _list_fn(name: str, fn: Callable[[list[Any]], Any]) -> Callable[[Any], Any]:
    def op(xs: Any) -> Any:
        if not isinstance(xs, celtypes.ListType):
            raise _overload(name, xs)
        return fn(list(xs))

    return op


def _list_min(xs: list[Any]) -> Any:
    if not xs:
        raise ValueError("min called on empty list")
    return min(xs)


def _list_max(xs: list[Any]) -> Any:
    if not xs:
        raise ValueError("max called on empty list")
    return max(xs)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _q_arith("add", 1),
    "sub": _q_arith("sub", -1),
    "sign": _q_unary("sign", lambda q: _i((q.value > 0) - (q.value < 0))),
    "asInteger": _q_unary("asInteger", _as_integer),
    "isInteger": _q_unary("isInteger", lambda q: _b(_as_int64(q) is not None)),
    "asApproximateFloat": _q_unary("asApproximateFloat", lambda q: celtypes.DoubleType(float(q.value))),
    "major": _semver_part("major", 0),
    "minor": _semver_part("minor", 1),
    "patch": _semver_part("patch", 2),
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "find": _find,
    "findAll": _find_all,
    "isSorted": _list_fn("isSorted", lambda xs: _b(all(a <= b for a, b in itertools.pairwise(xs)))),
    "sum": _list_fn("sum", lambda xs: functools.reduce(lambda a, b: a + b, xs, celtypes.IntType(0))),
    "min": _list_fn("min", _list_min),
    "max": _list_fn("max", _list_max),
}
