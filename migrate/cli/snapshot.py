"""`dra-migrate snapshot`: save what the tool reads from a live cluster, for offline use and review."""

from __future__ import annotations

from pathlib import Path

import click

from migrate import __version__
from migrate.cli.options import SourceOptions, source_options
from migrate.cluster.live import LiveCluster, LiveOptions, read_objects
from migrate.cluster.redact import SnapshotFilter
from migrate.cluster.snapshot import snapshot_header, write_snapshot
from migrate.errors import InputError
from migrate.fileio import atomic_writer

_FORMATS = {".jsonl": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}


@click.command()
@source_options
@click.option(
    "-o",
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="File to write: .jsonl (streamed, for large fleets), .json or .yaml.",
)
@click.option("--keep-env", is_flag=True, help="Keep container env values and args (redacted by default).")
def snapshot(source: SourceOptions, out: Path, keep_env: bool) -> None:
    """Write a snapshot of a live cluster (read-only; no Secrets; env values redacted)."""
    if source.snapshot:
        raise InputError("snapshot reads a live cluster", "drop --snapshot and pass --kubeconfig/--context")
    fmt = _FORMATS.get(out.suffix)
    if fmt is None:
        raise InputError(f"cannot tell the format of {out}", "name the file .jsonl, .json or .yaml")
    cluster = LiveCluster(LiveOptions(source.kubeconfig, source.context))
    info, objects = read_objects(cluster, source.template_table())
    kept = SnapshotFilter(keep_env=keep_env, templates=source.template_table()).stream(objects)
    # Written beside the target and renamed: a crash or a refused list never leaves a partial snapshot.
    with atomic_writer(out) as fh:
        n = write_snapshot(fh, snapshot_header(info, __version__), kept, fmt)
    click.echo(f"wrote {n} objects from {info.location} to {out} ({cluster.requests} API requests)", err=True)
