"""The rule registry: adding a rule is one function with this decorator, in a rule module of the catalog
(catalog.py imports them and runs the checks)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, Severity

RuleFn = Callable[[CheckContext], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    id: str
    severities: tuple[Severity, ...]  # what it can report (documented in README)
    summary: str
    fn: RuleFn


RULES: dict[str, Rule] = {}


def rule(rule_id: str, *severities: Severity, summary: str) -> Callable[[RuleFn], RuleFn]:
    def register(fn: RuleFn) -> RuleFn:
        if rule_id in RULES:
            raise RuntimeError(f"rule {rule_id} registered twice")
        RULES[rule_id] = Rule(rule_id, severities, summary, fn)
        return fn

    return register
