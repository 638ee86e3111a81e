"""No code outside the plan's codec reads plan data by string key (issue 29, item 2): the typed model
(`plan/model.py`) is what the rest of the package reads.

An AST scan of dra_migrate/ finds every read of a plan field by its key — `x["nodeSteps"]`,
`x.get("gpuPods")`, `"digests" in x`, `x.pop(...)`, `x.setdefault(...)` — outside the codec: `plan/wire.py`
(the file format), `plan/io.py` (reading, writing, digests), `plan/filechecks.py` (what every reading
checks), `plan/stream.py` and `plan/outline.py` (`show`'s streaming reader), `plan/model.py` and
`plan/fields.py` (the typed model's reading of the file's mapping). Two kinds of key are watched:

* PLAN_ONLY: fields only a plan has (no view, report or other document of the tool uses the name), so
  any read of one is a read of plan data;
* SHARED: fields a plan shares with view documents (`status`'s report has `stages` too, a rehearsal
  `waves`): a read of one counts when what is read is named as a plan (`plan[...]`, `body[...]`,
  `sealed[...]`, `self.plan[...]`, `stage.get(...)`).

`DEBT` was what was left to move onto the model, module by module, with the exact count; it is empty
now, so no module outside the codec may read a plan field by key. The scan is proved not to pass
vacuously: it flags each planted form, and every watched key is a key of a real plan.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import Any

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dra_migrate"
CODEC = {
    "plan/wire.py", "plan/io.py", "plan/filechecks.py", "plan/model.py", "plan/fields.py", "plan/outline.py",
    "plan/stream.py",
}  # fmt: skip
PLAN_ONLY = frozenset(
    {"nodeSteps", "soakAfter", "gpuPods", "otherPods", "expectedDevices", "canaryResource", "digests", "labelKeys",
     "nodeColumns", "objectColumns"}
)  # fmt: skip
SHARED = frozenset({"stages", "waves", "nodes", "steps", "digest", "formatVersion", "evictedPods", "fingerprint"})
PLAN_NAMES = frozenset({"plan", "body", "sealed", "original", "edited", "rebased", "stage", "wave"})

# Reads still to move onto the typed model (issue 29), per module, exactly: none are left. Keep it empty:
# a new read of the mapping is a failure, not new debt.
DEBT: dict[str, int] = {}


def _is_plan_named(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in PLAN_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in PLAN_NAMES
    return False


def _key(node: ast.AST) -> tuple[str, ast.expr] | None:
    """(key, the mapping read) of a read by string key, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _text(node.slice) is not None:
        return str(_text(node.slice)), node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _method_key(node) is not None:
        return str(_method_key(node)), node.func.value
    in_test = isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn)
    if in_test and isinstance(node, ast.Compare) and _text(node.left) is not None:
        return str(_text(node.left)), node.comparators[0]
    return None


def _method_key(call: ast.Call) -> str | None:
    """The key of `x.get("k")`, `x.pop("k")`, `x.setdefault("k", ...)`."""
    name = getattr(call.func, "attr", None)
    return _text(call.args[0]) if name in ("get", "pop", "setdefault") and call.args else None


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def string_key_reads(source: str) -> list[tuple[int, str]]:
    """(line, key) of every read of plan data by string key in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        read = _key(node)
        if read is None:
            continue
        key, mapping = read
        if key in PLAN_ONLY or (key in SHARED and _is_plan_named(mapping)):
            found.append((getattr(node, "lineno", 0), key))
    return sorted(found)


def _scan() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in CODEC:
            reads = string_key_reads(path.read_text())
            if reads:
                out[rel] = reads
    return out


def test_the_scan_flags_every_planted_form() -> None:
    planted = """
a = stage["nodeSteps"]
b = node.get("gpuPods")
c = "digests" in doc
d = plan["stages"]
e = body.get("digest")
f = self.plan["waves"]
g = wave.get("nodes")
h = entry.pop("canaryResource")
"""
    assert [k for _, k in string_key_reads(planted)] == [
        "nodeSteps", "gpuPods", "digests", "stages", "digest", "waves", "nodes", "canaryResource",
    ]  # fmt: skip
    # Not plan data: another document's shared key, a write, typed attributes.
    assert string_key_reads('r = report["stages"]\nplan["digest"] = x\nn = plan.stages[0].node_steps\n') == []


def test_the_watched_keys_are_a_real_plans() -> None:
    """Every watched key is a key a plan file or its model really has (a renamed field cannot leave the
    scan watching nothing)."""
    body = build_plan(load_snapshot(ROOT / "fixtures/clusters/demo.yaml"), PlanParams(drain="all")).to_dict()
    sealed = plan_io.seal(body)
    from dra_migrate.plan import wire

    keys: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            keys.update(value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(sealed)
    walk(wire.encode(plan_io.body_of(sealed)))
    assert keys >= (PLAN_ONLY | SHARED), sorted((PLAN_ONLY | SHARED) - keys)


def test_no_module_outside_the_codec_reads_plan_data_by_string_key() -> None:
    found = _scan()
    assert len(list(PACKAGE.rglob("*.py"))) > 100  # the whole package was scanned
    counts = {m: len(r) for m, r in found.items()}
    new = {m: found[m] for m in counts if m not in DEBT}
    assert new == {}, "read the typed model (plan/model.py) instead of the plan's mapping"
    changed = {m: (DEBT[m], counts.get(m, 0)) for m in DEBT if counts.get(m, 0) != DEBT[m]}
    assert changed == {}, "(recorded, found): lower DEBT to what is left (remove a module at 0)"
    assert sum(Counter(counts).values()) == sum(DEBT.values())


CLEARED = (
    "plan/validate.py", "plan/estimate.py", "plan/consistency.py", "plan/diff.py", "plan/drift.py",
    "plan/strategies.py", "plan/derived.py", "plan/view.py", "rehearse/run.py", "rehearse/model.py",
    "render/disruption.py", "report/layout.py",
)  # fmt: skip


def test_a_read_planted_in_a_cleared_module_is_found() -> None:
    """The modules moved onto the model (issue 29) read none, and the scan still sees one planted in each
    of them, in the forms they used to read the mapping by."""
    planted = 'def _planted(stage, plan, wave):\n    return stage.get("nodeSteps"), plan["stages"], wave["soakAfter"]\n'
    for module in CLEARED:
        source = (PACKAGE / module).read_text()
        assert string_key_reads(source) == [], module
        assert sorted(k for _, k in string_key_reads(source + "\n\n" + planted)) == ["nodeSteps", "soakAfter", "stages"]
