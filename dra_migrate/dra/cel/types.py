"""The checker's types, the declarations of the Kubernetes CEL environment, and the type algebra.

Types are cel-go's names as strings (`int`, `list(int)`, `map(string, any)`); the overload tables say
what apiserver/pkg/cel/library and cel-go's extensions declare (environment/base.go).
"""

from __future__ import annotations

from typing import Any

import lark

# ---------------------------------------------------------------------------------------------------
# The static checker: the compile-time errors cel-go's checker reports, on the types we can know.

DYN, BOOL, INT, UINT, DOUBLE = "dyn", "bool", "int", "uint", "double"
STRING, BYTES, NULL = "string", "bytes", "null_type"
LIST, MAP, TYPE = "list(dyn)", "map(dyn, dyn)", "type"
QUANTITY, SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
DEVICE = "kubernetes.DRADevice"
ANY = "any"  # compile.go declares attribute values as apiservercel.AnyType (google.protobuf.Any), not dyn
ATTRS, ATTR_DOMAIN = "map(string, map(string, any))", "map(string, any)"
CAPS, CAP_DOMAIN = "map(string, map(string, kubernetes.Quantity))", "map(string, kubernetes.Quantity)"
_NUMERIC = {INT, UINT, DOUBLE}
_PRIMITIVES = {INT, UINT, DOUBLE, STRING, BYTES, BOOL}

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
    # `sign` is global only and there is no `mul` (apiserver v0.37.2 pkg/cel/library/quantity.go
    # quantityLibraryDecls: cel.Overload, not MemberOverload; its doc comment's `<Quantity>.sign()` is not declared).
    "sign": [(None, (QUANTITY,), INT)],
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
    # ext.Lists(ListsVersion(3)) (apiserver base.go, 1.34); first/last return optionals (refused)
    "lists.range": [(None, (INT,), LIST)],
    # ext.Sets (apiserver base.go, 1.29)
    "sets.contains": [(None, (LIST, LIST), BOOL)],
    "sets.equivalent": [(None, (LIST, LIST), BOOL)],
    "sets.intersects": [(None, (LIST, LIST), BOOL)],
    "sort": [(LIST, (), LIST)],
    "slice": [(LIST, (INT, INT), LIST)],
    "flatten": [(LIST, (), LIST), (LIST, (INT,), LIST)],
    "distinct": [(LIST, (), LIST)],
    "reverse": [(LIST, (), LIST)],
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
    "format", "validate", "quote", "reverse", "sets", "strings", "optional",
    "orValue", "hasValue", "value", "or", "ofNonZeroValue", "none", "of", "image", "isImage",
    "containerImage", "registry", "repository", "identifier", "tag", "digest", "all", "transformList",
    "transformMap", "transformMapEntry", "existsOne", "first", "last", "timestamp", "duration", "getFullYear",
    "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getHours", "getMinutes",
    "getSeconds", "getMilliseconds",
}  # fmt: skip
_MACROS = {"all": BOOL, "exists": BOOL, "exists_one": BOOL, "map": LIST, "filter": LIST, "sortBy": LIST}
# ext.TwoVarComprehensions (apiserver base.go, 1.32): name -> (result, number of expressions after the vars)
_MACROS2 = {
    "all": (BOOL, (1,)), "exists": (BOOL, (1,)), "existsOne": (BOOL, (1,)), "exists_one": (BOOL, (1,)),
    "transformList": (LIST, (1, 2)),
    "transformMap": (MAP, (1, 2)), "transformMapEntry": (MAP, (1, 2)),
}  # fmt: skip
COST_REFUSAL = (
    "the API server's cost estimate for this selector is not reproduced offline (it may refuse it as"
    " 'too complex, exceeds cost limit'); validate it server-side with --kubeconfig"
)
# Worst-case iterations past which a selector is refused as maybe over the cost limit (1,000,000 units).
_MAX_ITERATIONS = 20_000
_DEVICE_MAP_SIZE = 32  # resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice
_UNKNOWN_SIZE = 1_000
_TYPE_NAMES = {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type", "dyn"}
_DEVICE_FIELDS = {"driver": STRING, "attributes": ATTRS, "capacity": CAPS, "allowMultipleAllocations": BOOL}


def _kind(t: str) -> str:
    """The checker type as the family overloads are declared on."""
    if t.startswith("map("):
        return MAP
    if t.startswith("list("):
        return LIST
    return t


def _parameters(t: str) -> list[str]:
    """list(int) -> [int]; map(string, map(string, any)) -> [string, map(string, any)]; others []."""
    if not (t.startswith(("list(", "map(")) and t.endswith(")")):
        return []
    body = t[t.index("(") + 1 : -1]
    out, depth, start = [], 0, 0
    for i, c in enumerate(body):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            out.append(body[start:i].strip())
            start = i + 1
    out.append(body[start:].strip())
    return out


def _matches(declared: str, actual: str) -> bool:
    return declared == DYN or actual in (DYN, ANY) or _kind(declared) == _kind(actual)


def _unifiable(a: str, b: str) -> bool:
    """Whether cel-go's checker can bind one type parameter to both: equal types, dyn/any on either side
    (also inside a list or map), null against anything but a primitive, or aggregates whose parameters
    unify. `int` and `double` do not: heterogeneous equality is a runtime feature, not a checked one."""
    if a == b or _loose(a) or _loose(b):
        return True
    if NULL in (a, b):
        other = b if a == NULL else a
        return other not in _PRIMITIVES
    if _kind(a) != _kind(b) or _kind(a) not in (LIST, MAP):
        return False
    pa, pb = _parameters(a), _parameters(b)
    return len(pa) == len(pb) and all(_unifiable(x, y) for x, y in zip(pa, pb, strict=True))


def _unified(a: str, b: str) -> str:
    """The type of `c ? a : b` once a and b unify: list(int) and list(dyn) give a list, not dyn, so a
    conditional between two lists is still refused as a selector's result."""
    if a == b:
        return a
    if _loose(a) or _loose(b):
        return DYN
    if NULL in (a, b):
        return b if a == NULL else a
    return _kind(a)


# Names an expression may use without declaring them: the device, the extension libraries' namespaces.
_NAMESPACES = {"device", "cel", "math", "lists", "strings", "sets", "optional", "base64"}
_BINDERS = {"all", "exists", "exists_one", "existsOne", "map", "filter", "sortBy", "transformList",
            "transformMap", "transformMapEntry", "bind", "optMap", "optFlatMap"}  # fmt: skip


def undeclared_references(tree: lark.Tree[Any]) -> list[str]:
    """Names the expression reads that nothing declares, whatever else it uses: cel-go reports an
    undeclared reference at check time, before it looks at optional syntax or any extension, so this
    verdict holds where the rest of the expression cannot be checked offline. Every variable a macro or
    cel.bind introduces counts as declared everywhere (never a false refusal)."""
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "member_dot_arg" and len(node.children) >= 3 and str(node.children[1]) in _BINDERS:
            args = node.children[2].children if isinstance(node.children[2], lark.Tree) else []
            bound.update(n for n in (_ident_name(a) for a in args[:2]) if n is not None)
    found: dict[str, None] = {}
    for node in tree.iter_subtrees():
        if node.data == "ident":
            name = str(node.children[0])
            if name not in bound and name not in _NAMESPACES and name not in _TYPE_NAMES:
                found[name] = None
    return list(found)


def _loose(t: str) -> bool:
    """dyn and any: checked at run time."""
    return t in (DYN, ANY)


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


def _orderable(t: str) -> bool:
    """A type some `_<_` overload takes (cel-go checker: int, uint, double, string, bytes, bool, timestamp,
    duration), or dyn/any; null beside dyn/any compiles (then a runtime error)."""
    return (
        _loose(t)
        or t in _NUMERIC
        or t in (STRING, BYTES, BOOL, NULL, "google.protobuf.Timestamp", "google.protobuf.Duration")
    )
