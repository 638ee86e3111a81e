"""`dra-migrate show PLAN`: what a plan will do, summary first."""

from __future__ import annotations

from pathlib import Path

import click

from dra_migrate.cli.options import output_option, plan_argument, print_data


@click.command(
    epilog="""\b
Examples:
  dra-migrate show plans/prod-20261201-101500.yaml
  dra-migrate show plans/prod-20261201-101500.yaml -o wide
  dra-migrate show plans/prod-20261201-101500.yaml -o json | jq '.findings[] | {id, scope, pools}'
  dra-migrate show plans/edited.yaml --allow-edited      # look at a hand edit before rebasing it
  git show main:plans/prod.yaml | dra-migrate show -      # `-`: the plan on stdin
"""
)
@plan_argument(only_reads=True)
@output_option(names="the stages")
@click.option("--allow-edited", is_flag=True, help="Show a hand-edited, not yet rebased plan, marked UNTRUSTED.")
def show(plan_file: Path, output: str, allow_edited: bool) -> None:
    """Show a plan: pools, nodes, waves, disruption and duration, which stages can be applied, then each
    stage with its steps' parameters and its nodes."""
    # Imports stay in the branch that needs them: a module is memory, and `show`'s peak is held to 5x the
    # plan file (issue 29); the streamed paths import no YAML library and no plan model.
    from dra_migrate.cli.progress import Working

    if output in ("table", "wide", "markdown", "name") and not allow_edited:
        # A verified plan's outline, its tables streamed a chunk of rows at a time (plan/stream.py): a
        # 10,000-node plan is never held whole. What does not stream is read by `io.load` (and refused).
        from dra_migrate.plan.stream import outline
        from dra_migrate.render.plan import plan_document

        with Working(f"reading {plan_file}"):
            drawn = outline(plan_file)
        print_data(output, None, lambda: plan_document(drawn), lambda: [st.name for st in drawn.stages])
        return
    if output in ("json", "yaml") and not allow_edited:
        # The data of a verified plan, its tables' rows read again a chunk at a time (plan/stream.py): the
        # JSON of a 10,000-node plan is 7x its file. What does not stream is read by `io.load`.
        from dra_migrate.plan.stream import pieces
        from dra_migrate.render import emit

        with Working(f"reading {plan_file}"):
            text = pieces(plan_file, output)
        if text is not None:
            emit(text)
            return
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.outline import outline_of
    from dra_migrate.plan.view import plan_json
    from dra_migrate.render import Document
    from dra_migrate.render.plan import plan_document

    with Working(f"reading {plan_file}"):
        review = plan_io.load_for_review(plan_file) if allow_edited else plan_io.Review(plan_io.load(plan_file), [])
    plan, banner = review.plan, None if review.trusted else review.banner(plan_file)
    if banner:
        click.echo(banner, err=True)

    def document() -> Document:
        doc = plan_document(outline_of(plan))
        if banner:
            doc.blocks.insert(0, ("line", banner))
        return doc

    data = plan_json(plan) if banner is None else {"untrusted": banner, **plan_json(plan)}
    print_data(output, data, document, lambda: [st["name"] for st in data["stages"]])
