"""The plan's direct YAML writer (`plan/emit.py`): byte-equal to PyYAML's dumper on every document, random
and hostile ones included, and its cost does not grow with a table's rows through PyYAML's representer."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan import emit, fastyaml, wire
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.wire import Line, Row

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").rglob("*.yaml"))

# Strings YAML reads as something else, or writes quoted, folded or escaped.
HOSTILE = [
    "", " ", "true", "True", "no", "NO", "on", "y", "~", "null", "Null", "1", "-1", "+1", "017", "0o17", "0x1F",
    "0b101", "1_000", "1e3", "1E3", ".5", "1.", ".inf", "-.inf", ".nan", "1:20", "12:30:45", "2026-12-04",
    "-", "- a", "--", "---", "...", "a: b", "a:b", "a :b", "#x", "a #b", "a#b", "'", '"', "'a'", "\\", "a\nb",
    "\n", "\t", "a\tb", " lead", "trail ", "[x]", "{x}", "a,b", "&a", "*a", "!a", "!!str", "%x", "@x", "`x",
    "?", "? a", "|", ">", "é", "日本", "\x85", "\u2028", "\ufeff", "\x07", "\x7f", "\U0001f600", "a" * 127,
    "a" * 128, "a" * 300, "a " * 300, "x" * 5000, "v1.2.3", "nvidia.com/gpu", "gpu-0", "0000:18:00.0",
    "sha256:ab", "10%", "5m", "-0", "0", "00", "1e", "e1", "_1", "a/b/c", "a.b-c_d", "A_", "9" * 30,
]  # fmt: skip

scalars = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=12),
    st.text(alphabet="abz019._/-: #'\"\n", max_size=10),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
keys = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none())


def _line(d: dict[Any, Any]) -> Line:
    return Line(d)  # a plan's one-line maps have string keys; hostile ones need not


def _docs(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=4).map(Row),
            st.dictionaries(keys, inner, max_size=4),
            st.dictionaries(keys, inner, max_size=4).map(_line),
        ),
        max_leaves=25,
    )


documents = st.dictionaries(keys, _docs(scalars), min_size=0, max_size=5)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_dump_is_pyyamls_bytes_on_random_documents(doc: dict[Any, Any]) -> None:
    try:
        old = fastyaml._pyyaml_dump(doc)
    except yaml.YAMLError:
        return  # PyYAML refuses it (a type it cannot represent): so does `dump`, through it
    assert fastyaml.dump(doc) == old
    try:
        direct = fastyaml._EMITTER.emit(doc)
    except emit.Unsupported:
        return
    assert direct == old


SPECIAL: list[Any] = [0.0, -0.0, 1e300, float("nan"), float("inf"), 2**64, -(2**63), True]


@pytest.mark.parametrize("value", [*HOSTILE, *SPECIAL])
def test_each_hostile_scalar_in_every_context(value: Any) -> None:
    """A scalar as a block value, in a row, in a one-line mapping, as a key and as a one-line map's key."""
    for doc in (
        {"k": value}, {"k": Row([value, value])}, {"k": Line({"a": value})}, {"k": [value, {"a": value}]},
        {value: 1} if not isinstance(value, float) else {"k": [[value]]}, {"k": Line({value: Row([value])})},
        {"a": {"b": [{"c": value, "d": [value]}]}},
    ):  # fmt: skip
        assert fastyaml.dump(doc) == fastyaml._pyyaml_dump(doc), doc


def test_a_type_pyyaml_refuses_is_refused_as_before() -> None:
    with pytest.raises(yaml.representer.RepresenterError):
        fastyaml.dump({"k": object()})
    assert fastyaml.dump({"k": (1, "a")}) == fastyaml._pyyaml_dump({"k": (1, "a")})  # a tuple: PyYAML's own


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.relative_to(ROOT / "fixtures").as_posix() for f in FIXTURES])
def test_every_fixture_plan_is_written_directly_and_as_before(fixture: Path) -> None:
    """The plans the tool writes are the direct writer's (no fallback), and PyYAML's bytes."""
    sealed = plan_io.seal(build_plan(load_snapshot(fixture), PlanParams()))
    doc = wire.encode(plan_io.body_of(sealed))
    doc.update({k: sealed[k] for k in ("digests", "digest")})
    assert fastyaml._EMITTER.emit(doc) == fastyaml._pyyaml_dump(doc)


def _table(rows: int) -> dict[str, Any]:
    return {
        "formatVersion": 2,
        "nodeColumns": Row(wire.NODE_COLUMNS),
        "nodes": [
            Row([f"node-{i:05d}", f"9c7c8abb-{i:04d}", f"wave-{i % 7}", 0, i % 4, 1, 8, None, Row(["true", f"{i}"])])
            for i in range(rows)
        ],
        "waves": [Line({"name": f"wave-{w}", "evictedPods": w, "soakAfter": "5m"}) for w in range(7)],
    }


def test_pyyaml_represents_no_row_of_a_table() -> None:
    """Counted: PyYAML's pure-Python representer (a node per value, most of writing a 10,000-node plan)
    is asked about a fixed few scalars, however many rows the table has."""
    calls = []
    for rows in (50, 500):
        fastyaml._EMITTER._memo.clear()
        with mock.patch.object(
            yaml.representer.SafeRepresenter, "represent_data", autospec=True,
            side_effect=yaml.representer.SafeRepresenter.represent_data,
        ) as spy:  # fmt: skip
            text = fastyaml.dump(_table(rows))
        assert text == fastyaml._pyyaml_dump(_table(rows))
        calls.append(spy.call_count)
    assert calls[0] == calls[1]


def test_one_long_message_does_not_send_the_tables_to_pyyaml() -> None:
    """A finding message of 5,000 characters (a gang across hundreds of pools) made PyYAML write the whole
    plan, every row through its representer (7 s of a 10,000-node plan of 2,000 pools). Now it writes that
    message's entry only: counted, its calls do not grow with the table's rows, and the bytes are PyYAML's."""
    calls = []
    for rows in (50, 500):
        doc = {**_table(rows), "findings": [{"id": "a", "message": "pools " + ", ".join(["gpu-a100-1"] * 500)}]}
        fastyaml._EMITTER._memo.clear()
        with mock.patch.object(
            yaml.representer.SafeRepresenter, "represent_data", autospec=True,
            side_effect=yaml.representer.SafeRepresenter.represent_data,
        ) as spy:  # fmt: skip
            text = fastyaml.dump(doc)
        assert text == fastyaml._pyyaml_dump(doc)
        calls.append(spy.call_count)
    assert calls[0] == calls[1]
