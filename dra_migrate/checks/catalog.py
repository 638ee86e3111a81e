"""The rule catalog: every rule module of checks/, imported so that its rules register (registry.py), and
the checks run over them.

A module of its own so that the imports run one way: a rule module imports the registry's decorator, and
this module imports the rule modules (the registry importing them back made a loop). The modules are
imported by name, not discovered, so an installed copy runs exactly these and tools that draw imports
(import-linter, farm-studio) see them; a unit test holds them to the package's `rules.py` and `rules_*.py`,
so a rule module added and not imported here fails it rather than going unrun (and undocumented:
tools/docs/generate reads this catalog too).
"""

from __future__ import annotations

from types import ModuleType

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, sort_findings
from dra_migrate.checks.registry import RULES, Rule


def rule_modules() -> tuple[ModuleType, ...]:
    """Every rule module, imported (importing one registers its rules). Imported when first asked, not at
    the top: the rules pull in the inventory and the CEL engine, and importing the catalog (`run.py` does,
    and every module that imports it) then costs nothing until the rules are wanted."""
    from dra_migrate.checks import (
        rules,
        rules_classes,
        rules_dependents,
        rules_gangs,
        rules_health,
        rules_jobs,
        rules_operator,
        rules_platforms,
        rules_runtime,
        rules_workloads,
    )

    return (
        rules,
        rules_classes,
        rules_dependents,
        rules_gangs,
        rules_health,
        rules_jobs,
        rules_operator,
        rules_platforms,
        rules_runtime,
        rules_workloads,
    )


def all_rules() -> list[Rule]:
    """Every rule, registered, in registration order."""
    rule_modules()
    return list(RULES.values())


def run_checks(ctx: CheckContext) -> list[Finding]:
    findings: list[Finding] = []
    for r in all_rules():
        for f in r.fn(ctx):
            if f.id != r.id or f.severity not in r.severities:
                raise RuntimeError(f"rule {r.id} reported {f.id}/{f.severity.value}, outside its contract")
            findings.append(f)
    return sort_findings(findings)
