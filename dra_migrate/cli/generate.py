"""`dra-migrate generate deviceclasses`: the DeviceClasses that map device-plugin names to DRA devices."""

from __future__ import annotations

import io
import logging

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.dryrun import DRY_RUN_OPTION, refuse_snapshot, server_dry_run
from dra_migrate.cli.options import SourceOptions, load_state, output_option, source_options
from dra_migrate.cli.progress import Working
from dra_migrate.cluster.yamlio import dump_yaml
from dra_migrate.dra.deviceclasses import Generation
from dra_migrate.inventory.dra import check_driver_name
from dra_migrate.render import emit, to_json, to_names

log = logging.getLogger("dra_migrate")


@click.group(epilog="Example:\n\n  dra-migrate generate deviceclasses --snapshot cluster.yaml")
def generate() -> None:
    """Generate manifests."""


@generate.command(
    epilog="""\b
Examples:
  dra-migrate generate deviceclasses --snapshot cluster.yaml > deviceclasses.yaml
  dra-migrate generate deviceclasses --kubeconfig ~/.kube/config --dry-run=server
  dra-migrate generate deviceclasses --snapshot cluster.yaml -o name
"""
)
@source_options
@click.option(
    "--dra-driver",
    default="gpu.nvidia.com",
    show_default=True,
    metavar="NAME",
    help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).",
)
@output_option(formats=("yaml", "json", "name"), default="yaml", names="the DeviceClasses")
@DRY_RUN_OPTION
def deviceclasses(source: SourceOptions, dra_driver: str, output: str, dry_run: str | None) -> None:
    """A YAML stream of DeviceClasses with spec.extendedResourceName, one per device-plugin name in use
    (json: a v1 List of them). --dry-run=server also sends them to the cluster's API server as a dry run:
    nothing is persisted, and a rejected class makes the command exit 1."""
    from dra_migrate.dra.deviceclasses import generate as generate_classes
    from dra_migrate.dra.validate import live_selector_warnings
    from dra_migrate.inventory.model import build_inventory

    driver = check_driver_name(dra_driver)
    if dry_run:
        refuse_snapshot(source.snapshot)
    state = load_state(source)
    with Working("generating the DeviceClasses"):
        gen = generate_classes(state, build_inventory(state, dra_driver=driver), driver)
    accepted = True
    if dry_run:  # every class, whole, as `kubectl apply --server-side --dry-run=server` would send it
        manifests = [("generated", p.manifest()) for p in sorted(gen.proposals, key=lambda p: p.name)]
        accepted = server_dry_run(source.kubeconfig, source.context, manifests)
    elif source.snapshot is None:  # a live cluster: its API server judges the generated selectors (dry run)
        for line in live_selector_warnings(source.kubeconfig, source.context, [p.selector for p in gen.proposals]):
            log.warning("%s", line)
    _emit_classes(gen, output)
    if not accepted:
        raise SystemExit(exitcodes.FAILED)


def _emit_classes(gen: Generation, output: str) -> None:
    if output != "yaml":
        for ng in gen.not_generated:
            log.warning("not generated: %s: %s", ng.extended_resource_name, ng.reason)
        proposals = sorted(gen.proposals, key=lambda p: p.name)
        if output == "name":
            emit(to_names([f"deviceclass.resource.k8s.io/{p.name}" for p in proposals]))
        else:
            emit(to_json({"apiVersion": "v1", "kind": "List", "items": [p.manifest() for p in proposals]}))
        return
    out = io.StringIO()
    for ng in gen.not_generated:
        out.write(f"# not generated: {ng.extended_resource_name}: {ng.reason}\n")
        log.warning("not generated: %s: %s", ng.extended_resource_name, ng.reason)
    for p in sorted(gen.proposals, key=lambda p: p.name):
        out.write(f"# {p.extended_resource_name}: {p.reason}\n")
        out.write(dump_yaml(p.manifest(), explicit_start=True))  # long lines whole: CEL on one line
    emit(out.getvalue())


@generate.command(
    epilog="""\b
Examples:
  dra-migrate generate dependents --snapshot cluster.yaml > dependents.yaml
  dra-migrate generate dependents --kubeconfig ~/.kube/config -o json | jq '.changes[] | select(.gitops)'
"""
)
@source_options
@click.option(
    "--dra-driver",
    default="gpu.nvidia.com",
    show_default=True,
    metavar="NAME",
    help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).",
)
@output_option(formats=("yaml", "json", "name"), default="yaml", names="the changed objects")
def dependents(source: SourceOptions, dra_driver: str, output: str) -> None:
    """The changes to what else depends on the GPU names (ResourceQuotas with their DRA limit, Kueue's
    deviceClassMappings, Volcano Queues with their DeviceClass keys), each headed by the GitOps owner whose
    repository must carry it."""
    from dra_migrate.convert.dependents import dependent_changes
    from dra_migrate.dra.deviceclasses import generate as generate_classes
    from dra_migrate.inventory.model import build_inventory

    state = load_state(source)
    with Working("working out the dependents' changes"):
        driver = check_driver_name(dra_driver)
        inventory = build_inventory(state, dra_driver=driver)
        gen = generate_classes(state, inventory, driver)
        proposals = [(p.name, p.extended_resource_name) for p in gen.proposals]
        changes = dependent_changes(state, proposals, inventory.consumers)
    if output == "name":
        emit(to_names([c.target for c in changes]))
        return
    if output == "json":
        emit(to_json({"changes": [c.to_dict() for c in changes]}))
        return
    out = io.StringIO()
    for c in changes:
        where = f"; change it in the repository of {c.owner}" if c.owner else ""
        out.write(f"---\n# {c.target}: {c.why}{where}\n")
        out.write(dump_yaml(c.manifest))
    emit(out.getvalue() or "# nothing depends on the GPU names\n")
