"""Reading and writing snapshot files.

Accepted on read (see README "Snapshots"):
  * what `kubectl get ... -o yaml|json` writes: one object or a `v1 List`;
  * a multi-document YAML stream of such, or JSON documents one after another (as kubectl reads them);
  * a directory of such files (*.yaml, *.yml, *.json, *.jsonl), read in name order;
  * `-`: standard input, any of the above but a directory (`kubectl get ... -o json | dra-migrate ... --snapshot -`);
  * the ClusterSnapshot format that `dra-migrate snapshot` writes, as one YAML/JSON document
    ({apiVersion: dra-migrate.io/v1alpha1, kind: ClusterSnapshot, metadata, items}) or as JSON Lines
    (.jsonl: the header without `items` on the first line, then one object per line), which is streamed
    so a large fleet is never held in memory twice.
"""

from __future__ import annotations

import gzip
import io
import itertools
import sys
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, cast

import orjson

from dra_migrate.cluster.jsondup import as_written, duplicate_key
from dra_migrate.cluster.lists import list_shape, untyped
from dra_migrate.cluster.sealed import (
    API_VERSION,
    PodReader,
    Recheck,
    Seal,
    announces_end,
    cut_short,
    is_end,
    write_sealed,
)
from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.cluster.validate import MAX_DEPTH, depth_exceeds, type_name
from dra_migrate.cluster.yamlio import dump_yaml, load_yaml_documents
from dra_migrate.errors import InputError
from dra_migrate.fileio import GZIP_MAGIC, format_suffix, mark_of, not_text, open_read, text_of
from dra_migrate.gcpause import paused_gc

SNAPSHOT_API_VERSION = API_VERSION
SNAPSHOT_KIND = "ClusterSnapshot"
_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def load_snapshot(
    path: Path | str,
    *,
    kubernetes_version: str | None = None,
    templates: TemplateTable | None = None,
) -> ClusterState:
    """Read a snapshot file or directory into a ClusterState.

    `kubernetes_version` states (or overrides) the server version the snapshot came from.
    """
    p = Path(path)
    if str(path) == STDIN:
        builder, header = _read_stdin(templates)
    elif not p.exists():
        raise InputError(f"snapshot {p} does not exist", "check the --snapshot path")
    else:
        files = _snapshot_files(p)
        try:
            builder, header = _read(p, files, templates, trust_ends=True)
        except Recheck:  # a file the tool wrote was changed since: read it again with every check
            builder, header = _read(p, files, templates, trust_ends=False)
    state = builder.state
    meta = header.get("metadata") or {}
    served = meta.get("servedAPIs")
    state.source = replace(
        state.source,
        context=meta.get("context"),
        kubernetes_version=kubernetes_version or meta.get("kubernetesVersion"),
        taken_at=meta.get("takenAt"),
        served_apis=tuple(served) if isinstance(served, list) else None,
        cluster_uid=_text(meta.get("clusterUID")),
        server=_text(meta.get("server")),
    )
    return state


def _read(
    p: Path, files: list[Path], templates: TemplateTable | None, *, trust_ends: bool
) -> tuple[StateBuilder, dict[str, Any]]:
    """Every file into one builder. `trust_ends`: a .jsonl file that announces a closing line is read
    by cluster/sealed.py's fast reader, which raises Recheck if the file is not as the tool wrote it."""
    builder = StateBuilder(SourceInfo(kind="snapshot", location=str(p)), templates)
    header: dict[str, Any] = {}
    with paused_gc():
        for f in files:
            if format_suffix(f) == ".jsonl":
                _load_jsonl(f, builder, header, trust_ends)
            else:
                _read_whole(_read_bytes(f), f, builder, header)
    return builder, header


STDIN = "-"
_STDIN_NAME = "<stdin>"


def _read_stdin(templates: TemplateTable | None) -> tuple[StateBuilder, dict[str, Any]]:
    """`--snapshot -`: a snapshot piped in. JSON Lines are read line by line as they arrive, by the reader
    that checks every line (the sealed reader's fast path needs a second pass a pipe cannot give); any
    other text is read whole, as a file is."""
    stdin = sys.stdin.buffer
    if stdin.isatty():
        raise InputError(
            "--snapshot - reads a snapshot from standard input, which is a terminal",
            "pipe one in (kubectl get nodes,pods -A -o json | dra-migrate inventory --snapshot -), or give a path",
        )
    name = Path(_STDIN_NAME)
    builder = StateBuilder(SourceInfo(kind="snapshot", location=_STDIN_NAME), templates)
    header: dict[str, Any] = {}
    buffered = stdin if isinstance(stdin, io.BufferedReader) else io.BufferedReader(stdin)  # type: ignore[type-var]
    stream: IO[bytes] = buffered
    if buffered.peek(2)[:2] == GZIP_MAGIC:  # `... | gzip | dra-migrate ... --snapshot -`
        stream = cast(IO[bytes], gzip.GzipFile(fileobj=buffered, mode="rb"))
    try:
        with paused_gc():
            first = stream.readline()
            if _json_object_line(first):
                _read_piped_lines(name, first, stream, builder, header)
            else:
                _read_whole(first + stream.read(), name, builder, header)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise _damaged(name, e) from e
    return builder, header


def _read_piped_lines(
    name: Path, first: bytes, rest: Iterable[bytes], builder: StateBuilder, header: dict[str, Any]
) -> None:
    """JSON Lines from a pipe, every line checked; a header that announces a closing line must see it, or the
    text was cut short (a copy stopped at a line boundary would read as a smaller fleet, as from a file)."""
    last = [b""]

    def remembered(lines: Iterable[bytes]) -> Iterator[bytes]:
        for line in lines:
            if line.strip():
                last[0] = line
            yield line

    _read_lines(name, remembered(itertools.chain([first], rest)), builder, header)
    if announces_end(header) and not is_end(_loads_or_none(last[0])):
        raise cut_short(str(name))


def _loads_or_none(line: bytes) -> Any:
    """A line's JSON value, or None for a line that is not JSON (each caller asks what the value is)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _json_values(data: bytes) -> list[tuple[int, int, Any]]:
    """Every JSON value of a text, with where each starts and ends: one document, or several one after
    another, as `(kubectl get nodes -o json; kubectl get pods -A -o json) > fleet.json` writes them and
    kubectl itself reads them (k8s.io/apimachinery pkg/util/yaml/decoder.go, YAMLOrJSONDecoder: a
    json.Decoder reads value after value). JSON Lines are such a text too.
    Raises orjson.JSONDecodeError, its `pos` in `data`, for a text that is not that."""
    view, start, values = memoryview(data), 0, []
    while True:
        try:
            values.append((start, len(data), orjson.loads(view[start:])))
            return values
        except orjson.JSONDecodeError as e:
            end = start + e.pos  # where orjson stopped: content after a whole value, or the error
            try:
                value = orjson.loads(view[start:end])
            except orjson.JSONDecodeError:
                raise orjson.JSONDecodeError(e.msg, "", end) from e
            values.append((start, end, value))
            start = end


def _json_object_line(line: bytes) -> bool:
    """Whether a piped text's first line is a whole JSON object by itself: JSON Lines, streamed."""
    return line.lstrip().startswith(b"{") and isinstance(_loads_or_none(line), dict)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _snapshot_files(p: Path) -> list[Path]:
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and format_suffix(f) in _SUFFIXES)
        if not files:
            raise InputError(
                f"snapshot directory {p} holds no .yaml, .yml, .json or .jsonl files (or .gz of them)", "check the path"
            )
        return files
    return [p]


def _read_bytes(f: Path) -> bytes:
    try:
        with open_read(f) as fh:
            return fh.read()
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise _damaged(f, e) from e
    except OSError as e:
        raise InputError(f"cannot read {f}: {e.strerror}", "check the path and its permissions") from e


def _read_whole(raw: bytes, f: Path, builder: StateBuilder, header: dict[str, Any]) -> None:
    """A JSON or YAML text read whole into the builder."""
    for item in _documents(_as_utf8(raw, str(f)), f, header):
        builder.add(item, where=str(f))


def _documents(data: bytes, f: Path, header: dict[str, Any]) -> Iterator[dict[str, Any]]:
    name = str(f)
    as_json = format_suffix(f) == ".json"
    if as_json or data.lstrip()[:1] in (b"{", b"["):
        try:
            values = _json_values(data)
        except orjson.JSONDecodeError as e:
            if "depth limit" in e.msg:  # orjson stops at 1024 levels
                raise _too_deep(name) from e
            if as_json:
                line = data.count(b"\n", 0, e.pos) + 1
                raise InputError(f"{f}:{line}: invalid JSON ({e.msg})", "fix the file or export it again") from e
            # Not JSON after all (YAML flow style): fall through to YAML.
        else:
            line, prev = 1, 0
            for start, end, doc in values:
                line, prev = line + data.count(b"\n", prev, start), start
                where = name if len(values) == 1 else f"{name}:{line}"
                if depth_exceeds(doc):
                    raise _too_deep(where)
                _refuse_duplicate_key(data[start:end], doc, where)
                yield from _expand(doc, where, header)
            return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{f}: not UTF-8 text", "a snapshot is YAML or JSON text") from e
    for doc in load_yaml_documents(text, str(f)):
        yield from _expand(doc, str(f), header)


# A pod uses devices only through an nvidia.com/ resource name or resourceClaims. The claims are one
# look-up in the parsed pod; for the names, a C-speed substring test of the raw line spares a
# Python-level look at the containers of most pods. The test must never miss a name a JSON parser reads:
# "nvidia.com" itself has no character JSON may escape but by \uXXXX (RFC 8259 §7; `\/` only stands for
# "/", which follows it), so a line with a \u escape anywhere is looked into as well — unless orjson wrote
# the line (`as_written`), which escapes none of its characters: that scan was a sixth of reading a pod.
_GPU_MARK = b"nvidia.com"
_ESCAPE_MARK = b"\\u"


def _refuse_duplicate_key(data: bytes, doc: Any, where: str) -> None:
    """JSON follows YAML's rule: a key given twice in one object is refused, never the last one kept."""
    key = duplicate_key(data, doc)
    if key is not None:
        raise InputError(
            f"{where}: the key {key!r} appears twice in one object (YAML refuses that too)",
            "fix the file or export it again",
        )


def _load_jsonl(f: Path, builder: StateBuilder, header: dict[str, Any], trust_end: bool) -> None:
    """Stream a JSON Lines snapshot into the builder: the header line, then one object per line.

    The loops are the hot path for large fleets (benchmarked in bench/plan_scale.py), so they are kept flat.
    """
    try:
        with open_read(f) as fh:
            first = fh.readline()
            start = _text_start(first, f)
            head = _header_announcing_end(first) if trust_end and not start else None
            if head is not None:
                _read_sealed(f, fh, first, head, builder, header)
                return
            fh.seek(start)
            _read_lines(f, fh, builder, header)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise _damaged(f, e) from e
    except OSError as e:
        raise InputError(f"cannot read {f}: {e.strerror}", "check the path and its permissions") from e


def _damaged(f: Path, e: Exception) -> InputError:
    return InputError(f"{f}: a gzip file cut short or damaged ({e})", "copy it again (gzip -t FILE tests one)")


_AS_UTF8 = "write it as UTF-8 (PowerShell: kubectl ... | Out-File -Encoding utf8), or take it with dra-migrate snapshot"


def _as_utf8(data: bytes, where: str) -> bytes:
    """A whole file's text as UTF-8 without a byte order mark: a marked UTF-8, 16 or 32 text is decoded."""
    if mark_of(data) is None:
        return data  # UTF-8 or not, as every reader below decides
    try:
        return text_of(data).encode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: {not_text(e)} after its byte order mark", _AS_UTF8) from e


def _text_start(first: bytes, f: Path) -> int:
    """Where a JSON Lines file's text starts: past a UTF-8 byte order mark. One of UTF-16 or 32 is refused:
    its lines are not bytes ending in a newline, and the file is not read whole to convert it."""
    marked = mark_of(first)
    if marked is None:
        return 0
    if marked[1] == "utf-8-sig":
        return len(marked[0])
    raise InputError(f"{f}: UTF-16 or UTF-32 text: JSON Lines are read as UTF-8", _AS_UTF8)


def _header_announcing_end(first: bytes) -> dict[str, Any] | None:
    """The first line, parsed, if it is a ClusterSnapshot header that announces a closing line."""
    head = _loads_or_none(first)
    return head if isinstance(head, dict) and head.get("kind") == SNAPSHOT_KIND and announces_end(head) else None


def _read_lines(f: Path, fh: Iterable[bytes], builder: StateBuilder, header: dict[str, Any]) -> None:
    """Every line parsed whole, and checked for repeated keys unless orjson wrote it."""
    loads, name = orjson.loads, str(f)
    for lineno, line in enumerate(fh, 1):
        try:
            obj = loads(line)
        except orjson.JSONDecodeError as e:
            if not line.strip():
                continue
            if "depth limit" in e.msg:
                raise _too_deep(f"{f}:{lineno}") from e
            raise InputError(f"{f}:{lineno}: invalid JSON ({e.msg})", "fix the file or export it again") from e
        _take(line, obj, f"{name}:{lineno}", builder, header, check_repeats=True)


def _read_sealed(
    f: Path, fh: IO[bytes], first: bytes, head: dict[str, Any], builder: StateBuilder, header: dict[str, Any]
) -> None:
    """A file that announces its closing line (cluster/sealed.py): pods decoded only for what is kept or
    counted of them, the rest parsed whole; no line checked for repeated keys, which the closing line's
    CRC vouches for. Anything amiss raises Recheck (or, if the closing line is missing, refuses the file
    as cut short)."""
    name, seal, pods = str(f), Seal(first), PodReader()
    count, keep, base = builder.count_pod, builder.keep_pod, builder.lines_of(name)
    merge_header(header, head, f"{name}:1")
    end: bytes | None = None
    try:
        for lineno, line in enumerate(fh, 2):
            if end is not None:
                raise Recheck  # a line after the closing line
            pod = pods.read(line)
            if isinstance(pod, tuple):
                count(*pod, base + lineno)
            elif pod is not None:
                keep(pod, base + lineno)
            else:
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    raise Recheck from e
                if is_end(obj):
                    end = line
                    continue
                _take(line, obj, f"{name}:{lineno}", builder, header, check_repeats=False)
            seal.add(line)
    except InputError as e:
        raise Recheck from e
    if end is None:
        raise cut_short(name)
    if not seal.matches(end):
        raise Recheck


def _take(
    line: bytes, obj: Any, where: str, builder: StateBuilder, header: dict[str, Any], *, check_repeats: bool
) -> None:
    """One parsed line into the builder (a header is merged, a closing line passed over)."""
    if type(obj) is not dict:
        raise InputError(
            f"{where}: expected a Kubernetes object, found {type(obj).__name__}",
            "a .jsonl snapshot holds one object per line",
        )
    kind = obj.get("kind")
    if kind == "Pod":
        # Pods are kept pruned to a fixed shallow shape, so their depth never matters.
        spec = obj.get("spec")
        may = (isinstance(spec, dict) and bool(spec.get("resourceClaims"))) or _GPU_MARK in line
        if check_repeats and not as_written(line, obj):  # text another writer made: repeats and escapes
            _refuse_duplicate_key(line, obj, where)
            may = may or _ESCAPE_MARK in line
        builder.add(obj, may_request_gpus=may, where=where)
        return
    if check_repeats:
        _refuse_duplicate_key(line, obj, where)
    # A line nests no deeper than it has brackets: only a line with many is measured.
    if line.count(b"{") + line.count(b"[") > MAX_DEPTH and depth_exceeds(obj):
        raise _too_deep(where)
    if list_shape(obj, wrapper=SNAPSHOT_KIND) is not None:
        # A header line, a whole ClusterSnapshot on one line, or a List (`kubectl get ... -o json | jq -c .`)
        for item in _expand(obj, where, header):
            builder.add(item, where=where)
    elif not is_end(obj):
        builder.add(obj, where=where)


def _expand(doc: Any, name: str, header: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Objects of one document: a List/ClusterSnapshot is unwrapped, a single object is itself."""
    if not isinstance(doc, dict):
        raise InputError(
            f"{name}: expected a Kubernetes object or List, found a {type(doc).__name__}", "check the file"
        )
    kind = doc.get("kind")
    if kind == SNAPSHOT_KIND:
        merge_header(header, {k: v for k, v in doc.items() if k != "items"}, name)
    items = list_items(doc, name)
    if items is None:
        yield doc
        return
    for item in items:
        yield from _expand(item, name, header) if list_shape(item) is not None else [item]


def list_items(doc: dict[str, Any], where: str) -> list[dict[str, Any]] | None:
    """The items of a list document or a ClusterSnapshot (cluster/lists.py says which documents are lists
    and which items take the list's kind), each a copy that says its kind; None for any other document."""
    shape = list_shape(doc, wrapper=SNAPSHOT_KIND)
    if shape is None:
        return None
    items = shape.items or []
    if not isinstance(items, list):
        raise InputError(f"{where}: `items` of a {shape.kind} must be a list", "check the file")
    typed = shape.types_items()
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(
                f"{where}: item {n} of a {shape.kind} is a {type(item).__name__}, not an object",
                "fix the file or export it again",
            )
        if typed and untyped(item):
            item = {"apiVersion": shape.api_version, "kind": shape.item_kind, **item}
        out.append(item)
    return out


# What tells one cluster's snapshot from another's: two headers that differ in one of these are two clusters.
_CLUSTER_IDENTITY = ("clusterUID", "server", "context", "kubernetesVersion")


def merge_header(header: dict[str, Any], new: dict[str, Any], where: str) -> None:
    """Take a ClusterSnapshot header; one from another cluster than the headers before it is refused."""
    meta = new.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise InputError(f"{where}: the ClusterSnapshot metadata must be a map", "fix the file or export it again")
    meta = meta or {}
    for key in ("context", "kubernetesVersion", "server", "clusterUID"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise InputError(
                f"{where}: the ClusterSnapshot metadata.{key} must be a string, not {type_name(meta[key])}",
                "fix the file or export it again",
            )
    served = meta.get("servedAPIs")
    if served is not None and not (isinstance(served, list) and all(isinstance(a, str) for a in served)):
        raise InputError(
            f"{where}: the ClusterSnapshot metadata.servedAPIs must be a list of strings",
            "fix the file or export it again",
        )
    old = header.get("metadata")
    if isinstance(old, dict):
        for key in _CLUSTER_IDENTITY:
            a, b = old.get(key), meta.get(key)
            if a is not None and b is not None and a != b:
                raise InputError(
                    f"{where}: a snapshot of {key} {b!r}, but {header.get('_where')} is of {a!r}",
                    "one snapshot is one cluster: give each cluster's snapshot on its own",
                )
        meta = {**old, **{k: v for k, v in meta.items() if v is not None}}
    header.update({**new, "metadata": meta})
    header.setdefault("_where", where)


def _too_deep(where: str) -> InputError:
    return InputError(
        f"{where}: nested deeper than {MAX_DEPTH} levels", "no Kubernetes object nests so deep; fix or export again"
    )


def snapshot_header(source: SourceInfo, tool_version: str) -> dict[str, Any]:
    return {
        "apiVersion": SNAPSHOT_API_VERSION,
        "kind": SNAPSHOT_KIND,
        "metadata": {
            "kubernetesVersion": source.kubernetes_version,
            "server": source.location,
            "context": source.context,
            "clusterUID": source.cluster_uid,  # the kube-system Namespace's uid (cluster/identity.py)
            "takenAt": source.taken_at,
            "toolVersion": tool_version,
            "servedAPIs": list(source.served_apis) if source.served_apis is not None else None,
        },
    }


def write_snapshot(out: IO[bytes], header: dict[str, Any], items: Iterable[dict[str, Any]], fmt: str) -> int:
    """Write a ClusterSnapshot as jsonl (streamed), json or yaml. Returns the number of objects."""
    if fmt == "jsonl":
        return write_sealed(out, header, items)
    collected = list(items)
    doc = {**header, "items": collected}
    if fmt == "json":
        out.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        out.write(dump_yaml(doc, keep_order=False).encode())
    return len(collected)
