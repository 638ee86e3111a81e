"""The YAML the tool writes, read without PyYAML: for `show`'s streamed reading of a plan (plan/stream.py).

`import yaml` is 1.2 MB of `show`'s peak memory, and issue 29 holds `show` to 5x the plan file: 2.9 MB at
2,000 nodes, where the modules it imported were most of it. A plan as the tool writes it (`fastyaml.dump`:
block mappings and sequences, a mapping's sequence not indented, table rows as flow sequences on one line,
scalars on one line) is a small part of YAML, and this reads only that part. Everything else makes it
answer None, "not mine": the caller then reads the text with `fastyaml.load` (libyaml), as before.

It never reads a text otherwise than YAML does: each construct it accepts has one meaning in YAML 1.2, and
it bails on any it does not know to (tabs, blank lines, non-printable characters, block scalars, anchors,
tags, `? ` keys, multi-line scalars, a plain scalar holding `: ` or ` #`, escapes in double quotes, a number
written any way but plainly, keys that repeat or are not strings). Plain scalars resolve by YAML 1.2's
table (`YAML_1_2_RESOLVERS`, ruamel's, which the strict reader uses). tests/unit/test_plan_ownyaml.py holds
every value it reads equal, types and all, to `fastyaml.load`'s (random documents, every plan, and random
edits of them), and the memory it saves to bench/plan_scale.py's `show memory/file`.
"""

from __future__ import annotations

import re
from typing import Any

# How the strict reader (ruamel.yaml, YAML 1.2) resolves a plain scalar: its `resolver.implicit_resolvers`
# rows for 1.2 as (tag, pattern, flags, first characters), held here so that reading a plan the tool wrote
# never imports ruamel (~2 MB of `show`'s peak memory) or PyYAML (1.2 MB; issue 29 holds `show` to 5x the
# file). tests/unit/test_plan_wire.py fails the day the installed ruamel's table differs from this one.
YAML_1_2_RESOLVERS: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("bool", "^(?:true|True|TRUE|false|False|FALSE)$", 96, ("t", "T", "f", "F")),
    (
        "float",
        "^(?:\n         [-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+]?[0-9]+)?\n        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?"
        "[0-9]+)\n        |[-+]?\\.[0-9_]+(?:[eE][-+][0-9]+)?\n        |[-+]?\\.(?:inf|Inf|INF)\n        "
        "|\\.(?:nan|NaN|NAN))$",
        96,
        tuple("-+0123456789."),
    ),
    (
        "int",
        "^(?:[-+]?0b[0-1_]+\n        |[-+]?0o?[0-7_]+\n        |[-+]?[0-9_]+\n        |[-+]?0x[0-9a-fA-F_]+)$",
        96,
        tuple("-+0123456789"),
    ),
    ("merge", "^(?:<<)$", 32, ("<",)),
    ("null", "^(?: ~\n        |null|Null|NULL\n        | )$", 96, ("~", "n", "N", "")),
    (
        "timestamp",
        "^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]\n        "
        "|[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?\n        "
        "(?:[Tt]|[ \\t]+)[0-9][0-9]?\n        :[0-9][0-9] :[0-9][0-9] (?:\\.[0-9]*)?\n        (?:[ \\t]*(?:Z|[-+][0-9]"
        "[0-9]?(?::[0-9][0-9])?))?)$",
        96,
        tuple("0123456789"),
    ),
    ("value", "^(?:=)$", 32, ("=",)),
    ("yaml", "^(?:!|&|\\*)$", 32, ("!", "&", "*")),
)
_RESOLVERS = [(name, re.compile(pattern, flags), first) for name, pattern, flags, first in YAML_1_2_RESOLVERS]

_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # what a plan holds (wire.INT_MIN/INT_MAX; orjson's range)
# What YAML would read as anything but a plain line of text: any character outside YAML's printable set
# (tabs included: the tool writes none), a byte-order mark, the line breaks YAML 1.1 knows beyond \n
# (NEL, LS, PS: libyaml ends a line at them, the strict reader does not; the writer escapes them).
_NOT_MINE = re.compile("[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
# A flow token: a single-quoted scalar, a double-quoted one without escapes, a plain one made only of
# characters that cannot end or start anything in flow context, or an indicator as the writer spaces it.
_FLOW = re.compile(r"'(?:[^']|'')*'|\"[^\"\\]*\"|[A-Za-z0-9._/-]+|\[|\]|\{|\}|, |: ")
_PLAIN_START = re.compile(r"[A-Za-z0-9_./(]|-[^ ]")  # how a plain block scalar may start: never an indicator
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+(?:[eE][-+]?[0-9]+)?")
_MAX_DEPTH = 64


class _NotMine(Exception):
    """Not the YAML the tool writes: the caller reads the text with the full reader."""


def load(text: str) -> dict[str, Any] | None:
    """The document, a mapping, as plain values; None when the text is not as the tool writes it."""
    try:
        doc = _Reader(text).document()
    except (_NotMine, RecursionError):
        return None
    return doc


def load_rows(text: str) -> list[Any] | None:
    """A run of table rows (`- [...]` lines, each at the first's indentation, as `plan/stream.py` cuts them
    out of a plan) as `fastyaml.load_rows` reads them; None when not as the tool writes them."""
    if _NOT_MINE.search(text) or not text.endswith("\n"):
        return None
    lead = text[: len(text) - len(text.lstrip(" "))] + "- ["
    rows: list[Any] = []
    try:
        for line in text[:-1].split("\n"):
            if not line.startswith(lead):
                return None
            rows.append(_flow_line(line, len(lead) - 1))
    except (_NotMine, RecursionError):
        return None
    return rows


class _Reader:
    def __init__(self, text: str) -> None:
        if _NOT_MINE.search(text) or not text.endswith("\n"):
            raise _NotMine
        self.keys: dict[str, str] = {}
        self.lines = [ln for ln in text[:-1].split("\n") if not ln.startswith("#")]  # whole-line comments
        self.i = 0

    def document(self) -> dict[str, Any]:
        if not self.lines or self.lines[0].startswith(" "):
            raise _NotMine
        doc = self.mapping(0, 0)
        if self.i != len(self.lines):
            raise _NotMine  # a line at an indentation no collection took
        return doc

    def _indent(self) -> int | None:
        if self.i >= len(self.lines):
            return None
        line = self.lines[self.i]
        n = len(line) - len(line.lstrip(" "))
        if n == len(line) or line[n] == "#":
            raise _NotMine  # a blank line, or a comment after spaces
        return n

    def mapping(self, indent: int, depth: int) -> dict[str, Any]:
        if depth > _MAX_DEPTH:
            raise _NotMine
        out: dict[str, Any] = {}
        while self._indent() == indent and not self.lines[self.i].startswith("- ", indent):
            key, rest = _key(self.lines[self.i], indent)
            if key in out:
                raise _NotMine  # a repeated key: the full reader refuses it with its line
            # A plan repeats its few keys thousands of times: one string each (not `sys.intern`, whose table
            # grew by 400 KB for the thousands of keys a plan of many pools holds once each).
            key = self.keys.setdefault(key, key)
            self.i += 1
            out[key] = self._value(rest, indent, depth) if rest else self._block(indent, depth)
        return out

    def _block(self, indent: int, depth: int) -> Any:
        """The value of `key:` alone on its line: a mapping indented by two, or a sequence at the key's
        indentation (as the writer puts them)."""
        at = self._indent()
        if at == indent + 2 and not self.lines[self.i].startswith("- ", at):
            return self.mapping(indent + 2, depth + 1)
        if at == indent and self.lines[self.i].startswith("- ", at):
            return self.sequence(indent, depth + 1)
        raise _NotMine  # `key:` with nothing under it is null to YAML; the writer writes `null`

    def sequence(self, indent: int, depth: int) -> list[Any]:
        if depth > _MAX_DEPTH:
            raise _NotMine
        out: list[Any] = []
        while self._indent() == indent and self.lines[self.i].startswith("- ", indent):
            line = self.lines[self.i]
            rest = line[indent + 2 :]
            if not rest or rest[0] == " ":
                raise _NotMine
            if rest.startswith(("[", "{", "'", '"')) and _scalar_or_flow_alone(rest):
                self.i += 1
                out.append(self._value(rest, indent, depth))
            elif _is_key(rest):
                # `- key: ...`: a mapping whose keys stand two columns in, the first on the dash's line
                self.lines[self.i] = " " * (indent + 2) + rest
                out.append(self.mapping(indent + 2, depth + 1))
            else:
                self.i += 1
                out.append(self._value(rest, indent, depth))
        return out

    def _value(self, rest: str, indent: int, depth: int) -> Any:
        """A value written on its key's (or dash's) line."""
        if rest[0] in "[{":
            return _flow_line(rest, 0)
        return _block_scalar(rest)


def _scalar_or_flow_alone(rest: str) -> bool:
    """Whether `rest` is one flow collection or quoted scalar and nothing after it (not a key)."""
    try:
        _, end = _flow(rest, 0, 0)
    except _NotMine:
        return False
    return end == len(rest)


def _is_key(rest: str) -> bool:
    try:
        _key(rest, 0)
    except _NotMine:
        return False
    return True


def _key(line: str, indent: int) -> tuple[str, str]:
    """(key, the text after `key: `, or "" after `key:` ending the line)."""
    body = line[indent:]
    if body[:1] in ("'", '"'):
        token = _FLOW.match(body)
        if token is None or token.group()[0] != body[0]:
            raise _NotMine
        key: Any = _quoted(token.group())
        after = body[token.end() :]
    else:
        colon = body.find(":")
        while colon != -1 and body[colon + 1 : colon + 2] not in ("", " "):
            colon = body.find(":", colon + 1)
        if colon <= 0:
            raise _NotMine
        key = _plain(body[:colon], flow=False)
        after = body[colon:]
    if type(key) is not str:
        raise _NotMine  # a key that is a number, a boolean or null: the full reader refuses it
    if after == ":":
        return key, ""
    if not after.startswith(": ") or after[2:3] in ("", " "):
        raise _NotMine
    return key, after[2:]


def _block_scalar(text: str) -> Any:
    if text[0] in "'\"":
        token = _FLOW.match(text)
        if token is None or token.end() != len(text) or token.group()[0] != text[0]:
            raise _NotMine
        return _quoted(token.group())
    return _plain(text, flow=False)


def _quoted(token: str) -> str:
    return token[1:-1].replace("''", "'") if token[0] == "'" else token[1:-1]


def _plain(text: str, *, flow: bool) -> Any:
    """A plain scalar's value, resolved as YAML 1.2 resolves it; only the forms the writer uses."""
    if not flow and (
        not _PLAIN_START.match(text)
        or ": " in text
        or " #" in text
        or text.endswith((":", " "))
        or text in ("---", "...")
    ):
        raise _NotMine
    for name, pattern, first in _RESOLVERS:
        if text[:1] in first and pattern.match(text):
            return _resolved(name, text)
    return text


def _resolved(name: str, text: str) -> Any:
    if name == "bool" and text in ("true", "false"):
        return text == "true"
    if name == "null" and text == "null":
        return None
    if name == "int" and _DECIMAL.fullmatch(text):
        value = int(text)
        if _INT_MIN <= value <= _INT_MAX:
            return value
    if name == "float" and _FLOAT.fullmatch(text) and len(text) < 40:
        return float(text)
    raise _NotMine  # another spelling (`True`, `~`, `0x1F`, `1_000`, `.inf`), a date, `<<`: not the writer's


def _flow_line(text: str, start: int) -> Any:
    value, end = _flow(text, start, 0)
    if end != len(text):
        raise _NotMine
    return value


def _flow(text: str, pos: int, depth: int) -> tuple[Any, int]:
    """The flow node at `pos` and where it ends: `[a, b]`, `{k: v}` (spaced as the writer spaces them) or
    a scalar."""
    if depth > _MAX_DEPTH:
        raise _NotMine
    token = _FLOW.match(text, pos)
    if token is None:
        raise _NotMine
    t, pos = token.group(), token.end()
    if t == "[":
        items: list[Any] = []
        if text.startswith("]", pos):
            return items, pos + 1
        while True:
            item, pos = _flow(text, pos, depth + 1)
            items.append(item)
            if text.startswith(", ", pos):
                pos += 2
            elif text.startswith("]", pos):
                return items, pos + 1
            else:
                raise _NotMine
    if t == "{":
        out: dict[str, Any] = {}
        if text.startswith("}", pos):
            return out, pos + 1
        while True:
            key, pos = _flow(text, pos, depth + 1)
            if type(key) is not str or key in out or not text.startswith(": ", pos):
                raise _NotMine
            out[key], pos = _flow(text, pos + 2, depth + 1)
            if text.startswith(", ", pos):
                pos += 2
            elif text.startswith("}", pos):
                return out, pos + 1
            else:
                raise _NotMine
    if t[0] in "'\"":
        return _quoted(t), pos
    if t[0] in "]}," or t == ": " or (t[0] == "-" and not "0" <= t[1:2] <= "9"):
        raise _NotMine  # an indicator where a node starts; `-` starts a plain scalar only before a digit here
    return _plain(t, flow=True), pos
