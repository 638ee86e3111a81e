"""`dra-migrate explain RULE`: what a rule means, why it matters, how to fix it, and what it rests on."""

from __future__ import annotations

import difflib
from typing import Any

import click

from dra_migrate.cli.options import output_option, print_data
from dra_migrate.errors import InputError
from dra_migrate.render import Document


def _rule_ids(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """`dra-migrate explain <TAB>` (and kubectl's plugin completion helper): the rule ids that start so."""
    from dra_migrate.checks.catalog import all_rules

    return sorted(r.id for r in all_rules() if r.id.startswith(incomplete))


@click.command(
    epilog="""\b
Examples:
  dra-migrate explain gang-capacity-after
  dra-migrate check --list-rules          # every rule id
"""
)
@click.argument("rule_id", metavar="RULE", shell_complete=_rule_ids)
@output_option(formats=("table", "json", "yaml", "markdown"))
def explain(rule_id: str, output: str) -> None:
    """What RULE (a finding id of `check`) means, why it matters, how to fix it, and its source."""
    from dra_migrate.checks.catalog import all_rules
    from dra_migrate.checks.explain import RULE_DOCS

    rules = {r.id: r for r in all_rules()}
    rule = rules.get(rule_id)
    if rule is None:
        close = difflib.get_close_matches(rule_id, list(rules), n=1)
        raise InputError(
            f"no rule {rule_id!r}" + (f" (did you mean {close[0]}?)" if close else ""),
            "dra-migrate check --list-rules lists them",
        )
    doc = RULE_DOCS.get(rule_id)
    data: dict[str, Any] = {
        "id": rule.id,
        "severities": [s.value for s in rule.severities],
        "checks": rule.summary,
        "when": doc.when if doc else rule.summary,
        "whyItMatters": doc.rests_on if doc else None,
        "fix": doc.fix if doc else None,
    }
    print_data(output, data, lambda: _document(data))


def _document(data: dict[str, Any]) -> Document:
    d = Document()
    d.heading(f"{data['id']} ({', '.join(data['severities'])})")
    for label, key in (("checks", "checks"), ("when", "when"), ("why it matters", "whyItMatters"), ("fix", "fix")):
        if data.get(key):
            d.line(f"{label + ':':16}{data[key]}")
    return d
