"""`dra-migrate inventory`: what uses GPUs through the device plugin, and the GPU, operator and DRA state."""

from __future__ import annotations

import sys

import click

from migrate.cli.options import SourceOptions, load_state, output_option, source_options
from migrate.inventory.model import build_inventory
from migrate.render import emit, to_json, to_yaml, use_color
from migrate.render.inventory import inventory_document


@click.command()
@source_options
@click.option(
    "--pool-label",
    "pool_labels",
    multiple=True,
    metavar="KEY",
    help="Node label that names a pool (repeatable; tried before the cloud defaults).",
)
@output_option()
def inventory(source: SourceOptions, pool_labels: tuple[str, ...], output: str) -> None:
    """List GPU consumers, GPU nodes and pools, the NVIDIA stack and DRA state."""
    inv = build_inventory(load_state(source), pool_labels).to_dict()
    if output == "json":
        emit(to_json(inv))
    elif output == "yaml":
        emit(to_yaml(inv))
    else:
        emit(inventory_document(inv).render(output, color=use_color(sys.stdout)))
