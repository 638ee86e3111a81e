"""`dra-migrate inventory`: what uses GPUs through the device plugin, and the GPU, operator and DRA state."""

from __future__ import annotations

import shlex

import click

from dra_migrate.cli.options import (
    SourceOptions,
    load_state,
    next_step,
    output_option,
    pool_label_option,
    print_data,
    source_args,
    source_options,
)


@click.command(
    epilog="""\b
Examples:
  dra-migrate inventory --snapshot cluster.yaml
  dra-migrate inventory --kubeconfig ~/.kube/config --context prod -o wide
  dra-migrate inventory --snapshot cluster.yaml -o json | jq '.consumers[].name'
"""
)
@source_options
@pool_label_option("Node label that names a pool (repeatable; tried before the cloud defaults).")
@output_option(names="the GPU consumers (kind/namespace/name)")
def inventory(source: SourceOptions, pool_labels: tuple[str, ...], output: str) -> None:
    """List GPU consumers, GPU nodes and pools, the NVIDIA stack and DRA state."""
    from dra_migrate.cli.progress import Working
    from dra_migrate.inventory.model import build_inventory
    from dra_migrate.render.inventory import consumer_names, inventory_document

    state = load_state(source)
    with Working("building the inventory"):
        inv = build_inventory(state, pool_labels).to_dict()
    print_data(output, inv, lambda: inventory_document(inv), lambda: consumer_names(inv))
    labels = "".join(f" --pool-label {shlex.quote(k)}" for k in pool_labels)
    next_step(f"dra-migrate check {source_args(source)}{labels}".replace("  ", " "))
