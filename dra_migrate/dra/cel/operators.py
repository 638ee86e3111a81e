"""Equality, ordering and membership as cel-go evaluates them in the Kubernetes environment, and the
runtime helpers of the rewritten macros (two-variable comprehensions, sortBy, lists.range).

cel-go (v0.29.2, common/types) uses heterogeneous equality: values of different kinds are unequal, not an
error (`dyn(1) == 'a'` is false), and int, uint and double compare by numeric value (`dyn(1) == 1u`,
`dyn(1) == 1.0` are true; NaN equals nothing). Kubernetes turns on cel.CrossTypeNumericComparisons
(apiserver v0.37.2 pkg/cel/environment/base.go, 1.28), so `<` and friends also compare int, uint and
double by exact value (`dyn(-9223372036854775809.0) < -9223372036854775808` is false: that double is
-2^63). celpy instead raises on mixed numeric types; these functions replace its operators.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from dra_migrate.dra.cel.values import Quantity, Semver

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _kind(v: Any) -> str:
    if isinstance(v, celtypes.BoolType | bool):
        return "bool"
    if isinstance(v, (*_NUMBERS, int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bytes):
        return "bytes"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "map"
    if v is None or isinstance(v, celtypes.NullType):
        return "null"
    return type(v).__name__


def equal(a: Any, b: Any) -> bool:
    """CEL equality as a bool: an equality cel-go answers with an error is not true."""
    return _equal(a, b) is True


def _equal(a: Any, b: Any) -> bool | None:
    """cel-go's `types.Equal(a, b)` (common/types/util.go): True, False, or None where it is an error. A Semver
    or Quantity on the left of anything but its own type (null aside) is an error, not false (apiserver v0.37.2
    pkg/cel/semver.go, quantity.go `Equal`: MaybeNoSuchOverloadErr); every other mix of kinds is false. Inside
    a list or a map only a False element makes the aggregate unequal: an erroring element pair counts as
    equal (cel-go v0.29.2 common/types/list.go, map.go `Equal`: `if elemEq == False`)."""
    ka, kb = _kind(a), _kind(b)
    if isinstance(a, Quantity | Semver) and kb != "null" and type(a) is not type(b):
        return None
    if ka != kb:
        return False
    if ka == "number":
        return compare_numbers(a, b) == 0
    if ka == "list":
        return len(a) == len(b) and all(_equal(x, y) is not False for x, y in zip(a, b, strict=True))
    if ka == "map":
        if len(a) != len(b):
            return False
        for key, value in a.items():
            found, other = lookup(b, key)
            if not found or _equal(value, other) is False:
                return False
        return True
    if ka == "null":
        return True
    if ka in ("bool", "string", "bytes") or isinstance(a, Quantity | Semver):
        return bool(a == b)
    if isinstance(a, type) or isinstance(b, type):
        return a is b
    return bool(a == b)


def _num(v: Any) -> int | float:
    return float(v) if isinstance(v, float) else int(v)


_TWO63 = 2.0**63
_TWO64 = 2.0**64


def compare_numbers(a: Any, b: Any) -> int | None:
    """-1, 0, 1 as cel-go compares int, uint and double (common/types/compare.go); None when a NaN is
    involved. An int or uint meets a double as a double unless the double is outside its range, so
    9223372036854775807 == 9223372036854775808.0 (both are 2^63 as doubles)."""
    x, y = _num(a), _num(b)
    if (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)):
        return None
    if isinstance(x, float) != isinstance(y, float):
        i, d, sign = (y, x, -1) if isinstance(x, float) else (x, y, 1)
        low, high = (-_TWO63, _TWO63) if isinstance(a if sign == 1 else b, celtypes.IntType) or i < 0 else (0.0, _TWO64)
        if d < low:
            return sign
        if d > high:
            return -sign
        fi = float(i)
        return sign * ((fi > d) - (fi < d))
    return (x > y) - (x < y)


def lookup(m: Any, key: Any) -> tuple[bool, Any]:
    """A map entry by CEL key equality (1, 1u and 1.0 find the same entry)."""
    if key in m and _kind(key) == _kind(next(k for k in m if k == key)):
        return True, m[key]
    for k, v in m.items():
        if equal(k, key):
            return True, v
    return False, None


def _no_overload(op: str, a: Any, b: Any) -> TypeError:
    return TypeError(f"no such overload: {type(a).__name__} {op} {type(b).__name__}")


def _ordering(op: str, test: Callable[[int], bool]) -> Callable[[Any, Any], celtypes.BoolType]:
    def compare(a: Any, b: Any) -> celtypes.BoolType:
        ka, kb = _kind(a), _kind(b)
        if ka == kb == "number":
            c = compare_numbers(a, b)
            return celtypes.BoolType(c is not None and test(c))
        if ka != kb or (ka not in ("bool", "string", "bytes") and not _is_time(a)):
            raise _no_overload(op, a, b)
        return celtypes.BoolType(test((a > b) - (a < b)))

    return compare


def _is_time(v: Any) -> bool:
    return isinstance(v, celtypes.TimestampType | celtypes.DurationType)


def _eq(a: Any, b: Any) -> celtypes.BoolType:
    result = _equal(a, b)
    if result is None:
        raise _no_overload("==", a, b)
    return celtypes.BoolType(result)


def _ne(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(not equal(a, b))


def _in_set(x: Any, container: Any) -> celtypes.BoolType:
    """`x in [literals]`: cel-go's planner (OptOptimize, on in the Kubernetes environment) turns a non-empty list
    of primitive literals into a Go map (interpreter/decorators.go maybeOptimizeSetMembership) and looks `x` up
    in it, so a Semver `x` (a version attribute), unhashable in Go (apiserver pkg/cel/semver.go: a struct holding
    slices), is a runtime error ("hash of unhashable type"), where the same list built at run time answers false.
    Lists and maps are pointers there: hashable, not found."""
    if isinstance(x, Semver):
        raise TypeError(f"hash of unhashable type {type(x).__name__}")
    return _in(x, container)


def _in(x: Any, container: Any) -> celtypes.BoolType:
    if isinstance(container, celtypes.ListType):
        return celtypes.BoolType(any(equal(x, v) for v in container))
    if isinstance(container, celtypes.MapType):
        return celtypes.BoolType(lookup(container, x)[0])
    raise _no_overload("in", x, container)


def _index(container: Any, key: Any) -> Any:
    if isinstance(container, celtypes.ListType):
        if _kind(key) != "number":
            raise _no_overload("[]", container, key)
        n = _num(key)
        if isinstance(n, float):
            if not n.is_integer():
                raise ValueError(f"unsupported index value {n}")
            n = int(n)
        if not 0 <= n < len(container):
            raise IndexError(f"index out of bounds: {n}")
        return container[n]
    if isinstance(container, celtypes.MapType):
        found, value = lookup(container, key)
        if not found:
            return container[key]  # the domain maps default; others raise KeyError ("no such key")
        return value
    raise _no_overload("[]", container, key)


# ---------------------------------------------------------------------------------------------------
# Helpers of rewritten macros


def _keys(x: Any) -> celtypes.ListType:
    """The first variable of a two-variable comprehension: list indices or map keys."""
    if isinstance(x, celtypes.ListType):
        return celtypes.ListType([celtypes.IntType(i) for i in range(len(x))])
    if isinstance(x, celtypes.MapType):
        return celtypes.ListType(list(x.keys()))
    raise TypeError(f"no such overload: comprehension over {type(x).__name__}")


def _to_map(keys: Any, values: Any) -> celtypes.MapType:
    return celtypes.MapType(dict(zip(keys, values, strict=True)))


def _merge(maps: Any) -> celtypes.MapType:
    out = celtypes.MapType()
    for m in maps:
        if not isinstance(m, celtypes.MapType):
            raise TypeError("transformMapEntry: the expression must produce a map")
        for k, v in m.items():
            if lookup(out, k)[0]:
                raise ValueError(f"insert failed: key {k!r} already exists")
            out[k] = v
    return out


def _sort_key_check(keys: list[Any]) -> None:
    kinds = {_kind(k) for k in keys}
    if len(kinds) > 1 or kinds - {"number", "string", "bool", "bytes"}:
        raise TypeError("sort: list elements must be comparable and of one type")


def _sort(xs: Any) -> celtypes.ListType:
    if not isinstance(xs, celtypes.ListType):
        raise TypeError("no such overload: sort")
    _sort_key_check(list(xs))
    return celtypes.ListType(sorted(xs, key=_sortable))


def _sortable(v: Any) -> Any:
    return _num(v) if _kind(v) == "number" else v


def _sort_by(xs: Any, keys: Any) -> celtypes.ListType:
    _sort_key_check(list(keys))
    order = sorted(range(len(xs)), key=lambda i: _sortable(keys[i]))
    return celtypes.ListType([xs[i] for i in order])


def _range(n: Any) -> celtypes.ListType:
    if not isinstance(n, celtypes.IntType):
        raise TypeError("no such overload: lists.range")
    if n > 1_000_000:
        raise ValueError("lists.range: too large")
    return celtypes.ListType([celtypes.IntType(i) for i in range(max(int(n), 0))])


def _slice(xs: Any, start: Any, end: Any) -> celtypes.ListType:
    if not isinstance(xs, celtypes.ListType) or not all(isinstance(v, celtypes.IntType) for v in (start, end)):
        raise TypeError("no such overload: slice")
    a, b = int(start), int(end)
    if a < 0 or b < 0:
        raise IndexError(f"cannot slice({a}, {b}), negative indexes not supported")
    if a > b:
        raise IndexError(f"cannot slice({a}, {b}), start index must be less than or equal to end index")
    if b > len(xs):
        raise IndexError(f"cannot slice({a}, {b}), list is length {len(xs)}")
    return celtypes.ListType(xs[a:b])


def _flatten(xs: Any, depth: Any = None) -> celtypes.ListType:
    if not isinstance(xs, celtypes.ListType):
        raise TypeError("no such overload: flatten")
    if depth is None:
        d = 1
    elif isinstance(depth, celtypes.IntType):
        d = int(depth)
    else:
        raise TypeError("no such overload: flatten")
    if d < 0:
        raise ValueError("level must be non-negative")
    return celtypes.ListType(_flat(list(xs), d))


def _flat(xs: list[Any], depth: int) -> list[Any]:
    out: list[Any] = []
    for x in xs:
        if isinstance(x, celtypes.ListType) and depth > 0:
            out += _flat(list(x), depth - 1)
        else:
            out.append(x)
    return out


def _distinct(xs: Any) -> celtypes.ListType:
    if not isinstance(xs, celtypes.ListType):
        raise TypeError("no such overload: distinct")
    out: list[Any] = []
    for x in xs:
        if not any(equal(x, y) for y in out):
            out.append(x)
    return celtypes.ListType(out)


def _reverse(xs: Any) -> celtypes.ListType:
    if not isinstance(xs, celtypes.ListType):
        raise TypeError("no such overload: reverse")
    return celtypes.ListType(list(reversed(xs)))


_INT64 = (-(2**63), 2**63 - 1)


def _divide(a: Any, b: Any) -> Any:
    """IEEE division for doubles (0.0/0.0 is NaN, 1.0/0.0 +Inf; celpy returns inf for both); int and uint
    division truncates, and by zero is an error, as in cel-go."""
    if isinstance(a, celtypes.DoubleType) and isinstance(b, celtypes.DoubleType):
        x, y = float(a), float(b)
        if y == 0.0:
            if x == 0.0 or math.isnan(x):
                return celtypes.DoubleType(math.nan)
            return celtypes.DoubleType(math.copysign(math.inf, x) * math.copysign(1.0, y))
        return celtypes.DoubleType(x / y)
    for t in (celtypes.IntType, celtypes.UintType):
        if type(a) is t and type(b) is t:
            if int(b) == 0:
                raise ValueError("division by zero")
            q = abs(int(a)) // abs(int(b)) * (1 if (int(a) < 0) == (int(b) < 0) else -1)
            if t is celtypes.IntType and not _INT64[0] <= q <= _INT64[1]:
                raise ValueError("integer overflow")
            return t(q)
    raise _no_overload("/", a, b)


def _modulo(a: Any, b: Any) -> Any:
    for t in (celtypes.IntType, celtypes.UintType):
        if type(a) is t and type(b) is t:
            if int(b) == 0:
                raise ValueError("modulus by zero")
            r = abs(int(a)) % abs(int(b)) * (1 if int(a) >= 0 else -1)
            return t(r)
    raise _no_overload("%", a, b)


_UINT64_MAX = 2**64 - 1


def _to_int(v: Any) -> celtypes.IntType:
    """int() as cel-go: range-checked (a double must lie strictly inside (-2^63, 2^63))."""
    if isinstance(v, celtypes.BoolType | bool):
        raise _no_overload("int", v, None)
    if isinstance(v, celtypes.DoubleType):
        x = float(v)
        if math.isnan(x) or math.isinf(x) or x <= -(2.0**63) or x >= 2.0**63:
            raise ValueError("integer overflow")
        return celtypes.IntType(int(x))
    if isinstance(v, celtypes.IntType | celtypes.UintType):
        if not _INT64[0] <= int(v) <= _INT64[1]:
            raise ValueError("integer overflow")
        return celtypes.IntType(int(v))
    if isinstance(v, celtypes.StringType):
        if not re.fullmatch(r"[+-]?[0-9]+", str(v)):
            raise ValueError("type conversion error from 'string' to 'int'")
        n = int(str(v))
        if not _INT64[0] <= n <= _INT64[1]:
            raise ValueError("type conversion error from 'string' to 'int'")
        return celtypes.IntType(n)
    if isinstance(v, celtypes.TimestampType):
        return celtypes.IntType(int(v.timestamp()))
    raise _no_overload("int", v, None)


def _to_uint(v: Any) -> celtypes.UintType:
    if isinstance(v, celtypes.BoolType | bool):
        raise _no_overload("uint", v, None)
    if isinstance(v, celtypes.DoubleType):
        x = float(v)
        if math.isnan(x) or math.isinf(x) or x < 0 or x >= 2.0**64:
            raise ValueError("unsigned integer overflow")
        return celtypes.UintType(int(x))
    if isinstance(v, celtypes.IntType | celtypes.UintType):
        if not 0 <= int(v) <= _UINT64_MAX:
            raise ValueError("unsigned integer overflow")
        return celtypes.UintType(int(v))
    if isinstance(v, celtypes.StringType):
        if not re.fullmatch(r"[+]?[0-9]+", str(v)) or int(str(v)) > _UINT64_MAX:
            raise ValueError("type conversion error from 'string' to 'uint'")
        return celtypes.UintType(int(str(v)))
    raise _no_overload("uint", v, None)


_BOOL_STRINGS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
                 "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}  # fmt: skip


def _to_bool(v: Any) -> celtypes.BoolType:
    """bool() as cel-go: Go's strconv.ParseBool spellings only."""
    if isinstance(v, celtypes.BoolType | bool):
        return celtypes.BoolType(bool(v))
    if isinstance(v, str):
        if str(v) not in _BOOL_STRINGS:
            raise ValueError("type conversion error from 'string' to 'bool'")
        return celtypes.BoolType(_BOOL_STRINGS[str(v)])
    raise _no_overload("bool", v, None)


def _set_lists(name: str, a: Any, b: Any) -> tuple[list[Any], list[Any]]:
    if not isinstance(a, list) or not isinstance(b, list):
        raise _no_overload(name, a, b)
    return list(a), list(b)


def _sets_contains(a: Any, b: Any) -> celtypes.BoolType:
    """sets.contains(a, b): every element of b is in a (cel-go ext/sets.go, CEL equality)."""
    xs, ys = _set_lists("sets.contains", a, b)
    return celtypes.BoolType(all(any(equal(y, x) for x in xs) for y in ys))


def _sets_equivalent(a: Any, b: Any) -> celtypes.BoolType:
    _set_lists("sets.equivalent", a, b)
    return celtypes.BoolType(bool(_sets_contains(a, b)) and bool(_sets_contains(b, a)))


def _sets_intersects(a: Any, b: Any) -> celtypes.BoolType:
    xs, ys = _set_lists("sets.intersects", a, b)
    return celtypes.BoolType(any(equal(x, y) for x in xs for y in ys))


OPERATORS: dict[str, Callable[..., Any]] = {
    "__sets_contains": _sets_contains,
    "__sets_equivalent": _sets_equivalent,
    "__sets_intersects": _sets_intersects,
    "bool": _to_bool,
    "int": _to_int,
    "uint": _to_uint,
    "_/_": _divide,
    "_%_": _modulo,
    "_==_": _eq,
    "_!=_": _ne,
    "_<_": _ordering("<", lambda c: c < 0),
    "_<=_": _ordering("<=", lambda c: c <= 0),
    "_>_": _ordering(">", lambda c: c > 0),
    "_>=_": _ordering(">=", lambda c: c >= 0),
    "_in_": _in,
    "__in_set": _in_set,
    "_[_]": _index,
    "__keys": _keys,
    "__to_map": _to_map,
    "__merge": _merge,
    "__sort_by": _sort_by,
    "__lists_range": _range,
    "sort": _sort,
    "slice": _slice,
    "flatten": _flatten,
    "distinct": _distinct,
    "reverse": _reverse,
}


def error_propagating(fn: Callable[..., Any]) -> Callable[..., Any]:
    """celpy passes an operand's evaluation error in as a value; a CEL function of an error is that error
    (`1/0 == 1/0` is an error, not true)."""

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        try:
            return fn(*args)
        except Exception as e:
            message = "no such overload" if isinstance(e, TypeError) else str(e) or type(e).__name__
            return CELEvalError(message, e.__class__, e.args)

    return call
