"""`dra-migrate policy check PLAN --policy DIR`: change-review policies on a plan, by OPA (docs/policy.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import output_option, plan_argument, print_data, read_plan


@click.group(
    epilog="""\b
Examples:
  dra-migrate policy check plans/prod.yaml --policy policies/
  dra-migrate policy examples
"""
)
def policy() -> None:
    """Policies on plans, evaluated by OPA (Rego, package dramigrate: `deny` fails, `warn` informs)."""


@policy.command(
    epilog="""\b
Examples:
  dra-migrate policy check plans/prod.yaml --policy policies/
  dra-migrate policy check plans/prod.yaml --policy "$(dra-migrate policy examples)"
  dra-migrate policy check plans/prod.yaml --policy policies/ -o json | jq .deny
Exit codes: 0 no violation, 2 a `deny` fired, 1 the check could not run.
"""
)
@plan_argument(only_reads=True)
@click.option(
    "--policy",
    "policy_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory of .rego policies (package dramigrate) and their data files.",
)
@output_option(names="the violations")
def check(plan_file: Path, policy_dir: Path, output: str) -> None:
    """Evaluate policies against PLAN as `show PLAN -o json` prints it; exit 2 when a `deny` fires."""
    from dra_migrate.plan.view import plan_json
    from dra_migrate.policy.engine import evaluate
    from dra_migrate.render import Document

    verdict = evaluate(plan_json(read_plan(plan_file)), policy_dir)

    def document() -> Document:
        doc = Document()
        head = "PASS" if verdict.passed else f"FAIL: {len(verdict.deny)} violation(s)"
        doc.blocks.append(("line", f"{head} ({verdict.engine}, policies {policy_dir})"))
        doc.blocks.extend(("line", f"DENY  {m}") for m in verdict.deny)
        doc.blocks.extend(("line", f"WARN  {m}") for m in verdict.warn)
        return doc

    print_data(output, verdict.to_dict(), document, lambda: verdict.deny)
    if not verdict.passed:
        sys.exit(exitcodes.ACTION_NEEDED)


@policy.command(
    epilog="""\b
Examples:
  dra-migrate policy examples
  dra-migrate policy check plans/prod.yaml --policy "$(dra-migrate policy examples)"
"""
)
def examples() -> None:
    """Print the directory of the example policies shipped with dra-migrate."""
    from dra_migrate.policy.engine import EXAMPLES

    click.echo(str(EXAMPLES))
