"""`fastyaml` builds a plan's values from libyaml's events (`_parse`) instead of composing the document
into nodes first (`yaml.load`). It must read exactly what the composing loader read, and refuse what it
refused: held here against that loader (its key checks as `fastyaml` had them) on plan-like documents,
written in every style, and on random texts of the characters that decide how YAML parses."""

from __future__ import annotations

import random
from collections.abc import Hashable
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.plan import fastyaml


class _Composing(fastyaml._Loader):
    """The loader `fastyaml.load` used before: compose, then construct, with its own key checks."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Hashable, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise fastyaml._Refused("not a mapping")
        out: dict[Hashable, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise fastyaml._Refused("merge key")
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str) or key in out:
                raise fastyaml._Refused("key")
            out[key] = self.construct_object(value_node, deep=deep)
        return out


# Text that might hold an anchor, an alias or a tag never reaches either loader (`fastyaml._suspicious`
# hands it to the strict reader): the builder refuses those outright, the composing loader read tags.


def composed(text: str) -> tuple[str, Any]:
    if fastyaml._suspicious(text):
        return ("strict reader", None)
    try:
        return ("read", yaml.load(text, Loader=_Composing))
    except (fastyaml._Refused, yaml.YAMLError, RecursionError, ValueError, TypeError):
        return ("refused", None)


def built(text: str) -> tuple[str, Any]:
    if fastyaml._suspicious(text):
        return ("strict reader", None)
    try:
        return ("read", fastyaml._parse(text))
    except (fastyaml._Refused, yaml.YAMLError, RecursionError, ValueError, TypeError):
        return ("refused", None)


def same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """Equal outcomes, values of the same types all the way down (1 and True are equal, not the same)."""
    return a[0] == b[0] and repr(a[1]) == repr(b[1])


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
    st.text(max_size=12), st.sampled_from(["017", "0o17", "1e3", "no", "~", "=", "<<", "2026-01-01", "a: b", "- x"]),
)  # fmt: skip
DOCS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)
@given(doc=DOCS, flow=st.sampled_from([None, True, False]), style=st.sampled_from([None, "'", '"', "|"]))
def test_every_document_written_in_any_style_reads_as_the_composing_loader_reads_it(
    doc: Any, flow: bool | None, style: str | None
) -> None:
    text = yaml.safe_dump(doc, default_flow_style=flow, default_style=style, allow_unicode=True)
    assert same(built(text), composed(text)), text


@settings(max_examples=200, deadline=None)
@given(doc=st.dictionaries(st.text(max_size=6), DOCS, max_size=5))
def test_the_plan_writers_text_reads_as_the_composing_loader_reads_it(doc: dict[str, Any]) -> None:
    text = fastyaml.dump(doc)
    assert same(built(text), composed(text)), text


def test_random_texts_read_or_are_refused_as_the_composing_loader_does() -> None:
    """200,000 short texts of YAML's deciding characters: keys, repeats, merge keys, anchors, aliases, tags,
    several documents, flow and block collections as keys, scalars of every resolution."""
    rng = random.Random(11)
    words = ["a", "b", ":", ": ", "- ", "\n", "\n  ", "[", "]", "{", "}", ", ", "? ", "<<", "&x ", "*x", "!!str ",
             "!t ", "---\n", "...\n", "'q'", '"d"', "1", "0o7", "1e3", "~", "null", "true", "no", "=", "|\n  t",
             "# c", "2026-01-01", ".nan"]  # fmt: skip
    for _ in range(200_000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 10)))
        assert same(built(text), composed(text)), repr(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("", None),
        ("a: 1\n", {"a": 1}),
        ("7\n", 7),
        ("- [a, {b: null}]\n- c\n", [["a", {"b": None}], "c"]),
        ("'1': x\n", {"1": "x"}),
    ],
)
def test_documents_of_every_shape(text: str, value: Any) -> None:
    assert built(text) == ("read", value) == composed(text)


@pytest.mark.parametrize(
    "text", ["a: 1\na: 2\n", "1: a\n", "<<: {a: 1}\n", "? [a]\n: b\n", "a: 1\n---\nb: 2\n", "a: =\n"]
)
def test_what_a_plan_never_holds_is_refused(text: str) -> None:
    assert built(text)[0] == "refused" == composed(text)[0]
