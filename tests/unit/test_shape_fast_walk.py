"""The snapshot check's walk of SHAPES (cluster/validate.py) has two forms: `_fits`, which builds nothing and
runs on every object, and `_shape`, which names the field and runs only where `_fits` says no. They must agree
on every value, or a malformed field would pass unnamed (or a well-formed one be refused): this holds them to
each other on random values at every path of SHAPES."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.cluster import validate

PATHS = sorted({(path, leaf) for shapes in validate.SHAPES.values() for path, leaf in shapes})

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=2), st.floats(allow_nan=False))
ANY = st.one_of(SCALARS, st.lists(SCALARS, max_size=2), st.dictionaries(st.text(max_size=2), SCALARS, max_size=2))


def _along(segments: tuple[tuple[str, str], ...], i: int = 0) -> st.SearchStrategy[Any]:
    """Values shaped like the path from segment i on, each level sometimes of a wrong type (or null)."""
    if i == len(segments):
        return ANY
    key, form = segments[i]
    below = _along(segments, i + 1)
    child: st.SearchStrategy[Any] = below
    if form == "[]":
        child = st.one_of(ANY, st.lists(below, min_size=1, max_size=3), st.lists(below, min_size=1, max_size=3))
    elif form == "{}":
        child = st.one_of(ANY, *[st.dictionaries(st.text(max_size=2), below, min_size=1, max_size=3)] * 2)
    shaped = st.one_of(st.fixed_dictionaries({key: child}), st.fixed_dictionaries({key: child, "x": ANY}))
    # the object itself is a map; below it, a wrong type one time in four (each level's own chance)
    return shaped if i == 0 else st.one_of(SCALARS, shaped, shaped, shaped)


def _agree(obj: Any, path: str, leaf: str) -> tuple[bool, bool]:
    fits = validate._fits(obj, validate._split(path), 0, leaf, path.endswith("[]"))
    try:
        validate._shape(obj, path, leaf)
    except validate.Malformed:
        return fits, False
    return fits, True


@pytest.mark.parametrize(("path", "leaf"), PATHS, ids=[f"{p}:{leaf}" for p, leaf in PATHS])
def test_the_fast_walk_agrees_with_the_describing_one(path: str, leaf: str) -> None:
    @settings(max_examples=30, deadline=None, derandomize=True, database=None)
    @given(_along(validate._split(path)))
    def agree(obj: Any) -> None:
        fits, passes = _agree(obj, path, leaf)
        assert fits == passes, obj

    agree()


def test_both_walks_see_a_null_list_item_where_a_map_is_asked() -> None:
    path = "spec.taints[]"
    assert _agree({"spec": {"taints": [None]}}, path, "map") == (False, False)
    assert _agree({"spec": {"taints": [{"key": "k"}]}}, path, "map") == (True, True)
    assert _agree({"spec": {"taints": "x"}}, "spec.taints[].key", "str") == (False, False)
    assert _agree({"spec": {"taints": [{"key": 1}]}}, "spec.taints[].key", "str") == (False, False)
    assert _agree({"spec": None}, "spec.taints[].key", "str") == (True, True)
