"""The rule registry: adding a rule is one function with this decorator, in a module imported below."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, Severity, sort_findings

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


def all_rules() -> list[Rule]:
    """Every rule, registered (its modules imported), in registration order."""
    from dra_migrate.checks import (  # noqa: F401  (registers every rule)
        rules,
        rules_dependents,
        rules_gangs,
        rules_operator,
        rules_platforms,
        rules_workloads,
    )

    return list(RULES.values())


def run_checks(ctx: CheckContext) -> list[Finding]:
    all_rules()

    findings: list[Finding] = []
    for r in RULES.values():
        for f in r.fn(ctx):
            if f.id != r.id or f.severity not in r.severities:
                raise RuntimeError(f"rule {r.id} reported {f.id}/{f.severity.value}, outside its contract")
            findings.append(f)
    return sort_findings(findings)
