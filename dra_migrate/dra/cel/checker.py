"""A static checker for the compile-time errors the API server reports on DRA selectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lark

from dra_migrate.dra.cel.errors import SelectorError, UnsupportedSelectorError
from dra_migrate.dra.cel.types import (
    _DEVICE_FIELDS,
    _DEVICE_MAP_SIZE,
    _MACROS,
    _MACROS2,
    _MAX_ITERATIONS,
    _NUMERIC,
    _SIGNATURES,
    _TYPE_NAMES,
    _UNKNOWN_SIZE,
    _UNSUPPORTED,
    ANY,
    ATTR_DOMAIN,
    ATTRS,
    BOOL,
    BYTES,
    CAP_DOMAIN,
    CAPS,
    COST_REFUSAL,
    DEVICE,
    DOUBLE,
    DYN,
    INT,
    LIST,
    MAP,
    NULL,
    QUANTITY,
    SEMVER,
    STRING,
    TYPE,
    UINT,
    _ident_name,
    _is_ident,
    _kind,
    _loose,
    _matches,
    _orderable,
    _parameters,
    _unifiable,
    _unified,
    _unwrap,
)


class _CompileError(Exception):
    def __init__(self, node: lark.Tree[Any] | lark.Token, message: str) -> None:
        line = getattr(node, "line", None) or getattr(getattr(node, "meta", None), "line", 1)
        column = getattr(node, "column", None) or getattr(getattr(node, "meta", None), "column", 1)
        super().__init__(f"ERROR: <input>:{line}:{column}: {message}")


class _Checker:
    def __init__(self) -> None:
        self.scopes: list[dict[str, str]] = [{"device": DEVICE}]
        self.sized_scopes: list[set[str]] = []
        self.iterations = 1

    def check(self, node: lark.Tree[Any] | lark.Token) -> str:
        if isinstance(node, lark.Token):
            raise _CompileError(node, f"unexpected token {node!r}")
        method = getattr(self, "_" + str(node.data), None)
        if method is not None:
            result: str = method(node)
            return result
        children = [c for c in node.children if isinstance(c, lark.Tree)]
        if len(children) == 1:
            return self.check(children[0])
        raise _CompileError(node, f"unsupported syntax {node.data!s}")  # pragma: no cover

    # literals and names
    def _literal(self, node: lark.Tree[Any]) -> str:
        tok = node.children[0]
        assert isinstance(tok, lark.Token)
        return {
            "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "INT_LIT": INT, "MLSTRING_LIT": STRING, "STRING_LIT": STRING,
            "BYTES_LIT": BYTES, "BOOL_LIT": BOOL, "NULL_LIT": NULL,
        }.get(tok.type, DYN)  # fmt: skip

    def _ident(self, node: lark.Tree[Any]) -> str:
        name = str(node.children[0])
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in _TYPE_NAMES:
            return TYPE
        if name in _UNSUPPORTED:
            raise UnsupportedSelectorError(f"{name!r} is not supported by the offline CEL evaluator")
        raise _CompileError(node.children[0], f"undeclared reference to '{name}' (in container '')")

    def _dot_ident(self, node: lark.Tree[Any]) -> str:
        raise _CompileError(node, "leading-dot names are not declared in this environment")

    _dot_ident_arg = _dot_ident

    def _paren_expr(self, node: lark.Tree[Any]) -> str:
        return self.check(node.children[0])

    def _list_lit(self, node: lark.Tree[Any]) -> str:
        items = node.children[0].children if node.children else []
        return f"list({self._homogeneous(items)})"

    def _map_lit(self, node: lark.Tree[Any]) -> str:
        inits = node.children[0].children if node.children else []
        return f"map({self._homogeneous(inits[0::2])}, {self._homogeneous(inits[1::2])})"

    def _homogeneous(self, items: list[Any]) -> str:
        """cel.HomogeneousAggregateLiterals (apiserver base.go): every element of a list literal, every key
        and every value of a map literal has one type; only an explicit dyn() differs. The element type."""
        first: str | None = None
        for item in items:
            t = self.check(item)
            if t == DYN:
                continue
            if first is None:
                first = t
            elif t != first and not ("dyn" in t or "dyn" in first):
                raise _CompileError(_unwrap(item), f"expected type '{first}' but found '{t}'")
        return first or DYN

    def _exprlist(self, node: lark.Tree[Any]) -> str:
        for c in node.children:
            self.check(c)
        return LIST

    _mapinits = _exprlist

    def _member_object(self, node: lark.Tree[Any]) -> str:
        # google.protobuf.Value{...} and friends are declared in cel-go's base environment.
        raise UnsupportedSelectorError("message construction (Type{...}) is not supported by the offline CEL evaluator")

    # operators
    def _expr(self, node: lark.Tree[Any]) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        cond, a, b = (self.check(c) for c in node.children)
        # cel-go declares `_?_:_` as (bool, A, A) -> A: both branches must unify, `true ? 1 : 'a'` is refused.
        if cond not in (BOOL, DYN, ANY) or not _unifiable(a, b):
            where = next(node.scan_values(lambda v: isinstance(v, lark.Token)), node)
            raise _CompileError(where, f"found no matching overload for '_?_:_' applied to '({cond}, {a}, {b})'")
        return _unified(a, b)

    def _logical(self, node: lark.Tree[Any], op: str) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        a, b = (self.check(c) for c in node.children)
        if a not in (BOOL, DYN, ANY) or b not in (BOOL, DYN, ANY):
            raise _CompileError(node, f"found no matching overload for '{op}' applied to '({a}, {b})'")
        return BOOL

    def _conditionalor(self, node: lark.Tree[Any]) -> str:
        return self._logical(node, "_||_")

    def _conditionaland(self, node: lark.Tree[Any]) -> str:
        return self._logical(node, "_&&_")

    def _relation(self, node: lark.Tree[Any]) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        op_node, right = node.children
        assert isinstance(op_node, lark.Tree) and isinstance(right, lark.Tree)
        a, b = self.check(op_node.children[0]), self.check(right)
        op = str(op_node.data).removeprefix("relation_")
        symbol = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "in": "@in"}[op]
        # Beside dyn/any the other operand still needs an ordering overload: `attr >= semver('1.0.0')` is refused.
        ok = (_loose(a) and _orderable(b)) or (_loose(b) and _orderable(a)) or (a in _NUMERIC and b in _NUMERIC)
        if op in ("eq", "ne"):
            # `_==_` is (A, A) -> bool in cel-go: CrossTypeNumericComparisons covers the ordering operators
            # only, so `1.0 == 1` and `[1] == [1u]` are refused by the API server as no matching overload.
            ok = _unifiable(a, b)
        elif op == "in":
            params = _parameters(b)
            ok = _kind(b) in (DYN, ANY) or (_kind(b) in (LIST, MAP) and (not params or _unifiable(a, params[0])))
        else:
            # Cross-type numeric comparisons are on in Kubernetes; Quantity and Semver have no `<`.
            ok = ok or (a == b and a in (STRING, BYTES, BOOL))
        if not ok:
            raise _CompileError(op_node, f"found no matching overload for '_{symbol}_' applied to '({a}, {b})'")
        if op == "ne" and a == b and a in (QUANTITY, SEMVER):
            # apiserver v0.37.2 library/cost.go prices `_==_` of two Quantities/Semvers at 1 but not `_!=_`: cel-go's
            # estimate is then unbounded, the API server refuses `memory != quantity('0')` (not `!(... == ...)`).
            raise SelectorError(f"too complex, exceeds cost limit: `!=` of two {a} values (write !(a == b))")
        if op in ("eq", "ne", "in"):
            self._check_equality_cost(op_node.children[0], right, a, b)
        return BOOL

    def _check_equality_cost(self, left: Any, right: Any, a: str, b: str) -> None:
        """kube-apiserver refuses a selector whose estimated cost exceeds the limit; cel-go's estimate of
        an equality is unbounded when neither operand has a known size (type values, dyn() of a function
        result). That estimate is not reproduced here: refuse rather than guess."""
        if TYPE in (a, b):
            raise UnsupportedSelectorError(COST_REFUSAL)
        variable_size = {DYN, ANY, STRING, BYTES}
        if (_kind(a) in variable_size | {LIST, MAP} or _kind(b) in variable_size | {LIST, MAP}) and not (
            self._sized(left) or self._sized(right)
        ):
            raise UnsupportedSelectorError(COST_REFUSAL)
        # Comparing aggregates: cel-go's estimate needs the size of both.
        if {_kind(a), _kind(b)} & {LIST, MAP} and not (self._sized(left) and self._sized(right)):
            raise UnsupportedSelectorError(COST_REFUSAL)

    def _addition(self, node: lark.Tree[Any]) -> str:
        return self._arith(node, {"addition_add": "_+_", "addition_sub": "_-_"})

    def _multiplication(self, node: lark.Tree[Any]) -> str:
        ops = {"multiplication_mul": "_*_", "multiplication_div": "_/_", "multiplication_mod": "_%_"}
        return self._arith(node, ops)

    def _arith(self, node: lark.Tree[Any], ops: Mapping[str, str]) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        op_node, right = node.children
        assert isinstance(op_node, lark.Tree) and isinstance(right, lark.Tree)
        a, b = self.check(op_node.children[0]), self.check(right)
        op = ops[str(op_node.data)]
        allowed = _NUMERIC | ({STRING, BYTES, LIST} if op == "_+_" else set())
        if op == "_%_":
            allowed = {INT, UINT}
        other = a if _loose(b) else b  # beside dyn/any, `attr + quantity('1')` still has no overload
        if (_loose(a) or _loose(b)) and (_loose(other) or _kind(other) in allowed):
            return DYN if _loose(a) and _loose(b) else (b if _loose(a) else a)
        if not (_loose(a) or _loose(b)) and _kind(a) == _kind(b) and _kind(a) in allowed:
            return a
        raise _CompileError(op_node, f"found no matching overload for '{op}' applied to '({a}, {b})'")

    def _unary(self, node: lark.Tree[Any]) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        op, operand = node.children
        assert isinstance(op, lark.Tree)
        t = self.check(operand)
        if op.data == "unary_not":
            if t not in (BOOL, DYN, ANY):
                raise _CompileError(op, f"found no matching overload for '!_' applied to '({t})'")
            return BOOL
        if t not in (INT, DOUBLE, DYN, ANY):
            raise _CompileError(op, f"found no matching overload for '-_' applied to '({t})'")
        return t

    # selection and calls
    def _member_dot(self, node: lark.Tree[Any]) -> str:
        target, name_tok = node.children
        name = str(name_tok)
        t = self.check(target)
        if t == DEVICE:
            if name not in _DEVICE_FIELDS:
                raise _CompileError(name_tok, f"undefined field '{name}'")
            return _DEVICE_FIELDS[name]
        return self._select(node, t)

    def _member_index(self, node: lark.Tree[Any]) -> str:
        target, index = node.children
        t, i = self.check(target), self.check(index)
        if _kind(t) == LIST and i not in (INT, UINT, DYN, ANY):
            raise _CompileError(node, f"found no matching overload for '_[_]' applied to '({t}, {i})'")
        if t == DEVICE:
            raise _CompileError(node, f"found no matching overload for '_[_]' applied to '({t}, {i})'")
        if _is_bytes_constant(index):
            # cel-go's planner turns a constant index into a qualifier at program creation; bytes are none.
            raise _CompileError(node, "program instantiation failed: invalid qualifier type: types.Bytes")
        return self._select(node, t)

    def _select(self, node: lark.Tree[Any], t: str) -> str:
        nested = {ATTRS: ATTR_DOMAIN, ATTR_DOMAIN: ANY, CAPS: CAP_DOMAIN, CAP_DOMAIN: QUANTITY}
        if t in nested:
            return nested[t]
        params = _parameters(t)
        if params:
            return params[-1]  # list(E) -> E, map(K, V) -> V
        if _kind(t) in (MAP, LIST, DYN, ANY):
            return DYN
        raise _CompileError(node, f"type '{t}' does not support field selection")

    def _ident_arg(self, node: lark.Tree[Any]) -> str:
        name_tok = node.children[0]
        assert isinstance(name_tok, lark.Token)
        args = node.children[1].children if len(node.children) > 1 else []
        name = str(name_tok)
        if name == "has":
            if len(args) != 1 or _unwrap(args[0]).data != "member_dot":
                raise _CompileError(name_tok, "invalid argument to has() macro")
            self.check(args[0])
            return BOOL
        return self._call(name_tok, None, [self.check(a) for a in args])

    def _member_dot_arg(self, node: lark.Tree[Any]) -> str:
        target, name_tok = node.children[0], node.children[1]
        assert isinstance(name_tok, lark.Token)
        args = node.children[2].children if len(node.children) > 2 else []
        name = str(name_tok)
        if _is_ident(target, "cel") and name == "bind":
            var = _ident_name(args[0]) if len(args) == 3 else None
            if var is None:
                raise _CompileError(name_tok, "cel.bind() variable name must be a simple identifier")
            init = self.check(args[1])
            self.scopes.append({var: init})
            try:
                return self.check(args[2])
            finally:
                self.scopes.pop()
        if name in _MACROS2 and len(args) - 2 in _MACROS2[name][1] and None not in map(_ident_name, args[:2]):
            return self._comprehension(node, name_tok, target, args[:2], args[2:], _MACROS2[name][0])
        if name == "map" and len(args) == 3 and _ident_name(args[0]) is not None:
            return self._comprehension(node, name_tok, target, args[:1], args[1:], LIST)
        if name in _MACROS and len(args) == 2 and _ident_name(args[0]) is not None:
            return self._comprehension(node, name_tok, target, args[:1], args[1:], _MACROS[name])
        if _is_ident(target, "lists") and name == "range":
            return self._call(name_tok, None, [self.check(a) for a in args], "lists.range")
        if _is_ident(target, "sets") and name in ("contains", "equivalent", "intersects"):
            types = [self.check(a) for a in args]
            elems = [(_parameters(t) or [DYN])[0] for t in types]
            if len(elems) == 2 and DYN not in elems and ANY not in elems and elems[0] != elems[1]:
                # sets.contains(list(T), list(T)): one type parameter for both lists
                raise _CompileError(name_tok, f"found no matching overload for 'sets.{name}' applied to {types}")
            return self._call(name_tok, None, types, f"sets.{name}")
        if _is_namespace(target):
            raise UnsupportedSelectorError(
                f"'{_ident_name_of_member(target)}.{name}' is not supported by the offline CEL evaluator"
            )
        if name == "join":
            raise UnsupportedSelectorError(COST_REFUSAL)
        if name in ("matches", "find", "findAll") and args:
            _validate_regex_literal(name_tok, args[0])
        if name in _UNSUPPORTED and name not in _SIGNATURES:
            # before the arguments: format's list argument is exempt from the homogeneity rule in cel-go
            raise UnsupportedSelectorError(f"{name!r} is not supported by the offline CEL evaluator")
        return self._call(name_tok, self.check(target), [self.check(a) for a in args])

    def _comprehension(
        self, node: Any, name_tok: lark.Token, target: Any, variables: list[Any], bodies: list[Any], result: str
    ) -> str:
        t = self.check(target)
        if t == ANY:
            raise _CompileError(_unwrap(target), "expression of type 'any' cannot be range of a comprehension")
        if _kind(t) not in (LIST, MAP, DYN):
            raise _CompileError(name_tok, f"expression of type '{t}' cannot be range of a comprehension")
        names = [str(_ident_name(v)) for v in variables]
        if "__result__" in names:
            raise _CompileError(_unwrap(variables[0]), "iteration variable overwrites accumulator variable")
        if len(set(names)) != len(names):
            raise _CompileError(_unwrap(variables[1]), f"overlapping declaration name '{names[0]}'")
        self.iterations *= self._range_size(target)
        if self.iterations > _MAX_ITERATIONS:
            raise UnsupportedSelectorError(COST_REFUSAL)
        sized = self._sized(target)
        if not sized and str(name_tok) in ("transformList", "transformMap", "transformMapEntry", "map", "filter"):
            # cel-go estimates what a comprehension builds from the size of its range: unbounded here.
            raise UnsupportedSelectorError(COST_REFUSAL)
        self.scopes.append(dict(zip(names, _iteration_types(t, len(names)), strict=True)))
        self.sized_scopes.append(set(names) if sized else set())
        try:
            for i, body in enumerate(bodies):
                bt = self.check(body)
                if str(name_tok) == "transformMapEntry" and i == len(bodies) - 1 and _kind(bt) not in (MAP, DYN, ANY):
                    raise _CompileError(
                        _unwrap(body), f"found no matching overload for 'cel.@mapInsert' applied to '{bt}'"
                    )
        finally:
            self.scopes.pop()
            self.sized_scopes.pop()
            self.iterations //= self._range_size(target)
        return result

    def _range_size(self, node: Any) -> int:
        inner = _core(node)
        if inner.data == "list_lit":
            return max(1, len(inner.children[0].children) if inner.children else 0)
        if inner.data == "map_lit":
            return max(1, len(inner.children[0].children) // 2 if inner.children else 0)
        if _device_path(inner):
            return _DEVICE_MAP_SIZE
        return _UNKNOWN_SIZE

    def _sized(self, node: Any) -> bool:
        """Whether cel-go's cost estimator knows a size for this value (literals, the device, fixed-size
        results); equality of two values of unknown size is estimated as unbounded."""
        inner = _core(node)
        data = str(inner.data)
        if data == "literal":
            return True
        if data in ("list_lit", "map_lit"):
            items = inner.children[0].children if inner.children else []
            return all(self._sized(i) for i in items)
        if data == "ident":
            name = str(inner.children[0])
            return name == "device" or any(name in s for s in self.sized_scopes)
        if _device_path(inner):
            return True
        if data == "ident_arg" and str(inner.children[0]) == "dyn" and len(inner.children) > 1:
            return self._sized(inner.children[1].children[0])
        if data in ("relation", "conditionalor", "conditionaland", "unary", "addition", "multiplication"):
            return True  # bools and numbers
        if data == "member_dot_arg" and _is_ident(inner.children[0], "lists") and str(inner.children[1]) == "range":
            args = inner.children[2].children if len(inner.children) > 2 else []
            return len(args) == 1 and _core(args[0]).data == "literal"
        if data == "member_dot_arg" and str(inner.children[1]) in _SIZE_PRESERVING:
            return self._sized(inner.children[0])
        if data in ("ident_arg", "member_dot_arg"):
            return _call_result_is_fixed_size(inner)
        return False

    def _call(self, name_tok: lark.Token, receiver: str | None, args: list[str], name: str = "") -> str:
        name = name or str(name_tok)
        if name in _UNSUPPORTED and name not in _SIGNATURES:
            raise UnsupportedSelectorError(f"{name!r} is not supported by the offline CEL evaluator")
        sigs = _SIGNATURES.get(name)
        if sigs is None:
            raise _CompileError(name_tok, f"undeclared reference to '{name}' (in container '')")
        fits = [
            s
            for s in sigs
            if (s[0] is None) == (receiver is None)
            and (receiver is None or s[0] is None or _matches(s[0], receiver))
            and len(s[1]) == len(args)
            and all(_matches(d, a) for d, a in zip(s[1], args, strict=True))
        ]
        if not fits:
            shown = f"{receiver}.({', '.join(args)})" if receiver is not None else f"({', '.join(args)})"
            raise _CompileError(name_tok, f"found no matching overload for '{name}' applied to '{shown}'")
        results = {s[2] for s in fits}
        return results.pop() if len(results) == 1 else DYN


def _is_namespace(node: Any) -> bool:
    # `sets.contains(...)`, `strings.quote(...)`: a namespaced function, not a call on a variable.
    # math and base64 (cel-go ext.Math, ext.Encoders) are not in the Kubernetes environment: undeclared.
    return _ident_name(node) in {"sets", "strings", "optional"}


_WRAPPERS = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
             "member", "primary", "paren_expr"}  # fmt: skip


def _core(node: Any) -> lark.Tree[Any]:
    """Descend wrapper nodes only (unlike _unwrap, stops at a one-element list or map literal)."""
    while (
        isinstance(node, lark.Tree) and node.data in _WRAPPERS and len(node.children) == 1
        and isinstance(node.children[0], lark.Tree)
    ):  # fmt: skip
        node = node.children[0]
    assert isinstance(node, lark.Tree)
    return node


def _is_bytes_constant(node: Any) -> bool:
    inner = _core(node)
    if inner.data == "ident_arg" and str(inner.children[0]) == "dyn" and len(inner.children) > 1:
        args = inner.children[1].children
        inner = _core(args[0]) if len(args) == 1 else inner
    tok = inner.children[0] if inner.data == "literal" else None
    return isinstance(tok, lark.Token) and tok.type == "BYTES_LIT"


def _device_path(node: Any) -> bool:
    """device, device.x, device.attributes["d"], device.attributes["d"].x ..."""
    return _device_steps(node) is not None


def _device_steps(node: Any) -> list[str] | None:
    """The fields after `device` of a path rooted at it (an index is "[]"); None when it is not."""
    steps: list[str] = []
    inner = _core(node)
    while inner.data in ("member_dot", "member_index"):
        steps.append(str(inner.children[1]) if inner.data == "member_dot" else "[]")
        inner = _core(inner.children[0])
    if inner.data == "ident" and str(inner.children[0]) == "device":
        return steps[::-1]
    return None


_FIXED_SIZE_RESULTS = {
    "size", "int", "uint", "double", "bool", "contains", "startsWith", "endsWith", "matches", "indexOf",
    "lastIndexOf", "compareTo", "isGreaterThan", "isLessThan", "isQuantity", "isSemver", "sign", "asInteger",
    "isInteger", "asApproximateFloat", "major", "minor", "patch", "isSorted", "all", "exists", "exists_one",
    "existsOne", "has",
}  # fmt: skip


_SIZE_PRESERVING = {"sort", "distinct", "reverse", "slice", "flatten", "lowerAscii", "upperAscii", "trim"}


def _iteration_types(t: str, count: int) -> list[str]:
    """Types of a comprehension's variables over a range of type t: list(E) -> [E] or [int, E];
    map(K, V) -> [K] or [K, V]."""
    params = _parameters(t)
    if not params:
        return [DYN] * count
    if _kind(t) == LIST:
        return [params[0]] if count == 1 else [INT, params[0]]
    return [params[0]] if count == 1 else params[:2]


def _call_result_is_fixed_size(node: lark.Tree[Any]) -> bool:
    name = node.children[0] if node.data == "ident_arg" else node.children[1]
    return str(name) in _FIXED_SIZE_RESULTS


def _validate_regex_literal(name_tok: lark.Token, arg: Any) -> None:
    """cel.ValidateRegexLiterals (apiserver base.go, 1.29): a literal pattern must compile (RE2)."""
    inner = _unwrap(arg)
    tok = inner.children[0] if inner.data == "literal" else None
    if not isinstance(tok, lark.Token) or tok.type not in ("STRING_LIT", "MLSTRING_LIT"):
        return
    import re2  # type: ignore[import-untyped]  # cel-python's dependency; Go's regexp is RE2

    from dra_migrate.dra.cel.literals import LiteralError, decode

    try:
        pattern = decode(str(tok))
        re2.compile(pattern)
    except LiteralError:
        return  # reported by the literal pass
    except Exception as e:  # re2.error and friends: any failure to compile the pattern
        raise _CompileError(name_tok, f"invalid {name_tok} argument") from e


def _ident_name_of_member(node: Any) -> str:
    return _ident_name(node) or "?"


_COMPREHENSIONS = frozenset(_MACROS) | frozenset(_MACROS2)


def least_cost(node: Any) -> int:
    """A lower bound of the API server's estimated worst-case cost, from the comprehensions over list and
    map literals and over the device's attribute and capacity maps, whose sizes the estimate knows: a
    literal's own, and for the device's maps their declared most entries (`_device_map_range`).

    cel-go's estimate of a comprehension (checker/cost.go, costComprehension) is the range's size times the
    cost of one iteration (loop condition plus loop step), and an iteration costs at least 1 (the loop
    condition reads `__result__`); nested comprehensions multiply. Any other part of the expression only
    adds to that, so past CEL_SELECTOR_EXPRESSION_MAX_COST the selector is refused whatever else it uses."""
    return _least_cost(node, device_maps=not _rebinds_device(node))


def _least_cost(node: Any, *, device_maps: bool) -> int:
    if not isinstance(node, lark.Tree):
        return 0
    parts = [_least_cost(c, device_maps=device_maps) for c in node.children]
    args = _comprehension_args(node)
    if args is not None:
        size = _literal_size(node.children[0])
        if size is None and device_maps and _device_map_range(node.children[0]):
            size = _DEVICE_MAP_SIZE
        if args and _ident_name(args[0]) is not None and size is not None:
            body = max((_least_cost(a, device_maps=device_maps) for a in args[1:]), default=0)
            return max(size * max(1, body), _least_cost(node.children[0], device_maps=device_maps))
    return max(parts, default=0)


def _rebinds_device(node: Any) -> bool:
    """Whether a comprehension names its variable `device`: then `device.attributes` may be anything, and
    no size is assumed for it (a lower bound must never be above the API server's estimate)."""
    if not isinstance(node, lark.Tree):
        return False
    args = _comprehension_args(node)
    if args is not None and any(_ident_name(a) == "device" for a in args[:2]):
        return True
    return any(_rebinds_device(c) for c in node.children)


def _comprehension_args(node: lark.Tree[Any]) -> list[Any] | None:
    """The arguments of a macro call `range.all(x, ...)` (its variables first), or None for anything else."""
    if node.data == "member_dot_arg" and len(node.children) > 2 and str(node.children[1]) in _COMPREHENSIONS:
        return node.children[2].children if isinstance(node.children[2], lark.Tree) else []
    return None


def _device_map_range(node: Any) -> bool:
    """`device.attributes`, `device.capacity`, or one domain's map of either (`device.attributes["d"]`).

    The API server sizes a comprehension over them by the maps' declared most entries,
    ResourceSliceMaxAttributesAndCapacitiesPerDevice (32): k8s.io/dynamic-resource-allocation@v0.37.2
    cel/compile.go declares the outer (by domain) and inner (by name) maps with it and its `sizeEstimator`
    hands that to cel-go's estimate. Checked on the real API server: four comprehensions nested over them
    (32^4 iterations) are refused as over the cost limit, three are not
    (tests/integration/test_dry_run_server.py)."""
    steps = _device_steps(node)
    return steps is not None and len(steps) in (1, 2) and steps[0] in ("attributes", "capacity")


def _literal_size(node: Any) -> int | None:
    if not isinstance(node, lark.Tree):
        return None
    inner = _core(node)
    if inner.data == "list_lit":
        return len(inner.children[0].children) if inner.children else 0
    if inner.data == "map_lit":
        return len(inner.children[0].children) // 2 if inner.children else 0
    return None
