"""Plan files: YAML in format 2 (`wire.py`), digested, and refused when edited by hand.

The only code that reads or writes a plan file. What is read and written in memory is the model's dict
(`Plan.to_dict()` shape); `wire.encode`/`wire.decode` turn it into the file's compact form and back,
and the digests cover the file's form. Reading is libyaml's (`fastyaml.py`) on every path, a refusal's
line included (`fastyaml.load_lined`); ruamel's round-trip parser runs only when the fast reader suspects
an anchor or a tag (or the like) and must let the strict one decide.

`digest` is sha256 over the canonical serialisation of the whole plan body as the file holds it
(everything but the digests): JSON with sorted mapping keys, lists in their order — so the order of stages, waves, nodes
and steps counts, and formatting and comments do not. `digests` holds one digest per top-level
section, per stage and of the stage order, only so that an edit is refused with the line of the first
section that no longer matches. Loading is strict about what YAML could smuggle past a digest: NaN
and infinities (JSON has neither: they would digest as null), duplicate keys, anchors and aliases,
merge keys, explicit tags, non-string keys, dates and binary values are refused with their line; the
tool writes none of them. `rebase` re-digests a plan that was edited on purpose, after validating what
it means (`dra_migrate.plan.validate`), and records the edit.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dra_migrate.errors import InputError
from dra_migrate.fileio import not_text, read_inflated, text_of, write_text_atomic
from dra_migrate.gcpause import paused_gc
from dra_migrate.plan import fastyaml, wire
from dra_migrate.plan.derived import applicable_problems
from dra_migrate.plan.filechecks import (
    _SECTIONS,
    _STAGE_ORDER,
    _check_finite,
    _check_schema,
)
from dra_migrate.plan.filechecks import (  # what every reading checks (light: the streamed reader's too)
    SECTIONS as SECTIONS,
)
from dra_migrate.plan.filechecks import (
    STAGE_ORDER as STAGE_ORDER,
)
from dra_migrate.plan.filechecks import (
    _digest as _digest,
)
from dra_migrate.plan.filechecks import (
    _plain as _plain,
)
from dra_migrate.plan.filechecks import (
    body_of as body_of,
)
from dra_migrate.plan.filechecks import (
    canonical as canonical,
)
from dra_migrate.plan.filechecks import (
    check_schema as check_schema,
)
from dra_migrate.plan.model import Plan
from dra_migrate.plan.problems import Problem
from dra_migrate.plan.wire import REGENERATE, line_of

if TYPE_CHECKING:
    from dra_migrate.plan.diff import PlanDiff  # deepdiff (and pydantic) load only for a rebase: see rebase_checked
    from dra_migrate.plan.fastyaml import LinedMap
    from dra_migrate.plan.lined import Lined as StrictLined

    Lined = StrictLined | LinedMap  # a document with its lines, from either reader


def section_digests(body: dict[str, Any], *, read: bool = False) -> dict[str, str]:
    """Per section, per stage and of the stage order: what the error message names."""
    if not read:
        _check_finite(body)
    out = {k: _digest(body.get(k), read=True) for k in _SECTIONS if k in body}
    if "edited" in body:
        out["edited"] = _digest(body["edited"], read=True)
    stages = body.get("stages") or []
    out[_STAGE_ORDER] = _digest([s.get("name") if isinstance(s, dict) else s for s in stages], read=True)
    for stage in stages:
        if isinstance(stage, dict):
            out[f"stages/{stage.get('name')}"] = _digest(stage, read=True)
    return out


def seal(body: dict[str, Any] | Plan) -> dict[str, Any]:
    """The plan (typed, or the model's dict) with the digests of its file form: per section (for
    messages), and one over the whole body, as the model's dict. Always the format `wire.encode` writes."""
    with paused_gc(freeze=False):  # as `dumps`: the file's form is garbage once digested (0.05 s at 10,000 nodes)
        return _sealed_forms(body)[0]


def _sealed_forms(body: dict[str, Any] | Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The sealed plan as the model's dict (`seal`), and as the file holds it (what `dumps` writes of it):
    the file's form is the one digested, so a caller that writes the plan need not encode it again."""
    if isinstance(body, Plan):
        body = body.to_dict()
    body = {**body_of(body), "formatVersion": wire.WRITES}
    encoded = wire.encode(body)
    seals = {"digests": section_digests(encoded), "digest": _digest(encoded, read=True)}
    return {**body, **seals}, {**encoded, **seals}


def seal_plan(plan: Plan) -> Plan:
    """The typed plan `build_plan` makes, with the digests of its file form (`seal`)."""
    return _sealed(plan, seal(plan))


def write_sealed(plan: Plan, path: Path) -> Plan:
    """Seal the typed plan `build_plan` makes and write it (atomically); the sealed plan, typed. The
    model's mapping is made once, for both the digests and the file."""
    with paused_gc(freeze=False):  # as `seal` and `dumps`
        sealed, file_form = _sealed_forms(plan)
        # The form just digested is the one written: encoding the plan again (`write`) was a tenth of `plan`'s
        # own work on a fleet of many pools, and gave the same text (tests/unit/test_plan_write_once.py).
        text = _file_text(file_form)
    write_text_atomic(path, text)
    return _sealed(plan, sealed)


def _sealed(plan: Plan, sealed: dict[str, Any]) -> Plan:
    return replace(plan, format_version=wire.WRITES, digests=sealed["digests"], digest=sealed["digest"])


_HEADER = "# dra-migrate plan: review it, then `dra-migrate apply` it. Edits are refused unless rebased.\n"


def dumps(plan: dict[str, Any] | Plan) -> str:
    """The file's text of a sealed plan (typed, or the model's dict with its digests)."""
    if isinstance(plan, Plan):
        plan = plan.to_dict()
    with paused_gc(freeze=False):  # the emitter's nodes: rescanning them made writing grow faster than the plan
        doc = wire.encode(body_of(plan))
        doc.update({k: plan[k] for k in ("digests", "digest") if k in plan})
        return _file_text(doc)


def _file_text(file_form: dict[str, Any]) -> str:
    """The file's text of a plan in its file form (`wire.encode`, digests added)."""
    return _HEADER + fastyaml.dump(file_form)


def write(plan: dict[str, Any] | Plan, path: Path) -> None:
    """Atomically: a crash never leaves half a plan."""
    write_text_atomic(path, dumps(plan))


# --- reading ---------------------------------------------------------------------------------------


# The most a plan file may hold (decompressed): a 10,000-node plan is ~2.7 MB, one of format 1 was 14 MB. Past
# this it is no plan, and a gzip file of a few KB that inflates without end (a gzip bomb) is refused at this
# much memory, not when the memory is gone.
PLAN_MAX_BYTES = 64 << 20


def _text(path: Path) -> str:
    """The plan file's text. A gzip-compressed plan (by its magic, whatever its name) is read as the file it
    holds: the in-cluster Job gets its plan from a ConfigMap, which the API server caps at 1 MiB
    (`ValidateConfigMap`), a plan of some 3,500 GPU nodes; gzip takes one to ~80 bytes a node
    (docs/in-cluster.md). The digests are of the plan's content, so the compressed file verifies as the plain."""
    try:
        data = read_inflated(path, PLAN_MAX_BYTES)
    except (EOFError, zlib.error) as e:
        raise InputError(f"{path}: a damaged or cut-short gzip file ({e})", "compress the plan again") from e
    except OSError as e:
        raise InputError(f"cannot read plan {path}: {e.strerror or e}", "check the path") from e
    if data is None:
        raise InputError(f"{path}: more than {PLAN_MAX_BYTES >> 20} MiB (decompressed): no plan", REGENERATE)
    try:
        return text_of(data)  # a reviewer's editor may save it with a byte order mark, or as UTF-16
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a plan file ({not_text(e)} at byte {e.start})", REGENERATE) from e


def _strict(text: str, path: Path) -> Lined:
    """The round-trip reading, which knows every key's line: refuses with the line of the first problem."""
    from dra_migrate.plan import lined  # ruamel: loaded only when a line or the strict reader is needed

    return lined.strict(text, path)


@dataclass
class _File:
    """A plan file as read: its text and its document (plain values, the file's form)."""

    path: Path
    text: str
    doc: dict[str, Any]
    _lined: Lined | None = None

    @property
    def lined(self) -> Lined:
        """The same document with line numbers (parsed only when a refusal needs a line): libyaml's marks
        (`fastyaml.load_lined`, 1 s for a 10,000-node plan) where the fast reader read the file, else the
        strict reader's (ruamel's round trip: 16 s and 240 MB there). Both answer `line_of` alike
        (tests/unit/test_fastyaml_lines.py)."""
        if self._lined is None:
            self._lined = fastyaml.load_lined(self.text) or _strict(self.text, self.path)
        return self._lined

    def check(self, fn: Callable[[Any], None]) -> None:
        """Run a check on the document; when it refuses, run it on the lined document so that the
        refusal names its line (the two hold the same values: `fastyaml.load`)."""
        try:
            fn(self.doc)
        except InputError:
            fn(self.lined)
            raise


def _read(path: Path) -> _File:
    text = _text(path)
    try:
        doc = fastyaml.load(text)
    except fastyaml.NotAMapping:
        raise InputError(f"{path}: not a plan (expected a mapping)", REGENERATE) from None
    if doc is None:  # something the fast reader leaves to the strict one: it refuses it, or reads it
        lined = _strict(text, path)
        file = _File(path, text, _plain(lined), lined)
    else:
        file = _File(path, text, doc)
    file.check(lambda d: _check_schema(d, path))
    return file


def _decode(file: _File) -> dict[str, Any]:
    try:
        plan: dict[str, Any] = wire.decode(file.doc)
    except wire.WireError as e:
        line = _path_line(file.lined, e.at)
        where = f"{file.path}:{line}" if line else str(file.path)
        raise InputError(f"{where}: {e.message}", e.hint) from e
    return plan


def load(path: Path, *, verify: bool = True) -> dict[str, Any]:
    """Read and validate a plan; refuse a malformed or edited one with its first problem and line.
    Returns the model's dict (`Plan.from_dict` reads it), with the file's digests.

    `verify=False` skips the digests (for `rebase` and review of an edited plan), never the rest."""
    file = _read(path)
    if verify:
        file.check(lambda d: _check_digests(d, path))
    plan = _decode(file)
    if verify:
        # The digest already refuses any edit; of a plan sealed anew by hand, every load refuses a false
        # `applicable` (apply trusts it). The whole meaning is rebase's and review's to check
        # (`validate`), and the executor's preflight checks every step before the cluster is contacted.
        _refuse(applicable_problems(plan), file, "the plan is inconsistent")
    return plan


@dataclass(frozen=True)
class Edit:
    """A section of a plan that no longer matches its recorded digest."""

    section: str  # "parameters", "stages/pool-a", "stages" (their order), "digests" (none recorded)
    line: int

    def __str__(self) -> str:
        return f"{self.section} (line {self.line})" if self.line else self.section


@dataclass(frozen=True)
class Review:
    """A plan to look at, edited or not: `edits` lists the sections whose digests no longer match."""

    plan: dict[str, Any]
    edits: list[Edit]

    @property
    def trusted(self) -> bool:
        return not self.edits

    def banner(self, path: Path) -> str:
        """One line that cannot be missed above an edited plan's display."""
        sections = ", ".join(str(e) for e in self.edits[:6]) + (" ..." if len(self.edits) > 6 else "")
        return (
            f"EDITED, NOT REBASED, UNTRUSTED: {path} changed since it was made ({sections}); shown as "
            f"`plan --rebase` would accept it (summary and applicability recomputed); apply refuses it "
            f"until it is rebased"
        )


def load_for_review(path: Path) -> Review:
    """A plan as `plan --rebase` would accept it, edited or not, for `show`/`diff --allow-edited`:
    refused only when rebase would refuse it; `edits` says what changed. Never for apply."""
    # Imported here: what an edit means is checked only for review and rebase (~0.1 s of imports that
    # every load, `diff` and `apply` among them, would otherwise pay).
    from dra_migrate.plan.validate import recompute, validate

    file = _read(path)
    found = edits(file.doc)
    if found:
        found = edits(file.lined)  # with their lines, for the banner
    plan = _decode(file)
    if not found:
        _refuse(validate(plan), file, "the plan is inconsistent")
        return Review(plan, [])
    _refuse(validate(body_of(plan), derived=False), file, "the edited plan is not one rebase would accept")
    return Review({**recompute(body_of(plan)), **{k: plan[k] for k in ("digests", "digest") if k in plan}}, found)


def _body(doc: Any) -> dict[str, Any]:
    body = {k: v for k, v in doc.items() if k not in ("digests", "digest")}
    return body if type(doc) is dict else _plain(body)  # the strict reader's types, made plain


def edits(doc: Any) -> list[Edit]:
    recorded = doc.get("digests")
    body = _body(doc)
    if not isinstance(recorded, dict) or not isinstance(doc.get("digest"), str):
        return [Edit("digests", line_of(doc, "digests") if "digests" in doc else 0)]
    recorded = _plain(recorded)
    expected = section_digests(body, read=True)
    out = [Edit(key, _section_line(doc, key)) for key, value in expected.items() if recorded.get(key) != value]
    out.extend(Edit(key, line_of(doc, "digests")) for key in recorded if key not in expected)
    if not out and doc["digest"] != _digest(body, read=True):
        out.append(Edit("digest", line_of(doc, "digest")))
    return out


def _section_line(doc: Any, key: str) -> int:
    if key.startswith("stages/"):
        return _stage_line(doc, key)
    return line_of(doc, key)


def _check_digests(doc: Any, path: Path) -> None:
    found = edits(doc)
    if not found:
        return
    first = found[0]
    hint = "regenerate it, or if the edit is intended: dra-migrate plan --rebase " + str(path)
    if first.section == "digests":
        raise InputError(f"{path}: the plan has no digest", "regenerate it, or `dra-migrate plan --rebase` it")
    if first.section == "digest":
        raise InputError(f"{path}:{first.line}: the plan's digest does not match", "regenerate it")
    if first.section == _STAGE_ORDER:
        what = "the stages were reordered"
    elif first.section in section_digests(_body(doc), read=True):
        what = f"`{first.section}` does not match its digest"
    else:
        what = f"`{first.section}` was removed"
    raise InputError(f"{path}:{first.line}: the plan was edited after it was made ({what})", hint)


def _stage_line(doc: Any, key: str) -> int:
    name = key.split("/", 1)[1]
    for i, stage in enumerate(doc["stages"]):
        if isinstance(stage, dict) and stage.get("name") == name:
            return line_of(doc["stages"], i)
    return line_of(doc, "stages")


def _problem_line(doc: Lined, problem: Problem) -> int:
    """The line of the deepest part of a problem's path that the document still has (a node of the
    model is a row of its stage's table in format 2: `wire.wire_path`)."""
    return _path_line(doc, wire.wire_path(tuple(problem.path), doc))


def _path_line(doc: Lined, path: tuple[str | int, ...]) -> int:
    node: Any = doc
    line = 0
    for seg in path:
        in_map = isinstance(node, dict) and seg in node
        in_seq = isinstance(node, list) and isinstance(seg, int) and 0 <= seg < len(node)
        if not (in_map or in_seq):
            break
        line = line_of(node, seg) or line
        node = node[seg]
    return line


def _refuse(problems: list[Problem], file: _File, what: str) -> None:
    if not problems:
        return
    p = problems[0]
    line = _problem_line(file.lined, p)
    where = f"{file.path}:{line}" if line else str(file.path)
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    raise InputError(f"{where}: {what}: {p}{more}", p.hint or REGENERATE)


# --- rebase ----------------------------------------------------------------------------------------


@dataclass
class Rebased:
    """What `plan --rebase` makes of an edited plan: the sealed plan, the sections the edit touched,
    and a semantic diff — against the original plan when one is given, else against the file as edited
    (then it shows what rebase itself recomputed: applicability, summary, pods evicted per wave)."""

    plan: dict[str, Any]
    edited: list[Edit]
    diff: PlanDiff
    against_original: bool
    # A stage was edited and no original was given: its nodes' recorded `original` values (what rollback
    # restores) could not be compared with the plan's as made (apply compares them with the live nodes).
    originals_unchecked: bool = False


def rebase_checked(path: Path, against: Path | None = None) -> Rebased:
    """Validate an intentionally edited plan by what it means, recompute what follows from its stages
    and findings, re-digest it, and record that it was edited."""
    # Imported here: deepdiff (and the pydantic it imports) costs ~0.2 s at start-up, which every command
    # that reads a plan (show, status, apply) would pay for a diff only rebase makes; validate and
    # consistency as in load_for_review.
    from dra_migrate.plan.consistency import contradictions, deviceclasses_dropped, originals_changed
    from dra_migrate.plan.derived import gangs_followed
    from dra_migrate.plan.diff import diff_plans
    from dra_migrate.plan.validate import recompute, validate

    file = _read(path)
    touched = edits(file.lined)  # rebase reports the edited sections with their lines
    edited = _decode(file)
    previous = edited.get("digest") if isinstance(edited.get("digest"), str) else None
    original = load(against) if against is not None else None
    # What only the state knew follows the nodes from the original: a gang's waves (plan/derived.py).
    body = recompute(gangs_followed(original, body_of(edited)) if original is not None else body_of(edited))
    _refuse(validate(body), file, "refusing to rebase")
    _refuse(contradictions(body), file, "refusing to rebase")  # parts that no longer agree (soak, ...)
    history = [str(d) for d in (body.get("edited") or {}).get("previousDigests") or []]
    if previous and previous not in history:
        history.append(previous)
    body["edited"] = {"previousDigests": history}
    sealed = seal(body)
    if original is not None:
        if original["digest"] not in history:
            raise InputError(
                f"{against} is not the plan {path} was edited from (its digest {original['digest'][:19]}... "
                "is not among the edited plan's previous digests)",
                "give the plan the edit started from, or leave out --against",
            )
        _refuse(originals_changed(original, body) + deviceclasses_dropped(original, body), file, "refusing to rebase")
        diff = diff_plans(original, sealed)
    else:
        diff = diff_plans(edited, sealed)
    unchecked = against is None and any(e.section.startswith("stages/") for e in touched)
    return Rebased(sealed, touched, diff, against is not None, unchecked)


def rebase(path: Path) -> dict[str, Any]:
    """Validate an intentionally edited plan, re-digest it, and record that it was edited."""
    return rebase_checked(path).plan
