"""The ignore file: findings an operator has looked at and accepted, with the reason and an expiry.

`.dra-migrate-ignore.yaml` (or `--ignore-file PATH`), a list of acceptances:

    - rule: gang-capacity-after            # a rule id (`dra-migrate check --list-rules`)
      objects: [JobSet ml/llama-ft]        # optional: only findings about these objects ("Kind ns/name")
      reason: migrated at night, when the gang is not running
      expires: 2027-01-31                  # optional: after this day the finding counts again

A finding is accepted when an unexpired acceptance names its rule and, if it lists objects, every object
of the finding. Accepted findings do not count (no exit 2 from `check`, no blocker in `plan`); they are
kept apart as accepted risks — in `check -o json`, and in the plan's review section, which the report
shows. An expired acceptance is said on stderr and accepts nothing. Pure: the caller gives `today`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_migrate.checks.model import Finding, ObjectRef
from dra_migrate.errors import InputError
from dra_migrate.fileio import not_text, text_of

DEFAULT_FILE = ".dra-migrate-ignore.yaml"
_KEYS = {"rule", "objects", "reason", "expires"}
_HINT = "fix the ignore file (docs/ignore-file.md)"


@dataclass(frozen=True)
class Acceptance:
    rule: str
    reason: str
    objects: tuple[str, ...] = ()  # empty: every finding of the rule
    expires: dt.date | None = None
    where: str = ""  # file and entry, for messages

    def covers(self, finding: Finding) -> bool:
        if finding.id != self.rule:
            return False
        return not self.objects or {str(o) for o in finding.objects} <= set(self.objects)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "objects": list(self.objects),
            "reason": self.reason,
            "expires": self.expires.isoformat() if self.expires else None,
        }


@dataclass(frozen=True)
class Accepted:
    finding: Finding
    acceptance: Acceptance

    def to_record(self) -> dict[str, Any]:
        """As a plan's review section records it (objects as text) and check's JSON shows it."""
        a = self.acceptance
        return {**self.finding.to_record(), "reason": a.reason, "expires": a.expires.isoformat() if a.expires else None}


def load_ignore_file(path: Path, known_rules: Iterable[str]) -> list[Acceptance]:
    """The acceptances of `path`; every malformed entry is one line naming the file and the entry."""
    from dra_migrate.cluster.yamlio import load_yaml_documents

    try:
        text = text_of(path.read_bytes())
    except OSError as e:
        raise InputError(f"cannot read ignore file {path}: {e.strerror}", "check --ignore-file") from e
    except UnicodeDecodeError as e:
        raise InputError(f"ignore file {path}: {not_text(e)}", _HINT) from e
    docs = list(load_yaml_documents(text, str(path)))
    entries = docs[0] if docs else []
    if not isinstance(entries, list):
        raise InputError(f"{path}: an ignore file is a list of {{rule, objects, reason, expires}}", _HINT)
    rules = set(known_rules)
    return [_entry(e, f"{path}: entry {i + 1}", rules) for i, e in enumerate(entries)]


def _entry(e: Any, where: str, rules: set[str]) -> Acceptance:
    if not isinstance(e, dict):
        raise InputError(f"{where}: must be a map with rule and reason", _HINT)
    unknown = sorted(set(map(str, e)) - _KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (keys: rule, objects, reason, expires)", _HINT)
    rule, reason = e.get("rule"), e.get("reason")
    if not isinstance(rule, str) or rule not in rules:
        raise InputError(f"{where}: rule {rule!r} is not a rule (dra-migrate check --list-rules)", _HINT)
    if not isinstance(reason, str) or not reason.strip():
        raise InputError(f"{where}: a reason is required: say why the risk is accepted", _HINT)
    objects = e.get("objects") or []
    if not isinstance(objects, list) or not all(isinstance(o, str) for o in objects):
        raise InputError(f'{where}: objects must be a list of "Kind namespace/name"', _HINT)
    expires = e.get("expires")
    if isinstance(expires, str):
        try:
            expires = dt.date.fromisoformat(expires)
        except ValueError as err:
            raise InputError(f"{where}: expires {expires!r} is not a date (YYYY-MM-DD)", _HINT) from err
    if expires is not None and (not isinstance(expires, dt.date) or isinstance(expires, dt.datetime)):
        raise InputError(f"{where}: expires must be a date (YYYY-MM-DD)", _HINT)
    refs = tuple(str(ObjectRef.parse(o.strip())) for o in objects)
    return Acceptance(rule, reason.strip(), refs, expires, where)


def split_accepted(
    findings: Sequence[Finding], acceptances: Sequence[Acceptance], today: dt.date
) -> tuple[list[Finding], list[Accepted], list[Acceptance]]:
    """(findings that count, accepted findings, acceptances that have expired)."""
    live = [a for a in acceptances if a.expires is None or a.expires >= today]
    expired = [a for a in acceptances if a not in live]
    kept: list[Finding] = []
    accepted: list[Accepted] = []
    for f in findings:
        by = next((a for a in live if a.covers(f)), None)
        if by is None:
            kept.append(f)
        else:
            accepted.append(Accepted(f, by))
    return kept, accepted, expired
