"""`convert`'s diff compares a stream document by document (convert/unidiff.py): it must be a unified diff
that turns the original into the converted text, hunks across document boundaries included, and it must
not grow with the square of the stream (a stream of 3,000 alike Deployments spent 50 s in difflib)."""

from __future__ import annotations

import difflib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.convert.unidiff import diff_pieces, unified_diff

_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply(original: str, diff: str) -> str:
    """Apply a unified diff (as `patch` would, exactly: no fuzz), checking every context and removed line."""
    old = original.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    lines = diff.splitlines(keepends=True)[2:]  # past --- and +++
    for line in lines:
        m = _HUNK.match(line)
        if m:
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            first = start - 1 if count else start  # an empty range names the line before it
            out.extend(old[at:first])
            at = first
            continue
        sign, text = line[0], line[1:]
        if sign in " -":
            assert old[at] == text, (at, old[at], text)
            at += 1
        if sign in " +":
            out.append(text)
    return "".join(out + old[at:])


doc_lines = st.lists(st.sampled_from(["a: 1\n", "b: 2\n", "spec:\n", "  x: y\n", "  - z\n", "# note\n"]), max_size=8)


@st.composite
def streams(draw: st.DrawFn) -> list[tuple[str, str]]:
    pieces = []
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        old = "---\n" + "".join(draw(doc_lines))
        new = old if draw(st.booleans()) else "---\n" + "".join(draw(doc_lines))
        pieces.append((old, new))
    return pieces


@settings(max_examples=400, deadline=None)
@given(streams())
def test_the_diff_turns_the_original_into_the_converted_text(pieces: list[tuple[str, str]]) -> None:
    original, converted = "".join(o for o, _ in pieces), "".join(c for _, c in pieces)
    diff = unified_diff(diff_pieces(pieces, original, converted), "a/f.yaml", "b/f.yaml")
    if original == converted:
        assert diff == ""
        return
    assert diff.startswith("--- a/f.yaml\n+++ b/f.yaml\n@@ -")
    assert apply(original, diff) == converted


def test_pieces_that_do_not_split_the_files_at_line_ends_are_compared_whole() -> None:
    pieces = [("a: 1", "a: 2"), ("\nb: 1\n", "\nb: 1\n")]  # the first piece ends mid-line
    original, converted = "a: 1\nb: 1\n", "a: 2\nb: 1\n"
    assert diff_pieces(pieces, original, converted) == [(original, converted)]
    assert apply(original, unified_diff(diff_pieces(pieces, original, converted), "a", "b")) == converted


def test_a_file_emptied_or_filled_is_written_as_difflib_writes_it() -> None:
    for original, converted in (("", "a: 1\nb: 2\n"), ("a: 1\n", ""), ("a: 1\n", "a: 1\nb: 2\n")):
        ours = unified_diff([(original, converted)], "a/f", "b/f")
        theirs = "".join(difflib.unified_diff(original.splitlines(True), converted.splitlines(True), "a/f", "b/f"))
        assert ours == theirs
        assert apply(original, ours) == converted
