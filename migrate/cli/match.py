"""`dra-migrate match`: per DeviceClass, which devices on which nodes and pools it selects."""

from __future__ import annotations

from typing import Any

import click

from migrate.cli.options import SourceOptions, load_state, output_option, print_data, source_options

FORMAT_VERSION = 1


@click.command(
    epilog="""\b
Examples:
  dra-migrate match --snapshot cluster.yaml
  dra-migrate match --kubeconfig ~/.kube/config -o json
"""
)
@source_options
@click.option("--pool-label", "pool_labels", multiple=True, metavar="KEY", help="Node label that names a pool.")
@output_option(names="the DeviceClasses")
def match(source: SourceOptions, pool_labels: tuple[str, ...], output: str) -> None:
    """Evaluate existing and proposed DeviceClasses against every GPU node's devices."""
    from migrate.dra.capacity import compile_classes
    from migrate.dra.deviceclasses import generate
    from migrate.dra.match import match_classes
    from migrate.inventory.model import build_inventory
    from migrate.render.match import match_document

    state = load_state(source)
    inv = build_inventory(state, pool_labels)
    proposals = generate(state, inv).proposals
    classes = compile_classes(state, [(p.name, p.extended_resource_name, p.selector) for p in proposals])
    matches = match_classes(state, inv, classes)
    report: dict[str, Any] = {
        "formatVersion": FORMAT_VERSION,
        "cluster": inv.cluster_dict(),
        "classes": [m.to_dict() for m in matches],
    }
    print_data(output, report, lambda: match_document(report), lambda: [c["name"] for c in report["classes"]])
