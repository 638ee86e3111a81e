"""JSON Schemas of a plan, generated from the code that reads and writes it (docs/plan-format.md).

Two documents, each versioned by its `$id` (a change that breaks a consumer gets a new one):
  * `plan-file/v2`: the file as `dra-migrate plan` writes it (format 2, `wire.py`), YAML read as JSON;
  * `plan-show/v1`: what `dra-migrate show PLAN -o json` prints (the model's shape, `view.plan_json`):
    every node of a wave in full, the cluster as an object, findings' objects structured. Policies (OPA,
    conftest) are best written against this one: it does not change with the file's compaction.
The column lists, enums and key sets come from `wire.py`, `model.py` and `checks/model.py`, so the
schemas follow the code; tests/unit/test_plan_schema.py checks every fixture's plan against them and
that docs/ holds what this module generates (`python -m dra_migrate.plan.schema docs/`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dra_migrate.checks.model import Severity
from dra_migrate.plan import wire
from dra_migrate.plan.model import Action, InverseAction

FILE_ID = "https://dra-migrate.dev/schemas/plan-file/v2.json"
SHOW_ID = "https://dra-migrate.dev/schemas/plan-show/v1.json"

_STR = {"type": "string"}
_COUNT = {"type": "integer", "minimum": 0}
_OBJ = {"type": "object"}
_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"}
_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_LABEL_VALUE = {"type": ["string", "null"]}


def _closed(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


def _step() -> dict[str, Any]:
    inverse = _closed({"action": {"enum": [a.value for a in InverseAction]}, "restore": _OBJ})
    return _closed({
        "id": _STR, "action": {"enum": [a.value for a in Action]}, "target": _STR, "params": _OBJ,
        "precondition": _STR, "timeout": _DURATION, "inverse": {"anyOf": [{"type": "null"}, inverse]},
    })  # fmt: skip


def _finding(objects: dict[str, Any]) -> dict[str, Any]:
    props = {
        "id": _STR, "severity": {"enum": [s.value for s in Severity]}, "message": _STR,
        "objects": {"type": "array", "items": objects}, "remediation": _STR, "scope": {"enum": ["cluster", "pool"]},
        "pools": {"type": "array", "items": _STR},
    }  # fmt: skip
    return _closed(props, ["id", "severity", "message", "objects", "remediation"])


def _sections(findings: dict[str, Any]) -> dict[str, Any]:
    """What both documents share, section by section."""
    return {
        "tool": _closed({"name": {"const": "dra-migrate"}, "version": _STR}),
        "parameters": _OBJ,
        "applicable": {"type": "boolean"},
        "findings": {"type": "array", "items": findings},
        "summary": _OBJ,
        "review": _OBJ,
        "edited": _closed({"previousDigests": {"type": "array", "items": _DIGEST}}),
        "digests": {"type": "object", "additionalProperties": _DIGEST},
        "digest": _DIGEST,
    }


_PREPARE = _closed({"name": {"const": "prepare"}, "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}})
# replace-pool's stage before the old pool's: bring up and prove the new pool (plan/strategies.py).
_PROVISION = _closed(
    {"name": {"type": "string", "pattern": "^provision-"},
     "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}}
)  # fmt: skip
_STRATEGY = {"enum": ["in-place", "replace-pool"]}
_REQUIRED = ["formatVersion", "tool", "cluster", "parameters", "fingerprint", "applicable", "findings", "summary"]


def file_schema() -> dict[str, Any]:
    """The plan file, format 2."""
    row_types: dict[str, Any] = {
        "node": {"type": "string", "minLength": 1}, "uid": _STR, "wave": _STR, "profile": _COUNT, "gpuPods": _COUNT,
        "otherPods": _COUNT, "expectedDevices": _COUNT, "unschedulable": {"type": "boolean"},
        "labels": {"anyOf": [{"type": "array", "items": _LABEL_VALUE},
                             {"type": "object", "additionalProperties": _LABEL_VALUE}]},
    }  # fmt: skip
    assert tuple(row_types) == wire.NODE_COLUMNS
    annotations = {"anyOf": [{"type": "null"}, {"type": "array", "items": _LABEL_VALUE},
                             {"type": "object", "additionalProperties": _LABEL_VALUE}]}  # fmt: skip
    row = {"type": "array", "prefixItems": [*row_types.values(), annotations], "items": False,
           "minItems": len(row_types), "description": "one node: " + ", ".join(wire.NODE_COLUMNS)
           + f"[, {wire.ANNOTATIONS_COLUMN}]"}  # fmt: skip
    profile = {"type": "object", "properties": {"resources": {"type": "array", "items": _STR},
               "canaryResource": _STR, "placement": _OBJ}, "required": ["resources", "canaryResource"],
               "additionalProperties": False}  # fmt: skip
    wave = _closed({"name": _STR, "evictedPods": _COUNT, "soakAfter": _DURATION})
    same_as = _closed({wire.SAME_AS: {**_STR, "description": "the pool stage that states the same itself"}})
    pool = _closed({
        "name": _STR, "pool": _STR, "resources": {"type": "array", "items": _STR},
        "nodeSteps": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/step"}}, same_as]},
        "waves": {"type": "array", "items": wave}, "labelKeys": {"type": "array", "items": _STR},
        "annotationKeys": {"type": "array", "items": _STR},
        "profiles": {"anyOf": [{"type": "array", "items": profile}, same_as]},
        "nodeColumns": {"enum": [list(wire.NODE_COLUMNS), [*wire.NODE_COLUMNS, wire.ANNOTATIONS_COLUMN]]},
        "nodes": {"type": "array", "items": row}, "strategy": _STRATEGY,
    }, list(wire.POOL_STAGE_KEYS))  # fmt: skip
    obj_row = {"type": "array", "prefixItems": [_STR] * len(wire.OBJECT_COLUMNS), "items": False,
               "minItems": len(wire.OBJECT_COLUMNS)}  # fmt: skip
    fingerprint = _closed(
        {"kubernetesVersion": {"type": ["string", "null"]}, "digest": _DIGEST,
         "objectColumns": {"const": list(wire.OBJECT_COLUMNS)}, "objects": {"type": "array", "items": obj_row}},
    )  # fmt: skip
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": FILE_ID,
        "title": "dra-migrate plan file (format 2)",
        "type": "object",
        "properties": {
            "formatVersion": {"const": wire.WRITES},
            "cluster": _STR,
            "fingerprint": fingerprint,
            **_sections(_finding(_STR)),
            "stages": {"type": "array", "items": {"anyOf": [_PREPARE, _PROVISION, pool]}},
        },
        "required": [*_REQUIRED, "stages", "digests", "digest"],
        "additionalProperties": False,
        "$defs": {"step": _step()},
    }


def show_schema() -> dict[str, Any]:
    """`show -o json`: the model's shape, whatever the file's format."""
    node = {
        "type": "object",
        "properties": {
            "node": {"type": "string", "minLength": 1}, "gpuPods": _COUNT, "otherPods": _COUNT,
            "expectedDevices": _COUNT, "resources": {"type": "array", "items": _STR}, "canaryResource": _STR,
            "original": _closed({"unschedulable": {"type": "boolean"},
                                 "labels": {"type": "object", "additionalProperties": _LABEL_VALUE},
                                 "annotations": {"type": "object", "additionalProperties": _LABEL_VALUE}},
                                ["unschedulable", "labels"]),
            "placement": _OBJ,
        },
        "required": ["node", "gpuPods", "otherPods", "expectedDevices", "resources", "canaryResource", "original"],
        "additionalProperties": False,
    }  # fmt: skip
    wave = _closed({"name": _STR, "evictedPods": _COUNT, "soakAfter": _DURATION,
                    "nodes": {"type": "array", "items": node}})  # fmt: skip
    pool = _closed({
        "name": _STR, "pool": _STR, "resources": {"type": "array", "items": _STR},
        "nodeSteps": {"type": "array", "items": {"$ref": "#/$defs/step"}}, "waves": {"type": "array", "items": wave},
        "strategy": _STRATEGY,
    }, ["name", "pool", "resources", "nodeSteps", "waves"])  # fmt: skip
    ref = _closed({"kind": _STR, "namespace": {"type": ["string", "null"]}, "name": _STR}, ["kind", "name"])
    ref["additionalProperties"] = True
    cluster = {"type": "object", "properties": {"name": _STR, "kubernetesVersion": {"type": ["string", "null"]},
               "source": _STR}, "required": ["name", "source"]}  # fmt: skip
    fp_object = _closed({c: _STR for c in wire.OBJECT_COLUMNS})
    fingerprint = _closed({"kubernetesVersion": {"type": ["string", "null"]}, "digest": _DIGEST,
                           "objects": {"type": "array", "items": fp_object}})  # fmt: skip
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SHOW_ID,
        "title": "dra-migrate show PLAN -o json",
        "type": "object",
        "properties": {
            "formatVersion": {"enum": list(wire.READS)},
            "untrusted": _STR,
            "cluster": cluster,
            "fingerprint": fingerprint,
            **_sections(_finding(ref)),
            "stages": {"type": "array", "items": {"anyOf": [_PREPARE, _PROVISION, pool]}},
        },
        "required": [*_REQUIRED, "stages"],
        "additionalProperties": False,
        "$defs": {"step": _step()},
    }


SCHEMAS = {"plan-file.schema.json": file_schema, "plan-show.schema.json": show_schema}


def render(make: Any) -> str:
    return json.dumps(make(), indent=2) + "\n"


if __name__ == "__main__":  # python -m dra_migrate.plan.schema docs/
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs")
    for name, make in SCHEMAS.items():
        (out / name).write_text(render(make))
