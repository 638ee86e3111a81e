"""Plan files: YAML written with ruamel.yaml, digested, and refused when edited by hand.

Each top-level section and each stage carries its own digest (`digests`), and `digest` covers them
all, so an edit is refused with the line of the first section that no longer matches. Digests are
sha256 over the section's canonical JSON (sorted keys): formatting and comments do not count.
`rebase` re-digests a plan that was edited on purpose, after validating it, and records the edit.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import orjson
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError

from migrate.cluster.yamlio import dumper
from migrate.errors import InputError
from migrate.fileio import write_text_atomic
from migrate.plan.model import FORMAT_VERSION

_SECTIONS = (
    "formatVersion",
    "tool",
    "cluster",
    "parameters",
    "fingerprint",
    "applicable",
    "findings",
    "summary",
    "review",
)
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "formatVersion": int,
    "tool": dict,
    "cluster": str,
    "parameters": dict,
    "fingerprint": dict,
    "applicable": bool,
    "findings": list,
    "summary": dict,
    "stages": list,
}


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def section_digests(body: dict[str, Any]) -> dict[str, str]:
    out = {k: _digest(body.get(k)) for k in _SECTIONS if k in body}
    if "edited" in body:
        out["edited"] = _digest(body["edited"])
    for stage in body.get("stages") or []:
        out[f"stages/{stage.get('name')}"] = _digest(stage)
    return out


def seal(body: dict[str, Any]) -> dict[str, Any]:
    """The plan with its digests: per section, and one over all of them."""
    digests = section_digests(body)
    return {**body, "digests": digests, "digest": _digest(digests)}


def dumps(plan: dict[str, Any]) -> str:
    yaml = dumper()
    buf = io.StringIO()
    buf.write("# dra-migrate plan: review it, then `dra-migrate apply` it. Edits are refused unless rebased.\n")
    yaml.dump(plan, buf)
    return buf.getvalue()


def write(plan: dict[str, Any], path: Path) -> None:
    """Atomically: a crash never leaves half a plan."""
    write_text_atomic(path, dumps(plan))


def _line(node: Any, key: str | int | None = None) -> int:
    """1-based line of a key in a round-trip-loaded mapping or sequence (0 when unknown)."""
    try:
        if isinstance(node, CommentedMap) and key is not None:
            return int(node.lc.key(key)[0]) + 1
        if isinstance(node, CommentedSeq) and isinstance(key, int):
            return int(node.lc.item(key)[0]) + 1
        return int(node.lc.line) + 1
    except (AttributeError, KeyError, TypeError):
        return 0


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    # Round-trip loading gives ruamel's scalar subclasses (ScalarInt, ScalarBoolean, ...): plain types
    # digest and dump like the plan that was written.
    if isinstance(value, bool) or value is None:
        return value
    for plain in (int, float, str):
        if isinstance(value, plain):
            return plain(value)
    return value


def load(path: Path, *, verify: bool = True) -> dict[str, Any]:
    """Read and validate a plan; refuse a malformed or edited one with its first problem and line."""
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read plan {path}: {e.strerror}", "check the path") from e
    yaml = YAML(typ="rt")
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(f"{where}: not a valid plan file ({e.problem})", "regenerate it with dra-migrate plan") from e
    if not isinstance(doc, CommentedMap):
        raise InputError(f"{path}: not a plan (expected a mapping)", "regenerate it with dra-migrate plan")
    _check_schema(doc, path)
    if verify:
        _check_digests(doc, path)
    return dict(_plain(doc))


def _check_schema(doc: CommentedMap, path: Path) -> None:
    for key, typ in _REQUIRED.items():
        if key not in doc:
            raise InputError(f"{path}: missing `{key}`", "regenerate the plan with dra-migrate plan")
        if not isinstance(doc[key], typ) or (typ is int and isinstance(doc[key], bool)):
            raise InputError(f"{path}:{_line(doc, key)}: `{key}` has the wrong type", "regenerate the plan")
    if doc["formatVersion"] != FORMAT_VERSION:
        raise InputError(
            f"{path}:{_line(doc, 'formatVersion')}: plan format {doc['formatVersion']}, "
            f"this tool reads {FORMAT_VERSION}",
            "regenerate the plan with this version of dra-migrate",
        )
    names = set()
    for i, stage in enumerate(doc["stages"]):
        where = f"{path}:{_line(doc['stages'], i)}"
        if not isinstance(stage, dict) or not isinstance(stage.get("name"), str):
            raise InputError(f"{where}: a stage needs a `name`", "regenerate the plan")
        if stage["name"] in names:
            raise InputError(f"{where}: stage {stage['name']} appears twice", "regenerate the plan")
        names.add(stage["name"])
        if "pool" in stage and not isinstance(stage.get("waves"), list):
            raise InputError(f"{where}: stage {stage['name']} needs `waves`", "regenerate the plan")


def _check_digests(doc: CommentedMap, path: Path) -> None:
    if not isinstance(doc.get("digests"), dict) or not isinstance(doc.get("digest"), str):
        raise InputError(f"{path}: the plan has no digest", "regenerate it, or `dra-migrate plan --rebase` it")
    body = _plain({k: v for k, v in doc.items() if k not in ("digests", "digest")})
    expected = section_digests(body)
    recorded = _plain(doc["digests"])
    for key, value in expected.items():
        if recorded.get(key) != value:
            line = _stage_line(doc, key) if key.startswith("stages/") else _line(doc, key)
            raise InputError(
                f"{path}:{line}: the plan was edited after it was made (`{key}` does not match its digest)",
                "regenerate it, or if the edit is intended: dra-migrate plan --rebase " + str(path),
            )
    extra = sorted(set(recorded) - set(expected))
    if extra:
        raise InputError(
            f"{path}:{_line(doc, 'digests')}: the plan was edited (`{extra[0]}` was removed)",
            "regenerate it, or dra-migrate plan --rebase it",
        )
    if doc["digest"] != _digest(recorded):
        raise InputError(f"{path}:{_line(doc, 'digest')}: the plan's digest does not match", "regenerate it")


def _stage_line(doc: CommentedMap, key: str) -> int:
    name = key.split("/", 1)[1]
    for i, stage in enumerate(doc["stages"]):
        if isinstance(stage, dict) and stage.get("name") == name:
            return _line(doc["stages"], i)
    return _line(doc, "stages")


def body_of(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k not in ("digests", "digest")}


def rebase(path: Path) -> dict[str, Any]:
    """Validate an intentionally edited plan, re-digest it, and record that it was edited."""
    plan = load(path, verify=False)
    previous = plan.get("digest")
    body = body_of(plan)
    history = list((body.get("edited") or {}).get("previousDigests") or [])
    if previous and previous not in history:
        history.append(previous)
    body["edited"] = {"previousDigests": history}
    return seal(body)
