"""Reading a format-2 plan's tables a chunk of rows at a time, for `show` (issue 29, item 4).

`io.load` parses the whole file into one tree and then the model's mapping: ~40x the file's size at
10,000 nodes. Here the file's text is cut in two: its skeleton (every line but the rows of
`fingerprint.objects` and of each pool stage's `nodes`, each run of rows replaced by a marker no file
holds) is parsed whole, as `io.load` parses the file; the rows are parsed `_CHUNK` lines at a time by
the same strict reader (`fastyaml.load_rows`), hashed into the digests as they pass, checked by the
codec's own row check (`wire.StageTable`), and dropped, keeping only the outline `show` draws.

Nothing is shown before every digest is verified. The digests cover the canonical JSON of the file's
body with sorted keys (`io.canonical`); the skeleton's canonical bytes around each marker, with the
rows' canonical bytes between them in file order, are the very same bytes (the markers stand where
the row lists sort, and a table's rows come in the file in the order they sort: fingerprint before
stages, stages in their order). Anything that is not exactly what the tool writes, or that does not
verify, is not judged here: `outline` then reads the file with `io.load`, which refuses it with its
line as every other command does (or reads it, e.g. a format-1 plan).

`show -o json|yaml` (`pieces`) prints the whole plan, not an outline: after the same verifying pass, the
rows are read a second time and printed as they pass (each chunk only if it hashes as it did when
verified), the rest of the plan dumped whole with a marker standing for each list of rows.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import Any, BinaryIO

from dra_migrate.errors import InputError
from dra_migrate.fileio import GZIP_MAGIC
from dra_migrate.plan import filechecks, ownyaml, wire
from dra_migrate.plan.filechecks import applicable_problems
from dra_migrate.plan.outline import NodeLine, PlanOutline, head_outline, node_line, outline_of, stage_outline
from dra_migrate.plan.step import Step

# A run of table rows as the writer puts them (`fastyaml.dump`: a key alone on its line, then one flow row
# per line at the key's indentation). A row that spans lines, or any other layout, is simply not cut: the
# skeleton then fails to read as a plan, and the whole file goes to `io.load`.
_KEY = re.compile(rb"( *)(?:objects|nodes):\n")


def _is_row(line: bytes, indent: bytes | None) -> bool:
    return indent is not None and line.startswith(indent + b"- [") and line.endswith(b"]\n")


_CHUNK = 64  # rows parsed at once: a reader's per-call cost amortised, memory bounded
# The canonical bytes the digests cover (`filechecks.canonical`: orjson, sorted keys, compact), written by
# the standard library's encoder: the same bytes for what a plan holds (strings, integers, booleans, nulls,
# lists, maps; tests/unit/test_plan_stream.py holds them to orjson's on random documents), and orjson is
# 0.4 MB of `show`'s peak, which issue 29 holds to 5x the plan file. Where the two could write a value
# apart (a float's exponent: `1e-07` against `1e-7`) the digests do not verify here, and `io.load` reads
# the file with orjson's. Equal bytes are the same JSON value, so no other file can verify in their place.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _canonical(value: Any) -> bytes:
    try:
        return _CANONICAL.encode(value).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        raise _NotStreamed from None


class _NotStreamed(Exception):
    """The file is not exactly what the tool writes, or does not verify: `io.load` decides."""


@dataclass
class _Block:
    """One run of rows in the text, and the marker that stands for it in the skeleton."""

    start: int
    end: int
    marker: str


@dataclass
class _Digest:
    """A digest over canonical bytes that hold markers: the bytes around them are hashed in order, the
    rows of each marker's block in between."""

    expected: str | None  # the digest the file records (None: the whole-body digest, checked last)
    pieces: list[bytes]  # canonical bytes cut at the markers: one more than `blocks`
    blocks: list[int]  # the blocks it holds, in order
    hash: Any = field(default_factory=wire.sha256)

    def verified(self) -> str:
        return "sha256:" + str(self.hash.hexdigest())


def outline(path: Path) -> PlanOutline:
    """The outline of a plan file for `show`, verified: streamed when the file is the tool's format 2,
    else (and whenever streaming finds anything amiss) from `io.load`, which refuses what it refuses."""
    found = scan(path)
    if found is not None:
        return found
    from dra_migrate.plan import io as plan_io  # the whole reader: PyYAML, the model

    return outline_of(plan_io.load(path))


def scan(path: Path) -> PlanOutline | None:
    """The streamed outline of a verified format-2 plan; None when it is not one (`io.load` decides)."""
    try:
        fh = _streamable(path)
        if fh is None:
            return None
        with fh:
            return _Stream(fh, path).run()
    except (OSError, _NotStreamed, InputError, UnicodeDecodeError):
        return None


def pieces(path: Path, fmt: str) -> Iterator[str] | None:
    """`show -o json|yaml`'s text of a verified format-2 plan, a chunk of rows at a time: JSON the very
    text of `to_json(plan_json(io.load(path)))`, YAML the same data (its tables' rows written without
    anchors); None when the file does not stream (the caller reads it whole).

    The whole JSON was 7x the file and its making 29x at 10,000 nodes (70 MB; issue 29 holds `show` to 5x),
    the YAML's 70x at 2,000.
    The file is verified whole first, as `outline` verifies it; nothing is printed before. The rows are
    then read again, each chunk printed only when it hashes as it did when verified: a file rewritten in
    between stops the output with an error (what was printed is the verified plan's, cut short)."""
    try:
        fh = _streamable(path)
    except OSError:
        return None
    if fh is None:
        return None
    try:
        reader = _Stream(fh, path)
        reader.verify(lines_too=False)
    except (OSError, _NotStreamed, InputError, UnicodeDecodeError):
        fh.close()
        return None
    return reader.pieces(fmt)


def _streamable(path: Path) -> BufferedReader | None:
    """The plan file opened to be read twice; None for a pipe (`show <(git show main:plan.yaml)`: read once,
    whole, by io.load) or a compressed plan (the in-cluster Job's ConfigMap: read whole)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    fh = path.open("rb")
    if fh.peek(2)[:2] == GZIP_MAGIC:
        fh.close()
        return None
    return fh


def _load(text: str) -> dict[str, Any] | None:
    """The skeleton's values: read by `ownyaml` (no YAML library imported) when it is as the tool writes
    it, else by `fastyaml`; None when neither reads it as a plan (the whole reader then decides)."""
    doc = ownyaml.load(text)
    if doc is not None:
        return doc
    from dra_migrate.plan import fastyaml

    try:
        return fastyaml.load(text)
    except fastyaml.NotAMapping:
        return None  # the whole reader says so


def _load_rows(text: str) -> list[Any] | None:
    rows = ownyaml.load_rows(text)
    if rows is not None:
        return rows
    from dra_migrate.plan import fastyaml

    return fastyaml.load_rows(text)


def _marker(value: Any, markers: dict[str, int]) -> bool:
    return isinstance(value, str) and value in markers


class _Stream:
    def __init__(self, fh: BinaryIO, path: Path) -> None:
        # Two passes over the open file, never all of it in memory: this one keeps the skeleton (the
        # lines outside the runs of rows) and where each run lies; `_rows` reads the runs back a chunk at
        # a time. `show`'s peak memory is held to 5x the file's size (issue 29): the whole file as bytes
        # was 1x of it, as text another. Every cut is at a line's start, never inside a UTF-8 sequence,
        # so decoding the pieces checks the file's UTF-8 as decoding it whole would.
        self.fh, self.path = fh, path
        nonce = os.urandom(16).hex()  # as secrets.token_hex, without its imports (random, hmac, base64)
        self.blocks: list[_Block] = []
        skeleton = self._skeleton(nonce)
        doc = _load(skeleton.decode("utf-8"))
        if doc is None:
            raise _NotStreamed
        filechecks.check_schema(doc, path)
        if doc.get("formatVersion") != wire.WRITES:
            raise _NotStreamed
        self.doc = doc
        self.shared = wire.Shared(doc["stages"])
        self.uids = wire.UidDigests()
        self.owner: dict[int, str] = {}
        # Each chunk's hash as the first pass read it: a second pass (`json_pieces`) prints only chunks
        # that hash the same, so a file rewritten between the passes is never printed as a mix of both.
        self.seen: dict[int, list[bytes]] = {}
        self.again = False
        self.cursor: dict[int, int] = {}
        self.lines_too = True

    def _skeleton(self, nonce: str) -> bytes:
        """The file with each run of rows (`_KEY` line, then `_is_row` lines) replaced by a marker on the
        key's line; `self.blocks` gets where each run lies."""
        mark = nonce.encode()
        lines: list[bytes] = []
        pos = 0
        key: bytes | None = None  # the indentation of the table key on the line before, if any
        block: _Block | None = None
        for line in self.fh:
            if mark in line:  # it cannot be (128 random bits), but a marker must never be the file's own
                raise _NotStreamed
            start, pos = pos, pos + len(line)
            if block is not None:
                if _is_row(line, key):
                    block.end = pos
                    continue
                block, key = None, None
            if key is not None and _is_row(line, key):
                marker = f"__dra_migrate_rows_{nonce}_{len(self.blocks)}__"
                lines[-1] = lines[-1][:-1] + f" {marker}\n".encode()
                block = _Block(start, pos, marker)
                self.blocks.append(block)
                continue
            lines.append(line)
            found = _KEY.fullmatch(line)
            key = found.group(1) if found else None
        return b"".join(lines)

    def run(self) -> PlanOutline:
        """The verified plan's outline (what `show` draws)."""
        return self._outline(*self.verify())

    def verify(self, *, lines_too: bool = True) -> tuple[dict[str, wire.StageTable], dict[str, list[NodeLine]]]:
        """Hash and check every row; refuse (`_NotStreamed`) what does not verify. Each stage's table, and
        its nodes' lines unless not `lines_too` (`show -o json` prints the rows again instead: 2,000 nodes'
        lines are a third of its memory)."""
        self.lines_too = lines_too
        doc, blocks = self.doc, self.blocks
        fp = doc["fingerprint"]
        markers = {b.marker: i for i, b in enumerate(blocks)}
        owner: dict[int, str] = {}  # block -> "fingerprint" or the stage index
        if _marker(fp.get("objects"), markers):
            wire.check_object_columns(fp)
            owner[markers[fp["objects"]]] = "fingerprint"
        for s, stage in enumerate(doc["stages"]):
            if "pool" in stage and _marker(stage.get("nodes"), markers):
                owner[markers[stage["nodes"]]] = str(s)
        # Every run of rows is a table's, and the fingerprint's comes first (the stages' rows are checked
        # against its node uids as they pass).
        if sorted(owner) != list(range(len(blocks))) or owner.get(0) != "fingerprint":
            raise _NotStreamed
        digests = self._digests(markers)
        uids = wire.UidDigests()
        tables: dict[str, wire.StageTable] = {}
        lines: dict[str, list[NodeLine]] = {}
        for k, block in enumerate(blocks):
            for d in digests:
                if k in d.blocks:
                    at = d.blocks.index(k)
                    d.hash.update(d.pieces[at] + b"[")
                    d.pieces[at] = b""  # hashed: let go
            self._block(k, block, owner[k], digests, uids, tables, lines)
            for d in digests:
                if k in d.blocks:
                    d.hash.update(b"]")
        for d in digests:
            d.hash.update(d.pieces[-1])
        self._verify(digests)
        self.uids, self.owner = uids, owner
        self._unstreamed_tables(tables, lines, uids)
        if applicable_problems(self._head()):
            raise _NotStreamed
        return tables, lines

    def _digests(self, markers: dict[str, int]) -> list[_Digest]:
        """What `io.edits` compares, each cut at its markers; the whole body's last."""
        body = filechecks.body_of(self.doc)
        recorded = self.doc.get("digests")
        if not isinstance(recorded, dict) or not isinstance(self.doc.get("digest"), str):
            raise _NotStreamed
        sections: dict[str, Any] = {k: body.get(k) for k in filechecks.SECTIONS if k in body}
        if "edited" in body:
            sections["edited"] = body["edited"]
        stages = body["stages"]
        sections[filechecks.STAGE_ORDER] = [s.get("name") for s in stages]
        sections.update({f"stages/{s.get('name')}": s for s in stages})
        if set(recorded) != set(sections):
            raise _NotStreamed
        out = [self._cut(recorded[key], value, markers) for key, value in sections.items()]
        return [*out, self._cut(None, body, markers)]

    def _cut(self, expected: Any, value: Any, markers: dict[str, int]) -> _Digest:
        canon = _canonical(value)
        pieces: list[bytes] = []
        blocks: list[int] = []
        pos = 0
        for m in re.finditer(rb'"(__dra_migrate_rows_[0-9a-f]{32}_[0-9]+__)"', canon):
            k = markers.get(m.group(1).decode())
            if k is None or (blocks and k <= blocks[-1]):
                raise _NotStreamed  # not ours, or out of file order
            pieces.append(canon[pos : m.start()])
            blocks.append(k)
            pos = m.end()
        pieces.append(canon[pos:])
        digest = _Digest(expected, pieces, blocks)
        # What comes before the first run of rows is hashed now and let go (a section that holds none is
        # whole, and checked at once by `_verify`): only the bytes after a marker wait for its rows.
        digest.hash.update(pieces[0])
        pieces[0] = b""
        return digest

    def _rows(self, block: _Block) -> Iterator[list[Any]]:
        """The block's rows, `_CHUNK` lines at a time, each chunk exactly one row per line."""
        fh, pos = self.fh, block.start
        fh.seek(pos)
        while pos < block.end:
            chunk: list[bytes] = []
            while len(chunk) < _CHUNK and pos < block.end:
                line = fh.readline()
                if not line:
                    raise _NotStreamed  # the file shrank under us: `io.load` reads what is there now
                chunk.append(line)
                pos += len(line)
            raw = b"".join(chunk)
            self._same_as_read(block.start, raw)
            rows = _load_rows(raw.decode("utf-8"))
            if rows is None or len(rows) != len(chunk) or pos > block.end:
                raise _NotStreamed
            yield rows

    def _same_as_read(self, start: int, raw: bytes) -> None:
        """Record a chunk's hash on the first pass; on the second, refuse a chunk that is not the same."""
        digest = wire.sha256(raw).digest()
        seen = self.seen.setdefault(start, [])
        if not self.again:
            seen.append(digest)
            return
        at = self.cursor.get(start, 0)
        self.cursor[start] = at + 1
        if at >= len(seen) or seen[at] != digest:
            raise InputError(f"{self.path} changed while it was read", "run the command again")

    def _block(
        self,
        k: int,
        block: _Block,
        owner: str,
        digests: list[_Digest],
        uids: wire.UidDigests,
        tables: dict[str, wire.StageTable],
        lines: dict[str, list[NodeLine]],
    ) -> None:
        """Hash, check and take what show needs of one run of rows."""
        first, r = True, 0
        if owner != "fingerprint":
            stage = self.shared.stage(int(owner))
            tables[owner] = table = wire.StageTable(stage, f"stages[{owner}]", uids)
            lines[owner] = out = []
            waves = [w["name"] for w in table.waves]
        for rows in self._rows(block):
            canon = _canonical(rows)[1:-1]  # `filechecks.canonical`'s bytes
            for d in digests:
                if k in d.blocks:
                    d.hash.update(canon if first else b"," + canon)
            first = False
            for row in rows:
                if owner == "fingerprint":
                    found = wire.node_uid(wire.object_entry(row, f"fingerprint.objects[{r}]"))
                    if found is not None:
                        uids.add(*found)
                else:
                    wave, entry = table.entry(r, row)
                    if self.lines_too:
                        out.append(node_line(waves[wave], entry))
                r += 1

    def _unstreamed_tables(
        self, tables: dict[str, wire.StageTable], lines: dict[str, list[NodeLine]], uids: wire.UidDigests
    ) -> None:
        """A pool stage whose rows the skeleton holds (`nodes: []`): read as `io.load` reads it."""
        for s, stage in enumerate(self.doc["stages"]):
            if "pool" not in stage or str(s) in tables:
                continue
            rows = stage.get("nodes")
            if not isinstance(rows, list):
                raise _NotStreamed
            tables[str(s)] = table = wire.StageTable(self.shared.stage(s), f"stages[{s}]", uids)
            waves = [w["name"] for w in table.waves]
            lines[str(s)] = []
            for r, row in enumerate(rows):
                wave, entry = table.entry(r, row)
                lines[str(s)].append(node_line(waves[wave], entry))

    def _verify(self, digests: list[_Digest]) -> None:
        *sections, whole = digests
        if any(d.verified() != d.expected for d in sections) or whole.verified() != self.doc["digest"]:
            raise _NotStreamed

    def _head(self) -> dict[str, Any]:
        return {k: v for k, v in self.doc.items() if k != "stages"}

    def _outline(self, tables: dict[str, wire.StageTable], lines: dict[str, list[NodeLine]]) -> PlanOutline:
        stages = []
        typed: dict[int, tuple[Step, ...]] = {}  # the steps' lists are the doc's, alive while this runs
        for s, stage in enumerate(self.doc["stages"]):
            path = f"stages[{s}]"
            if "pool" not in stage:
                stages.append(stage_outline(stage, path, (), []))
                continue
            nodes = tuple(lines[str(s)])
            names: dict[str, list[str]] = {str(w["name"]): [] for w in tables[str(s)].waves}
            for n in nodes:
                names[n.wave].append(n.node)
            head = {**tables[str(s)].head, "waves": tables[str(s)].waves}
            stages.append(stage_outline(head, path, nodes, [tuple(v) for v in names.values()], typed))
        return head_outline(self.doc, tuple(stages))

    # --- the second pass: `show -o json` ------------------------------------------------------------

    def pieces(self, fmt: str) -> Iterator[str]:
        """The text: the plan with a marker for each table's list is written whole, and each marker is
        replaced by its rows' entries, each written alike at the marker's indentation."""
        from dra_migrate.plan.view import plan_json  # not on the table's path: its imports are show's memory

        self.again = True
        nonce = os.urandom(16).hex()
        try:
            model, lists = self._marked_model(nonce)
            # The rest of the plan, with the markers, as bytes decoded a piece at a time (the text beside the
            # bytes would be a second copy of it).
            if fmt == "json":
                import orjson  # the JSON printed is orjson's (`render.to_json`)

                raw = orjson.dumps(plan_json(model), option=orjson.OPT_INDENT_2) + b"\n"
                at = f'"__dra_migrate_json_{nonce}_([0-9]+)__"'.encode()
            else:
                from dra_migrate.cluster.yamlio import dump_yaml  # ruamel: only for YAML

                raw, at = dump_yaml(plan_json(model)).encode(), f": __dra_migrate_json_{nonce}_([0-9]+)__\n".encode()
            del model
            found = list(re.finditer(at, raw))
            if [int(m.group(1)) for m in found] != list(range(len(lists))):
                raise _NotStreamed  # the file's own text held the marker: it cannot (128 random bits)
            pos = 0
            entries = _Pending(self._entries())
            for m in found:
                yield raw[pos : m.start()].decode()
                line = raw[raw.rfind(b"\n", 0, m.start()) + 1 : m.start()]
                indent = len(line) - len(line.lstrip(b" "))
                items = entries.take(lists[int(m.group(1))])
                yield from (_json_list if fmt == "json" else _yaml_list)(items, indent)
                pos = m.end()
            if entries.held is not None or next(entries.items, None) is not None:
                raise _NotStreamed  # a row no list took: it cannot be, the rows are the verified ones
            yield raw[pos:].decode()
        except _NotStreamed:
            raise InputError(f"{self.path} changed while it was read", "run the command again") from None
        finally:
            self.fh.close()

    def _marked_model(self, nonce: str) -> tuple[dict[str, Any], list[tuple[int, int]]]:
        """The model's dict as `wire.decode` makes it of the file, but each streamed list a marker; and
        what each marker stands for: (block, wave index; -1 for the fingerprint's objects)."""
        lists: list[tuple[int, int]] = []

        def mark(block: int, wave: int) -> str:
            lists.append((block, wave))
            return f"__dra_migrate_json_{nonce}_{len(lists) - 1}__"

        doc = self.doc
        out = dict(doc)
        fp = doc["fingerprint"]
        out["fingerprint"] = {k: v for k, v in fp.items() if k != "objectColumns"} | {"objects": mark(0, -1)}
        block_of = {int(s): k for k, s in self.owner.items() if s != "fingerprint"}
        stages: list[Any] = []
        for s, stage in enumerate(doc["stages"]):
            if "pool" not in stage:
                stages.append(stage)
                continue
            table = wire.StageTable(self.shared.stage(s), f"stages[{s}]", self.uids)
            if s in block_of:
                decoded = table.stage()
                decoded["waves"] = [{**w, "nodes": mark(block_of[s], i)} for i, w in enumerate(decoded["waves"])]
            else:
                for r, row in enumerate(stage["nodes"]):
                    table.row(r, row)
                decoded = table.stage()
            stages.append(decoded)
        out["stages"] = stages
        return out, lists

    def _entries(self) -> Iterator[tuple[int, int, Any]]:
        """(block, wave index, the model's entry) of every row of every block, in file order."""
        for k, block in enumerate(self.blocks):
            owner = self.owner[k]
            if owner == "fingerprint":
                r = 0
                for rows in self._rows(block):
                    for row in rows:
                        yield k, -1, wire.object_entry(row, f"fingerprint.objects[{r}]")
                        r += 1
                continue
            table = wire.StageTable(self.shared.stage(int(owner)), f"stages[{owner}]", self.uids)
            r = 0
            for rows in self._rows(block):
                for row in rows:
                    wave, entry = table.entry(r, row)
                    yield k, wave, entry
                    r += 1


class _Pending:
    """An iterator of (block, wave, entry) that can hand back the one item it read too far."""

    def __init__(self, items: Iterator[tuple[int, int, Any]]) -> None:
        self.items = items
        self.held: tuple[int, int, Any] | None = None

    def take(self, which: tuple[int, int]) -> Iterator[Any]:
        """The entries of one list: the next items while they are `which`'s."""
        while True:
            item = self.held if self.held is not None else next(self.items, None)
            self.held = None
            if item is None:
                return
            if item[:2] != which:
                self.held = item
                return
            yield item[2]


def _json_list(items: Iterator[Any], indent: int) -> Iterator[str]:
    """One marker's list as orjson's OPT_INDENT_2 writes it at `indent`: `[]`, or `[`, each item on lines
    of its own two spaces deeper, `]`. An item dumped alone and indented is the item dumped in place."""
    pad = "\n" + " " * (indent + 2)
    first = True
    import orjson

    for entry in items:  # an item at a time: each is written as it is made, never a chunk of them joined
        text = orjson.dumps(entry, option=orjson.OPT_INDENT_2).decode()
        yield ("[" if first else ",") + pad + text.replace("\n", pad)
        first = False
    yield "[]" if first else "\n" + " " * indent + "]"


def _yaml_list(items: Iterator[Any], indent: int) -> Iterator[str]:
    """One marker's list as the block YAML `dump_yaml` writes after `key:` at `indent` (a sequence in a
    mapping is not indented): `key: []`, or `key:` then each chunk of items dumped as a sequence, every
    line indented as the key is."""
    pad = " " * indent
    first = True
    chunk: list[Any] = []
    for entry in items:
        chunk.append(entry)
        if len(chunk) >= _CHUNK:
            yield (":\n" if first else "") + _indented(chunk, pad)
            first = False
            chunk = []
    if chunk:
        yield (":\n" if first else "") + _indented(chunk, pad)
    elif first:
        yield ": []\n"


def _indented(chunk: list[Any], pad: str) -> str:
    from dra_migrate.cluster.yamlio import dump_yaml

    text = dump_yaml(chunk, aliases=False)
    return "".join(pad + line for line in text.splitlines(keepends=True))
