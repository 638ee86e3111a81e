"""`--dry-run=server` for `generate deviceclasses` and `convert`: the live API server's verdict on what
would be applied, nothing persisted (dra_migrate/cluster/dryrun.py)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from dra_migrate.cluster.snapshot import list_items
from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.errors import InputError

DRY_RUN_OPTION = click.option(
    "--dry-run",
    "dry_run",
    type=click.Choice(["server"]),
    help="server: send every object to the live API server as a server-side dry run (dryRun=All, nothing "
    "persisted); a rejection is an error (exit 1).",
)


def objects_of(text: str, where: str) -> list[tuple[str, dict[str, Any]]]:
    """The API objects of a YAML/JSON manifest stream (a `List`'s items one by one)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for doc in load_yaml_documents(text, where):
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            continue
        items = list_items(doc, where)
        out.extend((where, i) for i in items) if items is not None else out.append((where, doc))
    return out


def server_dry_run(kubeconfig: Path | None, context: str | None, objects: Iterable[tuple[str, dict[str, Any]]]) -> bool:
    """Send the objects; one stderr line per rejection and a summary. True when the server accepted all."""
    from dra_migrate.cluster.dryrun import dry_run
    from dra_migrate.cluster.live import LiveCluster, LiveOptions
    from dra_migrate.render import terminal_safe

    items = list(objects)
    cluster = LiveCluster(LiveOptions(kubeconfig, context))
    verdicts = dry_run(cluster, items)
    rejected = [v for v in verdicts if not v.accepted]
    for v in rejected:
        click.echo(f"error: {terminal_safe(v.describe())}", err=True)  # quotes the server's or a webhook's message
    click.echo(
        f"server dry run on {cluster.server}: {len(verdicts) - len(rejected)} of {len(verdicts)} object(s) accepted,"
        f" {len(rejected)} rejected; nothing persisted",
        err=True,
    )
    return not rejected


def refuse_snapshot(snapshot: Any) -> None:
    if snapshot:
        raise InputError(
            "--dry-run=server sends the objects to a live API server", "drop --snapshot; pass --kubeconfig/--context"
        )
