"""`dra-migrate diff`: two plans compared semantically, or one plan against the cluster now (drift)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import (
    SourceOptions,
    load_state,
    output_option,
    plan_argument,
    print_data,
    refuse_stdin_twice,
    source_options,
)
from dra_migrate.cli.progress import Working
from dra_migrate.errors import InputError


@click.command(
    epilog="""\b
Examples:
  dra-migrate diff plans/old.yaml plans/new.yaml
  dra-migrate diff plans/prod.yaml --kubeconfig ~/.kube/config      # drift since the plan was made
  dra-migrate diff plans/prod.yaml --snapshot today.jsonl -o json || echo "changed"

Exit codes: 0 no differences, 1 error, 2 differences or drift found.
"""
)
@source_options
@plan_argument("plan_a", "PLAN_A", only_reads=True)
@plan_argument("plan_b", "[PLAN_B]", only_reads=True, required=False)
@output_option(names="what differs (plan paths, or drifted objects)")
@click.option("--allow-edited", is_flag=True, help="Compare hand-edited, not yet rebased plans, marked UNTRUSTED.")
@click.option(
    "--allow-other-cluster", is_flag=True, help="Compare plans or a plan and a cluster of two different clusters."
)
def diff(
    source: SourceOptions, plan_a: Path, plan_b: Path | None, output: str, allow_edited: bool, allow_other_cluster: bool
) -> None:
    """Compare PLAN_A with PLAN_B, or PLAN_A with the cluster now (a snapshot or live): exit 2 on differences.

    Without PLAN_B the cluster is read as every command reads it (--snapshot, or --kubeconfig/--context,
    or kubectl's defaults), and the report says what drifted since the plan was made.
    """
    from dra_migrate.cluster.identity import refuse_other_cluster
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.diff import diff_plans
    from dra_migrate.plan.model import plan_identity
    from dra_migrate.render import Document
    from dra_migrate.render.diff import drift_document, drift_names, plan_diff_document, plan_diff_names

    refuse_stdin_twice(plan_a, plan_b, source.snapshot)
    banners: list[str] = []

    def load(path: Path) -> dict[str, Any]:
        with Working(f"reading {path}"):
            if not allow_edited:
                return plan_io.load(path)
            review = plan_io.load_for_review(path)
        if not review.trusted:
            banners.append(review.banner(path))
            click.echo(banners[-1], err=True)
        return review.plan

    def marked(doc: Document) -> Document:
        for b in reversed(banners):
            doc.blocks.insert(0, ("line", b))
        return doc

    a = load(plan_a)
    if plan_b is not None:
        if any((source.snapshot, source.kubeconfig, source.context, source.kubernetes_version, source.templates)):
            raise InputError(
                "diff takes a second plan or a cluster source, not both",
                "dra-migrate diff PLAN_A PLAN_B, or dra-migrate diff PLAN --snapshot FILE",
            )
        b = load(plan_b)
        refuse_other_cluster(
            plan_identity(a), f"plan {plan_a}", plan_identity(b), f"plan {plan_b}", allow=allow_other_cluster
        )
        result = diff_plans(a, b, read=not allow_edited)  # both as `io.load` read them: values checked
        report = result.to_dict()
        changed = not result.empty
        print_data(
            output,
            {"untrusted": banners, **report} if banners else report,
            lambda: marked(plan_diff_document(report, output == "markdown")),
            lambda: plan_diff_names(report),
        )
    else:
        # Here, not above: the cluster model it reads a state into (~20 ms of imports) is no part of a diff
        # of two plans, held to 2x loading them (bench/plan_scale.py).
        from dra_migrate.plan.drift import drift

        state = load_state(source)
        with Working("comparing the plan with the cluster"):
            found = drift(a, state, allow_other_cluster=allow_other_cluster)
        report = found.to_dict()
        changed = not found.holds
        print_data(
            output,
            {"untrusted": banners, **report} if banners else report,
            lambda: marked(drift_document(report, output == "markdown")),
            lambda: drift_names(report),
        )
    if changed:
        sys.exit(exitcodes.ACTION_NEEDED)
