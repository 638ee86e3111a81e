"""`dra-migrate show PLAN`: what a plan will do, summary first."""

from __future__ import annotations

from pathlib import Path

import click

from migrate.cli.options import output_option, print_data


@click.command(
    epilog="""\b
Examples:
  dra-migrate show plans/prod-20261201-101500.yaml
  dra-migrate show plans/prod-20261201-101500.yaml -o wide
  dra-migrate show plans/prod-20261201-101500.yaml -o json | jq '.stages[] | {name, applicable, blockedBy}'
"""
)
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@output_option(names="the stages")
def show(plan_file: Path, output: str) -> None:
    """Show a plan: pools, nodes, waves, disruption and duration, which stages can be applied, then each
    stage with its steps' parameters and its nodes."""
    from migrate.plan import io as plan_io
    from migrate.render.plan import plan_document

    plan = plan_io.load(plan_file)
    print_data(output, plan, lambda: plan_document(plan), lambda: [st["name"] for st in plan["stages"]])
