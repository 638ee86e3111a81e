"""Reading and writing plan YAML at C speed (libyaml through PyYAML), for every path that needs no line
numbers: `show`, `status`, `apply`, `diff`, verification, `plan` itself.

`load` is the strict reader's (`lined.parse`, ruamel's round-trip loader, which knows lines) equal in what it
accepts, never laxer: it refuses duplicate keys, merge keys, non-string keys and any value a plan does not
hold (NaN and infinities, integers beyond 64 bits, dates, binary, sets), and hands text that might hold an
anchor (so any alias: an alias needs one), an explicit tag or nesting deep enough to exhaust libyaml's C
stack to the strict reader without parsing it. Plain scalars resolve as YAML 1.2 (ruamel's). `None` means
"ask the strict reader": it either refuses the file with a line or, when the suspicion was false (a `&&` in
a quoted command), reads it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from dra_migrate.plan import emit
from dra_migrate.plan.ownyaml import YAML_1_2_RESOLVERS as YAML_1_2_RESOLVERS
from dra_migrate.plan.wire import INT_MAX, INT_MIN, Line, Row

# How plain scalars resolve in YAML 1.2 (ruamel's table, which the strict reader uses): `ownyaml` holds it,
# where reading a plan the tool wrote imports no YAML library at all.
# An anchor (`&name`) or a tag (`!x`, `!!x`) where a token starts; a false hit only costs the slow path.
_ANCHOR_OR_TAG = re.compile(r"(?:^|[\s\[{,])(?:&[^\s&]|![^\s=])")
_MARK = re.compile(r"[&!]")
_DEEP_INDENT = re.compile(r"^[ \t]{256}", re.M)
_TWO_COMPACT = re.compile(r"[-?][ \t]+[-?][ \t]")  # cheap: most plans have no `- - ` at all
_COMPACT = re.compile(r"(?:[-?][ \t]+){24}")
_BRACKETS = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "[]{}"))
_MAX_FLOW_DEPTH = 64


class _Refused(Exception):
    """Something the strict reader refuses (with its line)."""


class _Loader(yaml.CSafeLoader):
    """libyaml's parser, YAML 1.2's scalars (below); `_build` makes the values from its events."""

    def construct_yaml_int(self, node: Any) -> int:
        """YAML 1.2's integers, as the strict reader reads them (`017` is 17, `0o17` is 15)."""
        text = str(self.construct_scalar(node))
        if text.isascii() and text.isdigit():  # nearly every integer of a plan: decimal, unsigned
            return int(text)
        text = text.replace("_", "")
        sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
        base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2].lower(), 10)
        try:
            return sign * int(digits[2:] if base != 10 else digits, base)
        except ValueError:
            raise _Refused("int") from None

    def construct_yaml_float(self, node: Any) -> float:
        text = str(self.construct_scalar(node))
        if ":" in text:
            raise _Refused("sexagesimal")
        value: float = super().construct_yaml_float(node)
        return value


# Resolve plain scalars as YAML 1.2 does (the strict reader, ruamel, is 1.2; libyaml's PyYAML is 1.1, where
# `no` is false and `017` is 15): the same table, so both readers see the same values.
_COMPILED = [
    (name, f"tag:yaml.org,2002:{name}", re.compile(pattern, flags), list(first))
    for name, pattern, flags, first in YAML_1_2_RESOLVERS
]  # compiled once, for the reader and the writer
_Loader.yaml_implicit_resolvers = {}
for _name, _tag, _regexp, _first in _COMPILED:
    _Loader.add_implicit_resolver(_tag, _regexp, _first)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _anchor_or_tag(text: str) -> bool:
    """`_ANCHOR_OR_TAG.search(text)`, at a tenth of its cost on a plan: a search tries the pattern at every
    character (9 ms of a 2,000-node plan's 140 ms parse); a plan holds a handful of `&` and `!` (its
    canary command's `&&`), and only where one stands can the pattern match."""
    return any(_ANCHOR_OR_TAG.match(text, max(m.start() - 1, 0)) for m in _MARK.finditer(text))


def _suspicious(text: str) -> bool:
    if _anchor_or_tag(text) or _DEEP_INDENT.search(text):
        return True
    if _TWO_COMPACT.search(text) and _COMPACT.search(text):
        return True
    depth = deepest = 0
    for c in text.translate(_BRACKETS):
        depth = depth + 1 if c in "[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest > _MAX_FLOW_DEPTH


def _plain(value: Any) -> bool:
    """Only what the tool writes: strings, 64-bit integers, finite floats, booleans, nulls, lists, maps."""
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend(v.values())
        elif t is list:
            stack.extend(v)
        elif t is float:
            if not math.isfinite(v):
                return False
        elif t is int:
            if not INT_MIN <= v <= INT_MAX:
                return False
        elif not (v is None or t is str or t is bool):
            return False
    return True


_STR = "tag:yaml.org,2002:str"
_Frame = tuple[Any, bool, Any, bool]  # a collection being built: (it, is a map, its pending key, a key next)


def _parse(text: str) -> Any:
    """The single document of `text` as Python values, built from libyaml's events as they come.

    Not `yaml.load`: it composes the whole document into nodes (two position marks each) before making a
    value, 7x the memory and 3x the time of building from the events (a 10,000-node plan: 102 MB and 1.3 s
    against 15 MB and 0.4 s; `show`'s peak is held to 5x the file, issue 29). What `yaml.load`'s safe
    loader refused is refused here too (`_Refused`, or libyaml's error): anchors, aliases and explicit tags
    (text that might hold one never gets here: `_suspicious`), merge keys, keys that are not strings or
    repeat, a second document; scalars resolve and construct through the loader's own tables."""
    loader = _Loader(text)
    try:
        return _build(loader)
    finally:
        loader.dispose()


def _scalar(loader: _Loader, event: Any) -> Any:
    """A scalar event's value: a plain scalar resolved as YAML 1.2, a quoted or block one text."""
    if event.anchor is not None or event.tag not in (None, "!"):
        raise _Refused("anchor or tag")
    value = event.value
    if not event.implicit[0]:
        return value
    tag = loader.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    if tag == _STR:
        return value
    construct = loader.yaml_constructors.get(tag)
    if construct is None:  # a merge key `<<`, `=` and the like: no value a plan holds
        raise _Refused(tag)
    return construct(loader, yaml.ScalarNode(tag, value, None, None, None))


class _Lines:
    """Where a map's keys or a list's items start (0-based lines), answered as ruamel's `lc` answers
    `wire.line_of`: `line` the collection's own, `key(k)` and `item(i)` as (line, column)."""

    __slots__ = ("at", "line")

    def __init__(self, line: int, at: Any) -> None:
        self.line, self.at = line, at  # at: key -> line (a map), or the items' lines in order (a list)

    def key(self, key: str) -> tuple[int, int]:
        return self.at[key], 0

    def item(self, index: int) -> tuple[int, int]:
        return self.at[index], 0


class LinedMap(dict[str, Any]):
    """A map read with its lines (`lc`)."""

    __slots__ = ("lc",)
    lc: _Lines


class LinedList(list[Any]):
    """A list read with its lines (`lc`)."""

    __slots__ = ("lc",)
    lc: _Lines


def _new(is_map: bool, lined: bool, line: int) -> Any:
    if not lined:
        return {} if is_map else []
    made: LinedMap | LinedList = LinedMap() if is_map else LinedList()
    made.lc = _Lines(line, {} if is_map else [])
    return made


def _build(loader: _Loader, lined: bool = False) -> Any:
    """The document's values from the events; `lined`: each map and list with where its parts start."""
    get = loader.get_event
    get()  # the stream's start
    if type(get()) is yaml.StreamEndEvent:
        return None  # no document (after the document's start)
    stack: list[_Frame] = []
    node: Any = None  # the collection being filled, None at the top
    is_map = key_next = False
    key: Any = None
    root: Any = None
    while True:
        event: Any = get()
        kind = type(event)
        if kind is yaml.ScalarEvent:
            value = _scalar(loader, event)
            if node is None:
                root = value
                continue
            if lined and (key_next or not is_map):
                _mark(node, key_next, value, event.start_mark.line)
            if key_next:
                if type(value) is not str or value in node:
                    raise _Refused("key")
                key, key_next = value, False
            elif is_map:
                node[key], key_next = value, True
            else:
                node.append(value)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None or event.tag is not None or key_next:
                raise _Refused("anchor, tag or a collection as a key")
            if node is not None:
                if lined and not is_map:
                    node.lc.at.append(event.start_mark.line)
                stack.append((node, is_map, key, key_next))
            is_map = key_next = kind is yaml.MappingStartEvent
            node = _new(is_map, lined, event.start_mark.line)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            done = node
            if not stack:
                root = done
                get()  # the document's end
                break
            node, is_map, key, key_next = stack.pop()
            if is_map:
                node[key], key_next = done, True
            else:
                node.append(done)
        elif kind is yaml.DocumentEndEvent:
            break  # a document that is one scalar
        else:
            raise _Refused(kind.__name__)  # an alias
    if type(get()) is not yaml.StreamEndEvent:
        raise _Refused("a second document")
    return root


_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")


def _mark(node: Any, is_key: bool, value: Any, line: int) -> None:
    """Where a key (of a map) or an item (of a list) starts."""
    if is_key:
        if type(value) is str:
            node.lc.at.setdefault(value, line)
    else:
        node.lc.at.append(line)


def load_lined(text: str) -> LinedMap | None:
    """`load`'s document with where each key and item starts (`wire.line_of` reads them as it reads the
    strict reader's), for a refusal's line: the strict reader (ruamel's round trip, pure Python) took 16 s
    and 240 MB to find it in a 10,000-node plan. For a text `load` read (its values are not checked again);
    None where libyaml counts lines another way: it ends a line at NEL, LS and PS as YAML 1.1 does, ruamel
    (1.2) and editors do not (the writer escapes them; a hand edit may hold one raw)."""
    if _suspicious(text) or any(c in text for c in _OTHER_BREAKS):
        return None
    loader = _Loader(text)
    try:
        doc = _build(loader, lined=True)
    except (_Refused, yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    finally:
        loader.dispose()
    return doc if isinstance(doc, LinedMap) else None


class NotAMapping(ValueError):
    """A well-formed document that is a scalar or a list: no plan. Said at once, not left to the strict
    reader, which takes ~0.5 s a MB of a single long scalar (25 s for a 50 MB one) to say the same."""


def load(text: str) -> dict[str, Any] | None:
    """The document as plain values, or None when the strict reader must decide. Raises NotAMapping."""
    if _suspicious(text):
        return None
    try:
        doc = _parse(text)  # stricter than PyYAML's SafeLoader
    except (_Refused, yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    if not _plain(doc):
        return None
    if doc is not None and type(doc) is not dict:
        raise NotAMapping
    return doc


class _Dumper(yaml.CSafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # the same object twice is written twice: a plan holds no anchors


def _row(dumper: _Dumper, row: Row) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", row, flow_style=True)


def _line(dumper: _Dumper, line: Line) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", line, flow_style=True)


_Dumper.add_representer(Row, _row)
_Dumper.add_representer(Line, _line)
# libyaml is YAML 1.1 and ruamel (the strict reader, and the YAML most tools read) is 1.2: a string that
# either would read as a number or a boolean is quoted (`1e3`, `0o17` are strings to 1.1, numbers to 1.2).
for _name, _tag, _regexp, _first in _COMPILED:
    if _name in ("bool", "int", "float"):
        _Dumper.add_implicit_resolver(_tag, _regexp, _first)


def _pyyaml_dump(doc: Any) -> str:
    text: str = yaml.dump(
        doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096
    )
    return text


def _resolve(value: str) -> str:
    """The tag `_Dumper` reads a plain scalar of this text as (PyYAML's `BaseResolver.resolve`, implicit)."""
    resolvers = _Dumper.yaml_implicit_resolvers
    for tag, regexp in resolvers.get(value[:1], []) + resolvers.get(None, []):
        if regexp.match(value):
            return str(tag)
    return str(_Dumper.DEFAULT_SCALAR_TAG)


_EMITTER = emit.Emitter(_pyyaml_dump, _resolve)


def dump(doc: dict[str, Any]) -> str:
    """Block style, keys in the document's order, table rows on one line each: PyYAML's bytes, written by
    `emit` where it knows them to be the same (it asks PyYAML about scalars), else by PyYAML.

    What `emit` cannot write goes to PyYAML alone, not the whole plan with it: one finding message over
    1,000 characters (a gang across 300 pools) made PyYAML's pure-Python representer write a 10,000-node
    plan, 7 s of a 41 s `plan` (issue 29). A block mapping's entries, and a block sequence's items, are
    written by PyYAML each as it writes them in the whole (no anchors: `_Dumper.ignore_aliases`), so the
    top level is written an entry at a time and a top-level sequence an item at a time."""
    try:
        return _EMITTER.emit(doc)
    except emit.Unsupported:
        pass
    if type(doc) is not dict or not doc:
        return _pyyaml_dump(doc)
    return "".join(_entry(key, value) for key, value in doc.items())


def _entry(key: Any, value: Any) -> str:
    """One top-level entry as `dump` of the document writes it."""
    try:
        return _EMITTER.emit({key: value})
    except emit.Unsupported:
        pass
    if type(value) is not list or not value:
        return _pyyaml_dump({key: value})
    head: str | None = None
    items: list[str] = []
    for item in value:
        try:
            text = _EMITTER.emit({key: [item]})
        except emit.Unsupported:
            text = _pyyaml_dump({key: [item]})
        cut = text.find("\n") + 1
        if head is None:
            head = text[:cut]
        if not cut or text[:cut] != head or not text.startswith("- ", cut):
            return _pyyaml_dump({key: value})  # not the layout this relies on: PyYAML writes it whole
        items.append(text[cut:])
    return str(head) + "".join(items)


def load_rows(text: str) -> list[Any] | None:
    """A run of table rows (`- [...]` lines cut from a plan, `plan/stream.py`) as plain values, by the
    same rules as `load`; None when the strict reader must decide (the caller then reads the whole file)."""
    if _suspicious(text):
        return None
    try:
        rows = _parse(text)
    except (_Refused, yaml.YAMLError, RecursionError, ValueError, TypeError):
        return None
    if type(rows) is not list or not _plain(rows):
        return None
    return rows
