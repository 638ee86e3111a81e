"""`dra-migrate snapshot`: save what the tool reads from a live cluster, for offline use and review."""

from __future__ import annotations

from pathlib import Path

import click

from dra_migrate import __version__
from dra_migrate.cli.options import SourceOptions, source_options
from dra_migrate.cli.progress import TerminalProgress, counted
from dra_migrate.cluster.live import LiveCluster, LiveOptions, read_objects
from dra_migrate.cluster.redact import SnapshotFilter
from dra_migrate.cluster.snapshot import snapshot_header, write_snapshot
from dra_migrate.errors import InputError
from dra_migrate.fileio import GZIP_SUFFIX, atomic_writer, format_suffix, gzip_writer

_FORMATS = {".jsonl": "jsonl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}


@click.command(
    epilog="""\b
Examples:
  dra-migrate snapshot --kubeconfig ~/.kube/config --context prod --out prod.jsonl
  dra-migrate snapshot --out cluster.yaml && dra-migrate inventory --snapshot cluster.yaml
"""
)
@source_options
@click.option(
    "--out",
    "out",
    type=click.Path(path_type=Path),
    help="File to write: .jsonl (streamed, for large fleets), .json or .yaml; .gz after it compresses.  [required]",
)
@click.option("-o", "--output", "output_flag", hidden=True, help="Refused: -o is a format everywhere else.")
@click.option("--keep-env", is_flag=True, help="Keep container env values and args (redacted by default).")
def snapshot(source: SourceOptions, out: Path | None, output_flag: str | None, keep_env: bool) -> None:
    """Write a snapshot of a live cluster (read-only; no Secrets; env values redacted)."""
    if output_flag is not None:
        raise InputError(
            f"snapshot has no -o/--output (got {output_flag!r})", f"name the file with --out {output_flag}"
        )
    if out is None:
        raise click.UsageError("Missing option '--out'.")
    if source.snapshot:
        raise InputError("snapshot reads a live cluster", "drop --snapshot and pass --kubeconfig/--context")
    fmt = _FORMATS.get(format_suffix(out))
    if fmt is None:
        raise InputError(
            f"cannot tell the format of {out}", "name the file .jsonl, .json or .yaml (.gz to compress it)"
        )
    cluster = LiveCluster(LiveOptions(source.kubeconfig, source.context))
    info, objects = read_objects(cluster, source.template_table())
    objects = counted(objects, TerminalProgress())  # a large fleet takes a while: say so on a terminal
    kept = SnapshotFilter(keep_env=keep_env, templates=source.template_table()).stream(objects)
    # Written beside the target and renamed: a crash or a refused list never leaves a partial snapshot.
    # With --keep-env the file holds env values (API keys, passwords): readable by its owner only.
    with atomic_writer(out, private=keep_env) as fh, gzip_writer(fh, out.suffix == GZIP_SUFFIX) as z:
        n = write_snapshot(z, snapshot_header(info, __version__), kept, fmt)
    click.echo(f"wrote {n} objects from {info.location} to {out} ({cluster.requests} API requests)", err=True)
