"""`dra-migrate show PLAN`: what a plan will do, summary first."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from migrate.plan import io as plan_io
from migrate.render import emit, to_json, use_color
from migrate.render.plan import plan_document


@click.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True)
def show(plan_file: Path, output: str) -> None:
    """Show a plan: pools, nodes, waves, disruption and duration, then each stage."""
    plan = plan_io.load(plan_file)
    if output == "json":
        emit(to_json(plan))
    else:
        emit(plan_document(plan).render(output, color=use_color(sys.stdout)))
