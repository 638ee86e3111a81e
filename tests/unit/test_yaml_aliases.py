"""The alias-bomb guard (cluster/yamlio.py `check_aliases`) measures what aliases add, and nothing else: a
document without aliases, of any size, expands to exactly what it holds; each alias adds what it repeats."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.cluster.yamlio import _expanded_size

json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=6),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_a_document_without_aliases_expands_to_what_it_holds(doc: Any) -> None:
    expanded, written = _expanded_size(doc)
    assert expanded == written


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(), min_size=0, max_size=40), st.integers(min_value=1, max_value=30))
def test_each_alias_adds_what_it_repeats(shared: list[int], uses: int) -> None:
    doc = {"items": [shared] * uses}  # one list written once, then aliased uses - 1 times
    expanded, written = _expanded_size(doc)
    assert expanded - written == (uses - 1) * (1 + len(shared))
