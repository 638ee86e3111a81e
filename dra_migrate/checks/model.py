"""Findings: the public contract of `dra-migrate check` (ids and severities: docs/rules.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    BLOCKER = "blocker"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"blocker": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class ObjectRef:
    """An object a finding names. The one place that knows both of its forms:

    * text, for tables, markdown and the plan file: "Kind namespace/name", or "Kind name" when it is
      cluster-scoped (`str()`; `parse` reads it back);
    * JSON and YAML output: `{"kind", "namespace", "name"}`, `namespace` null when cluster-scoped (`to_dict`).

    A kind has no space (it may be group-qualified, "nvidia.com/ClusterPolicy"); Kubernetes namespaces and
    names have neither spaces nor slashes, so the first space ends the kind and the first slash after it
    ends the namespace. Refs order as their text does, so findings keep the order they always had."""

    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}" if self.kind else where

    def __lt__(self, other: ObjectRef) -> bool:
        return str(self) < str(other)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace or None, "name": self.name}

    @classmethod
    def of(cls, kind: str, obj: Mapping[str, Any]) -> ObjectRef:
        """The ref of an API object (its metadata's namespace and name) as `kind`."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        return cls(kind, str(meta.get("name")), str(meta["namespace"]) if meta.get("namespace") else None)

    @classmethod
    def parse(cls, text: str) -> ObjectRef:
        """The ref `str()` wrote. Total: any text gives a ref (text without a space is a name of no kind;
        an empty namespace is none)."""
        kind, space, rest = text.partition(" ")
        if not space:
            return cls("", text)
        namespace, slash, name = rest.partition("/")
        return cls(kind, name, namespace or None) if slash else cls(kind, rest)

    @classmethod
    def from_value(cls, value: Any) -> ObjectRef:
        """A ref from either form (a plan file's text, or a JSON object); anything else is read as text."""
        if isinstance(value, ObjectRef):
            return value
        if isinstance(value, Mapping):
            ns = value.get("namespace")
            return cls(str(value.get("kind") or ""), str(value.get("name") or ""), str(ns) if ns else None)
        return cls.parse(str(value))


def objects_json(objects: Iterable[Any]) -> list[dict[str, Any]]:
    """A finding's `objects` as JSON and YAML output carries them, from either form."""
    return [ObjectRef.from_value(o).to_dict() for o in objects]


def objects_text(objects: Iterable[Any]) -> list[str]:
    """A finding's `objects` as tables and markdown show them ("Kind namespace/name"), from either form."""
    return [str(ObjectRef.from_value(o)) for o in objects]


def finding_json(finding: Mapping[str, Any]) -> dict[str, Any]:
    """A finding as it is recorded (a plan file's findings, with objects as text) as JSON output carries it:
    the same keys, `objects` structured. Idempotent."""
    out = dict(finding)
    if isinstance(out.get("objects"), list | tuple):
        out["objects"] = objects_json(out["objects"])
    return out


def findings_json(findings: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [finding_json(f) for f in findings]


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    message: str
    remediation: str
    objects: tuple[ObjectRef, ...] = field(default_factory=tuple)
    # The pools the finding is about, when its objects do not say it themselves (pods: `unmanaged-gpu-pod`),
    # so that it is scoped to them (`Readiness.scope_of`); empty: the objects decide.
    pools: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """As JSON and YAML output carry it: objects structured (`ObjectRef.to_dict`)."""
        return {**self.to_record(), "objects": [o.to_dict() for o in self.objects]}

    def to_record(self) -> dict[str, Any]:
        """As a plan file records it: objects as text (`str(ObjectRef)`), the form plan digests cover."""
        return {
            "id": self.id,
            "severity": self.severity.value,
            "message": self.message,
            "objects": [str(o) for o in self.objects],
            "remediation": self.remediation,
        }


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.severity.rank, f.id, tuple(str(o) for o in f.objects), f.message))
