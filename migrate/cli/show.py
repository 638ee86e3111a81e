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
@click.option("--allow-edited", is_flag=True, help="Show a hand-edited, not yet rebased plan, marked UNTRUSTED.")
def show(plan_file: Path, output: str, allow_edited: bool) -> None:
    """Show a plan: pools, nodes, waves, disruption and duration, then each stage."""
    review = plan_io.load_for_review(plan_file) if allow_edited else plan_io.Review(plan_io.load(plan_file), [])
    plan, banner = review.plan, None if review.trusted else review.banner(plan_file)
    if banner:
        click.echo(banner, err=True)
    if output == "json":
        emit(to_json(plan if banner is None else {"untrusted": banner, **plan}))
    else:
        emit((f"{banner}\n\n" if banner else "") + plan_document(plan).render(output, color=use_color(sys.stdout)))
