"""`plan/ownyaml.py`, the reader of the YAML the tool writes without PyYAML: never another value than YAML's.

The property: whatever text it reads, it reads to the value the strict readers read (`fastyaml.load`, and
where that leaves the text to it, ruamel's round trip), types and all (1 is not True, 1.0 is not 1); and
what the strict readers refuse, it does not read. Held on random documents as the tool writes them
(`fastyaml.dump`), on every plan, and on random edits of a plan: hostile characters inserted, lines cut,
re-indented, duplicated. It must also read every plan the tool writes (else `show` pays PyYAML's memory).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.errors import InputError
from dra_migrate.plan import fastyaml, ownyaml
from dra_migrate.plan import io as plan_io
from tests.unit.test_plan_emit import documents
from tests.unit.test_plan_integrity import FIXTURES, _plan_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("DRA_MIGRATE_HYPOTHESIS_EXAMPLES", "400"))
REFUSED = object()


def same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def strict(text: str) -> Any:
    """The value the plan readers give the text (`io._read`'s order), or REFUSED."""
    try:
        value = fastyaml.load(text)
    except fastyaml.NotAMapping:
        return REFUSED
    if value is not None:
        return value
    try:
        return plan_io._plain(plan_io._strict(text, Path("plan.yaml")))
    except InputError:
        return REFUSED


def agrees(text: str) -> bool:
    """Read by ownyaml: the same value as the strict readers'; else not read (None)."""
    mine = ownyaml.load(text)
    return mine is None or same(mine, strict(text))


def _plans(tmp_path: Path) -> list[str]:
    from tests.unit.cli import run

    texts = [p.read_text() for p in sorted((ROOT / "plans").glob("*.yaml"))]
    for fixture in FIXTURES:
        out = tmp_path / f"{fixture.stem}.yaml"
        assert run("plan", "--snapshot", str(fixture), "--out", str(out), "--force").code in (0, 2)
        texts.append(out.read_text())
    return texts


def test_every_plan_the_tool_writes_is_read_as_the_strict_readers_read_it(tmp_path: Path) -> None:
    for text in _plans(tmp_path):
        mine = ownyaml.load(text)
        assert mine is not None  # the fast path is taken: show's memory depends on it
        assert same(mine, fastyaml.load(text))
        rows = [ln[2:] + "\n" for ln in text.splitlines() if ln.startswith("  - [")]
        run = "".join(rows)
        assert same(ownyaml.load_rows(run), fastyaml.load_rows(run))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_random_documents_as_the_tool_writes_them(doc: dict[Any, Any]) -> None:
    try:
        text = fastyaml.dump(doc)
    except yaml.YAMLError:
        return  # a document PyYAML cannot write (a type it cannot represent): nothing to read
    assert agrees(text), text


# Characters and pieces that change what YAML reads: indicators, quotes, comments, breaks, tabs.
PIECES = [
    "#", " #", ":", ": ", "'", "''", '"', "\\", "-", "- ", "?", "? ", "&a ", "*a", "!x ", "!!str ", "|", ">",
    "[", "]", "{", "}", ",", ", ", "\t", " ", "  ", "\n", "\n ", "\n  ", "\r", "\x85", "\u2028", "\ufeff",
    "~", "null", "Null", "true", "True", "yes", "0x1", "017", "1_0", "1e3", ".inf", "2026-12-07", "<<", "%",
    "@", "`", "---", "...", "\x00", "\x7f", "é",
]  # fmt: skip


def _small_plan() -> str:
    """A short plan text as the tool writes it (the strict reader is slow on whole plans): the demo plan
    with at most three rows of each table and its first two stages."""
    out: list[str] = []
    rows = 0
    stages = None
    for line in _plan_text().splitlines(keepends=True):
        rows = rows + 1 if line.startswith("  - [") else 0
        if line.startswith("stages:"):
            stages = 0
        elif stages is not None and line.startswith("- name: "):
            stages += 1
        elif not line.startswith((" ", "-")):
            stages = None
        if rows <= 3 and (stages is None or stages <= 2):
            out.append(line)
    text = "".join(out)
    assert ownyaml.load(text) is not None
    return text


SMALL = _small_plan()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_edits_of_a_plan_are_read_as_yaml_reads_them_or_not_at_all(data: st.DataObject) -> None:
    text = SMALL
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        kind = data.draw(st.sampled_from(["insert", "delete", "indent", "dedent", "duplicate"]))
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at) + 1 or len(text)
        if kind == "insert":
            text = text[:at] + data.draw(st.sampled_from(PIECES)) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 3)) :]
        elif kind == "indent":
            text = text[:start] + "  " + text[start:]
        elif kind == "dedent" and text.startswith("  ", start):
            text = text[:start] + text[start + 2 :]
        elif kind == "duplicate":
            text = text[:end] + text[start:end] + text[end:]
    assert agrees(text), text


@pytest.mark.parametrize(
    "text",
    [
        "a: b\n  c\n",  # a plain scalar continued on the next line: `b c` to YAML
        "a:\n- b\n  c\n",
        "a: 'b\n  c'\n",  # a quoted scalar over two lines
        "a: b # c\n",  # a comment after a value
        "a: b: c\n",  # YAML refuses a mapping value here
        "a: b:\n",
        "a: b \n",  # a trailing space: not part of the value to YAML
        "a:\n- b: c: d\n",
        "a: [b: c]\n",  # a one-pair mapping in a flow sequence
        "a: b\n\nc: d\n",  # a blank line
        "a: b\n  # c\nd: e\n",  # an indented comment
        "a: &x b\nc: *x\n",
        "a: !!str 1\n",
        "a: |\n  b\n",
        "a:\n    b: c\n",  # indented by four
        "a:\n  - b\n",  # a sequence indented under its key
        "a: b\na: c\n",  # a key twice
        "1: a\n",
        "true: a\n",
        "a: [b, c\n",
        "a: [b,c]\n",
        "a: {b: c, b: d}\n",
        "a: '\\n'\n",
        'a: "b\\nc"\n',
        "a: 0x10\n",
        "a: 1_000\n",
        "a: 017\n",
        "a: .inf\n",
        "a: 2026-12-07\n",
        "a: True\n",
        "a: ~\n",
        "a:\n",
        "a: b\r\nc: d\r\n",
        "a: b\tc\n",
        "\ufeffa: b\n",
        "a: b\u2028c\n",
        "a: b",  # no final line break
        "- a\n",
        "? a\n: b\n",
        "a: - b\n",
        "a:\n- - b\n",
        "a: [-b]\n",
        "a: [- b]\n",
        "a: 9223372036854775808\n",
    ],
)
def test_hostile_texts_are_not_read_or_read_as_yaml_reads_them(text: str) -> None:
    assert agrees(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: b c\n", {"a": "b c"}),
        ("a: -c\n", {"a": "-c"}),
        ("a: 'it''s: #1'\n", {"a": "it's: #1"}),
        ("a: [x, 'y, z', -1, 1.5, null, true, [], {}]\n", {"a": ["x", "y, z", -1, 1.5, None, True, [], {}]}),
        ("a:\n- b: 1\n  c:\n  - d\n- e\n", {"a": [{"b": 1, "c": ["d"]}, "e"]}),
        ("# head\na: yes\n", {"a": "yes"}),  # YAML 1.2: a string
    ],
)
def test_what_the_writer_writes_is_read(text: str, value: Any) -> None:
    assert same(ownyaml.load(text), value)
    assert same(strict(text), value)
