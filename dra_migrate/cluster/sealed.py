"""A JSON Lines snapshot the tool wrote, read at the speed of its text (issue 29).

`dra-migrate snapshot --format jsonl` ends the file with a closing line,
`{"apiVersion": "dra-migrate.io/v1alpha1", "kind": "ClusterSnapshotEnd", "objects": N, "crc32": C}`: how many
object lines stand between the header and it, and the CRC-32 of every byte before it. The header announces it
(`metadata.closedBy: ClusterSnapshotEnd`), so a file cut short at a line boundary, which would otherwise
read as a smaller fleet, is refused.

Why it makes reading faster: every line of such a file is orjson's serialisation of an object the API
server returned, so no line repeats a key (cluster/jsondup.py has nothing to find) and no key is spelled
with a `\\u` escape. A file that reads back as written (count and CRC agree) can therefore skip the
duplicate-key check, and its pods -- most of a fleet -- are decoded by msgspec into typed structs of only
the fields kept or counted of them (`PodKept`, `PodCounted`), the rest of each line skipped at C speed
instead of built into dicts. A pod of any other shape, and every other object, take the full path of
cluster/snapshot.py, which parses the line whole and checks it field by field.

The reading is optimistic: the CRC is computed as the lines are read, and a file whose count or CRC
disagree at its closing line (edited by hand or by another tool), that goes on after it, or whose fast
read raised any error, is read again from the start with every check (`Recheck`), as a snapshot from
kubectl is. The CRC is no signature: whoever edits the file can recompute it. It tells an edit from the
writer's text, which is all the fast reader relies on (an edit made to be read differently could as well
state the value it wants).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from typing import IO, Any

import msgspec
import orjson
from msgspec import UNSET, UnsetType

from dra_migrate.cluster.podmeta import DO_NOT_DISRUPT, MIRROR_ANNOTATION, SAFE_TO_EVICT
from dra_migrate.cluster.state import POD_META_KEYS, POD_SPEC_KEYS, POD_STATUS_KEYS
from dra_migrate.cluster.validate import GPU_PREFIX
from dra_migrate.errors import InputError

API_VERSION = "dra-migrate.io/v1alpha1"  # of the header and the closing line (cluster/snapshot.py)
END_KIND = "ClusterSnapshotEnd"


class Recheck(Exception):
    """The fast read cannot vouch for the file: read it again with every check."""


class _Map(msgspec.Struct):
    """Any JSON object, its keys skipped: the field is checked to be a map, nothing is built."""


# `PodCounted` is what `ObjectChecker.light_pod` takes at a glance, no more: a pod that passes that quick
# check is refused for nothing else, while one that fails it is looked at field by field (its owner
# references, the values of its labels), which this reader leaves to the full path.
class _MetaCounted(msgspec.Struct):
    name: str = ""
    namespace: str = ""  # null is not a string: such a pod takes the full path (so for node and phase)
    uid: Any = None
    resourceVersion: Any = None
    labels: _Map | None = None


class _SpecCounted(msgspec.Struct):
    nodeName: str = ""
    containers: list[_Map] | None = None  # None: absent (or null), which `light_pod` does not take at a glance
    initContainers: list[_Map] = []
    resourceClaims: list[Any] | None = None


class _StatusCounted(msgspec.Struct):
    phase: str = ""


class PodCounted(msgspec.Struct):
    apiVersion: Any = None
    kind: Any = None
    metadata: _MetaCounted | None = None
    spec: _SpecCounted | None = None
    status: _StatusCounted | None = None


class _Resources(msgspec.Struct):
    limits: dict[str, Any] | UnsetType | None = UNSET
    requests: dict[str, Any] | UnsetType | None = UNSET
    claims: list[Any] | UnsetType = UNSET


class _Container(msgspec.Struct):
    name: str | UnsetType = UNSET
    restartPolicy: str | UnsetType = UNSET
    resources: _Resources | UnsetType | None = UNSET


class _Annotations(
    msgspec.Struct,
    rename={"mirror": MIRROR_ANNOTATION, "do_not_disrupt": DO_NOT_DISRUPT, "safe_to_evict": SAFE_TO_EVICT},
):
    """The annotations the state keeps of a pod (cluster/state.py `kept_annotations`); the others are skipped,
    not built. A type other than a string goes to the full path, which refuses it."""

    mirror: Any = UNSET
    do_not_disrupt: Any = UNSET
    safe_to_evict: Any = UNSET


_ANNOTATION_FIELDS = (
    ("mirror", MIRROR_ANNOTATION),
    ("do_not_disrupt", DO_NOT_DISRUPT),
    ("safe_to_evict", SAFE_TO_EVICT),
)


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str | UnsetType = UNSET
    uid: str | UnsetType = UNSET
    resourceVersion: str | UnsetType = UNSET
    ownerReferences: msgspec.Raw | UnsetType = UNSET  # shared (`_Shared`): a workload's pods repeat it
    labels: dict[str, str] | UnsetType = UNSET  # not shared: a StatefulSet's or an indexed Job's pods differ
    deletionTimestamp: Any = UNSET
    annotations: _Annotations | UnsetType | None = UNSET


class _Spec(msgspec.Struct):
    nodeName: str | UnsetType = UNSET
    nodeSelector: msgspec.Raw | UnsetType = UNSET  # shared
    affinity: msgspec.Raw | UnsetType = UNSET  # shared
    tolerations: msgspec.Raw | UnsetType = UNSET  # shared
    resourceClaims: list[Any] | UnsetType | None = UNSET
    priorityClassName: Any = UNSET
    schedulingGroup: Any = UNSET
    terminationGracePeriodSeconds: Any = UNSET
    schedulerName: Any = UNSET
    containers: msgspec.Raw | UnsetType = UNSET  # shared once pruned (`_Shared.containers`)
    initContainers: msgspec.Raw | UnsetType = UNSET


class _Status(msgspec.Struct):
    phase: str | UnsetType = UNSET
    extendedResourceClaimStatus: Any = UNSET


class PodKept(msgspec.Struct):
    apiVersion: Any = None
    kind: Any = None
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | UnsetType | None = UNSET


def _str_map(v: Any) -> bool:
    return type(v) is dict and all(type(x) is str for x in v.values())


# The type each shared field had as a struct field (`None`: null allowed), checked once per distinct text.
_SHARED_TYPES: dict[str, Callable[[Any], bool]] = {
    "ownerReferences": lambda v: v is None or (type(v) is list and all(type(x) is dict for x in v)),
    "nodeSelector": lambda v: v is None or _str_map(v),
    "affinity": lambda v: v is None or type(v) is dict,
    "tolerations": lambda v: v is None or type(v) is list,
}


class _Shared:
    """The values a workload's pods repeat word for word (owners, placement, containers), parsed once per
    distinct text and shared by every pod that has it: at 10,000 nodes of 50 pods, building each pod's own
    copy was a third of a kept pod's memory and the page faults that came with it (issue 29). A shared
    value is one object in many pods: the state is read, never changed in place (ClusterState).

    Each text is remembered whole, and a container list's text is most of a pod's (image, command, env), so
    a fleet whose every pod differs (a Spark executor's id in its env) would hold them all: the texts
    remembered are held to `_BUDGET` bytes, past which a value is parsed for its own pod, as before."""

    def __init__(self) -> None:
        self.budget = _BUDGET
        # One table per field: the same text is of one type in one field and another in the next ("[]" is
        # owner references, and no node selector).
        self._seen: dict[str, dict[bytes, Any]] = {key: {} for key in _SHARED_TYPES}
        self._containers: dict[bytes, tuple[list[dict[str, Any]] | None, tuple[Any, ...]]] = {}
        self._decode_containers = msgspec.json.Decoder(list[_Container] | None).decode

    def fields(self, struct: msgspec.Struct, keys: tuple[str, ...]) -> dict[str, Any]:
        """The keys `_prune_pod` keeps, in its order, that the line has (each a field of the struct)."""
        out = {}
        for k in keys:
            v = getattr(struct, k)
            if v is UNSET:
                continue
            out[k] = self._value(k, v) if type(v) is msgspec.Raw else v
        return out

    def _value(self, key: str, raw: msgspec.Raw) -> Any:
        text, seen = bytes(raw), self._seen[key]
        value = seen.get(text, _MISSING)
        if value is _MISSING:
            value = orjson.loads(text)
            if not _SHARED_TYPES[key](value):
                raise _FullPath
            if self._affords(text):
                seen[text] = value
        return value

    def _affords(self, text: bytes) -> bool:
        if len(text) > self.budget:
            return False
        self.budget -= len(text)
        return True

    def containers(self, raw: msgspec.Raw) -> tuple[list[dict[str, Any]] | None, tuple[Any, ...]]:
        """A list of containers as `_prune_container` keeps them (None: null), and the device counts they
        name; pruned once per distinct text: a workload's pods run the same containers."""
        text = bytes(raw)
        known = self._containers.get(text)
        if known is None:
            cs = self._decode_containers(text)  # msgspec.ValidationError: a type the full path looks at
            counts: list[Any] = []
            known = (None if cs is None else _kept_containers(cs, counts), tuple(counts))
            if self._affords(text):
                self._containers[text] = known
        return known


_MISSING = object()
_BUDGET = 64 << 20  # bytes of text remembered: 2.7 MB for the bench fleet of 10,000 nodes, 50 pods a node


def _kept_containers(cs: list[_Container], counts: list[Any]) -> list[dict[str, Any]]:
    """`cluster.state._prune_container` of each; the device counts they name are added to `counts`."""
    out: list[dict[str, Any]] = []
    for c in cs:
        kept: dict[str, Any] = {"name": None if c.name is UNSET else c.name}
        res = c.resources
        if res is not None and res is not UNSET:
            parts = {}
            for key, part in (("limits", res.limits), ("requests", res.requests)):
                if part:
                    gpu = {k: v for k, v in part.items() if k.startswith(GPU_PREFIX)}
                    if gpu:
                        parts[key] = gpu
                        counts.extend(gpu.values())
            kept["resources"] = parts
        if c.restartPolicy is not UNSET:
            kept["restartPolicy"] = c.restartPolicy
        out.append(kept)
    return out


def _kept_pod(pod: PodKept, shared: _Shared) -> dict[str, Any] | None:
    """The pod as `_prune_pod` keeps it, if it uses devices and its device counts are as the full path's
    quick check takes them (a plain whole number: "8"); None if it uses none (it is counted). Every shared
    field is parsed and its type checked either way, as the struct checked it before it was shared."""
    spec, meta = pod.spec, pod.metadata
    assert spec is not None and meta is not None
    counts: list[Any] = []
    metadata = shared.fields(meta, POD_META_KEYS)
    if isinstance(meta.annotations, _Annotations):
        values = [(key, getattr(meta.annotations, f)) for f, key in _ANNOTATION_FIELDS]
        if any(v is not UNSET and type(v) is not str for _, v in values):
            raise _FullPath
        annotations = {key: v for key, v in values if v is not UNSET}
        if annotations:
            metadata["annotations"] = annotations
    new_spec = shared.fields(spec, POD_SPEC_KEYS)
    for key, raw in (("containers", spec.containers), ("initContainers", spec.initContainers)):
        if raw is not UNSET:
            kept, named = shared.containers(raw)
            if kept is not None:
                new_spec[key] = kept
                counts.extend(named)
    if not counts and not spec.resourceClaims:
        return None
    if not all(type(v) is str and v.isascii() and v.isdigit() and len(v) < 10 for v in counts):
        raise _FullPath
    status = pod.status
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": new_spec,
        "status": {} if status is None or status is UNSET else shared.fields(status, POD_STATUS_KEYS),
    }


class _FullPath(Exception):
    """The line is taken by the full path."""


_MARK = GPU_PREFIX.encode()
_POD_KIND = b'"kind":"Pod"'


# A pod that is only counted: name, namespace, uid, resourceVersion, node, phase (`StateBuilder.count_pod`).
Counted = tuple[str, str | None, Any, Any, str | None, str | None]


class PodReader:
    """Reads the pod lines of one sealed file: decoders made once, shared values remembered (`_Shared`)."""

    def __init__(self) -> None:
        self._kept = msgspec.json.Decoder(PodKept).decode
        self._counted = msgspec.json.Decoder(PodCounted).decode
        self._shared = _Shared()

    def read(self, line: bytes) -> dict[str, Any] | Counted | None:
        """The line's pod if it is a well-typed v1 Pod: kept (`_prune_pod`'s dict) if it uses devices, else
        counted. None: the line takes the full path."""
        if _POD_KIND not in line:  # as orjson writes a pod's kind: no other line is decoded twice
            return None
        try:
            pod: PodKept | PodCounted = self._kept(line) if _MARK in line else self._counted(line)
        except msgspec.DecodeError:  # also a ValidationError: a type these structs do not take
            return None
        meta, spec = pod.metadata, pod.spec
        if pod.kind != "Pod" or pod.apiVersion != "v1" or meta is None or not meta.name or spec is None:
            return None  # both quick checks want a spec
        if isinstance(pod, PodKept):
            return self._kept_or_counted(pod)
        counted, c_spec, c_status = pod.metadata, pod.spec, pod.status  # as PodCounted's types
        assert counted is not None and c_spec is not None  # tested above
        if c_spec.resourceClaims or c_spec.containers is None:
            return None  # uses devices (the full path keeps it), or is not what `light_pod` takes at a glance
        phase = c_status.phase if c_status else None
        return counted.name, counted.namespace, counted.uid, counted.resourceVersion, c_spec.nodeName, phase

    def _kept_or_counted(self, pod: PodKept) -> dict[str, Any] | Counted | None:
        """A pod whose text names nvidia.com/: kept if it uses devices, counted if it only names them (a
        toleration); None if the full path must read it."""
        meta, spec, status = pod.metadata, pod.spec, pod.status
        assert meta is not None and spec is not None  # tested by `read`
        try:
            kept = _kept_pod(pod, self._shared)
        except (_FullPath, orjson.JSONDecodeError, msgspec.DecodeError):  # a shared value of another type
            return None
        if kept is not None:
            return kept
        return (
            meta.name, _set(meta.namespace), _set(meta.uid), _set(meta.resourceVersion), _set(spec.nodeName),
            _set(status.phase) if status else None,
        )  # fmt: skip


def _set(value: Any) -> Any:
    return None if value is UNSET else value


def announces_end(header: Any) -> bool:
    """Whether a header line says the file ends with a closing line."""
    meta = header.get("metadata") if isinstance(header, dict) else None
    return isinstance(meta, dict) and meta.get("closedBy") == END_KIND


def is_end(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("kind") == END_KIND and obj.get("apiVersion") == API_VERSION


class Seal:
    """The CRC-32 of a file's lines before its closing line (the header's too) and how many objects they
    hold, as they are written or read."""

    def __init__(self, header_line: bytes) -> None:
        self.objects = 0
        self.crc = zlib.crc32(header_line)

    def add(self, line: bytes) -> None:
        self.objects += 1
        self.crc = zlib.crc32(line, self.crc)

    def end_line(self) -> bytes:
        end = {"apiVersion": API_VERSION, "kind": END_KIND, "objects": self.objects, "crc32": self.crc}
        return orjson.dumps(end) + b"\n"

    def matches(self, end_line: bytes) -> bool:
        try:
            end = orjson.loads(end_line)
        except orjson.JSONDecodeError:
            return False
        return is_end(end) and end.get("objects") == self.objects and end.get("crc32") == self.crc


def write_sealed(out: IO[bytes], header: dict[str, Any], items: Iterable[dict[str, Any]]) -> int:
    """Write a JSON Lines snapshot: the header (announcing the closing line), one object per line, the
    closing line. Returns the number of objects."""
    meta = {**(header.get("metadata") or {}), "closedBy": END_KIND}
    first = orjson.dumps({**header, "metadata": meta}) + b"\n"
    out.write(first)
    seal = Seal(first)
    for item in items:
        line = orjson.dumps(item) + b"\n"
        out.write(line)
        seal.add(line)
    out.write(seal.end_line())
    return seal.objects


def cut_short(where: str) -> InputError:
    return InputError(
        f"{where}: the snapshot ends before its closing {END_KIND} line: it was cut short",
        "take the snapshot again (or, to read what is there, remove `closedBy` from its first line)",
    )
