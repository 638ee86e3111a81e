"""A semantic diff of two plans: what a reviewer must look at, summary first, free of noise.

The summary answers the review questions (which stages, waves and nodes came, went or moved; which
parameters, findings, applicability and DeviceClasses changed); the details list every changed value
underneath (mappings and lists of them walked here as deepdiff walks them, lists of scalars deepdiff's).
Noise that is not a change of the plan is left out: digests (they differ whenever anything does),
resourceVersions and the fingerprint digest that covers them (they move with every heartbeat, see
`fingerprint`), and the order of lists whose order means nothing (findings, fingerprint objects, the
nodes of one wave). The order of stages and steps does mean something: it is
summarised and listed as "reordered", once, rather than as a cascade of per-index changes.

Both plans are typed (`plan/model.py`), or plain dicts as `io.load` returns them, which the codec reads;
the same pair always gives the same diff.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from dra_migrate.checks.model import objects_json
from dra_migrate.plan import listdiff
from dra_migrate.plan.actions import Action
from dra_migrate.plan.model import Plan
from dra_migrate.plan.view import plan_cluster

FORMAT_VERSION = 1

# Top-level sections in file order, so details read in the order of the plan file.
_SECTION_ORDER = (
    "formatVersion",
    "tool",
    "cluster",
    "parameters",
    "fingerprint",
    "applicable",
    "findings",
    "summary",
    "stages",
    "edited",
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Detail:
    """One changed value: where (a readable path), how (added, removed, changed, reordered), from, to."""

    path: str
    change: str
    old: Any
    new: Any

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "change": self.change, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class Place:
    """Where a node runs in a plan: its stage and wave."""

    stage: str
    wave: str

    def __str__(self) -> str:
        return f"{self.stage}/{self.wave}"


@dataclass
class PlanDiff:
    a: dict[str, Any]  # {"cluster", "digest"} of each plan, to say what was compared
    b: dict[str, Any]
    stages_added: list[str] = field(default_factory=list)
    stages_removed: list[str] = field(default_factory=list)
    stages_moved: list[dict[str, Any]] = field(default_factory=list)  # {stage, from, to}: 1-based positions
    waves_added: list[dict[str, str]] = field(default_factory=list)  # {stage, wave}
    waves_removed: list[dict[str, str]] = field(default_factory=list)
    nodes_added: list[dict[str, str]] = field(default_factory=list)  # {node, stage, wave}
    nodes_removed: list[dict[str, str]] = field(default_factory=list)
    nodes_moved: list[dict[str, str]] = field(default_factory=list)  # {node, from, to}: "stage/wave"
    parameters: list[dict[str, Any]] = field(default_factory=list)  # {name, old, new}
    findings_added: list[dict[str, Any]] = field(default_factory=list)  # {id, severity, objects}
    findings_removed: list[dict[str, Any]] = field(default_factory=list)
    applicable: dict[str, bool] | None = None  # {old, new} when it changed
    device_classes_added: list[str] = field(default_factory=list)
    device_classes_removed: list[str] = field(default_factory=list)
    device_classes_changed: list[str] = field(default_factory=list)
    details: list[Detail] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """No difference at all (the summary is drawn from the same changes the details list)."""
        return not self.details and not self.summary_count

    @property
    def summary_count(self) -> int:
        return (
            len(self.stages_added)
            + len(self.stages_removed)
            + len(self.stages_moved)
            + len(self.waves_added)
            + len(self.waves_removed)
            + len(self.nodes_added)
            + len(self.nodes_removed)
            + len(self.nodes_moved)
            + len(self.parameters)
            + len(self.findings_added)
            + len(self.findings_removed)
            + (1 if self.applicable else 0)
            + len(self.device_classes_added)
            + len(self.device_classes_removed)
            + len(self.device_classes_changed)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "identical": self.empty,
            "a": self.a,
            "b": self.b,
            "summary": {
                "stages": {"added": self.stages_added, "removed": self.stages_removed, "moved": self.stages_moved},
                "waves": {"added": self.waves_added, "removed": self.waves_removed},
                "nodes": {"added": self.nodes_added, "removed": self.nodes_removed, "moved": self.nodes_moved},
                "parameters": self.parameters,
                "findings": {"added": self.findings_added, "removed": self.findings_removed},
                "applicable": self.applicable,
                "deviceClasses": {
                    "added": self.device_classes_added,
                    "removed": self.device_classes_removed,
                    "changed": self.device_classes_changed,
                },
            },
            "details": [d.to_dict() for d in self.details],
        }


def diff_plans(a: Mapping[str, Any] | Plan, b: Mapping[str, Any] | Plan, *, read: bool = False) -> PlanDiff:
    """The diff of two plans, typed or as `io.load` returns them (then read by the codec): the summary
    from the typed plans, the details from their file shapes (a walk of every value). `read`: both are
    `io.load`'s, whose values its readers checked (`Plan.from_dict`)."""
    ta, tb = _typed(a, read), _typed(b, read)
    out = PlanDiff(a=_identity(ta), b=_identity(tb))
    _stages(ta, tb, out)
    _nodes(ta, tb, out)
    _parameters(ta, tb, out)
    _findings(ta, tb, out)
    if ta.applicable != tb.applicable:
        out.applicable = {"old": ta.applicable, "new": tb.applicable}
    _device_classes(ta, tb, out)
    out.details = details(_shape(a), _shape(b))
    return out


def _typed(plan: Mapping[str, Any] | Plan, read: bool = False) -> Plan:
    return plan if isinstance(plan, Plan) else Plan.from_dict(plan, read=read)


def _shape(plan: Mapping[str, Any] | Plan) -> dict[str, Any]:
    return plan.to_dict() if isinstance(plan, Plan) else dict(plan)


def _identity(plan: Plan) -> dict[str, Any]:
    """What was compared: the plan's cluster object (`view.plan_cluster`) and its digest."""
    return {"cluster": plan_cluster(plan), "digest": plan.digest}


# --- summary ---------------------------------------------------------------------------------------


def _lcs(xs: list[str], ys: list[str]) -> set[str]:
    """The longest common subsequence: the items that kept their relative order."""
    n, m = len(xs), len(ys)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if xs[i] == ys[j] else max(table[i + 1][j], table[i][j + 1])
    keep, i, j = set(), 0, 0
    while i < n and j < m:
        if xs[i] == ys[j]:
            keep.add(xs[i])
            i, j = i + 1, j + 1
        elif table[i + 1][j] > table[i][j + 1]:
            i += 1
        else:  # on a tie keep A's item: the one B brought forward is the one reported moved (as --order does)
            j += 1
    return keep


def _moved(xs: list[str], ys: list[str]) -> list[str]:
    """Items of both lists that changed order: the fewest that, moved, turn one order into the other."""
    common = set(xs) & set(ys)
    xs_c, ys_c = [x for x in xs if x in common], [y for y in ys if y in common]
    keep = _lcs(xs_c, ys_c)
    return [y for y in ys_c if y not in keep]


def _stages(a: Plan, b: Plan, out: PlanDiff) -> None:
    names_a, names_b = a.stage_names, b.stage_names
    out.stages_added = [n for n in names_b if n not in names_a]
    out.stages_removed = [n for n in names_a if n not in names_b]
    out.stages_moved = [
        {"stage": n, "from": names_a.index(n) + 1, "to": names_b.index(n) + 1} for n in _moved(names_a, names_b)
    ]
    waves_a = {(s.name, w.name) for s in a.pool_stages() for w in s.waves}
    waves_b = {(s.name, w.name) for s in b.pool_stages() for w in s.waves}
    order = _stage_rank(names_a, names_b)
    out.waves_added = [{"stage": s, "wave": w} for s, w in sorted(waves_b - waves_a, key=lambda k: _wave_key(k, order))]
    out.waves_removed = [
        {"stage": s, "wave": w} for s, w in sorted(waves_a - waves_b, key=lambda k: _wave_key(k, order))
    ]


def _stage_rank(names_a: list[str], names_b: list[str]) -> dict[str, int]:
    """Stages in B's order, then those only A has: the order summaries and details follow."""
    ranked = names_b + [n for n in names_a if n not in names_b]
    return {n: i for i, n in enumerate(ranked)}


def _wave_key(key: tuple[str, str], order: dict[str, int]) -> tuple[int, tuple[tuple[int, int | str], ...]]:
    return order.get(key[0], len(order)), _natural(key[1])


@functools.lru_cache(maxsize=4096)  # a wave's name is sorted once per node moved (10,000 at fleet size)
def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """wave-2 before wave-10."""
    return tuple((0, int(p)) if p.isdecimal() else (1, p) for p in _DIGITS.split(text) if p)


def _places(plan: Plan) -> dict[str, Place]:
    return {n.node: Place(s.name, w.name) for s, w, n in plan.nodes()}


def _nodes(a: Plan, b: Plan, out: PlanDiff) -> None:
    pa, pb = _places(a), _places(b)
    order = _stage_rank(a.stage_names, b.stage_names)

    def key(item: tuple[str, Place]) -> tuple[Any, ...]:
        node, place = item
        return (*_wave_key((place.stage, place.wave), order), node)

    out.nodes_added = [
        {"node": n, "stage": p.stage, "wave": p.wave} for n, p in sorted(pb.items(), key=key) if n not in pa
    ]
    out.nodes_removed = [
        {"node": n, "stage": p.stage, "wave": p.wave} for n, p in sorted(pa.items(), key=key) if n not in pb
    ]
    out.nodes_moved = [
        {"node": n, "from": str(pa[n]), "to": str(p)} for n, p in sorted(pb.items(), key=key) if n in pa and pa[n] != p
    ]


def _parameters(a: Plan, b: Plan, out: PlanDiff) -> None:
    pa, pb = a.parameters, b.parameters
    names = list(pa) + [k for k in pb if k not in pa]  # the file's order, which is PlanParams' order
    out.parameters = [{"name": k, "old": pa.get(k), "new": pb.get(k)} for k in names if pa.get(k) != pb.get(k)]


def _finding_key(f: dict[str, Any]) -> str:
    """A finding's identity: its id and the objects it concerns (its message may word the same thing anew)."""
    objects = ", ".join(str(o) for o in f.get("objects") or [])
    return f"{f.get('id')}: {objects}" if objects else str(f.get("id"))


def _findings(a: Plan, b: Plan, out: PlanDiff) -> None:
    fa = {_finding_key(f): f for f in a.findings}
    fb = {_finding_key(f): f for f in b.findings}

    def brief(f: dict[str, Any]) -> dict[str, Any]:
        return {"id": f.get("id"), "severity": f.get("severity"), "objects": objects_json(f.get("objects") or [])}

    out.findings_added = [brief(fb[k]) for k in sorted(set(fb) - set(fa))]
    out.findings_removed = [brief(fa[k]) for k in sorted(set(fa) - set(fb))]


def _class_manifests(plan: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stage in plan.stages:
        for step in stage.steps:
            if step.action == Action.CREATE_DEVICECLASS:
                manifest = step.params.get("manifest") or {}
                name = (manifest.get("metadata") or {}).get("name") or step.target.rpartition(" ")[2]
                out[str(name)] = manifest
    return out


def _device_classes(a: Plan, b: Plan, out: PlanDiff) -> None:
    ca, cb = _class_manifests(a), _class_manifests(b)
    out.device_classes_added = sorted(set(cb) - set(ca))
    out.device_classes_removed = sorted(set(ca) - set(cb))
    out.device_classes_changed = sorted(n for n in set(ca) & set(cb) if ca[n] != cb[n])


# --- details ---------------------------------------------------------------------------------------


def _keyed(items: list[Any], key: str) -> dict[str, Any]:
    """A list of identified items as a mapping, so a path names the item rather than its index."""
    out: dict[str, Any] = {}
    for item in items:
        k = str(item.get(key)) if isinstance(item, dict) else str(item)
        while k in out:  # not expected from the builder, but a hand-rebased plan must still diff
            k += "'"
        out[k] = {f: v for f, v in item.items() if f != key} if isinstance(item, dict) else item
    return out


def _view(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan as compared: noise removed, identified lists keyed by their identity."""
    view = {k: v for k, v in plan.items() if k not in ("digests", "digest")}
    fp = view.get("fingerprint")
    if isinstance(fp, dict):
        view["fingerprint"] = {
            **{k: v for k, v in fp.items() if k not in ("digest", "objects")},
            "objects": {
                _object_key(o): {
                    k: v for k, v in o.items() if k not in ("kind", "group", "namespace", "name", "resourceVersion")
                }
                for o in fp.get("objects") or []
            },
        }
    if isinstance(view.get("findings"), list):
        view["findings"] = {_finding_key(f): {k: v for k, v in f.items() if k != "id"} for f in view["findings"]}
    if isinstance(view.get("stages"), list):
        view["stages"] = {str(s.get("name")): _stage_view(s) for s in view["stages"]}
    return view


def _object_key(o: dict[str, Any]) -> str:
    """ "Job.batch ns/name" (kubectl's kind.group): kinds of different API groups never collide."""
    ns, group = o.get("namespace"), o.get("group")
    kind = f"{o.get('kind')}.{group}" if group else str(o.get("kind"))
    return f"{kind} {ns}/{o.get('name')}" if ns else f"{kind} {o.get('name')}"


def _stage_view(stage: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in stage.items() if k != "name"}
    for steps in ("steps", "nodeSteps"):
        if isinstance(out.get(steps), list):
            out[steps] = _keyed(out[steps], "id")
    if isinstance(out.get("waves"), list):
        # Nodes are compared under their stage with their wave as a field, so a node that moves to another
        # wave is one change (its `wave`), not a removal from one wave and an addition to another.
        waves = out["waves"]
        out["waves"] = {str(w.get("name")): {k: v for k, v in w.items() if k not in ("name", "nodes")} for w in waves}
        out["nodes"] = _keyed([{**n, "wave": w.get("name")} for w in waves for n in w.get("nodes") or []], "node")
    return out


def _order_free(path: list[Any]) -> bool:
    # summary.pools repeats the stage order, which the stages' own "reordered" entry already reports.
    return path == ["summary", "pools"]


def _plain(value: Any) -> Any:
    from deepdiff.helper import NotPresent

    return None if isinstance(value, NotPresent) else value


_CHANGE = {
    "values_changed": "changed",
    "type_changes": "changed",
    "dictionary_item_added": "added",
    "dictionary_item_removed": "removed",
    "iterable_item_added": "added",
    "iterable_item_removed": "removed",
    "attribute_added": "added",
    "attribute_removed": "removed",
    "set_item_added": "added",
    "set_item_removed": "removed",
}


def details(a: dict[str, Any], b: dict[str, Any]) -> list[Detail]:
    """Every changed value, in the order of the plan file (sections, then stages in B's order)."""
    va, vb = _differing(_view(a), _view(b))
    walk = _Walk()
    walk.mapping(va, vb, [])
    found = walk.found + _list_changes(walk.lists) + _reorders(a, b)
    order = _stage_rank(_stage_order(a), _stage_order(b))
    found.sort(key=lambda item: _detail_key(item[0], item[1], order))
    return [d for _, d in found]


def _stage_order(doc: dict[str, Any]) -> list[str]:
    """The stage names of a document `details` compares. The details are a structural walk of the two
    documents (any two: tests give it generated ones), so they read its shape; the summary reads the model."""
    return [str(s.get("name")) for s in doc.get("stages") or []]


_Found = list[tuple[list[Any], Detail]]


class _Walk:
    """The changes between two views, as DeepDiff reports them with threshold_to_diff_deeper=0 (a mapping
    is never reported as replaced, always looked into): walked here, since a plan's bulk is mappings and
    lists of mappings (stages, waves, the nodes of a stage, summary.gangs), and DeepDiff's bookkeeping costs
    ~0.2 ms per change (a wave's worth of nodes moved is thousands of changes; issue 29). Lists of scalars,
    which DeepDiff aligns as difflib does, are collected in `lists` for `_list_changes`."""

    def __init__(self) -> None:
        self.found: _Found = []
        self.lists: list[tuple[list[Any], list[Any], list[Any]]] = []  # (path, old, new)

    def mapping(self, a: dict[Any, Any], b: dict[Any, Any], at: list[Any]) -> None:
        for k, old in a.items():
            if k in b:
                self.change(old, b[k], [*at, k])
            else:
                self._add([*at, k], "removed", old, None)
        for k, new in b.items():
            if k not in a:
                self._add([*at, k], "added", None, new)

    def change(self, old: Any, new: Any, path: list[Any]) -> None:
        if isinstance(old, dict) and isinstance(new, dict):
            self.mapping(old, new, path)
        elif isinstance(old, list) and isinstance(new, list):
            if _order_free(path) or (_all_scalars(old) and _all_scalars(new)):
                self.lists.append((path, old, new))
            else:
                self.pairwise(old, new, path)
        elif type(old) is type(new) and old == new:
            return  # equal, though written differently (-0.0 and 0.0): DeepDiff reports nothing either
        else:  # scalars, or a change of type (None to a mapping, a number to a string): one change
            self._add(path, "changed", old, new)

    def pairwise(self, a: list[Any], b: list[Any], at: list[Any]) -> None:
        """A list holding mappings or lists, as DeepDiff compares one in order: item i with item i, and what
        one list has beyond the other's length added or removed (deepdiff 9 `_compare_in_order`)."""
        for i in range(max(len(a), len(b))):
            if i >= len(b):
                self._add([*at, i], "removed", a[i], None)
            elif i >= len(a):
                self._add([*at, i], "added", None, b[i])
            elif not _same(a[i], b[i]):
                self.change(a[i], b[i], [*at, i])

    def _add(self, path: list[Any], change: str, old: Any, new: Any) -> None:
        self.found.append((path, Detail(_path(path), change, old, new)))


def _all_scalars(items: list[Any]) -> bool:
    return not any(isinstance(v, dict | list) for v in items)


def _list_changes(lists: list[tuple[list[Any], list[Any], list[Any]]]) -> _Found:
    """Lists of scalars: each in order as DeepDiff compares it (`listdiff`, without DeepDiff's 0.2 s of
    imports); summary.pools (compared as a set) and lists of other types in one DeepDiff call."""
    found: _Found = []
    rest = []
    for path, old, new in lists:
        if _order_free(path) or not listdiff.handled(old, new):
            rest.append((path, old, new))
            continue
        for change, index, x, y in listdiff.ordered_changes(old, new):
            found.append(([*path, index], Detail(_path([*path, index]), change, x, y)))
    return found + _deepdiff_changes(rest)


def _deepdiff_changes(lists: list[tuple[list[Any], list[Any], list[Any]]]) -> _Found:
    """The changes DeepDiff reports, all lists in one call: each is a key of the mappings compared, so each
    is compared on its own, and the call's fixed cost is paid once."""
    if not lists:
        return []
    from deepdiff import DeepDiff  # imported when such a list differs (0.2 s of imports)

    def where(level_path: list[Any]) -> list[Any]:
        return [*lists[int(level_path[0])][0], *level_path[1:]] if level_path else []

    tree = DeepDiff(
        {str(i): old for i, (_, old, _) in enumerate(lists)},
        {str(i): new for i, (_, _, new) in enumerate(lists)},
        view="tree", threshold_to_diff_deeper=0,
        ignore_order_func=lambda level: _order_free(where(level.path(output_format="list"))),
    )  # fmt: skip
    found: _Found = []
    for report, levels in tree.items():
        change = _CHANGE.get(report)
        if change is None:  # e.g. repetition changes, which only ignore_order reports: not a change here
            continue
        for level in levels:
            segments = where(level.path(output_format="list"))
            found.append((segments, Detail(_path(segments), change, _plain(level.t1), _plain(level.t2))))
    return found


def _same(x: Any, y: Any) -> bool:
    """Equal, type for type (1, 1.0 and true differ), as the canonical JSON shows them."""
    if x is y:
        return True
    try:
        return bool(orjson.dumps(x) == orjson.dumps(y))
    except TypeError:
        return False


def _differing(a: Any, b: Any) -> tuple[Any, Any]:
    """The two views with every mapping entry both hold equally left out, at every depth: DeepDiff then
    walks only what changed (at 2,000 nodes it took 3 s to find two changed waves; issue 29). Paths are
    kept, since only equal entries go."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return a, b
    out_a: dict[Any, Any] = {}
    out_b: dict[Any, Any] = {}
    for k, v in a.items():
        if k not in b:
            out_a[k] = v
        elif not _same(v, b[k]):
            out_a[k], out_b[k] = _differing(v, b[k])
    for k, v in b.items():
        if k not in a:
            out_b[k] = v
    return out_a, out_b


def _reorders(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[list[Any], Detail]]:
    """Lists keyed for the comparison whose order still matters: stages and each stage's steps."""
    out: list[tuple[list[Any], Detail]] = []
    names_a, names_b = _stage_order(a), _stage_order(b)
    if _moved(names_a, names_b):
        out.append((["stages"], Detail("stages", "reordered", names_a, names_b)))
    stages_a = {str(s.get("name")): s for s in a.get("stages") or []}
    for stage in b.get("stages") or []:
        name = str(stage.get("name"))
        if name not in stages_a:
            continue
        for steps in ("steps", "nodeSteps"):
            ids_a = [str(s.get("id")) for s in stages_a[name].get(steps) or []]
            ids_b = [str(s.get("id")) for s in stage.get(steps) or []]
            if _moved(ids_a, ids_b):
                segments = ["stages", name, steps]
                out.append((segments, Detail(_path(segments), "reordered", ids_a, ids_b)))
    return out


def _path(segments: list[Any]) -> str:
    """['stages', 'pool-a', 'waves', 'wave-1', 'nodes', 'n1', 'gpuPods'] -> stages[pool-a].waves[wave-1]...;
    keys with dots or slashes (label keys) stay whole inside brackets."""
    out = ""
    for i, seg in enumerate(segments):
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif isinstance(seg, str) and _IDENT.match(seg):
            out += seg if i == 0 else f".{seg}"
        else:
            out += f"[{seg}]"
    return out


def _detail_key(segments: list[Any], detail: Detail, order: dict[str, int]) -> tuple[Any, ...]:
    head = str(segments[0]) if segments else ""
    section = _SECTION_ORDER.index(head) if head in _SECTION_ORDER else len(_SECTION_ORDER)
    stage = order.get(str(segments[1]), len(order)) if head == "stages" and len(segments) > 1 else -1
    return section, stage, _natural(detail.path), detail.change
