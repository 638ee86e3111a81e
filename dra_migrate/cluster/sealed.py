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


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str | UnsetType = UNSET
    uid: str | UnsetType = UNSET
    resourceVersion: str | UnsetType = UNSET
    ownerReferences: list[dict[str, Any]] | UnsetType | None = UNSET
    labels: dict[str, str] | UnsetType = UNSET
    deletionTimestamp: Any = UNSET


class _Spec(msgspec.Struct):
    nodeName: str | UnsetType = UNSET
    nodeSelector: dict[str, str] | UnsetType | None = UNSET
    affinity: dict[str, Any] | UnsetType | None = UNSET
    tolerations: list[Any] | UnsetType | None = UNSET
    resourceClaims: list[Any] | UnsetType | None = UNSET
    priorityClassName: Any = UNSET
    schedulingGroup: Any = UNSET
    terminationGracePeriodSeconds: Any = UNSET
    schedulerName: Any = UNSET
    containers: list[_Container] | UnsetType | None = UNSET
    initContainers: list[_Container] | UnsetType | None = UNSET


class _Status(msgspec.Struct):
    phase: str | UnsetType = UNSET
    extendedResourceClaimStatus: Any = UNSET


class PodKept(msgspec.Struct):
    apiVersion: Any = None
    kind: Any = None
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | UnsetType | None = UNSET


def _fields(struct: msgspec.Struct, keys: tuple[str, ...]) -> dict[str, Any]:
    """The keys `_prune_pod` keeps, in its order, that the line has (each a field of the struct)."""
    return {k: v for k in keys if (v := getattr(struct, k)) is not UNSET}


def _kept_containers(cs: list[_Container], counts: list[Any]) -> list[dict[str, Any]]:
    """`cluster.state._prune_container` of each; the device counts they name are added to `counts`."""
    out = []
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


def _kept_pod(pod: PodKept) -> dict[str, Any] | None:
    """The pod as `_prune_pod` keeps it, if it uses devices and its device counts are as the full path's
    quick check takes them (a plain whole number: "8"); None if it uses none (it is counted)."""
    spec, meta = pod.spec, pod.metadata
    assert spec is not None and meta is not None
    counts: list[Any] = []
    new_spec = _fields(spec, POD_SPEC_KEYS)
    for key, cs in (("containers", spec.containers), ("initContainers", spec.initContainers)):
        if cs:
            new_spec[key] = _kept_containers(cs, counts)
        elif cs is not UNSET and cs is not None:
            new_spec[key] = []
    if not counts and not spec.resourceClaims:
        return None
    if not all(type(v) is str and v.isdigit() and len(v) < 10 for v in counts):
        raise _FullPath
    status = pod.status
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _fields(meta, POD_META_KEYS),
        "spec": new_spec,
        "status": {} if status is None or status is UNSET else _fields(status, POD_STATUS_KEYS),
    }


class _FullPath(Exception):
    """The line is taken by the full path."""


Decoders = tuple[Callable[[bytes], PodKept], Callable[[bytes], PodCounted]]
_MARK = GPU_PREFIX.encode()
_POD_KIND = b'"kind":"Pod"'


# A pod that is only counted: name, namespace, uid, resourceVersion, node, phase (`StateBuilder.count_pod`).
Counted = tuple[str, str | None, Any, Any, str | None, str | None]


def read_pod(line: bytes, decoders: Decoders) -> dict[str, Any] | Counted | None:
    """The line's pod if it is a well-typed v1 Pod: kept (`_prune_pod`'s dict) if it uses devices, else
    counted. None: the line takes the full path."""
    if _POD_KIND not in line:  # as orjson writes a pod's kind: no other line is decoded twice
        return None
    try:
        pod: PodKept | PodCounted = decoders[0](line) if _MARK in line else decoders[1](line)
    except msgspec.DecodeError:  # also a ValidationError: a type these structs do not take
        return None
    meta, spec, status = pod.metadata, pod.spec, pod.status
    if pod.kind != "Pod" or pod.apiVersion != "v1" or meta is None or not meta.name or spec is None:
        return None  # both quick checks want a spec
    if isinstance(pod, PodKept):
        try:
            kept = _kept_pod(pod)
        except _FullPath:
            return None
        if kept is not None:
            return kept
        return (
            meta.name, _set(meta.namespace), _set(meta.uid), _set(meta.resourceVersion), _set(spec.nodeName),
            _set(status.phase) if status else None,
        )  # fmt: skip
    counted, c_spec, c_status = pod.metadata, pod.spec, pod.status  # as PodCounted's types
    assert counted is not None and c_spec is not None  # tested above
    if c_spec.resourceClaims or c_spec.containers is None:
        return None  # uses devices (the full path keeps it), or is not what `light_pod` takes at a glance
    phase = c_status.phase if c_status else None
    return counted.name, counted.namespace, counted.uid, counted.resourceVersion, c_spec.nodeName, phase


def _set(value: Any) -> Any:
    return None if value is UNSET else value


def pod_decoders() -> Decoders:
    return msgspec.json.Decoder(PodKept).decode, msgspec.json.Decoder(PodCounted).decode


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
