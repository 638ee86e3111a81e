"""A unified diff of a YAML stream converted document by document, in time linear in the stream.

`difflib.unified_diff` matches the two files whole: over thousands of documents alike line for line (a
chart's Deployments) its longest-match search grows with the square of the file (a stream of 3,000
Deployments: 50 of the 57 s `convert` took). The converter changes each document on its own, so each is
compared with what it became: its opcodes (difflib's, over its own lines) are shifted to the file's line
numbers, and the hunks are grouped and written as `difflib.unified_diff` writes them (`n` lines of
context, the `--- a/`, `+++ b/` and `@@ -l,s +l,s @@` lines of GNU diff's unified format).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Literal

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


class _Known(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """A matcher whose opcodes are given: difflib's grouping of them into hunks, without its matching."""

    def __init__(self, opcodes: list[Opcode]) -> None:
        super().__init__(None, "", "")
        self._known = opcodes

    def get_opcodes(self) -> list[Opcode]:
        return self._known


def unified_diff(pieces: Sequence[tuple[str, str]], fromfile: str, tofile: str, n: int = 3) -> str:
    """The unified diff of the concatenated old pieces to the concatenated new ones, each pair compared on
    its own. Every piece but the last ends its last line (a stream's documents do), so the file's lines
    are the pieces' lines; `diff_pieces` falls back to one piece where that does not hold."""
    a: list[str] = []
    b: list[str] = []
    opcodes: list[Opcode] = []
    for old, new in pieces:
        old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
        i0, j0 = len(a), len(b)
        if old == new:
            found: list[Opcode] = [("equal", 0, len(old_lines), 0, len(new_lines))] if old_lines else []
        else:
            found = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in found:
            _add(opcodes, (tag, i1 + i0, i2 + i0, j1 + j0, j2 + j0))
        a.extend(old_lines)
        b.extend(new_lines)
    if not any(tag != "equal" for tag, *_ in opcodes):
        return ""
    return "".join(_hunks(a, b, opcodes, fromfile, tofile, n))


def diff_pieces(pieces: Sequence[tuple[str, str]], original: str, converted: str) -> list[tuple[str, str]]:
    """The pieces, if they split both files at line ends; else the two files as one piece."""
    ends_lines = all(old.endswith("\n") and new.endswith("\n") for old, new in pieces[:-1])
    whole = "".join(o for o, _ in pieces) == original and "".join(c for _, c in pieces) == converted
    return list(pieces) if pieces and ends_lines and whole else [(original, converted)]


def _add(opcodes: list[Opcode], op: Opcode) -> None:
    """Append, joining an `equal` run to the one before it (two documents left as they were are one run of
    context, which the grouping trims to `n` lines)."""
    if opcodes and op[0] == "equal" and opcodes[-1][0] == "equal":
        tag, i1, _, j1, _ = opcodes[-1]
        opcodes[-1] = (tag, i1, op[2], j1, op[4])
    elif op[1] != op[2] or op[3] != op[4]:
        opcodes.append(op)


def _range(start: int, stop: int) -> str:
    """A hunk's range in the unified format: `line,count`, the line before it for an empty range."""
    length = stop - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def _hunks(a: list[str], b: list[str], opcodes: list[Opcode], fromfile: str, tofile: str, n: int) -> Iterator[str]:
    yield f"--- {fromfile}\n"
    yield f"+++ {tofile}\n"
    for group in _Known(opcodes).get_grouped_opcodes(n):
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (_line(" ", line) for line in a[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from (_line("-", line) for line in a[i1:i2])
            if tag in ("replace", "insert"):
                yield from (_line("+", line) for line in b[j1:j2])


def _line(sign: str, line: str) -> str:
    """One line of a hunk. A file's last line without a newline is followed by GNU diff's marker, as POSIX
    `diff -u` writes it; without it the next line of the diff ran on after it and `patch` refused the diff as
    malformed (KServe's docs/samples/v1beta1/torchserve/v2/bert/bert_gpu.yaml ends so)."""
    return sign + line if line.endswith("\n") else f"{sign}{line}\n\\ No newline at end of file\n"
