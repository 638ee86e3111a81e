"""What every reading of a plan file checks before it trusts a value, light enough for `show`'s streamed
reading (plan/stream.py): the file's sections and their types, the canonical bytes its digests cover, and
whether `applicable` follows from the findings. `io.py` reads and writes plan files with these; they import
no YAML reader and no model, whose modules are most of `show`'s peak memory at 2,000 nodes (issue 29 holds it
to 5x the plan file).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.plan import wire
from dra_migrate.plan.problems import Problem, _Checker
from dra_migrate.plan.wire import INT_MAX, INT_MIN, REGENERATE, line_of

_SECTIONS = (
    "formatVersion",
    "tool",
    "cluster",
    "clusterIdentity",
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
# clusterIdentity: the cluster the plan was made from (cluster/identity.py); digested with the body.
_OPTIONAL = {"clusterIdentity": dict, "review": dict, "edited": dict, "digests": dict, "digest": str}
_STAGE_ORDER = "stages"  # the digests entry over the order of the stages
SECTIONS, STAGE_ORDER = _SECTIONS, _STAGE_ORDER  # what the streaming reader digests (plan/stream.py)


def canonical(body: dict[str, Any], *, read: bool = False) -> bytes:
    """The bytes a digest covers: sorted keys, lists in order. Refuses NaN/infinity (JSON has none);
    `read`: the values come from a file, whose readers refused those already (`fastyaml`, `lined.check_values`)."""
    if not read:
        _check_finite(body)
    import orjson  # not at import: `show`'s streamed reading digests with the standard library (plan/stream.py)

    try:
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except TypeError as e:  # orjson.JSONEncodeError is a TypeError: an integer beyond 64 bits and the like
        raise InputError(f"a plan holds a value with no canonical form ({e})", REGENERATE) from e


def _digest(value: Any, *, read: bool = False) -> str:
    return "sha256:" + str(wire.sha256(canonical(value, read=read)).hexdigest())


def check_schema(doc: Any, path: Path) -> None:
    """The file's sections and stages as `load` requires them (the streaming reader's, on its skeleton)."""
    _check_schema(doc, path)


def _check_finite(value: Any) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is str:  # most of a plan's values: nothing to check, so asked first
            continue
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"a plan holds {v!r}, which has no canonical form", REGENERATE)
        elif isinstance(v, int) and not isinstance(v, bool) and not INT_MIN <= v <= INT_MAX:
            raise InputError(f"a plan holds the integer {v}, beyond 64 bits: it has no canonical form", REGENERATE)


def _plain(value: Any) -> Any:
    """Round-trip loading gives ruamel's types (CommentedMap, ScalarInt, ScalarBoolean, ...): plain types
    digest and dump like the plan that was written. Iterative: depth is bounded by the parser anyway."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return bool(value) if value is not None else None
    for plain in (int, float, str):
        if isinstance(value, plain):
            return plain(value)
    return value


def _refuse_sealed_by_0_1(doc: Any, path: Path) -> None:
    """A plan sealed as 0.1.0 sealed them: `digest` over the `digests` (no entry for the stage order), where
    this version's covers the whole body. Its steps are not the ones this version writes either (the
    canary's parameters, the per-node steps): `plan --rebase` cannot convert it, so it is refused as what
    it is, naming the command that makes a plan this version runs, never as a hand edit."""
    recorded, top = doc.get("digests"), doc.get("digest")
    if not isinstance(recorded, dict) or _STAGE_ORDER in recorded or not isinstance(top, str):
        return
    try:
        if top != _digest(_plain(recorded), read=True):
            return
    except InputError:
        return
    # Named by its date, not `tool.version`: every build since has said 0.1.0 too (dra_migrate/__init__.py).
    raise InputError(
        f"{path}: a plan made by the dra-migrate 0.1.0 release (2026-11-30), which this build cannot verify or convert",
        "make it again: dra-migrate plan --kubeconfig ... --out NEW.yaml (the nodes its runs migrated are left "
        "out); to roll back what it applied, run rollback with that release",
    )


def _check_schema(doc: Any, path: Path) -> None:
    _refuse_sealed_by_0_1(doc, path)
    for key, typ in _REQUIRED.items():
        if key not in doc:
            raise InputError(f"{path}: missing `{key}`", "regenerate the plan with dra-migrate plan")
        if not isinstance(doc[key], typ) or (typ is int and isinstance(doc[key], bool)):
            raise InputError(f"{path}:{line_of(doc, key)}: `{key}` has the wrong type", "regenerate the plan")
    for key, value in doc.items():
        if key in _REQUIRED:
            continue
        if key not in _OPTIONAL:
            raise InputError(f"{path}:{line_of(doc, key)}: unknown section `{key}`", REGENERATE)
        if not isinstance(value, _OPTIONAL[key]):
            raise InputError(f"{path}:{line_of(doc, key)}: `{key}` has the wrong type", REGENERATE)
    if doc["formatVersion"] not in wire.READS:
        raise InputError(
            f"{path}:{line_of(doc, 'formatVersion')}: plan format {doc['formatVersion']}, "
            f"this tool reads {', '.join(map(str, wire.READS))}",
            "regenerate the plan with this version of dra-migrate",
        )
    names = set()
    for i, stage in enumerate(doc["stages"]):
        where = f"{path}:{line_of(doc['stages'], i)}"
        if not isinstance(stage, dict) or not isinstance(stage.get("name"), str):
            raise InputError(f"{where}: a stage needs a `name`", "regenerate the plan")
        if stage["name"] in names:
            raise InputError(f"{where}: stage {stage['name']} appears twice", "regenerate the plan")
        names.add(stage["name"])
        if "pool" in stage and not isinstance(stage.get("waves"), list):
            raise InputError(f"{where}: stage {stage['name']} needs `waves`", "regenerate the plan")


def body_of(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k not in ("digests", "digest")}


# --- applicable -----------------------------------------------------------------------------------------

# Blockers about single nodes: the plan leaves those nodes out rather than refusing the whole fleet. Kept
# here, beside the applicability it decides, so that reading a plan does not import the inventory.
NODE_SCOPED = frozenset(
    {
        "kubelet-version-unsupported",
        "dra-plugin-placement-unknown",
        "device-plugin-placement-unknown",
        "dynamic-mig-unpredicted",
        "mig-layout-unpredicted",
        "gpu-devices-unmatched",
        "gpu-operator-node-busy",
        "container-runtime-cdi",
    }
)


def _applicable(findings: Any) -> bool:
    """As `build` decides it: no blocker but those that only leave their own nodes out (`NODE_SCOPED`)."""
    return not any(
        isinstance(f, Mapping) and f.get("severity") == "blocker" and f.get("id") not in NODE_SCOPED
        for f in findings or []
    )


def _derived(c: _Checker, applicable: Any, findings: Any) -> None:
    """`applicable` must follow from the findings (apply trusts it)."""
    if applicable != _applicable(findings):
        c.add(("applicable",), "does not follow from the findings (any blocker: false)", "dra-migrate plan --rebase")


def applicable_problems(plan: Any) -> list[Problem]:
    """Only whether `applicable` follows from the findings: what every load checks (apply trusts it).
    Takes `io.load`'s mapping too: every load asks, and reading the findings needs no model."""
    c = _Checker()
    if not isinstance(plan, Mapping):  # the typed Plan (plan/model.py), not imported here
        _derived(c, plan.applicable, plan.findings)
    else:
        _derived(c, plan.get("applicable"), plan.get("findings"))
    return c.problems
