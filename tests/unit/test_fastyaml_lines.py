"""A refusal names its line: `fastyaml.load_lined` finds lines from libyaml's marks (1 s for a 10,000-node
plan), where the strict reader (ruamel's round trip) took 16 s and 240 MB. Both must answer `line_of` alike
for every map, key, list and item: held here on every committed plan and on documents in every style."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.errors import InputError
from dra_migrate.plan import fastyaml, lined
from dra_migrate.plan.wire import line_of
from tests.unit.test_fastyaml_events import DOCS

ROOT = Path(__file__).resolve().parents[2]
PLANS = [ROOT / "plans" / "demo-example.yaml", *sorted((ROOT / "tests" / "golden" / "plans").glob("*.yaml"))]


def differences(strict: Any, fast: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place where the two documents' lines differ (both hold the same values)."""
    out: list[tuple[Any, ...]] = []
    stack = [(strict, fast, path)]
    while stack:
        a, b, at = stack.pop()
        if not isinstance(a, dict | list):
            continue
        assert type(b) is (fastyaml.LinedMap if isinstance(a, dict) else fastyaml.LinedList), at
        if line_of(a) != line_of(b):
            out.append((at, line_of(a), line_of(b)))
        for k in a if isinstance(a, dict) else range(len(a)):
            if line_of(a, k) != line_of(b, k):
                out.append(((*at, k), line_of(a, k), line_of(b, k)))
            stack.append((a[k], b[k], (*at, k)))
    return out


@pytest.mark.parametrize("plan", PLANS, ids=[p.name for p in PLANS])
def test_every_line_of_a_committed_plan_is_the_strict_readers(plan: Path) -> None:
    text = plan.read_text()
    fast = fastyaml.load_lined(text)
    assert fast is not None and fast == fastyaml.load(text)
    assert differences(lined.strict(text, plan), fast) == []


def _both(text: str) -> tuple[Any, Any] | None:
    fast = fastyaml.load_lined(text)
    if fast is None:
        return None
    try:
        return lined.strict(text, Path("p.yaml")), fast
    except InputError:
        return None  # YAML 1.2 and libyaml disagree on the text (the strict reader decides it: io.py)


@settings(max_examples=300, deadline=None)
@given(
    doc=st.dictionaries(st.text(max_size=6), DOCS, min_size=1, max_size=5),
    flow=st.sampled_from([None, True, False]),
    style=st.sampled_from([None, "'", '"', "|"]),
)
def test_every_line_of_a_document_in_any_style_is_the_strict_readers(
    doc: dict[str, Any], flow: bool | None, style: str | None
) -> None:
    for text in (yaml.safe_dump(doc, default_flow_style=flow, default_style=style, allow_unicode=True),
                 fastyaml.dump(doc)):  # fmt: skip
        both = _both(text)
        if both is not None:
            assert differences(*both) == [], text


def test_what_load_leaves_to_the_strict_reader_load_lined_leaves_too() -> None:
    """Its form (values, such as NaN, are `load`'s to check: `load_lined` reads only a text `load` read)."""
    for text in ("a: &x 1\nb: *x\n", "a: !!binary aGk=\n", "a: 1\na: 2\n", "a: 1\n---\nb: 2\n"):
        assert fastyaml.load(text) is None and fastyaml.load_lined(text) is None, text
    # A list is no plan: `load` says so itself (tests/unit/test_plan_not_a_mapping.py), and has no lines.
    with pytest.raises(fastyaml.NotAMapping):
        fastyaml.load("- 1\n")
    assert fastyaml.load_lined("- 1\n") is None


def test_a_raw_line_break_that_libyaml_counts_and_ruamel_does_not_is_left_to_the_strict_reader() -> None:
    text = "? '\x85  '\n: null\nb: null\n"  # NEL inside a quoted key: libyaml puts b on line 4, ruamel on 3
    assert fastyaml.load(text) is not None and fastyaml.load_lined(text) is None
