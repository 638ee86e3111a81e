"""`dra-migrate check`: can this cluster migrate? Findings with stable ids, capacity before and after."""

from __future__ import annotations

import logging
import sys

import click

from migrate.checks.context import parse_feature_gates
from migrate.checks.run import assess
from migrate.cli import exitcodes
from migrate.cli.options import SourceOptions, load_state, output_option, source_options
from migrate.dra.validate import existing_class_selectors, live_selector_warnings
from migrate.inventory.dra import check_driver_name
from migrate.render import emit, to_json, to_yaml, use_color
from migrate.render.checks import check_document


@click.command()
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
@output_option()
def check(
    source: SourceOptions, pool_labels: tuple[str, ...], feature_gates: tuple[str, ...], dra_driver: str, output: str
) -> None:
    """Readiness findings (exit 2 when any blocker) and capacity per pool before and after."""
    gates = parse_feature_gates(feature_gates)
    driver = check_driver_name(dra_driver)
    state = load_state(source)
    readiness = assess(state, pool_labels=pool_labels, feature_gates=gates, dra_driver=driver)
    if source.snapshot is None:  # a live cluster: its API server judges every selector (dry run)
        proposed = [p.selector for p in readiness.generation.proposals]
        exprs = existing_class_selectors(state) + proposed
        for line in live_selector_warnings(source.kubeconfig, source.context, exprs):
            logging.getLogger("migrate").warning("%s", line)
    report = readiness.to_dict()
    if output == "json":
        emit(to_json(report))
    elif output == "yaml":
        emit(to_yaml(report))
    else:
        emit(check_document(report, markdown=output == "markdown").render(output, color=use_color(sys.stdout)))
    if readiness.blockers:
        sys.exit(exitcodes.ACTION_NEEDED)
