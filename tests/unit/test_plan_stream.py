"""`show`'s streaming reader of a plan (plan/stream.py): the same outline `io.load` gives of every plan
it streams, and nothing at all of a plan that is not exactly what the tool wrote.

The hostile cases are the ones `io.load` refuses (tests/unit/test_plan_integrity.py), here against the
streaming path itself: `scan` must give no outline of them (so `show` falls back to `io.load`, which
refuses with the line), and `show` must refuse them. An edit that keeps the YAML valid (a changed cell,
rows reordered or removed) is caught only by the digests: a reader that skipped them would return an
outline and fail these tests. Chunks are made tiny so that every table spans many of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_migrate.errors import InputError
from dra_migrate.plan import filechecks, stream
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.outline import outline_of
from dra_migrate.plan.view import plan_json
from dra_migrate.render import to_json, to_yaml
from dra_migrate.render.plan import plan_document
from tests.unit.cli import run
from tests.unit.test_plan_integrity import FIXTURES, demo

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "_CHUNK", 3)


def _node_rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("  - [") and ", wave-" in ln]


def test_the_streamed_outline_is_io_loads(tmp_path: Path) -> None:
    """Every committed plan and the plan of every fixture stream, to exactly the outline of `io.load`."""
    from tests.unit.test_plan_integrity import _plan_text  # the demo plan, as `plan` writes it

    paths = sorted((ROOT / "plans").glob("*.yaml"))
    for fixture in FIXTURES:
        out = tmp_path / f"{fixture.stem}.yaml"
        assert run("plan", "--snapshot", str(fixture), "--out", str(out), "--force").code in (0, 2)
        paths.append(out)
    assert _plan_text()  # the helper the hostile cases below edit
    for path in paths:
        streamed = stream.scan(path)
        assert streamed is not None, path
        assert streamed == outline_of(plan_io.load(path)), path


def _plans(tmp_path: Path) -> list[Path]:
    paths = sorted((ROOT / "plans").glob("*.yaml"))
    for fixture in FIXTURES:
        out = tmp_path / f"{fixture.stem}.yaml"
        assert run("plan", "--snapshot", str(fixture), "--out", str(out), "--force").code in (0, 2)
        paths.append(out)
    # A pool per node: many stages, their steps stated once and named by the others (`sameAs`).
    many = tmp_path / "pool-per-node.yaml"
    made = run("plan", "--snapshot", str(FIXTURES[0].parent / "demo.yaml"), "--pool-label", "kubernetes.io/hostname",
               "--out", str(many), "--force")  # fmt: skip
    assert made.code in (0, 2) and "sameAs" in many.read_text()
    # Whole pools in one wave: a chunk of rows holds several nodes sharing their profile's objects.
    return [*paths, many, demo(tmp_path, "one-wave.yaml", max_unavailable="100%")]


def _loaded(path: Path, fmt: str) -> str:
    data = plan_json(plan_io.load(path))
    return to_json(data) if fmt == "json" else to_yaml(data)


def test_show_o_json_and_yaml_stream_the_loaded_plans_output(tmp_path: Path) -> None:
    """`show -o json` streams the very text it printed of the whole plan (`to_json(plan_json(io.load))`),
    `-o yaml` the same data (its rows without anchors: `yaml.safe_load` refuses an anchor defined twice,
    as chunks dumped apart would each define `&id001`); every table spans many chunks here. Each plan
    must stream: the path under test is real."""
    for path in _plans(tmp_path):
        for fmt in ("json", "yaml"):
            streamed = stream.pieces(path, fmt)
            assert streamed is not None, path
            text = "".join(streamed)
            if fmt == "json":
                assert text == _loaded(path, fmt), path
            else:
                assert yaml.safe_load(text) == yaml.safe_load(_loaded(path, fmt)), path  # PyYAML's own composer
            shown = run("show", str(path), "-o", fmt)
            assert shown.code == 0 and shown.stdout == text


@pytest.mark.parametrize("edit", ["edited cell", "rows reordered", "row removed", "edited fingerprint row"])
def test_show_o_json_of_an_edited_plan_is_refused(tmp_path: Path, edit: str) -> None:
    path = demo(tmp_path)
    path.write_text(HOSTILE[edit](path.read_text()))
    assert stream.pieces(path, "json") is None and stream.pieces(path, "yaml") is None
    for fmt in ("json", "yaml"):
        shown = run("show", str(path), "-o", fmt)
        assert shown.code != 0 and shown.stdout == ""


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("change", ["edit", "truncate"])
def test_a_plan_changed_between_verifying_and_printing_stops_the_output(tmp_path: Path, fmt: str, change: str) -> None:
    """The rows are read twice: verified, then printed. A file rewritten in place in between must not be
    printed as it now is: the output stops with an error at the first chunk that differs, and what was
    printed is the start of the verified plan's."""
    path = demo(tmp_path)
    text = path.read_text()
    expected = _loaded(path, fmt)
    streamed = stream.pieces(path, fmt)
    assert streamed is not None
    row = _node_rows(text)[-1]
    if change == "edit":  # same length: only the chunk's hash can tell
        edited = row.replace("0", "1", 1) if "0" in row else row.replace("1", "0", 1)
        assert len(edited) == len(row) and edited != row
        path.write_text(text.replace(row, edited))
    else:
        path.write_text(text[: text.index(row)])
    printed: list[str] = []
    with pytest.raises(InputError, match="changed while it was read"):
        for piece in streamed:
            printed.append(piece)
    assert printed and len("".join(printed)) < len(expected)
    if fmt == "json":
        assert expected.startswith("".join(printed))


def test_show_draws_the_streamed_outline_as_it_drew_the_loaded_plan(tmp_path: Path) -> None:
    path = demo(tmp_path)
    for fmt in ("table", "wide", "markdown"):
        shown = run("show", str(path), "-o", fmt, env={"COLUMNS": "200"})
        assert shown.code == 0
        assert shown.stdout == plan_document(outline_of(plan_io.load(path))).render(
            fmt, width=200 if fmt == "table" else None
        )


def _edit_cell(text: str) -> str:
    row = _node_rows(text)[0]
    return text.replace(row, row.replace(", 0, 1, 2, 8,", ", 0, 1, 3, 8,", 1), 1)


def _reorder(text: str) -> str:
    a, b = [ln for ln in text.splitlines() if ln.startswith("  - [Node, ")][:2]
    return text.replace(a + "\n" + b, b + "\n" + a, 1)


def _reorder_waves(text: str) -> str:
    a, b = _node_rows(text)[:2]
    return text.replace(a + "\n" + b, b + "\n" + a, 1)


def _remove(text: str) -> str:
    return text.replace(_node_rows(text)[1] + "\n", "", 1)


def _truncate_mid_row(text: str) -> str:
    row = _node_rows(text)[2]
    return text[: text.index(row) + len(row) // 2]


def _truncate_after_row(text: str) -> str:
    row = _node_rows(text)[2]
    return text[: text.index(row) + len(row) + 1]


def _nan(text: str) -> str:
    row = _node_rows(text)[0]
    return text.replace(row, row.replace(", 0, 1, 2, 8,", ", 0, .nan, 2, 8,", 1), 1)


def _duplicate_key_in_row(text: str) -> str:
    row = _node_rows(text)[0]
    return text.replace(row, row.replace("['true', null]", "{a: 'x', a: 'y'}"), 1)


def _duplicate_key_in_skeleton(text: str) -> str:
    return text.replace("\napplicable:", "\ncluster: other\napplicable:", 1)


def _fingerprint_row(text: str) -> str:
    row = next(ln for ln in text.splitlines() if ln.startswith("  - [Node, "))
    return text.replace(row, row.replace("'', '',", "'', 'x',", 1), 1)


HOSTILE = {
    "edited cell": _edit_cell,
    "rows reordered": _reorder,
    "node rows out of wave order": _reorder_waves,
    "row removed": _remove,
    "truncated mid-row": _truncate_mid_row,
    "truncated after a row": _truncate_after_row,
    "NaN in a row": _nan,
    "duplicate key in a row": _duplicate_key_in_row,
    "duplicate key outside the rows": _duplicate_key_in_skeleton,
    "edited fingerprint row": _fingerprint_row,
}


@pytest.mark.parametrize("edit", list(HOSTILE), ids=list(HOSTILE))
def test_a_plan_not_as_written_gives_no_streamed_outline_and_show_refuses_it(tmp_path: Path, edit: str) -> None:
    path = demo(tmp_path)
    assert stream.scan(path) is not None  # the untouched plan streams: the path under test is real
    text = path.read_text()
    edited = HOSTILE[edit](text)
    assert edited != text
    path.write_text(edited)
    assert stream.scan(path) is None
    with pytest.raises(InputError) as refused:
        plan_io.load(path)
    shown = run("show", str(path))
    assert shown.code != 0 and shown.stdout == ""
    assert str(refused.value).split(":", 1)[0] in shown.stderr  # the same refusal, with its place


@pytest.mark.parametrize("n", [0, 1])
def test_a_row_spanning_two_lines_reads_as_io_load_reads_it(tmp_path: Path, n: int) -> None:
    """YAML lets a flow row continue on the next line. The reader never guesses at one: a table whose
    first row does is not cut out (the skeleton holds it whole); one cut short by it does not read."""
    path = demo(tmp_path)
    row = _node_rows(path.read_text())[n]
    path.write_text(path.read_text().replace(row, row.replace(", wave-", ",\n    wave-", 1), 1))
    if n:
        assert stream.scan(path) is None
    assert stream.outline(path) == outline_of(plan_io.load(path))  # the same plan: io.load reads it


@pytest.mark.parametrize("change", ["edit", "truncate", "append"])
def test_a_file_changed_between_the_skeleton_and_the_rows_gives_no_outline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """The reader reads the file twice (the skeleton, then the rows a chunk at a time) so as never to hold
    it whole. A file rewritten in place between the two must not yield an outline made of both: the
    digests (or the row bounds) catch it, and `io.load` then reads whatever the file is now. Rows added
    after the bytes already read leave those bytes as they were, and the outline is the first file's,
    verified."""
    path = demo(tmp_path)
    text = path.read_text()
    row = _node_rows(text)[-1]
    skeleton = stream._Stream._skeleton

    def then_change(self: stream._Stream, nonce: str) -> bytes:
        out = skeleton(self, nonce)
        if change == "edit":  # same length, one digit of a cell changed: only the digests can tell
            edited = row.replace("0", "1", 1) if "0" in row else row.replace("1", "0", 1)
            assert len(edited) == len(row) and edited != row
            path.write_text(text.replace(row, edited))
        elif change == "truncate":
            path.write_text(text[: text.index(row)])
        else:
            path.write_text(text.replace(row, row + "\n" + row))
        return out

    before = tmp_path / "before.yaml"
    before.write_text(text)
    monkeypatch.setattr(stream._Stream, "_skeleton", then_change)
    found = stream.scan(path)
    if change == "append":
        assert found == outline_of(plan_io.load(before))
    else:
        assert found is None


plain_values = st.recursive(
    st.one_of(st.text(), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(plain_values)
def test_the_streamed_digests_canonical_bytes_are_orjsons(value: Any) -> None:
    """The streamed reader digests with the standard library's encoder (orjson is `show`'s memory): for
    every value a plan holds, the bytes `filechecks.canonical` (orjson) writes, or no bytes where orjson
    writes none (a lone surrogate)."""
    try:
        expected = filechecks.canonical(value)
    except InputError:
        with pytest.raises(stream._NotStreamed):
            stream._canonical(value)
        return
    assert stream._canonical(value) == expected
