"""The rule catalog: every rule module of checks/, imported so that its rules register (registry.py), and
the checks run over them.

A module of its own so that the imports run one way: a rule module imports the registry's decorator, and
this module imports the rule modules (the registry importing them back made a loop). The modules are
listed, not discovered, so an installed copy runs exactly these; a unit test holds the list to the
package's `rules.py` and `rules_*.py`, so a rule module added and not listed fails it rather than going
unrun (and documented: tools/docs/generate reads this catalog too).
"""

from __future__ import annotations

import importlib

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, sort_findings
from dra_migrate.checks.registry import RULES, Rule

RULE_MODULES = ("rules", "rules_dependents", "rules_gangs", "rules_operator", "rules_platforms", "rules_workloads")


def all_rules() -> list[Rule]:
    """Every rule, registered (its modules imported), in registration order."""
    for name in RULE_MODULES:
        importlib.import_module(f"dra_migrate.checks.{name}")
    return list(RULES.values())


def run_checks(ctx: CheckContext) -> list[Finding]:
    findings: list[Finding] = []
    for r in all_rules():
        for f in r.fn(ctx):
            if f.id != r.id or f.severity not in r.severities:
                raise RuntimeError(f"rule {r.id} reported {f.id}/{f.severity.value}, outside its contract")
            findings.append(f)
    return sort_findings(findings)
