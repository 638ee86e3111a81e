"""A static checker for the compile-time errors the API server reports on DRA selectors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import lark

from migrate.dra.cel.errors import UnsupportedSelectorError

# ---------------------------------------------------------------------------------------------------
# The static checker: the compile-time errors cel-go's checker reports, on the types we can know.

DYN, BOOL, INT, UINT, DOUBLE = "dyn", "bool", "int", "uint", "double"
STRING, BYTES, NULL = "string", "bytes", "null_type"
LIST, MAP, TYPE = "list(dyn)", "map(dyn, dyn)", "type"
QUANTITY, SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
DEVICE = "kubernetes.DRADevice"
ATTRS, ATTR_DOMAIN = "map(string, map(string, dyn))", "map(string, dyn)"
CAPS, CAP_DOMAIN = "map(string, map(string, kubernetes.Quantity))", "map(string, kubernetes.Quantity)"
_NUMERIC = {INT, UINT, DOUBLE}

# name -> overloads (receiver or None for a global call, argument types, result type)
_Sig = tuple[str | None, tuple[str, ...], str]
_SIGNATURES: dict[str, list[_Sig]] = {
    "quantity": [(None, (STRING,), QUANTITY)],
    "isQuantity": [(None, (STRING,), BOOL)],
    "semver": [(None, (STRING,), SEMVER), (None, (STRING, BOOL), SEMVER)],
    "isSemver": [(None, (STRING,), BOOL), (None, (STRING, BOOL), BOOL)],
    "compareTo": [(QUANTITY, (QUANTITY,), INT), (SEMVER, (SEMVER,), INT)],
    "isGreaterThan": [(QUANTITY, (QUANTITY,), BOOL), (SEMVER, (SEMVER,), BOOL)],
    "isLessThan": [(QUANTITY, (QUANTITY,), BOOL), (SEMVER, (SEMVER,), BOOL)],
    "add": [(QUANTITY, (QUANTITY,), QUANTITY), (QUANTITY, (INT,), QUANTITY)],
    "sub": [(QUANTITY, (QUANTITY,), QUANTITY), (QUANTITY, (INT,), QUANTITY)],
    "mul": [(QUANTITY, (INT,), QUANTITY)],
    "sign": [(None, (QUANTITY,), INT), (QUANTITY, (), INT)],
    "asInteger": [(QUANTITY, (), INT)],
    "isInteger": [(QUANTITY, (), BOOL)],
    "asApproximateFloat": [(QUANTITY, (), DOUBLE)],
    "major": [(SEMVER, (), INT)],
    "minor": [(SEMVER, (), INT)],
    "patch": [(SEMVER, (), INT)],
    "size": [(None, (DYN,), INT), (STRING, (), INT), (BYTES, (), INT), (LIST, (), INT), (MAP, (), INT)],
    "contains": [(STRING, (STRING,), BOOL)],
    "startsWith": [(STRING, (STRING,), BOOL)],
    "endsWith": [(STRING, (STRING,), BOOL)],
    "matches": [(STRING, (STRING,), BOOL), (None, (STRING, STRING), BOOL)],
    "lowerAscii": [(STRING, (), STRING)],
    "upperAscii": [(STRING, (), STRING)],
    "charAt": [(STRING, (INT,), STRING)],
    "indexOf": [(STRING, (STRING,), INT), (STRING, (STRING, INT), INT), (LIST, (DYN,), INT)],
    "lastIndexOf": [(STRING, (STRING,), INT), (STRING, (STRING, INT), INT), (LIST, (DYN,), INT)],
    "replace": [(STRING, (STRING, STRING), STRING), (STRING, (STRING, STRING, INT), STRING)],
    "split": [(STRING, (STRING,), LIST), (STRING, (STRING, INT), LIST)],
    "substring": [(STRING, (INT,), STRING), (STRING, (INT, INT), STRING)],
    "trim": [(STRING, (), STRING)],
    "join": [(LIST, (), STRING), (LIST, (STRING,), STRING)],
    "find": [(STRING, (STRING,), STRING)],
    "findAll": [(STRING, (STRING,), LIST), (STRING, (STRING, INT), LIST)],
    "isSorted": [(LIST, (), BOOL)],
    "sum": [(LIST, (), DYN)],
    "min": [(LIST, (), DYN)],
    "max": [(LIST, (), DYN)],
    "int": [(None, (DYN,), INT)],
    "uint": [(None, (DYN,), UINT)],
    "double": [(None, (DYN,), DOUBLE)],
    "string": [(None, (DYN,), STRING)],
    "bytes": [(None, (DYN,), BYTES)],
    "bool": [(None, (DYN,), BOOL)],
    "dyn": [(None, (DYN,), DYN)],
    "type": [(None, (DYN,), TYPE)],
}
# In the Kubernetes environment (apiserver/pkg/cel/environment/base.go) but not re-implemented here.
_UNSUPPORTED = {
    "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
    "ip", "isIP", "cidr", "isCIDR", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "containsIP", "containsCIDR", "masked", "prefixLength",
    "format", "validate", "quote", "reverse", "sets", "strings", "math", "base64", "optional",
    "orValue", "hasValue", "value", "or", "ofNonZeroValue", "none", "of", "image", "isImage",
    "containerImage", "registry", "repository", "identifier", "tag", "digest", "all", "transformList",
    "transformMap", "transformMapEntry", "existsOne",
}  # fmt: skip
_MACROS = {"all": BOOL, "exists": BOOL, "exists_one": BOOL, "map": LIST, "filter": LIST}
_TYPE_NAMES = {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type", "dyn"}
_DEVICE_FIELDS = {"driver": STRING, "attributes": ATTRS, "capacity": CAPS, "allowMultipleAllocations": BOOL}


class _CompileError(Exception):
    def __init__(self, node: lark.Tree[Any] | lark.Token, message: str) -> None:
        line = getattr(node, "line", None) or getattr(getattr(node, "meta", None), "line", 1)
        column = getattr(node, "column", None) or getattr(getattr(node, "meta", None), "column", 1)
        super().__init__(f"ERROR: <input>:{line}:{column}: {message}")


def _kind(t: str) -> str:
    """The checker type as the family overloads are declared on."""
    if t.startswith("map("):
        return MAP
    if t.startswith("list("):
        return LIST
    return t


def _matches(declared: str, actual: str) -> bool:
    return declared == DYN or actual == DYN or _kind(declared) == _kind(actual)


class _Checker:
    def __init__(self) -> None:
        self.scopes: list[dict[str, str]] = [{"device": DEVICE}]

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
        for c in node.children:
            self.check(c)
        return LIST

    def _map_lit(self, node: lark.Tree[Any]) -> str:
        for c in node.children:
            self.check(c)
        return MAP

    def _exprlist(self, node: lark.Tree[Any]) -> str:
        for c in node.children:
            self.check(c)
        return LIST

    _mapinits = _exprlist

    def _member_object(self, node: lark.Tree[Any]) -> str:
        raise _CompileError(node, "message construction is not declared in this environment")

    # operators
    def _expr(self, node: lark.Tree[Any]) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        cond, a, b = (self.check(c) for c in node.children)
        if cond not in (BOOL, DYN):
            raise _CompileError(node, f"found no matching overload for '_?_:_' applied to '({cond}, {a}, {b})'")
        return a if a == b else DYN

    def _logical(self, node: lark.Tree[Any], op: str) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        a, b = (self.check(c) for c in node.children)
        if a not in (BOOL, DYN) or b not in (BOOL, DYN):
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
        ok = DYN in (a, b) or (a in _NUMERIC and b in _NUMERIC)
        if op in ("eq", "ne"):
            ok = ok or _kind(a) == _kind(b) or NULL in (a, b)
        elif op == "in":
            ok = _kind(b) in (LIST, MAP, DYN)
        else:
            # Cross-type numeric comparisons are on in Kubernetes; Quantity and Semver have no `<`.
            ok = ok or (a == b and a in (STRING, BYTES, BOOL))
        if not ok:
            raise _CompileError(op_node, f"found no matching overload for '_{symbol}_' applied to '({a}, {b})'")
        return BOOL

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
        if DYN in (a, b):
            return b if a == DYN else a
        if _kind(a) == _kind(b) and _kind(a) in allowed:
            return a
        raise _CompileError(op_node, f"found no matching overload for '{op}' applied to '({a}, {b})'")

    def _unary(self, node: lark.Tree[Any]) -> str:
        if len(node.children) == 1:
            return self.check(node.children[0])
        op, operand = node.children
        assert isinstance(op, lark.Tree)
        t = self.check(operand)
        if op.data == "unary_not":
            if t not in (BOOL, DYN):
                raise _CompileError(op, f"found no matching overload for '!_' applied to '({t})'")
            return BOOL
        if t not in (INT, DOUBLE, DYN):
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
        if _kind(t) == LIST and i not in (INT, UINT, DYN):
            raise _CompileError(node, f"found no matching overload for '_[_]' applied to '({t}, {i})'")
        if t == DEVICE:
            raise _CompileError(node, f"found no matching overload for '_[_]' applied to '({t}, {i})'")
        return self._select(node, t)

    def _select(self, node: lark.Tree[Any], t: str) -> str:
        nested = {ATTRS: ATTR_DOMAIN, CAPS: CAP_DOMAIN, CAP_DOMAIN: QUANTITY}
        if t in nested:
            return nested[t]
        if _kind(t) in (MAP, LIST, DYN):
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
        if name in _MACROS and args and _ident_name(args[0]) is not None:
            t = self.check(target)
            if _kind(t) not in (LIST, MAP, DYN):
                raise _CompileError(name_tok, f"found no matching overload for '{name}' applied to '({t})'")
            self.scopes.append({str(_ident_name(args[0])): DYN})
            try:
                for a in args[1:]:
                    self.check(a)
            finally:
                self.scopes.pop()
            return _MACROS[name]
        if _is_namespace(target):
            raise UnsupportedSelectorError(
                f"'{_ident_name_of_member(target)}.{name}' is not supported by the offline CEL evaluator"
            )
        return self._call(name_tok, self.check(target), [self.check(a) for a in args])

    def _call(self, name_tok: lark.Token, receiver: str | None, args: list[str]) -> str:
        name = str(name_tok)
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


def _unwrap(node: Any) -> lark.Tree[Any]:
    """Descend single-child wrapper nodes (expr -> conditionalor -> ... -> member)."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and isinstance(node.children[0], lark.Tree):
        node = node.children[0]
    assert isinstance(node, lark.Tree)
    return node


def _ident_name(node: Any) -> str | None:
    inner = _unwrap(node)
    return str(inner.children[0]) if inner.data == "ident" else None


def _is_ident(node: Any, name: str) -> bool:
    return _ident_name(node) == name


def _is_namespace(node: Any) -> bool:
    # `sets.contains(...)`, `strings.quote(...)`: a namespaced function, not a call on a variable.
    return _ident_name(node) in {"sets", "strings", "math", "base64", "optional"}


def _ident_name_of_member(node: Any) -> str:
    return _ident_name(node) or "?"
