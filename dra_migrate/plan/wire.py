"""Plan file format 2: the shape on disk, for review at fleet size (docs/plan-format.md).

The plan in memory (`Plan.to_dict()`, what `build_plan` makes and `io.load` returns) lists every node of a
wave with all it carries. On disk that repeats, per node, what every node of a pool shares; format 2
states it once per stage and keeps, per node, one row of only what differs:

    stages[i] (a pool stage):
      name, pool, resources, nodeSteps        as the model has them (the steps every node runs, once)
      strategy:    replace-pool              only when not in-place (plan/strategies.py)
      waves:       [{name, evictedPods, soakAfter}]          in order
      labelKeys:   [<label key>...]          the keys of every node's `original.labels`, in order
      profiles:    [{resources, canaryResource[, placement]}]  what several nodes share, first use first
      annotationKeys: [<annotation key>...]  only in a stage whose nodes record original annotations (the
                                         autoscaler's, which the protect step sets): their keys, in order
      nodeColumns: [node, uid, wave, profile, gpuPods, otherPods, expectedDevices, unschedulable, labels
                    [, annotations]]     annotations: only in a stage with annotationKeys
      nodes:       [[<one row per node, columns as named>]...]  grouped by wave, in wave order
    fingerprint.objects: rows of `fingerprint.objectColumns` (kind, group, namespace, name, uid, ...).

In a plan of many pools, `nodeSteps` (or `profiles`) that `SHARE_FROM` or more pool stages hold alike are
stated by the first of them, and the others name it (`nodeSteps: {sameAs: pool-a}`): a fleet of 2,000 pools
of five nodes repeated the same 70 lines of steps in every stage, 14 MB at 10,000 nodes (issue 29). A plan
of a few pools states every stage's in full, so a stage's steps are edited where they stand. A stage names
only a stage that states the value itself (never a chain), wherever it is in the file (stages may be
reordered); an edit to the named stage's steps is an edit to every stage that names it.

A node's `uid` is the one its fingerprint row records (refused when the two disagree), so a reviewer
reads it beside the node and apply's uid check and the row cannot differ. `labels` is a list of values
in `labelKeys` order, or a mapping for a node whose keys differ; `annotations` alike (`annotationKeys`; a
mapping in files written before the key list: 62 bytes a node for one annotation, 300 a node's budget).
Format 1 (every node in full) is read
as it is. `encode` and `decode` are exact inverses over what `build_plan` and `rebase` make; the digests
cover the encoded form (`io.py`).
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from dra_migrate.errors import InputError

# The digests' hash (`io.py`, `stream.py`). `import hashlib` loads OpenSSL's libcrypto, 3.6 MB of `show`'s
# peak memory (issue 29 holds it to 5x the plan file) for a digest the interpreter computes itself; a plan
# digests a few MB, where OpenSSL's speed is not worth it. The same FIPS 180-4 SHA-256 either way
# (tests/unit/test_plan_wire.py checks it against hashlib's).


def _own_sha256() -> Callable[..., Any]:
    for name in ("_sha2", "_sha256"):  # CPython's own (3.12 renamed `_sha256` to `_sha2`)
        try:
            found: Callable[..., Any] = importlib.import_module(name).sha256
            return found
        except (ImportError, AttributeError):
            continue
    import hashlib  # a Python built without its own: OpenSSL's, the same digest

    return hashlib.sha256


sha256 = _own_sha256()

WRITES = 2  # the format `encode` writes
READS = (1, 2)  # the formats `decode` reads

NODE_COLUMNS = (
    "node", "uid", "wave", "profile", "gpuPods", "otherPods", "expectedDevices", "unschedulable", "labels",
)  # fmt: skip
OBJECT_COLUMNS = ("kind", "group", "namespace", "name", "uid", "resourceVersion", "content")
_PROFILE_KEYS = ("resources", "canaryResource", "placement")
POOL_STAGE_KEYS = ("name", "pool", "resources", "nodeSteps", "waves", "labelKeys", "profiles", "nodeColumns", "nodes")
_OPTIONALPOOL_STAGE_KEYS = ("strategy", "annotationKeys")
# The column a stage adds when its nodes record original annotations; absent otherwise, so an in-place
# plan's rows stay as they were.
ANNOTATIONS_COLUMN = "annotations"
_HINT = "regenerate the plan with dra-migrate plan"
SAME_AS = "sameAs"
SHARED = ("nodeSteps", "profiles")  # what a pool stage may name another stage's for
SHARE_FROM = 8  # how many pool stages hold a value alike before it is stated once
# What every reader of a plan file (io, fastyaml, lined) holds its values to: integers JSON parsers (and
# orjson, which digests them) carry exactly; and what a refusal of the file's form tells the reader to do.
INT_MIN, INT_MAX = -(2**63), 2**64 - 1
REGENERATE = "regenerate it with dra-migrate plan"


class Row(list[Any]):
    """A table row (or a short list): written on one line (flow style), so a stage's nodes read as a table."""


class Line(dict[str, Any]):
    """A small mapping written on one line (a wave)."""


class WireError(InputError):
    """A malformed table of a format-2 file; `at` is where, as keys and indexes (for its line)."""

    def __init__(self, at: tuple[str | int, ...], message: str, hint: str = _HINT) -> None:
        super().__init__(message, hint)
        self.at = at


def field_at(path: str) -> tuple[str | int, ...]:
    """`stages[1].waves[0].nodes[3].wave` as ("stages", 1, "waves", 0, "nodes", 3, "wave"): where a field
    is, as keys and indexes (the codec finds its line from them)."""
    out: list[str | int] = []
    for part in path.replace("]", "").replace("[", ".").split("."):
        if part:
            out.append(int(part) if part.isdecimal() else part)
    return tuple(out)


def _fail(path: str, what: str, hint: str = _HINT) -> WireError:
    return WireError(field_at(path), f"plan field `{path}`: {what}", hint)


# --- encode: the model's dict -> format 2 ------------------------------------------------------------


def encode(body: Mapping[str, Any]) -> dict[str, Any]:
    """The file's form of a plan body (model shape, without digests), format 2."""
    out = dict(body)
    out["formatVersion"] = WRITES
    fp = body.get("fingerprint")
    uids: dict[str, str] = {}
    if isinstance(fp, Mapping) and isinstance(fp.get("objects"), list):
        objects = fp["objects"]
        uids = {str(o["name"]): str(o.get("uid") or "") for o in objects if _is_node(o)}
        rest = {k: v for k, v in fp.items() if k != "objects"}
        rows = [_object_row(o) for o in objects]
        out["fingerprint"] = {**rest, "objectColumns": Row(OBJECT_COLUMNS), "objects": rows}
    stages = body.get("stages")
    if isinstance(stages, list):
        tables = [_encode_stage(s, uids) if isinstance(s, Mapping) and "pool" in s else s for s in stages]
        out["stages"] = _share(tables)
    return out


def _share(stages: list[Any]) -> list[Any]:
    """`nodeSteps` and `profiles` that `SHARE_FROM` or more pool stages hold alike, stated by the first of
    them; the others name it (`{sameAs: <its name>}`)."""

    def alike(stage: Any) -> list[tuple[str, str]]:
        if not (isinstance(stage, dict) and "nodes" in stage and isinstance(stage.get("name"), str)):
            return []
        return [(key, repr(stage[key])) for key in SHARED if isinstance(stage.get(key), list) and stage[key]]

    # Each stage's values made once: a repr of its steps and profiles is most of what sharing costs.
    values = [alike(stage) for stage in stages]
    held = Counter(value for of_stage in values for value in of_stage)
    first: dict[tuple[str, str], str] = {}  # (field, its value's repr) -> the stage that states it
    out = []
    for stage, of_stage in zip(stages, values, strict=True):
        for value in of_stage:
            if held[value] < SHARE_FROM:
                continue
            named = first.setdefault(value, stage["name"])
            if named != stage["name"]:
                stage = {**stage, value[0]: Line({SAME_AS: named})}
        out.append(stage)
    return out


def _is_node(o: Any) -> bool:
    return isinstance(o, Mapping) and o.get("kind") == "Node" and isinstance(o.get("name"), str)


def _object_row(o: Any) -> Any:
    if isinstance(o, Mapping) and tuple(o) == OBJECT_COLUMNS:
        return Row(o[k] for k in OBJECT_COLUMNS)
    return o  # anything else is kept whole (and refused by validation as it would have been)


def _encode_stage(stage: Mapping[str, Any], uids: Mapping[str, str]) -> Any:
    """A pool stage as a table; a stage too malformed to be one is written as it is (and refused on
    reading: a pool stage on disk is a table), so a rebase of a broken edit fails with one line."""
    try:
        return _table(stage, uids)
    except (KeyError, TypeError, AttributeError, ValueError):
        return stage


def _table(stage: Mapping[str, Any], uids: Mapping[str, str]) -> dict[str, Any]:
    waves = stage.get("waves") or []
    nodes = [n for w in waves for n in w.get("nodes") or []]
    keys: list[str] = []
    for n in nodes[:1]:
        keys = list((n.get("original") or {}).get("labels") or {})
    annotated = [(n.get("original") or {})["annotations"] for n in nodes if "annotations" in (n.get("original") or {})]
    akeys = list(annotated[0]) if annotated else []
    columns = (*NODE_COLUMNS, ANNOTATIONS_COLUMN) if annotated else NODE_COLUMNS
    profiles: list[dict[str, Any]] = []
    index: dict[bytes, int] = {}
    rows = []
    for w in waves:
        for n in w.get("nodes") or []:
            profile = {k: n[k] for k in _PROFILE_KEYS if k in n}
            if profile.get("placement") == {}:
                del profile["placement"]
            key = repr(profile).encode()
            if key not in index:
                index[key] = len(profiles)
                profiles.append(profile)
            original = n.get("original") or {}
            labels = original.get("labels") or {}
            cell: Any = Row(labels.values()) if list(labels) == keys else dict(labels)
            row = Row([n["node"], uids.get(n["node"], ""), w["name"], index[key], n["gpuPods"], n["otherPods"],
                       n["expectedDevices"], original.get("unschedulable"), cell])  # fmt: skip
            if annotated:
                ann = original.get("annotations")
                row.append(None if ann is None else Row(ann.values()) if list(ann) == akeys else dict(ann))
            rows.append(row)
    head = {k: v for k, v in stage.items() if k not in ("waves",)}
    return {
        **head,
        "waves": [Line((k, v) for k, v in w.items() if k != "nodes") for w in waves],
        "labelKeys": Row(keys),
        **({"annotationKeys": Row(akeys)} if annotated else {}),
        "profiles": profiles,
        "nodeColumns": Row(columns),
        "nodes": rows,
    }


# --- decode: format 1 or 2 -> the model's dict -----------------------------------------------------------


def decode(wire: Mapping[str, Any]) -> dict[str, Any]:
    """The model's dict of a file's body (digests left as they are). Refuses a malformed table with the
    path of the cell; what the cells mean is the model's and `validate`'s to check."""
    version = wire.get("formatVersion")
    if version == 1:
        return dict(wire)
    out = dict(wire)
    fp = wire.get("fingerprint")
    uids: dict[str, str] | None = None
    if isinstance(fp, Mapping) and "objects" in fp:
        check_object_columns(fp)
        rows = _list(fp["objects"], "fingerprint.objects")
        objects = [_object(o, f"fingerprint.objects[{i}]") for i, o in enumerate(rows)]
        out["fingerprint"] = {k: v for k, v in fp.items() if k != "objectColumns"} | {"objects": objects}
        uids = {o["name"]: str(o.get("uid") or "") for o in objects if _is_node(o)}
    stages = wire.get("stages")
    if isinstance(stages, list):
        shared = Shared(stages)
        out["stages"] = [
            _decode_stage(shared.stage(i), f"stages[{i}]", uids or {}) if isinstance(s, Mapping) and "pool" in s else s
            for i, s in enumerate(stages)
        ]
    return out


class Shared:
    """The stages of a file as they read with what they name by `sameAs` taken from the stage named."""

    def __init__(self, stages: list[Any]) -> None:
        self.stages = stages
        self.index = {s["name"]: i for i, s in reversed(list(enumerate(stages))) if _named(s)}  # the first of a name

    def stage(self, i: int) -> Any:
        """Stage `i` with its `sameAs` fields resolved; refused (`WireError`) when one names no other stage
        that states that field itself."""
        stage = self.stages[i]
        if not isinstance(stage, Mapping):
            return stage
        out: dict[str, Any] | None = None
        for key in SHARED:
            value = stage.get(key)
            if isinstance(value, Mapping):
                out = out if out is not None else dict(stage)
                out[key] = self._resolved(i, key, value)
        return stage if out is None else out

    def source(self, i: int, key: str) -> int | None:
        """The index of the stage that states stage `i`'s `key` when it names one (else None)."""
        value = self.stages[i].get(key) if isinstance(self.stages[i], Mapping) else None
        name = value.get(SAME_AS) if isinstance(value, Mapping) else None
        j = self.index.get(name) if isinstance(name, str) else None  # a list or a mapping is no name
        return j if j is not None and j != i else None

    def _resolved(self, i: int, key: str, value: Mapping[str, Any]) -> list[Any]:
        at = f"stages[{i}].{key}"
        if set(value) != {SAME_AS} or not isinstance(value[SAME_AS], str):
            raise _fail(at, f"expected a list, or {{{SAME_AS}: <the name of the stage that states it>}}")
        j = self.source(i, key)
        named = self.stages[j].get(key) if j is not None else None
        if not isinstance(named, list):
            raise WireError(
                field_at(f"{at}.{SAME_AS}"),
                f"plan field `{at}.{SAME_AS}`: {value[SAME_AS]!r} is no other stage that states its {key}",
                f"write the {key} out here (copy them from the original plan), or {REGENERATE}",
            )
        return named


def _named(stage: Any) -> bool:
    return isinstance(stage, Mapping) and isinstance(stage.get("name"), str)


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, "expected a list")
    return value


def _object(row: Any, path: str) -> Any:
    if isinstance(row, list):
        if len(row) != len(OBJECT_COLUMNS):
            raise _fail(path, f"expected {len(OBJECT_COLUMNS)} columns, got {len(row)}")
        return dict(zip(OBJECT_COLUMNS, row, strict=True))
    return row


def _decode_stage(stage: Mapping[str, Any], path: str, uids: Mapping[str, str]) -> dict[str, Any]:
    table = StageTable(stage, path, uids)
    for r, row in enumerate(_list(stage["nodes"], f"{path}.nodes")):
        table.row(r, row)
    return table.stage()


class StageTable:
    """A pool stage's table, read a row at a time: `io.load` hands it every row of a stage, the
    streaming reader (`plan/stream.py`) its rows as they are read. The stage's head (everything but
    `nodes`) is checked when it is made, each row as it comes (`WireError` with the cell's path)."""

    def __init__(self, stage: Mapping[str, Any], path: str, uids: Mapping[str, str] | UidDigests) -> None:
        unknown = [k for k in stage if k not in POOL_STAGE_KEYS + _OPTIONALPOOL_STAGE_KEYS]
        if unknown:
            raise _fail(f"{path}.{unknown[0]}", "unknown field")
        missing = [k for k in POOL_STAGE_KEYS if k not in stage]
        if missing:
            raise _fail(f"{path}.{missing[0]}", "missing")
        self.annotated = stage["nodeColumns"] == [*NODE_COLUMNS, ANNOTATIONS_COLUMN]
        if stage["nodeColumns"] != list(NODE_COLUMNS) and not self.annotated:
            raise _fail(f"{path}.nodeColumns", f"expected {list(NODE_COLUMNS)} (and optionally {ANNOTATIONS_COLUMN!r})")
        self.width = len(NODE_COLUMNS) + (1 if self.annotated else 0)
        self.path, self.uids, self.columns = path, uids, stage["nodeColumns"]
        self.keys = _list(stage["labelKeys"], f"{path}.labelKeys")
        self.akeys = _list(stage["annotationKeys"], f"{path}.annotationKeys") if "annotationKeys" in stage else None
        if self.akeys is not None and not self.annotated:
            raise _fail(f"{path}.annotationKeys", f"only beside an {ANNOTATIONS_COLUMN!r} column")
        self.profiles = _list(stage["profiles"], f"{path}.profiles")
        self.head = {k: v for k, v in stage.items() if k in ("name", "pool", "resources", "nodeSteps", "strategy")}
        self.waves: list[dict[str, Any]] = []
        self.position: dict[Any, int] = {}
        for i, w in enumerate(_list(stage["waves"], f"{path}.waves")):
            if not isinstance(w, Mapping) or "nodes" in w:
                raise _fail(f"{path}.waves[{i}]", "expected {name, evictedPods, soakAfter}: nodes are rows of `nodes`")
            if not isinstance(w.get("name"), str):
                raise _fail(f"{path}.waves[{i}].name", "expected a wave name (a string)")
            if w.get("name") in self.position:
                raise _fail(f"{path}.waves[{i}].name", f"wave {w.get('name')} appears twice")
            self.position[w.get("name")] = i
            self.waves.append({**w, "nodes": []})
        self.last = 0

    def entry(self, r: int, row: Any) -> tuple[int, dict[str, Any]]:
        """Row `r` as the model's node entry, and the index of its wave; refused as `io.load` refuses it."""
        path, at = self.path, f"{self.path}.nodes[{r}]"
        if not isinstance(row, list) or len(row) != self.width:
            raise _fail(at, f"expected a row of {self.width} columns ({', '.join(self.columns)})")
        name, uid, wave, profile, gpu, other, devices, unschedulable, labels = row[: len(NODE_COLUMNS)]
        annotations = row[len(NODE_COLUMNS)] if self.annotated else None
        if not isinstance(wave, str) or wave not in self.position:
            raise _fail(f"{at}[2]", f"no wave {wave!r} in {path}.waves")
        if self.position[wave] < self.last:
            later = next(w for w, i in self.position.items() if i == self.last)
            raise _fail(
                f"{at}[2]",
                f"the row of node {name} ({wave}) comes after a row of {later}: rows are grouped by wave, "
                "in wave order",
                "move the row among its wave's rows (a node moved to another wave moves its row there too)",
            )
        self.last = self.position[wave]
        if isinstance(name, str) and not self._recorded(name, uid):
            raise _fail(f"{at}[1]", f"uid {uid!r} is not the one the fingerprint records for node {name}")
        if not isinstance(profile, int) or isinstance(profile, bool) or not 0 <= profile < len(self.profiles):
            raise _fail(f"{at}[3]", f"expected a profile index below {len(self.profiles)}")
        prof = self.profiles[profile]
        if not isinstance(prof, Mapping) or any(k not in _PROFILE_KEYS for k in prof):
            raise _fail(f"{path}.profiles[{profile}]", f"expected a mapping of {', '.join(_PROFILE_KEYS)}")
        if isinstance(labels, list):
            if len(labels) != len(self.keys):
                raise _fail(f"{at}[8]", f"expected {len(self.keys)} label values (labelKeys)")
            labels = dict(zip(self.keys, labels, strict=True))
        entry = {
            "node": name, "gpuPods": gpu, "otherPods": other, "expectedDevices": devices,
            "resources": prof.get("resources"), "canaryResource": prof.get("canaryResource"),
            "original": {"unschedulable": unschedulable, "labels": labels},
        }  # fmt: skip
        if isinstance(annotations, list):
            if self.akeys is None or len(annotations) != len(self.akeys):
                raise _fail(f"{at}[9]", "expected the annotation values of annotationKeys, or a mapping")
            annotations = dict(zip(self.akeys, annotations, strict=True))
        if annotations is not None:
            entry["original"]["annotations"] = annotations
        if "placement" in prof:
            entry["placement"] = prof["placement"]
        return self.position[wave], entry

    def _recorded(self, name: str, uid: Any) -> bool:
        """Whether `uid` is what the fingerprint records for node `name` ("" where it records no such node)."""
        if isinstance(self.uids, UidDigests):
            return self.uids.recorded(name, uid)
        return bool(uid == self.uids.get(name, ""))

    def row(self, r: int, row: Any) -> None:
        wave, entry = self.entry(r, row)
        self.waves[wave]["nodes"].append(entry)

    def stage(self) -> dict[str, Any]:
        """The model's stage, with the rows given so far in its waves."""
        return {**self.head, "waves": self.waves}


def object_entry(row: Any, path: str) -> Any:
    """A fingerprint row as the model's object (a row of the wrong width refused)."""
    return _object(row, path)


def check_object_columns(fp: Mapping[str, Any]) -> None:
    if fp.get("objectColumns") != list(OBJECT_COLUMNS):
        raise _fail("fingerprint.objectColumns", f"expected {list(OBJECT_COLUMNS)}")


def _digest8(text: str) -> bytes:
    return bytes(sha256(text.encode("utf-8", "surrogatepass")).digest()[:8])


class UidDigests:
    """The uid the fingerprint records for each Node, as 8 bytes of SHA-256 of the name and 8 of the uid, one
    sorted run of 16-byte records: what the streaming reader (plan/stream.py) checks a stage's rows against,
    16 bytes a node where the two strings and a dict took ~200 (`show`'s peak is held to 5x the file, issue
    29). Searched by halving, in Python: `bisect` and `array` are shared libraries, loading one is memory too."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        self._records = b""

    def add(self, name: str, uid: str) -> None:
        self._pending.append(_digest8(name) + _digest8(uid))

    def _sealed(self) -> None:
        # As a dict would: a name added twice keeps its last uid (a stable sort keeps the order of adds).
        old = [self._records[i : i + 16] for i in range(0, len(self._records), 16)]
        ordered = sorted([*old, *self._pending], key=lambda r: r[:8])
        kept = [r for i, r in enumerate(ordered) if i + 1 == len(ordered) or ordered[i + 1][:8] != r[:8]]
        self._records, self._pending = b"".join(kept), []

    def recorded(self, name: str, uid: Any) -> bool:
        """As `uid == recorded.get(name, "")` over the names and uids themselves."""
        if self._pending:
            self._sealed()
        key, records = _digest8(name), self._records
        lo, hi = 0, len(records) // 16
        while lo < hi:
            mid = (lo + hi) // 2
            if records[mid * 16 : mid * 16 + 8] < key:
                lo = mid + 1
            else:
                hi = mid
        if records[lo * 16 : lo * 16 + 8] != key:
            return bool(uid == "")
        return type(uid) is str and _digest8(uid) == records[lo * 16 + 8 : lo * 16 + 16]


def node_uid(o: Any) -> tuple[str, str] | None:
    """(name, uid) of a fingerprint object that is a Node, as the rows' uids are checked against."""
    return (o["name"], str(o.get("uid") or "")) if _is_node(o) else None


def wire_path(path: tuple[str | int, ...], wire: Mapping[str, Any]) -> tuple[str | int, ...]:
    """Where a model path (`stages[2].waves[1].nodes[3].gpuPods`) lives in a format-2 file, as far as it
    can be followed: a node is a row of its stage's `nodes`."""
    if wire.get("formatVersion") == 1 or len(path) < 2 or path[0] != "stages":
        return path
    stages = wire.get("stages")
    i = path[1]
    if not isinstance(stages, list) or not isinstance(i, int) or not 0 <= i < len(stages):
        return path
    stage = stages[i]
    if len(path) >= 3 and path[2] in SHARED:  # where the stage it names states it
        j = Shared(stages).source(i, str(path[2]))
        return path if j is None else ("stages", j, *path[2:])
    if not isinstance(stage, Mapping) or "nodes" not in stage or len(path) < 4 or path[2] != "waves":
        return path
    w = path[3]
    if len(path) < 6 or path[4] != "nodes" or not isinstance(w, int):
        return ("stages", i, "waves", w) if isinstance(w, int) else path[:3]
    waves = stage.get("waves") or []
    names = [x.get("name") for x in waves if isinstance(x, Mapping)]
    rows: list[Any] = stage["nodes"] if isinstance(stage.get("nodes"), list) else []
    wave = names[w] if 0 <= w < len(names) else None
    members = [r for r, row in enumerate(rows) if isinstance(row, list) and len(row) > 2 and row[2] == wave]
    n = path[5]
    if not isinstance(n, int) or not 0 <= n < len(members):
        return ("stages", i, "nodes")
    return ("stages", i, "nodes", members[n])


def line_of(node: Any, key: str | int | None = None) -> int:
    """1-based line of a key in a round-trip-loaded mapping or sequence (`lined.py`); 0 when unknown, and
    always for the fast reader's plain values (a line is read again with the strict reader when needed)."""
    lc = getattr(node, "lc", None)
    try:
        if lc is None:
            return 0
        if isinstance(node, dict) and key is not None:
            return int(lc.key(key)[0]) + 1
        if isinstance(node, list) and isinstance(key, int):
            return int(lc.item(key)[0]) + 1
        return int(lc.line) + 1
    except (AttributeError, KeyError, TypeError, IndexError):
        return 0
