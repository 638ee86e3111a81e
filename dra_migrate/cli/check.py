"""`dra-migrate check`: can this cluster migrate? Findings with stable ids, capacity before and after."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import (
    SourceOptions,
    load_state,
    next_step,
    output_option,
    print_data,
    source_args,
    source_options,
)
from dra_migrate.dra.validate import existing_class_selectors, live_selector_warnings
from dra_migrate.inventory.dra import check_driver_name


@click.command(
    epilog="""\b
Examples:
  dra-migrate check --snapshot cluster.yaml
  dra-migrate check --kubeconfig ~/.kube/config -o json | jq '.findings[] | select(.severity=="blocker")'
  dra-migrate check --snapshot cluster.yaml --feature-gate DRAExtendedResource=true || echo "blockers"

Exit codes: 0 no blockers, 1 error, 2 blockers found.
"""
)
@source_options
@click.option("--pool-label", "pool_labels", multiple=True, metavar="KEY", help="Node label that names a pool.")
@click.option(
    "--feature-gate",
    "feature_gates",
    multiple=True,
    metavar="NAME=BOOL",
    help="Declare a gate as the cluster runs it (e.g. DRAExtendedResource=true on 1.34-1.35).",
)
@click.option(
    "--dra-driver",
    default="gpu.nvidia.com",
    show_default=True,
    metavar="NAME",
    help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).",
)
@output_option(names="the ids of the findings")
def check(
    source: SourceOptions, pool_labels: tuple[str, ...], feature_gates: tuple[str, ...], dra_driver: str, output: str
) -> None:
    """Readiness findings (exit 2 when any blocker) and capacity per pool before and after."""
    from dra_migrate.checks.context import parse_feature_gates
    from dra_migrate.checks.run import assess
    from dra_migrate.render.checks import check_document

    gates = parse_feature_gates(feature_gates)
    driver = check_driver_name(dra_driver)
    state = load_state(source)
    readiness = assess(state, pool_labels=pool_labels, feature_gates=gates, dra_driver=driver)
    if source.snapshot is None:  # a live cluster: its API server judges every selector (dry run)
        exprs = existing_class_selectors(state) + [p.selector for p in readiness.generation.proposals]
        for line in live_selector_warnings(source.kubeconfig, source.context, exprs):
            logging.getLogger("dra_migrate").warning("%s", line)
    report: dict[str, Any] = {**readiness.to_dict(), "cluster": readiness.inventory.cluster_dict()}
    print_data(
        output,
        report,
        lambda: check_document(report, markdown=output == "markdown"),
        lambda: list(dict.fromkeys(f["id"] for f in report["findings"])),
    )
    args = source_args(source) + "".join(f" --pool-label {k}" for k in pool_labels)
    args += "".join(f" --feature-gate {g}" for g in feature_gates)
    if readiness.blockers:
        pools = sorted({c.pool for c in readiness.capacity if not c.fits})
        hint = f" --exclude-pools {','.join(pools)}" if pools else ""
        next_step(f"resolve the blockers, or plan around them: dra-migrate plan {args}{hint}")
        sys.exit(exitcodes.ACTION_NEEDED)
    next_step(f"dra-migrate plan {args}")
