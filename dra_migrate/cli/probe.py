"""`dra-migrate probe`: test a node's hardware contract on the live cluster (logic: dra_migrate/execute/probe.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import driver_name, duration, namespace_name, output_option, print_data, resource_name
from dra_migrate.errors import InputError
from dra_migrate.execute.ops import live_ops
from dra_migrate.execute.probe import ProbeOptions, ProbeResult, run_probe
from dra_migrate.plan.params import CANARY_COMMAND, CANARY_IMAGE, parse_duration
from dra_migrate.render import Document


@click.command()
@click.option("--kubeconfig", type=click.Path(path_type=Path), help="The live cluster (default: as kubectl).")
@click.option("--context", help="The kubeconfig context to use.")
@click.option("--node", required=True, help="The node to probe.")
@click.option("--canary-image", default=CANARY_IMAGE, show_default=True, help="Image of the pod that proves use.")
@click.option("--canary-command", default=CANARY_COMMAND, metavar="CMD",
              help="Shell command line (sh -c) that exits 0 only when it sees its device. "
                   "Default: counts nvidia-smi -L lines.")  # fmt: skip
@click.option(
    "--driver", default="gpu.nvidia.com", show_default=True, callback=driver_name, help="The node's DRA driver."
)
@click.option(
    "--resource",
    default="nvidia.com/gpu",
    show_default=True,
    callback=resource_name,
    help="The node's GPU resource name.",
)
@click.option(
    "--namespace",
    default="default",
    show_default=True,
    callback=namespace_name,
    help="Where the probe's claims and pods go.",
)
@click.option("--timeout", default="3m", show_default=True, callback=duration(), help="How long to wait for the pods.")
@output_option(names="the devices the node publishes")
def probe(
    kubeconfig: Path | None,
    context: str | None,
    node: str,
    canary_image: str,
    canary_command: str,
    driver: str,
    resource: str,
    namespace: str,
    timeout: str,
    output: str,
) -> None:
    """Check that NODE's DRA devices match a claim, refuse one none satisfies, and serve a container.

    Exit 0 when the contract holds, 2 when it does not, 1 on error. Creates a claim pair and two pods
    (and a DeviceClass when none maps --resource) and deletes them; changes nothing else.

    \b
    Examples:
      dra-migrate probe --node gpu-node-1
      dra-migrate probe --node gpu-node-1 -o json --canary-image my.registry/cuda-tools:1
      dra-migrate probe --node gpu-node-1 -o yaml
    """
    if not canary_command.strip():
        raise InputError("empty --canary-command", "give a command line that exits 0 when it sees its device")
    opts = ProbeOptions(
        node=node, image=canary_image, command=canary_command, driver=driver, resource=resource,
        namespace=namespace, timeout_s=float(parse_duration(timeout)),
    )  # fmt: skip
    result = run_probe(live_ops(kubeconfig, context).kube, opts)
    print_data(output, result.to_dict(), lambda: _table(result), lambda: [str(d["name"]) for d in result.devices])
    sys.exit(exitcodes.OK if result.ok else exitcodes.ACTION_NEEDED)


def _table(r: ProbeResult) -> Document:
    doc = Document()
    doc.heading(f"Probe of node {r.node} ({r.driver}, class {r.device_class or '-'})")
    doc.table(
        ["device", "attributes", "capacity"],
        [
            [d["name"], ", ".join(f"{k}={v}" for k, v in sorted(d["attributes"].items())),
             ", ".join(f"{k}={v}" for k, v in sorted(d["capacity"].items())) or "-"]
            for d in r.devices
        ],
        empty="(no devices published)",
    )  # fmt: skip
    doc.heading("Claims")
    doc.table(
        ["claim", "allocated", "detail"],
        [
            ["should match", "yes" if r.match["allocated"] else "no",
             f"devices {', '.join(r.match['devices']) or '-'}; container saw: "
             f"{' | '.join(r.match['containerSaw'].splitlines()) or '-'}"],
            ["should not match", "yes" if r.mismatch["allocated"] else "no", r.mismatch["reason"] or "-"],
        ],
    )  # fmt: skip
    doc.heading("Result")
    doc.line("ok: the node's DRA contract holds" if r.ok else "failed:")
    for p in r.problems:
        doc.line(f"- {p}")
    return doc
