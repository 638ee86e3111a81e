"""Compressed snapshots: `fleet.jsonl.gz` is read and written as the file it holds.

A 10,000-node snapshot is gigabytes of JSON that compresses about twentyfold; operators copy and keep them
compressed, and the tool read a gzip file as undecodable text."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from dra_migrate.cluster import snapshot as snapshot_module
from dra_migrate.cluster.snapshot import load_snapshot, snapshot_header, write_snapshot
from dra_migrate.cluster.state import SourceInfo
from dra_migrate.errors import InputError
from dra_migrate.fileio import format_suffix, gzip_writer
from tests.unit.cli import run
from tests.unit.test_snapshot_io import objects

SOURCE = SourceInfo(
    kind="live",
    location="https://k8s.example:6443",
    context="prod",
    kubernetes_version="v1.37.2",
    taken_at="2026-12-06T07:00:00Z",
)


FLEET = objects()


def _written(fmt: str, compress: bool) -> bytes:
    buf = io.BytesIO()
    with gzip_writer(buf, compress) as out:
        write_snapshot(out, snapshot_header(SOURCE, "0.1.0"), iter(FLEET), fmt)
    return buf.getvalue()


def _kinds(path: Path) -> dict[str, int]:
    state = load_snapshot(path)
    return {k: len(state.of(k)) for k in ("Node", "apps/Deployment", "Pod")}


@pytest.mark.parametrize("fmt", ["jsonl", "json", "yaml"])
def test_a_compressed_snapshot_reads_as_the_file_it_holds(tmp_path: Path, fmt: str) -> None:
    plain, packed = tmp_path / f"s.{fmt}", tmp_path / f"s.{fmt}.gz"
    plain.write_bytes(_written(fmt, False))
    packed.write_bytes(_written(fmt, True))
    assert gzip.decompress(packed.read_bytes()) == plain.read_bytes()
    assert _kinds(packed) == _kinds(plain) == {"Node": 1, "apps/Deployment": 1, "Pod": 1}
    assert load_snapshot(packed).source.context == "prod"


def test_the_sealed_reader_reads_a_compressed_snapshot_without_a_second_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packed = tmp_path / "s.jsonl.gz"
    packed.write_bytes(_written("jsonl", True))

    def second_pass(*_: object) -> None:
        raise AssertionError("read line by line: the closing line did not vouch for the decompressed text")

    monkeypatch.setattr(snapshot_module, "_read_lines", second_pass)
    assert _kinds(packed)["Pod"] == 1


def test_compressed_by_its_bytes_whatever_its_name_and_in_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.json.gz").write_bytes(_written("json", True))
    (tmp_path / "d" / "notes.txt.gz").write_bytes(gzip.compress(b"not a snapshot"))
    assert _kinds(tmp_path / "d")["Node"] == 1
    misnamed = tmp_path / "s.jsonl"
    misnamed.write_bytes(_written("jsonl", True))
    assert _kinds(misnamed)["Node"] == 1


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_compressed_snapshot_cut_short_is_refused_as_such(tmp_path: Path, fmt: str) -> None:
    packed = tmp_path / f"s.{fmt}.gz"
    data = _written(fmt, True)
    packed.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"s\.\w+\.gz: a gzip file cut short or damaged"):
        load_snapshot(packed)


def test_a_compressed_snapshot_piped_in_reads_too() -> None:
    r = run("inventory", "--snapshot", "-", "-o", "json", stdin=_written("jsonl", True))
    assert r.code == 0, r.stderr
    assert [c["name"] for c in json.loads(r.stdout)["consumers"]] == ["llm", "bare"]


def test_the_writer_puts_no_name_or_time_in_the_header() -> None:
    """RFC 1952 §2.3.1: FLG bit 3 (FNAME) unset, MTIME zero; two writes of one fleet are the same bytes."""
    data = _written("jsonl", True)
    assert data[3] & 0x08 == 0 and data[4:8] == b"\0\0\0\0"
    assert _written("jsonl", True) == data


def test_the_format_is_the_name_under_gz() -> None:
    assert [format_suffix(Path(n)) for n in ("a.jsonl.gz", "a.jsonl", "a.gz", "a.yaml.gz")] == [
        ".jsonl",
        ".jsonl",
        ".gz",
        ".yaml",
    ]


def test_a_piped_snapshot_cut_short_is_refused_as_a_file_is() -> None:
    """The closing line announced by the header must arrive through a pipe too, or the text was cut short."""
    whole = _written("jsonl", False)
    lines = whole.splitlines(keepends=True)
    assert run("inventory", "--snapshot", "-", stdin=whole).code == 0
    r = run("inventory", "--snapshot", "-", stdin=b"".join(lines[:-1]))
    assert (r.code, r.stderr.splitlines()[0]) == (
        1,
        "error: <stdin>: the snapshot ends before its closing ClusterSnapshotEnd line: it was cut short: "
        "take the snapshot again (or, to read what is there, remove `closedBy` from its first line)",
    )
    r = run("inventory", "--snapshot", "-", stdin=_written("jsonl", True)[:-30])
    assert r.code == 1 and r.stderr.startswith("error: <stdin>: a gzip file cut short or damaged"), r.stderr
