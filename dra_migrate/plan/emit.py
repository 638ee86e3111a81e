"""The plan's YAML written directly: the bytes `fastyaml`'s PyYAML dumper writes, without its representer.

PyYAML's representer and resolver are pure Python and make a node per value: at 10,000 nodes they were
most of `plan`'s writing (0.8 s of CPU). The shape of a plan's YAML is the codec's own (block mappings and
sequences, `Row`/`Line` on one line, nothing else), so only the scalars need YAML's judgement, and a plan
repeats few of them but for names and uids. Each scalar is written as PyYAML writes it in its context
(a block value, a flow value, a block key, a flow key): a string made only of `[A-Za-z0-9._/-]` that starts
with a letter or digit is plain where YAML would read it back as a string and single-quoted where it would
not (`'0123'`), and everything else is asked of PyYAML itself, once per distinct value and context.

`emit` raises `Unsupported` for whatever it does not know to be written the same way (a multi-line or
over-long scalar, a line near PyYAML's 4,096-column width, a complex key, a type PyYAML's safe representer
refuses or an empty document); the caller then writes with PyYAML. tests/unit/test_plan_emit.py holds it
byte-equal to PyYAML on random and hostile documents.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dra_migrate.plan.wire import Line, Row

_STR_TAG = "tag:yaml.org,2002:str"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
# PyYAML breaks a line past its width (4,096 here) at a space or between flow items; a line well short of
# it was written as the scalars were alone (the memo's renderings are single lines at a small column).
_MAX_LINE = 3800
_MAX_SCALAR = 1000


class Unsupported(Exception):
    """Something `emit` does not write byte-equal to PyYAML: write the document with PyYAML."""


class Emitter:
    """Writes documents as `dump(doc)` would; `dump` is PyYAML's, and is asked about scalars only."""

    def __init__(self, dump: Callable[[Any], str], resolve: Callable[[str], str]) -> None:
        self._dump = dump
        self._resolve = resolve  # the tag a plain scalar of this text would be read as
        self._memo: dict[tuple[int, type, str], str] = {}

    # --- scalars -------------------------------------------------------------------------------------

    def _scalar(self, value: Any, ctx: int) -> str:
        """`ctx`: 0 a block value, 1 a flow value, 2 a block key, 3 a flow key."""
        t = type(value)
        if t is str:
            # A key of 128 characters or more is a complex key (`? k`) to PyYAML: asked, and refused.
            if len(value) < 128 and _SAFE.fullmatch(value):
                # Plain, unless it would read back as another type (a number, a boolean): then quoted.
                return value if self._resolve(value) == _STR_TAG else f"'{value}'"
        elif t is int:
            return str(value)
        elif value is None:
            return "null"
        elif t is bool:
            return "true" if value else "false"
        elif t is not float:
            raise Unsupported(t.__name__)
        key = (ctx, t, value if t is str else repr(value))  # by repr: 0.0 == -0.0, and NaN is not itself
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= 100_000:  # a bound on what one process keeps
                self._memo.clear()
            found = self._memo[key] = self._ask(value, ctx)
        return found

    def _ask(self, value: Any, ctx: int) -> str:
        """PyYAML's writing of one scalar in a context, cut out of a document that holds only it."""
        if ctx == 0:
            text, head, tail = self._dump({"k": value}), "k: ", "\n"
        elif ctx == 1:
            text, head, tail = self._dump({"k": Row([value])}), "k: [", "]\n"
        elif ctx == 2:
            text, head, tail = self._dump({value: 0}), "", ": 0\n"
        else:
            text, head, tail = self._dump({"k": Line({value: 0})}), "k: {", ": 0}\n"
        if not (text.startswith(head) and text.endswith(tail)) or len(text) > _MAX_SCALAR:
            raise Unsupported("scalar")
        out = text[len(head) : len(text) - len(tail)]
        # Any line break (YAML's include U+0085, U+2028, U+2029; splitlines knows more) makes it context-bound.
        if not out or len(out.splitlines()) != 1 or out.startswith(("?", "!", "&", "*")):
            raise Unsupported("scalar")
        return out

    # --- collections -----------------------------------------------------------------------------

    def _flow(self, value: Any) -> str:
        t = type(value)
        if t is list or t is Row:
            return "[" + ", ".join([self._flow(v) for v in value]) + "]"
        if t is dict or t is Line:
            return "{" + ", ".join([f"{self._scalar(k, 3)}: {self._flow(v)}" for k, v in value.items()]) + "}"
        return self._scalar(value, 1)

    def _inline(self, value: Any) -> str | None:
        """The text after `key: ` or `- ` when the value is written on that line, else None (a block)."""
        t = type(value)
        if t is Row or t is Line or ((t is list or t is dict) and not value):
            return self._flow(value)
        if t is list or t is dict:
            return None
        return self._scalar(value, 0)

    def _mapping(self, value: dict[Any, Any], indent: int, out: list[str], first: str) -> None:
        """A block mapping at `indent`; its first key follows `first` (a `- ` already written) or its indent."""
        pad = " " * indent
        lead = first
        for k, v in value.items():
            key = self._scalar(k, 2)
            inline = self._inline(v)
            if inline is not None:
                out.append(f"{lead}{key}: {inline}\n")
            elif type(v) is dict:
                out.append(f"{lead}{key}:\n")
                self._mapping(v, indent + 2, out, " " * (indent + 2))
            else:
                out.append(f"{lead}{key}:\n")
                self._sequence(v, indent, out, pad)  # a sequence in a mapping is not indented
            lead = pad

    def _sequence(self, value: list[Any], indent: int, out: list[str], first: str) -> None:
        pad = " " * indent
        lead = first
        for v in value:
            inline = self._inline(v)
            if inline is not None:
                out.append(f"{lead}- {inline}\n")
            elif type(v) is dict:
                self._mapping(v, indent + 2, out, lead + "- ")
            else:
                self._sequence(v, indent + 2, out, lead + "- ")
            lead = pad

    def emit(self, doc: dict[str, Any]) -> str:
        if type(doc) is not dict or not doc:
            raise Unsupported("document")
        out: list[str] = []
        try:
            self._mapping(doc, 0, out, "")
        except RecursionError:
            raise Unsupported("depth") from None
        if any(len(line) > _MAX_LINE for line in out):
            raise Unsupported("width")
        return "".join(out)
