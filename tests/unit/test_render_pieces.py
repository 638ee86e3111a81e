"""A document is written a line at a time (`Document.pieces`, so that `show` of a 10,000-node plan never
holds its whole output): the pieces make exactly the text the whole-text renderer made, held here against
that renderer's rule (lines joined by newlines, a blank line before each heading but the first, no blank
line at the end, one newline) on random documents."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.render import Document, emit, plain_table
from dra_migrate.render.view import Table

TEXT = st.text(alphabet="ab \n", max_size=8)
BLOCKS = st.lists(
    st.one_of(
        st.tuples(st.just("heading"), TEXT),
        st.tuples(st.just("line"), TEXT),
        st.tuples(st.just("table"), st.lists(st.lists(TEXT, min_size=2, max_size=2), max_size=3)),
    ),
    max_size=6,
)


def whole_text(doc: Document, fmt: str) -> str:
    """The renderer before it streamed (without wrapping: no width is given)."""
    from dra_migrate.render import terminal_safe
    from dra_migrate.render.markdown import md_text

    out: list[str] = []
    for kind, value in doc.blocks:
        # Markdown lines are inert Markdown (md_text); no format carries a control character (terminal_safe).
        if kind == "heading":
            if out:
                out.append("")
            out.append(f"## {terminal_safe(md_text(value))}" if fmt == "markdown" else terminal_safe(value))
        elif kind == "line":
            out.append(terminal_safe(md_text(value) if fmt == "markdown" else value))
        elif not value.rows:
            out.append(terminal_safe(value.empty))
        elif fmt == "markdown":
            from dra_migrate.render.markdown import markdown_table

            out.extend(["", terminal_safe(markdown_table(value)), ""])
        else:
            out.append("\n".join(plain_table(value, fmt, False, None)))
    return "\n".join(out).rstrip("\n") + "\n"


@settings(max_examples=300, deadline=None)
@given(blocks=BLOCKS, fmt=st.sampled_from(["table", "wide", "markdown"]))
def test_the_pieces_make_the_whole_text(blocks: list[tuple[str, Any]], fmt: str) -> None:
    doc = Document()
    for kind, value in blocks:
        if kind == "heading":
            doc.heading(value)
        elif kind == "line":
            doc.line(value)
        else:
            doc.add(Table(["A", "B"], value))
    out = io.StringIO()
    emit(doc.pieces(fmt), out)
    assert out.getvalue() == doc.render(fmt) == whole_text(doc, fmt)
