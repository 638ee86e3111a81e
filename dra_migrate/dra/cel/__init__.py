"""DRA CEL device selectors, evaluated offline as kube-scheduler evaluates them.

What Kubernetes does (kubernetes/kubernetes, staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go):
the `device` variable is a `kubernetes.DRADevice` with `driver`, `attributes[domain][id]` (int, bool, string
or semver values) and `capacity[domain][id]` (Quantity). Unprefixed attribute names belong to the driver's
domain; looking up an unknown domain yields an empty map (its `mapper.Find`), while a missing id inside a
domain is a runtime error, which the scheduler treats as "cannot allocate this claim on this node". An
expression compiles when its static type is bool or dyn ("must evaluate to bool or the unknown type").
The Kubernetes libraries this module re-implements are staging/src/k8s.io/apiserver/pkg/cel/library/
quantity.go, semverlib.go, regex.go, lists.go and cel-go's ext.Strings (version 2) and ext.Bindings.

Library choice, measured on this project's 2-core machine (Python 3.11):

* `common-expression-language` 0.10.0 (Rust cel-interpreter): ~9 µs per evaluation of a compiled program,
  but a custom function cannot return a custom type ("Failed to convert Python object of type Quantity to
  Value"), so `quantity('64Gi').compareTo(...)` and `80Gi == 81920Mi` by value cannot be expressed without
  faking quantities as numbers (which then also compare equal to plain ints); `cel.bind` is an undefined
  variable, `.?` optional syntax does not parse, and nothing is type-checked before evaluation.
* `cel-python` 0.5.0 (`celpy`, pure Python): functions may take and return any Python class, and receiver
  calls `x.f(a)` dispatch to `f(x, a)`, so Quantity and Semver are ordinary value classes here; its parse
  tree is a plain lark tree we can inspect and rewrite. It lacks `cel.bind`, the optional syntax, the
  strings extension, cross-type numeric comparison and any type checker.

cel-python is used. Measured with the NVIDIA class selector plus a memory comparison: ~470 µs per evaluation
(interpreted runner; ~27 µs of it builds the `device` variable), ~8 µs for a cache hit, ~0.1 ms to compile.
celpy's faster CompiledRunner is unusable here: its generated Python names our functions by module path (a
syntax error) and it loses the error absorption of && and ||.

The gaps are closed here: `cel.bind(v, init, body)` is rewritten to the equivalent comprehension
`[init].map(v, body)[0]` (cel-go also implements bind as a comprehension, so `init` is evaluated eagerly in
both); a small static checker reproduces the compile-time errors the API
server reports (undeclared functions and variables, no matching overload on known types, result not bool);
the Kubernetes and strings-extension functions are Python functions below. Expressions using the optional
syntax or libraries not re-implemented (URLs, IP, CIDR, format, sets, image) raise UnsupportedSelectorError,
a SelectorError, rather than a wrong answer. The API server's cost limit: a selector whose estimated cost is
provably over it (nested comprehensions over literals, `checker.least_cost`) is refused, whatever else it
uses; one whose estimate is not reproduced here is declined (UnsupportedSelectorError, check it server-side).

A fleet has thousands of devices with identical attributes (only names and UUIDs differ), so every Selector
caches its result per (driver, frozen attributes+capacity); the expression is the Selector's own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import celpy
import celpy.celparser
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from dra_migrate.dra.cel.checker import _Checker, _CompileError, least_cost
from dra_migrate.dra.cel.errors import (
    CEL_SELECTOR_EXPRESSION_MAX_COST,
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH,
    SelectorError,
    SelectorEvaluationError,
    UnsupportedSelectorError,
)
from dra_migrate.dra.cel.library import _FUNCTIONS
from dra_migrate.dra.cel.literals import LiteralError, canonical, decode
from dra_migrate.dra.cel.operators import OPERATORS, error_propagating
from dra_migrate.dra.cel.rewrites import rewrite_set_membership
from dra_migrate.dra.cel.rewrites import splice as _splice
from dra_migrate.dra.cel.types import ANY, BOOL, DYN, _ident_name, _is_ident, _unwrap, undeclared_references
from dra_migrate.dra.cel.values import Quantity, Semver, parse_quantity, parse_semver

__all__ = [
    "CEL_SELECTOR_EXPRESSION_MAX_LENGTH",
    "Quantity",
    "Selector",
    "SelectorError",
    "SelectorEvaluationError",
    "Semver",
    "UnsupportedSelectorError",
    "compile_selector",
    "matches_all",
    "parse_quantity",
    "parse_semver",
]

_CACHE_LIMIT = 65536

# ---------------------------------------------------------------------------------------------------
# cel.bind rewrite


@functools.cache
def _environment() -> celpy.Environment:
    # The interpreted runner: celpy's CompiledRunner (a transpiler to Python) names our functions by module
    # path in generated source, which does not compile, and loses && / || error absorption.
    _cached_grammar()
    return celpy.Environment()


# celpy's string terminals (cel.lark STRING_LIT, MLSTRING_LIT; BYTES_LIT reuses them) let an escape such
# as `\x01` match either as one escape or as `.` per character, under a lazy `*?`: on a string with no
# closing quote the regex engine tries every split, 2**escapes ways (a 150-byte selector of 28 escapes
# ran for minutes; found by fuzzing with atheris). The same strings without the ambiguity: a backslash
# always takes the character after it, as cel-go's lexer does (literals.py then decodes the escape).
_STRING_TERMINALS = {
    "STRING_LIT": (
        r"""/[rR]?"(?:\\[^\n]|[^\n"\\])*"/"""  # `"` not after a backslash: lark would drop that one
        "\n               | "
        r"""/[rR]?'(?:\\[^\n]|[^\\'\n])*'/"""
    ),
    "MLSTRING_LIT": (
        r'''/[rR]?"""(?:\\[\s\S]|[^\\])*?"""/'''
        "\n               | "
        r"""/[rR]?'''(?:\\[\s\S]|[^\\])*?'''/"""
    ),
}


def _grammar() -> str:
    """celpy's grammar with its string terminals replaced by unambiguous ones (_STRING_TERMINALS)."""
    grammar = (Path(celpy.celparser.__file__).parent / "cel.lark").read_text()
    for name, pattern in _STRING_TERMINALS.items():
        definition = re.compile(rf"^{name}\s*:.*?(?=^\S)", re.M | re.S)
        grammar, n = definition.subn(f"{name:<15}: {pattern}\n\n".replace("\\", "\\\\"), grammar, count=1)
        if n != 1:
            raise RuntimeError(f"celpy's grammar has no {name} terminal: check the pinned cel-python")
    return grammar


def _cached_grammar() -> None:
    """Build celpy's LALR parser from `_grammar()`, with lark's on-disk cache of the grammar analysis.

    celpy builds it on first use, which costs ~0.3 s per process; `cache=True` keeps the tables in the
    temp directory, keyed by the grammar's hash. Same arguments as celpy.celparser.CELParser."""
    from celpy.celparser import CELParser

    if CELParser.CEL_PARSER is not None:
        return
    options: dict[str, Any] = {
        "parser": "lalr",
        "start": "expr",
        "debug": True,
        "g_regex_flags": re.M,
        "lexer_callbacks": {"IDENT": CELParser.ambiguous_literals},
        "propagate_positions": True,
        "maybe_placeholders": False,
        "priority": "invert",
        "tree_class": lark.Tree,
    }
    grammar = _grammar()
    try:
        CELParser.CEL_PARSER = lark.Lark(grammar, cache=True, **options)
    except (OSError, TypeError, ValueError):  # no writable temp dir: build it without the cache
        CELParser.CEL_PARSER = lark.Lark(grammar, **options)


def _rewrite_binds(tree: lark.Tree[Any]) -> None:
    """Replace every `cel.bind(v, init, body)` by `[init].map(v, body)[0]` (innermost first)."""
    for child in tree.children:
        if isinstance(child, lark.Tree):
            _rewrite_binds(child)
    if tree.data != "member_dot_arg" or str(tree.children[1]) != "bind" or not _is_ident(tree.children[0], "cel"):
        return
    args = tree.children[2].children
    var = _ident_name(args[0])
    _replace(tree, f"[__bind_init].map({var}, __bind_body)[0]", __bind_init=args[1], __bind_body=args[2])


# Macros celpy lacks, as equivalent expressions over the ones it has (cel-go also expands every macro
# into a comprehension). `__c` is the range, evaluated once; `[x].map(v, e)[0]` binds v to x in e.
_TWO_VAR = {
    ("all", 1): "__keys(__c).all({a}, [__c[{a}]].map({b}, __p0)[0])",
    ("exists", 1): "__keys(__c).exists({a}, [__c[{a}]].map({b}, __p0)[0])",
    ("existsOne", 1): "__keys(__c).exists_one({a}, [__c[{a}]].map({b}, __p0)[0])",
    ("exists_one", 1): "__keys(__c).exists_one({a}, [__c[{a}]].map({b}, __p0)[0])",
    ("transformList", 1): "__keys(__c).map({a}, [__c[{a}]].map({b}, __p0)[0])",
    (
        "transformList",
        2,
    ): "__keys(__c).filter({a}, [__c[{a}]].map({b}, __p0)[0]).map({a}, [__c[{a}]].map({b}, __p1)[0])",
    ("transformMap", 1): "__to_map(__keys(__c), __keys(__c).map({a}, [__c[{a}]].map({b}, __p0)[0]))",
    ("transformMap", 2): "[__keys(__c).filter({a}, [__c[{a}]].map({b}, __p0)[0])].map(__f, __to_map(__f, "
    "__f.map({a}, [__c[{a}]].map({b}, __p1)[0])))[0]",
    ("transformMapEntry", 1): "__merge(__keys(__c).map({a}, [__c[{a}]].map({b}, __p0)[0]))",
    ("transformMapEntry", 2): "__merge(__keys(__c).filter({a}, [__c[{a}]].map({b}, __p0)[0]).map({a}, "
    "[__c[{a}]].map({b}, __p1)[0]))",
}


def _rewrite_macros(tree: lark.Tree[Any], depth: int = 0) -> None:
    """Two-variable comprehensions, three-argument map, sortBy and lists.range (innermost first)."""
    for child in tree.children:
        if isinstance(child, lark.Tree):
            _rewrite_macros(child, depth + 1)
    if tree.data != "member_dot_arg" or len(tree.children) < 3:
        return
    target, name, args = tree.children[0], str(tree.children[1]), tree.children[2].children
    names = [_ident_name(a) for a in args]
    c = f"__c{depth}"
    if (name, len(args) - 2) in _TWO_VAR and len(args) >= 3 and None not in names[:2]:
        body = (
            _TWO_VAR[(name, len(args) - 2)]
            .format(a=names[0], b=names[1])
            .replace("__c", c)
            .replace("__f", f"__f{depth}")
        )
        places = {"__target": target, **{f"__p{i}": e for i, e in enumerate(args[2:])}}
        _replace(tree, f"[__target].map({c}, {body})[0]", **places)
    elif name == "map" and len(args) == 3 and names[0] is not None:
        _replace(
            tree,
            f"(__target).filter({names[0]}, __p0).map({names[0]}, __p1)",  # (): an expr, as _splice finds it
            __target=target,
            __p0=args[1],
            __p1=args[2],
        )
    elif name == "sortBy" and len(args) == 2 and names[0] is not None:
        _replace(
            tree, f"[__target].map({c}, __sort_by({c}, {c}.map({names[0]}, __p0)))[0]", __target=target, __p0=args[1]
        )
    elif name == "range" and _is_ident(target, "lists"):
        _replace(tree, "__lists_range(__p0)", __p0=args[0])
    elif name in ("contains", "equivalent", "intersects") and _is_ident(target, "sets") and len(args) == 2:
        _replace(tree, f"__sets_{name}(__p0, __p1)", __p0=args[0], __p1=args[1])


def _replace(tree: lark.Tree[Any], template_text: str, **places: Any) -> None:
    # The replaced node is a member's child (member_dot_arg): take the template's node at that level.
    template: lark.Tree[Any] = _environment().compile(template_text)
    while template.data != "member":
        template = template.children[0]
    template = template.children[0]
    for placeholder, replacement in places.items():
        _splice(template, placeholder, replacement)
    tree.data, tree.children = template.data, template.children


# ---------------------------------------------------------------------------------------------------
# The device variable


class _DomainMap(celtypes.MapType):
    """device.attributes / device.capacity: an unknown domain is an empty map (compile.go `mapper.Find`)."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _is_int64(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63


# resource/v1 DeviceAttribute: each form and the JSON type the API server admits for it (an int64, a
# bool, a string; a version is a string parsed as semver). Anything else never reaches kube-scheduler.
_ATTRIBUTE_FORMS: tuple[tuple[str, Any, Any], ...] = (
    ("int", _is_int64, celtypes.IntType),
    ("bool", lambda v: isinstance(v, bool), celtypes.BoolType),
    ("string", lambda v: isinstance(v, str), celtypes.StringType),
    ("version", lambda v: isinstance(v, str), parse_semver),
)


def _attribute_value(name: str, attr: Any) -> Any:
    """compile.go getAttributeValue: exactly one of int, bool, string, version (and the list forms). A value
    of another JSON type is this device's evaluation error, as for any device the scheduler cannot read."""
    if not isinstance(attr, Mapping):
        raise SelectorEvaluationError(f"attribute {name}: not a map of one typed value")
    for key, ok, conv in _ATTRIBUTE_FORMS:
        for form, many in ((key, False), (f"{key}s", True)):
            if form not in attr:
                continue
            raw = attr[form]
            values = raw if many and isinstance(raw, list) else [raw]
            if (many and not isinstance(raw, list)) or not all(ok(v) for v in values):
                raise SelectorEvaluationError(f"attribute {name}: `{form}` holds a value of another type")
            try:
                out = [conv(v) for v in values]
            except ValueError as e:
                raise SelectorEvaluationError(f"attribute {name}: parse semantic version: {e}") from e
            return celtypes.ListType(out) if many else out[0]
    raise SelectorEvaluationError(f"attribute {name}: unsupported attribute value")


def _device_maps(device: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The device's attributes and capacity, each a map of name -> map; a device of another shape (a
    snapshot's ResourceSlice the API server would not have admitted) is an evaluation error for it."""
    attributes = device.get("attributes") or {}
    capacity = device.get("capacity") or {}
    for what, value in (("attributes", attributes), ("capacity", capacity)):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, Mapping)
                                                     for k, v in value.items()):  # fmt: skip
            raise SelectorEvaluationError(f"device {what} is not a map of name -> value")
    return attributes, capacity


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _device_variable(
    attributes: Mapping[str, Any], capacity: Mapping[str, Any], driver: str, multi: Any = None
) -> celtypes.MapType:
    attrs: dict[str, celtypes.MapType] = {}
    for name, attr in attributes.items():
        domain, ident = _split_name(name, driver)
        attrs.setdefault(domain, celtypes.MapType())[celtypes.StringType(ident)] = _attribute_value(name, attr)
    caps: dict[str, celtypes.MapType] = {}
    for name, cap in capacity.items():
        domain, ident = _split_name(name, driver)
        try:
            value = parse_quantity(str(cap.get("value", "")))
        except ValueError as e:
            raise SelectorEvaluationError(f"capacity {name}: {e}") from e
        caps.setdefault(domain, celtypes.MapType())[celtypes.StringType(ident)] = value  # type: ignore[assignment]
    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            # compile.go DeviceMatches: ptr.Deref(input.AllowMultipleAllocations, false); declared to the
            # checker under DRAConsumableCapacity (beta, on by default in 1.37).
            celtypes.StringType("allowMultipleAllocations"): celtypes.BoolType(multi is True),
            celtypes.StringType("attributes"): _DomainMap({celtypes.StringType(k): v for k, v in attrs.items()}),
            celtypes.StringType("capacity"): _DomainMap({celtypes.StringType(k): v for k, v in caps.items()}),
        }
    )


# `device.attributes['d'].name` or `...['d']['name']`, not followed by `(`: `...['d'].exists(k, ...)` or `.size()`
# is a call on the domain's whole map (every key), not a read of an attribute named `exists`.
_REF = re.compile(
    r"device\.(attributes|capacity)\[\s*(['\"])([^'\"]+)\2\s*\]"
    r"(?:\.([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_]|\s*\()|\[\s*(['\"])([^'\"]+)\5\s*\])"
)


def _references(expression: str) -> tuple[tuple[str, str, str], ...] | None:
    """(attributes|capacity, domain, name) the expression reads, or None when it reads them dynamically
    (a bound map, a computed key, a macro over a domain): then every attribute counts."""
    refs = [(m.group(1), m.group(3), m.group(4) or m.group(6)) for m in _REF.finditer(expression)]
    if len(refs) != expression.count("device.attributes") + expression.count("device.capacity"):
        return None
    return tuple(sorted(set(refs)))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


# ---------------------------------------------------------------------------------------------------
# Public API


class Selector:
    """A compiled DRA CEL selector (DeviceClass or request `selectors[].cel.expression`)."""

    def __init__(self, expression: str, program: celpy.Runner) -> None:
        self.expression = expression
        self._program = program
        self._cache: dict[tuple[Any, ...], bool | SelectorEvaluationError] = {}
        self.refs = _references(expression)  # what it reads of a device; None: unknown (dynamic)

    def _key(
        self, attributes: Mapping[str, Any], capacity: Mapping[str, Any], driver: str, multi: Any
    ) -> tuple[Any, ...]:
        """The cache key: only what the expression can read, when that is statically known.

        Devices of one model differ in uuid and PCI address; a selector that reads `type` and `memory`
        then evaluates once per model, not once per device (a 2,000-node fleet: ~3 s -> ~0.1 s)."""
        if self.refs is None:
            return (driver, multi, _freeze(attributes), _freeze(capacity))
        values = []
        for kind, domain, name in self.refs:
            source = attributes if kind == "attributes" else capacity
            value = source.get(name) if domain == driver else None
            if value is None:
                value = source.get(f"{domain}/{name}")
            values.append(_freeze(value))
        return (driver, multi, tuple(values))

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"

    def matches(self, device: Mapping[str, Any], driver: str) -> bool:
        """Whether the device (ResourceSlice JSON shape) of `driver` matches.

        Raises SelectorEvaluationError when kube-scheduler's evaluation would fail (a missing attribute,
        a bad argument), which makes the scheduler give up on allocating the claim on that node."""
        attributes, capacity = _device_maps(device)
        multi = device.get("allowMultipleAllocations")
        key = self._key(attributes, capacity, driver, multi)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._evaluate(attributes, capacity, driver, multi)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = cached
        if isinstance(cached, SelectorEvaluationError):
            raise SelectorEvaluationError(str(cached))
        return cached

    def _evaluate(
        self, attributes: Mapping[str, Any], capacity: Mapping[str, Any], driver: str, multi: Any = None
    ) -> bool | SelectorEvaluationError:
        try:
            variable = _device_variable(attributes, capacity, driver, multi)
            result = self._program.evaluate({"device": variable})
        except SelectorEvaluationError as e:
            return e
        except CELEvalError as e:
            return SelectorEvaluationError(f"{self.expression}: {_eval_message(e)}")
        except RecursionError:
            return SelectorEvaluationError(f"{self.expression}: expression too deeply nested to evaluate")
        except Exception as e:
            # runtime error of this selector for this device (kube-scheduler: "cannot allocate"), never a crash
            return SelectorEvaluationError(f"{self.expression}: {type(e).__name__}: {e}")
        if isinstance(result, CELEvalError):
            return SelectorEvaluationError(f"{self.expression}: {_eval_message(result)}")
        if not isinstance(result, celtypes.BoolType):
            return SelectorEvaluationError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return bool(result)


def _eval_message(e: CELEvalError) -> str:
    # celpy's error args are (message, exception class, that exception's args): keep the cause's words.
    message = str(e.args[0]) if e.args else str(e)
    cause = e.args[2] if len(e.args) > 2 else None
    if isinstance(cause, tuple) and cause and str(cause[0]) not in message:
        message += f" ({cause[0]})"
    return message


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """Compile as the API server validates a selector; raises SelectorError where it would reject it and
    UnsupportedSelectorError (a SelectorError) where this offline evaluator cannot tell. Never anything else."""
    try:
        return _compile(expression)
    except SelectorError:
        raise
    except RecursionError as e:
        raise UnsupportedSelectorError("expression nested too deeply for the offline CEL evaluator") from e
    except Exception as e:
        raise UnsupportedSelectorError(
            f"the offline CEL evaluator cannot read this expression ({type(e).__name__})"
        ) from e


def _compile(expression: str) -> Selector:
    if not expression.strip():
        raise SelectorError("Required value: expression must not be empty")
    if len(expression.encode()) > CEL_SELECTOR_EXPRESSION_MAX_LENGTH:
        raise SelectorError(f"Too long: may not be more than {CEL_SELECTOR_EXPRESSION_MAX_LENGTH} bytes")
    env = _environment()
    source = _backquoted_fields(expression)
    try:
        tree = env.compile(source)
    except CELParseError as e:
        if re.search(r"\.\?|\[\?|\{\?", expression):
            _refuse_undeclared_without_optional_syntax(env, source)
            raise UnsupportedSelectorError("optional syntax (.?, [?, {?) is not supported offline") from e
        raise SelectorError(f"compilation failed: ERROR: <input>: Syntax error: {e}") from e
    _canonical_literals(tree)
    try:
        output = _Checker().check(tree)
    except _CompileError as e:
        raise SelectorError(f"compilation failed: {e}") from e
    except UnsupportedSelectorError:
        _refuse_over_cost_limit(tree)  # the API server refuses it whatever else it uses
        raise
    _refuse_over_cost_limit(tree)
    if output not in (BOOL, DYN, ANY):
        raise SelectorError(f"must evaluate to bool or the unknown type, not {output}")
    _rewrite_binds(tree)
    _rewrite_macros(tree)
    rewrite_set_membership(tree, lambda: _environment().compile("__in_set(__p0, __p1)"))
    functions = _functions()
    _fold_constant_conversions(tree, env, functions)
    return Selector(expression, env.program(tree, functions=functions))


def _refuse_over_cost_limit(tree: lark.Tree[Any]) -> None:
    """Refused, not declined: the API server's estimate is at least `least_cost`, over its limit."""
    cost = least_cost(tree)
    if cost > CEL_SELECTOR_EXPRESSION_MAX_COST:
        raise SelectorError(
            f"too complex, exceeds cost limit: the API server's cost estimate is at least {cost:,}, its limit"
            f" {CEL_SELECTOR_EXPRESSION_MAX_COST:,} (resource.k8s.io CELSelectorExpressionMaxCost)"
        )


def _refuse_undeclared_without_optional_syntax(env: celpy.Environment, source: str) -> None:
    """The API server refuses an undeclared reference whatever else the expression uses; with the optional
    markers dropped (`.?` -> `.`), the names it reads are the same, so that verdict is given offline."""
    try:
        tree = env.compile(re.sub(r"([.\[{])\?", r"\1", source))
    except CELParseError:
        return
    undeclared = undeclared_references(tree)
    if undeclared:
        raise SelectorError(
            f"compilation failed: ERROR: <input>: undeclared reference to '{undeclared[0]}' (in container '')"
        )


@functools.cache
def _functions() -> dict[str, Any]:
    return {name: error_propagating(fn) for name, fn in {**_FUNCTIONS, **OPERATORS}.items()}


_BACKQUOTED = re.compile(r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|\.\s*`([^`]*)`""")


def _backquoted_fields(expression: str) -> str:
    """`x.`name`` (cel-go 0.24+ quoted field names) as `x["name"]`, which cel-go evaluates the same way for
    maps; celpy's grammar has no backquoted identifiers. Triple-quoted strings are left alone."""
    if "`" not in expression or '"""' in expression or "'''" in expression:
        return expression
    return _BACKQUOTED.sub(lambda m: m.group(1) or _field(m.group(2)), expression)


_RESERVED = {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
             "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}  # fmt: skip


def _field(name: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name not in _RESERVED:
        return f".{name}"
    return f"[{canonical(name)}]"


def _canonical_literals(tree: lark.Tree[Any]) -> None:
    """Decode string and bytes literals as cel-go does (rejecting escapes it rejects) and respell them so
    that celpy reads the same value (see literals.py)."""
    for node in tree.iter_subtrees():
        if node.data != "literal":
            continue
        tok = node.children[0]
        if not isinstance(tok, lark.Token) or tok.type not in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            continue
        try:
            value = decode(str(tok))
        except LiteralError as e:
            raise SelectorError(
                f"compilation failed: ERROR: <input>:{tok.line}:{tok.column}: Syntax error: {e}"
                " (write a regex escape as \\\\. or use a raw string r'...')"
            ) from e
        node.children[0] = tok.update(value=canonical(value))


def _root(primary: lark.Tree[Any]) -> lark.Tree[Any]:
    tree = _environment().compile("__fold")
    holder = next(t for t in tree.iter_subtrees() if t.data == "primary")
    holder.children = primary.children
    return tree


_CONVERSIONS = {"int", "uint", "double", "string", "bytes", "bool"}


def _fold_constant_conversions(tree: lark.Tree[Any], env: celpy.Environment, functions: dict[str, Any]) -> None:
    """cel-go's planner (OptOptimize, set by the Kubernetes base environment) evaluates a type conversion
    of a literal when it builds the program, so `int("x")` or `uint(-1)` makes kube-apiserver reject the
    selector ("program instantiation failed"), where the same conversion of a device value is a runtime
    error."""
    for node in tree.iter_subtrees():
        if node.data != "ident_arg" or str(node.children[0]) not in _CONVERSIONS or len(node.children) < 2:
            continue
        args = node.children[1].children
        if len(args) != 1 or _unwrap(args[0]).data != "literal":
            continue
        value: Any
        probe = lark.Tree("primary", [node])
        try:
            value = env.program(_root(probe), functions=functions).evaluate({})
        except CELEvalError as e:
            value = e
        if isinstance(value, CELEvalError):
            raise SelectorError(f"program instantiation failed: {_eval_message(value)}")


def matches_all(selectors: Sequence[Selector], device: Mapping[str, Any], driver: str) -> bool:
    """All selectors match (the DeviceClass's and the request's); a runtime error counts as no match."""
    try:
        return all(s.matches(device, driver) for s in selectors)
    except SelectorEvaluationError:
        return False
