"""`dra-migrate match`: per DeviceClass, which devices on which nodes and pools it selects."""

from __future__ import annotations

import logging
from typing import Any

import click

from dra_migrate.cli.options import (
    SourceOptions,
    load_state,
    output_option,
    pool_label_option,
    print_data,
    source_options,
)
from dra_migrate.inventory.dra import check_driver_name

FORMAT_VERSION = 1
log = logging.getLogger("dra_migrate")


@click.command(
    epilog="""\b
Examples:
  dra-migrate match --snapshot cluster.yaml
  dra-migrate match --kubeconfig ~/.kube/config -o json
"""
)
@source_options
@pool_label_option()
@click.option(
    "--dra-driver",
    default="gpu.nvidia.com",
    show_default=True,
    metavar="NAME",
    help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).",
)
@output_option(names="the DeviceClasses")
def match(source: SourceOptions, pool_labels: tuple[str, ...], dra_driver: str, output: str) -> None:
    """Evaluate existing and proposed DeviceClasses against every GPU node's devices."""
    from dra_migrate.dra.capacity import compile_classes
    from dra_migrate.dra.deviceclasses import generate
    from dra_migrate.dra.match import match_classes
    from dra_migrate.dra.validate import existing_class_selectors, live_selector_warnings
    from dra_migrate.inventory.model import build_inventory
    from dra_migrate.render.match import match_document

    driver = check_driver_name(dra_driver)
    from dra_migrate.cli.progress import Working

    state = load_state(source)
    with Working("matching the classes to the nodes' devices"):
        inv = build_inventory(state, pool_labels, driver)
        proposals = generate(state, inv, driver).proposals
        classes = compile_classes(state, [(p.name, p.extended_resource_name, p.selector) for p in proposals])
        matches = match_classes(state, inv, classes, driver)
    if source.snapshot is None:  # a live cluster: let its API server judge every selector (dry run)
        exprs = existing_class_selectors(state) + [p.selector for p in proposals]
        for line in live_selector_warnings(source.kubeconfig, source.context, exprs):
            log.warning("%s", line)
    report: dict[str, Any] = {
        "formatVersion": FORMAT_VERSION,
        "cluster": inv.cluster_dict(),
        "classes": [m.to_dict() for m in matches],
    }
    print_data(output, report, lambda: match_document(report), lambda: [c["name"] for c in report["classes"]])
