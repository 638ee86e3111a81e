"""The changes between two ordered lists of scalars, exactly as DeepDiff 8.6 to 9.2 reports them, without DeepDiff.

`diff`'s details are DeepDiff's (docs/diff.md); most of a plan is walked here already (plan/diff.py `_Walk`),
and lists of scalars were left to one DeepDiff call. Importing DeepDiff costs 0.12-0.2 s, and on the issue's
fleet (2,000 nodes, 50 pods each) a re-plan with another --max-unavailable moves many gangs' wave lists,
so every such `diff` paid it: 2.39x loading both plans against the 2x asked (issue 29, bench/plan_scale.py).

What DeepDiff does with two lists of hashable scalars, in order (deepdiff 9.1 diff.py
`_diff_iterable_in_order`, `_diff_ordered_iterable_by_difflib`, `_diff_by_forming_pairs_and_comparing_one_by_one`;
model.py `TreeResult.mutual_add_removes_to_become_value_changes`, `DiffLevel.path`):
  1. difflib's opcodes (autojunk off): a `replace` run is compared position by position, a `delete` run
     reported removed (at its old index), an `insert` run added (at its new index);
  2. if that made more than one report, the lists compared position by position from the start, and that
     answer taken when it has no more reports than the first;
  3. a removal and an addition at the same index are one change, from the removed value to the added one.
A pair of scalars differs when they are not one object and differ in type or in value (1, 1.0 and True
differ). Two lists holding more than one numeric type (1, 1.0, True) are left to DeepDiff itself: difflib
aligns by `==`, under which they are one value, and DeepDiff 9.2 reports such an aligned pair changed where
9.1 and 8.6 report nothing (a plan's lists hold names: only a hand-made view mixes them).
`tests/unit/test_plan_diff.py` holds this against DeepDiff itself on random lists, so a DeepDiff upgrade
that changes its answer fails there.
"""

from __future__ import annotations

import difflib
from itertools import zip_longest
from typing import Any

# Exact types: anything else (a timestamp a YAML loader made, a subclass) is left to DeepDiff itself.
SCALARS = (str, int, float, bool, type(None))

# (change, index, old, new); change is removed, added, changed or moved (DeepDiff's iterable_item_moved,
# which counts in step 2 and is never shown).
Report = tuple[str, int, Any, Any]

_MISSING = object()


_NUMERIC = frozenset((int, float, bool))


def handled(old: list[Any], new: list[Any]) -> bool:
    """Whether `ordered_changes` answers for these two lists: scalars of the exact types above, and at most one
    numeric type among both (see the module's docstring)."""
    types = {type(v) for v in (*old, *new)}
    return types.issubset(SCALARS) and len(types & _NUMERIC) <= 1


def ordered_changes(old: list[Any], new: list[Any]) -> list[Report]:
    """DeepDiff's changes from `old` to `new`; the index is the one DeepDiff's path names."""
    reports = _by_difflib(old, new)
    if len(reports) > 1:
        by_position = _by_position(old, new, 0, len(old), 0, len(new))
        if len(reports) >= len(by_position):
            reports = by_position
    return [r for r in _merge_mutual(reports) if r[0] != "moved"]


def _by_difflib(old: list[Any], new: list[Any]) -> list[Report]:
    out: list[Report] = []
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "replace":
            out += _by_position(old, new, a1, a2, b1, b2)
        elif tag == "delete":
            out += [("removed", a1 + k, x, None) for k, x in enumerate(old[a1:a2])]
        elif tag == "insert":
            out += [("added", b1 + k, None, y) for k, y in enumerate(new[b1:b2])]
    return out


def _by_position(old: list[Any], new: list[Any], a1: int, a2: int, b1: int, b2: int) -> list[Report]:
    """Item k of one run against item k of the other. A removal is named by its old index, an addition by
    its new one (DeepDiff's path follows the side that holds the item), a change by the old."""
    out: list[Report] = []
    for k, (x, y) in enumerate(zip_longest(old[a1:a2], new[b1:b2], fillvalue=_MISSING)):
        i, j = a1 + k, b1 + k
        if y is _MISSING:
            out.append(("removed", i, x, None))
        elif x is _MISSING:
            out.append(("added", j, None, y))
        elif i != j and x == y:
            out.append(("moved", i, x, y))
        elif _differs(x, y):
            out.append(("changed", i, x, y))
    return out


def _differs(x: Any, y: Any) -> bool:
    return x is not y and (type(x) is not type(y) or bool(x != y))


def _merge_mutual(reports: list[Report]) -> list[Report]:
    added = {r[1]: r for r in reports if r[0] == "added"}
    removed = {r[1]: r for r in reports if r[0] == "removed"}
    both = added.keys() & removed.keys()
    if not both:
        return reports
    kept = [r for r in reports if not (r[0] in ("added", "removed") and r[1] in both)]
    return kept + [("changed", i, removed[i][2], added[i][3]) for i in sorted(both)]
