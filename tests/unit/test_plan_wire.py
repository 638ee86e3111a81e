"""Plan file format 2 (issue 29): the compact tables round-trip exactly, format 1 is still read, and the
fast reader (libyaml) sees exactly the values the strict one (ruamel, which knows lines) sees."""

from __future__ import annotations

import copy
import hashlib
import random
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.errors import InputError
from dra_migrate.plan import fastyaml, wire
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").rglob("*.yaml"))  # platforms/ too
FORMAT1 = ROOT / "tests" / "golden" / "plans-format1" / "demo.yaml"


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.relative_to(ROOT / "fixtures").as_posix() for f in FIXTURES])
def test_decode_inverts_encode_for_every_fixture(fixture: Path) -> None:
    for params in (PlanParams(), PlanParams(drain="all", max_unavailable="2")):
        body = build_plan(load_snapshot(fixture), params).to_dict()
        encoded = wire.encode(body)
        assert wire.decode(copy.deepcopy(encoded)) == body
        assert fastyaml.load(fastyaml.dump(encoded)) == encoded  # the file holds exactly the encoding


@pytest.mark.parametrize("fixture", FIXTURES[:3], ids=[f.stem for f in FIXTURES[:3]])
def test_build_returns_the_typed_plan_and_its_file_is_the_models(fixture: Path, tmp_path: Path) -> None:
    """`build_plan` returns the typed model (issue 29); what `plan` writes of it is exactly the file of the
    model's mapping, sealed, and reads back as the same typed plan."""
    plan = build_plan(load_snapshot(fixture), PlanParams(drain="all", max_unavailable="2"))
    assert isinstance(plan, Plan) and plan.digest is None
    sealed = plan_io.write_sealed(plan, tmp_path / "p.yaml")
    assert (tmp_path / "p.yaml").read_text() == plan_io.dumps(plan_io.seal(plan.to_dict()))
    assert sealed.digest is not None and sealed.digest.startswith("sha256:")
    assert Plan.from_dict(plan_io.load(tmp_path / "p.yaml")) == sealed


def test_a_pool_stage_is_one_screen_of_steps_and_a_row_per_node(tmp_path: Path) -> None:
    text = (ROOT / "tests" / "golden" / "plans" / "demo.yaml").read_text()
    doc = fastyaml.load(text)
    assert doc is not None and doc["formatVersion"] == 2
    stage = next(s for s in doc["stages"] if "pool" in s)
    # the demo's GKE pools record the autoscaler annotation their protect step sets (wire.ANNOTATIONS_COLUMN)
    assert stage["nodeColumns"] == [*wire.NODE_COLUMNS, wire.ANNOTATIONS_COLUMN]
    uids = {o[3]: o[4] for o in doc["fingerprint"]["objects"] if o[0] == "Node"}
    for row in stage["nodes"]:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"  - [{row[0]},"))
        assert line.endswith("]]")  # one line per node
        assert row[1] == uids[row[0]]  # the uid beside the name is the fingerprint's


def test_format_1_is_read_and_rebase_converts_it(tmp_path: Path) -> None:
    old = plan_io.load(FORMAT1)
    assert old["formatVersion"] == 1
    Plan.from_dict(old)  # the model reads it as it reads format 2
    assert run("show", str(FORMAT1)).code == 0
    path = tmp_path / "p.yaml"
    path.write_bytes(FORMAT1.read_bytes())
    r = run("plan", "--rebase", str(path))
    assert r.code == 0, r.stderr
    new = plan_io.load(path)
    assert new["formatVersion"] == 2 and new["edited"] == {"previousDigests": [old["digest"]]}
    assert plan_io.body_of(new)["stages"] == old["stages"]


def test_a_forged_format_1_file_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(FORMAT1.read_text().replace("      gpuPods: 1\n", "      gpuPods: 0\n", 1))
    with pytest.raises(InputError, match="edited"):
        plan_io.load(path)


SCALARS = ["017", "0o17", "0x9", "1_000", "1:20", "1e3", "no", "yes", "on", "off", "y", "n", "true", "False",
           "~", "null", "", "-0", "+5", "0b11", "09", ".5", "1.", "=", "2026-01-01"]  # fmt: skip


@pytest.mark.parametrize("scalar", SCALARS)
def test_the_fast_reader_sees_what_the_strict_reader_sees(scalar: str) -> None:
    text = f"a: {scalar}\nb: [{scalar}]\n" if scalar else "a: \n"
    strict = YAML(typ="rt").load(text)
    fast = fastyaml.load(text)
    plain = plan_io._plain(strict)
    if fast is None:  # left to the strict reader (a date, a bare `=`): never a different value
        return
    assert fast == plain
    assert [type(v) for v in fast.values()] == [type(v) for v in plain.values()]
    if "b" in fast:
        assert type(fast["b"][0]) is type(plain["b"][0])


def test_the_fast_reader_resolves_scalars_with_the_strict_readers_own_table() -> None:
    """`fastyaml` holds ruamel's YAML 1.2 table so that reading a plan never imports ruamel: the day an
    upgrade of ruamel changes its table, this fails, before the two readers could disagree."""
    from ruamel.yaml.resolver import implicit_resolvers

    theirs = [
        (t, rx.pattern, rx.flags, list(first)) for versions, t, rx, first in implicit_resolvers if (1, 2) in versions
    ]
    ours = [(f"tag:yaml.org,2002:{n}", p, f, list(first)) for n, p, f, first in fastyaml.YAML_1_2_RESOLVERS]
    assert ours == theirs


def test_the_anchor_and_tag_scan_finds_what_a_search_finds() -> None:
    """`fastyaml._anchor_or_tag` tries the pattern only where a `&` or `!` stands: on 100,000 random texts
    of the characters that decide it, it says what a search of the whole text says."""
    rng = random.Random(3)
    alphabet = " \t\n[{,&!=ab"
    for _ in range(100_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        assert fastyaml._anchor_or_tag(text) == bool(fastyaml._ANCHOR_OR_TAG.search(text)), repr(text)


@pytest.mark.parametrize(
    "text", ["017", "0", "42", "1_000", "+5", "-0", "0o17", "0x1f", "0b11", "18446744073709551615"]
)
def test_integers_read_as_the_strict_reader_reads_them(text: str) -> None:
    assert fastyaml.load(f"a: {text}\n") == plan_io._plain(YAML(typ="rt").load(f"a: {text}\n"))


def test_the_digest_hash_is_sha256() -> None:
    """The digests use CPython's own SHA-256 (no OpenSSL import): the same digest as hashlib's, at every
    length across the block boundaries and in pieces, as the streaming reader feeds it."""
    rng = random.Random(7)
    for n in [0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 100_000]:
        data = rng.randbytes(n)
        h = wire.sha256()
        for i in range(0, n, 37):
            h.update(data[i : i + 37])
        assert h.hexdigest() == wire.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


QUOTED = ["1e3", "25724084516e6291", "0o17", "no", "on", "017", "1_000", "null", "true", "1.5", "-", "a: b"]


@pytest.mark.parametrize("value", QUOTED)
def test_strings_are_written_so_that_both_readers_read_strings(value: str) -> None:
    text = fastyaml.dump({"a": value})
    assert fastyaml.load(text) == {"a": value}
    assert dict(YAML(typ="rt").load(text)) == {"a": value}


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # duplicate key
        "a: &x 1\nb: *x\n",  # alias
        "a: {<<: {b: 1}}\n",  # merge key
        "a: .nan\n",
        "a: 99999999999999999999\n",
        "a: !!binary Z3B1\n",
        "1: a\n",
        "x: " + "[" * 60_000 + "]" * 60_000 + "\n",  # libyaml would exhaust the C stack
        "x:\n  " + "- " * 60_000 + "a\n",
        "x: " + "{a: " * 60_000 + "}" * 60_000 + "\n",
    ],
)
def test_the_fast_reader_leaves_anything_unusual_to_the_strict_one(text: str) -> None:
    assert fastyaml.load(text) is None


def test_a_collection_as_a_key_is_one_line(tmp_path: Path) -> None:
    """Found by the mutation test once rows were flow sequences: `? ` before a row made ruamel raise a
    TypeError (an unhashable key), not a YAMLError."""
    path = tmp_path / "p.yaml"
    text = (ROOT / "tests" / "golden" / "plans" / "demo.yaml").read_text()
    path.write_text(text.replace("  - [gke-demo", "  - ? [gke-demo", 1))
    with pytest.raises(InputError, match="not a string"):
        plan_io.load(path)


def test_show_reads_without_the_round_trip_parser(tmp_path: Path, monkeypatch: Any) -> None:
    """Read-only paths never parse with ruamel (issue 29 item 3), a refusal's line included: libyaml's marks
    give it (`fastyaml.load_lined`), the strict reader only reads what the fast one leaves to it."""
    calls: list[int] = []
    original = plan_io._strict

    def counted(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(plan_io, "_strict", counted)
    path = ROOT / "tests" / "golden" / "plans" / "demo.yaml"
    plan_io.load(path)
    plan_io.load_for_review(path)
    assert calls == []
    edited = tmp_path / "p.yaml"
    edited.write_text(path.read_text().replace("soakAfter: 5m}", "soakAfter: 1m}", 1))
    with pytest.raises(InputError, match=r"p\.yaml:\d+: the plan was edited"):
        plan_io.load(edited)
    assert calls == []  # the refusal's line too


def _demo_body() -> dict[str, Any]:
    return plan_io.body_of(
        build_plan(load_snapshot(ROOT / "fixtures" / "clusters" / "demo.yaml"), PlanParams()).to_dict()
    )


def _written(encoded: dict[str, Any], path: Path) -> Path:
    sealed = {**encoded, "digests": plan_io.section_digests(encoded), "digest": plan_io._digest(encoded, read=True)}
    path.write_text(plan_io._file_text(sealed))
    return path


def test_a_nodes_recorded_annotations_are_values_in_annotation_keys_order(tmp_path: Path) -> None:
    """One autoscaler annotation recorded per node cost 62 bytes a row as a mapping (the key again on every
    row: a 2,000-node fleet of node groups went from 279 to 320 bytes a node, over issue 29's 300); as values
    in the stage's `annotationKeys` order, as labels are, 8."""
    body = _demo_body()
    encoded = wire.encode(body)
    stage = next(s for s in encoded["stages"] if "nodeColumns" in s and wire.ANNOTATIONS_COLUMN in s["nodeColumns"])
    assert stage["annotationKeys"] == ["cluster-autoscaler.kubernetes.io/scale-down-disabled"]
    assert all(row[-1] == [None] for row in stage["nodes"])
    assert wire.decode(encoded)["stages"] == body["stages"]


def test_a_plan_written_with_annotation_mappings_is_still_read(tmp_path: Path) -> None:
    """Plans written before `annotationKeys` (a mapping per row) keep their digests and read as they were."""
    body = _demo_body()
    old = wire.encode(body)
    for stage in old["stages"]:
        keys = stage.pop("annotationKeys", None)
        if keys is not None:
            stage["nodes"] = [[*row[:-1], dict(zip(keys, row[-1], strict=True))] for row in stage["nodes"]]
    path = _written(old, tmp_path / "old.yaml")
    assert "annotationKeys" not in path.read_text()
    assert plan_io.body_of(plan_io.load(path))["stages"] == body["stages"]


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.pop("annotationKeys"), "annotation values of annotationKeys"),
    (lambda s: s["nodes"][0].__setitem__(-1, [None, "x"]), "annotation values of annotationKeys"),
    (lambda s: s.update(nodeColumns=list(wire.NODE_COLUMNS), nodes=[r[:-1] for r in s["nodes"]]),
     "only beside an 'annotations' column"),
])  # fmt: skip
def test_annotation_cells_that_do_not_fit_their_keys_are_refused(tmp_path: Path, edit: Any, words: str) -> None:
    encoded = wire.encode(_demo_body())
    edit(next(s for s in encoded["stages"] if "annotationKeys" in s))
    path = _written(encoded, tmp_path / "p.yaml")
    with pytest.raises(InputError, match=words):
        plan_io.load(path)
