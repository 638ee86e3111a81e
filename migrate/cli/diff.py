"""`dra-migrate diff`: two plans compared semantically, or one plan against the cluster now (drift)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from migrate.cli import exitcodes
from migrate.cli.options import SourceOptions, load_state, output_option, source_options
from migrate.errors import InputError
from migrate.plan import io as plan_io
from migrate.plan.diff import diff_plans
from migrate.plan.drift import drift
from migrate.render import Document, emit, to_json, use_color
from migrate.render.diff import drift_document, plan_diff_document


@click.command()
@source_options
@click.argument("plan_a", metavar="PLAN_A", type=click.Path(path_type=Path))
@click.argument("plan_b", metavar="[PLAN_B]", required=False, type=click.Path(path_type=Path))
@output_option(formats=("table", "json", "markdown"))
@click.option("--allow-edited", is_flag=True, help="Compare hand-edited, not yet rebased plans, marked UNTRUSTED.")
def diff(source: SourceOptions, plan_a: Path, plan_b: Path | None, output: str, allow_edited: bool) -> None:
    """Compare PLAN_A with PLAN_B, or PLAN_A with the cluster now (a snapshot or live): exit 2 on differences.

    Without PLAN_B the cluster is read as every command reads it (--snapshot, or --kubeconfig/--context,
    or kubectl's defaults), and the report says what drifted since the plan was made.
    """
    banners: list[str] = []

    def load(path: Path) -> dict[str, Any]:
        if not allow_edited:
            return plan_io.load(path)
        review = plan_io.load_for_review(path)
        if not review.trusted:
            banners.append(review.banner(path))
            click.echo(banners[-1], err=True)
        return review.plan

    a = load(plan_a)
    if plan_b is not None:
        if any((source.snapshot, source.kubeconfig, source.context, source.kubernetes_version, source.templates)):
            raise InputError(
                "diff takes a second plan or a cluster source, not both",
                "dra-migrate diff PLAN_A PLAN_B, or dra-migrate diff PLAN --snapshot FILE",
            )
        result = diff_plans(a, load(plan_b))
        report = result.to_dict()
        changed = not result.empty
        doc: Document | None = None if output == "json" else plan_diff_document(report, output == "markdown")
    else:
        found = drift(a, load_state(source))
        report = found.to_dict()
        changed = not found.holds
        doc = None if output == "json" else drift_document(report, output == "markdown")
    if banners:
        report = {"untrusted": banners, **report}
    text = to_json(report) if doc is None else doc.render(output, color=use_color(sys.stdout))
    emit(("".join(f"{b}\n" for b in banners) + "\n" if banners and doc is not None else "") + text)
    if changed:
        sys.exit(exitcodes.ACTION_NEEDED)
