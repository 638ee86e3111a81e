"""`dra-migrate convert`: rewrite manifests' device-plugin GPU requests as DRA ResourceClaimTemplates."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.dryrun import DRY_RUN_OPTION, objects_of, server_dry_run
from dra_migrate.cli.options import class_names
from dra_migrate.cli.progress import Working
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import (
    FileResult,
    check_output_paths,
    convert_files,
    convert_text,
    decode_manifest,
    find_files,
    write_all,
)
from dra_migrate.convert.rewrite import MAX_SUBREQUESTS, ConvertOptions
from dra_migrate.convert.sharing import INTERVALS, STRATEGIES, sharing_of
from dra_migrate.dra.cel import SelectorError, UnsupportedSelectorError, compile_selector
from dra_migrate.dra.validate import validate_live, worth_reporting
from dra_migrate.errors import InputError
from dra_migrate.render import emit

log = logging.getLogger("dra_migrate")


def _classes(value: str | None) -> tuple[str, ...]:
    return tuple(c.strip() for c in (value or "").split(",") if c.strip())


@click.command(
    epilog="""\b
Examples:
  dra-migrate convert k8s/                              # a unified diff of what would change
  dra-migrate convert k8s/ --output-dir converted/      # converted copies under converted/
  dra-migrate convert k8s/training.yaml --in-place --fallback mig.nvidia.com
  helm template x chart/ | dra-migrate convert - | kubectl apply -f -   # stdin to stdout
  dra-migrate convert k8s/ --kubeconfig ~/.kube/config --dry-run=server   # the API server judges them
"""
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--in-place", is_flag=True, help="Rewrite the files themselves (atomically).")
@click.option("--output-dir", "output_dir", type=click.Path(path_type=Path), help="Write converted copies under DIR.")
@click.option("-o", "--output", "output_flag", hidden=True, help="Refused: -o is a format everywhere else.")
@click.option(
    "--device-class",
    callback=class_names,
    help="DeviceClass for every request (default: gpu.nvidia.com; MIG: mig.nvidia.com).",
)
@click.option(
    "--fallback",
    callback=class_names,
    help="CLASS[,CLASS...]: firstAvailable alternatives tried after the first class.",
)
@click.option("--selector", help="A CEL selector added to every request (checked to compile).")
@click.option("--share-across-pod", is_flag=True, help="GPU containers of one pod share one claim (same devices).")
@click.option("--shared-claim", is_flag=True, help="One ResourceClaim shared by every pod of a workload.")
@click.option(
    "--gang",
    is_flag=True,
    help="Training workloads: a PodGroup with gang.minCount (Kubernetes 1.37, GenericWorkload), pods wired to it.",
)
@click.option(
    "--topology",
    is_flag=True,
    help="Requests for 2+ whole GPUs keep them on one PCIe root (matchAttribute resource.kubernetes.io/pcieRoot), "
    "as the device plugin's preferred allocation did.",
)
@click.option(
    "--sharing",
    type=click.Choice(list(STRATEGIES)),
    help="Write the DRA driver's sharing config (GpuConfig/MigDeviceConfig) into every claim: how the pods "
    "sharing a claim (--shared-claim, --share-across-pod) share its GPUs, as the device plugin's time-slicing "
    "or MPS did. Needs the kubelet plugin's TimeSlicingSettings or MPSSupport gate.",
)
@click.option("--time-slice-interval", type=click.Choice(INTERVALS), help="With --sharing time-slicing: full GPUs'.")
@click.option(
    "--mps-thread-percentage",
    type=int,
    help="With --sharing mps: defaultActiveThreadPercentage (0..100; the device plugin gave each of N replicas 100/N).",
)
@click.option(
    "--mps-memory-limit",
    help="With --sharing mps: defaultPinnedDeviceMemoryLimit, e.g. 10Gi (the device plugin gave each replica 1/N).",
)
@click.option("--skip-unconvertible", is_flag=True, help="Leave unconvertible manifests unchanged and exit 0.")
@click.option("--templates", type=click.Path(path_type=Path), help="Extra pod-template paths for your CRDs.")
@click.option(
    "--kubeconfig", type=click.Path(path_type=Path), help="Also validate --selector on this cluster (dry run)."
)
@click.option("--context", help="The kubeconfig context for --kubeconfig.")
@DRY_RUN_OPTION
def convert(
    paths: tuple[Path, ...],
    in_place: bool,
    output_dir: Path | None,
    output_flag: str | None,
    device_class: str | None,
    fallback: str | None,
    selector: str | None,
    share_across_pod: bool,
    shared_claim: bool,
    gang: bool,
    topology: bool,
    sharing: str | None,
    time_slice_interval: str | None,
    mps_thread_percentage: int | None,
    mps_memory_limit: str | None,
    skip_unconvertible: bool,
    templates: Path | None,
    kubeconfig: Path | None,
    context: str | None,
    dry_run: str | None,
) -> None:
    """Rewrite nvidia.com/gpu and nvidia.com/mig-* requests in FILE|DIR as ResourceClaimTemplates.

    Prints a unified diff unless --in-place or --output-dir DIR is given; `-` reads manifests from stdin
    and writes the converted stream to stdout. Nothing is written when any
    manifest cannot be converted (unless --skip-unconvertible). --dry-run=server first sends every
    converted object to the API server of --kubeconfig/--context as a server-side dry run (nothing
    persisted); a rejection is an error and nothing is written.
    """
    if output_flag is not None:
        # -o was the output directory once; it is a format everywhere else, so refuse rather than guess.
        raise InputError(
            f"convert has no -o/--output (got {output_flag!r})",
            f"write converted copies with --output-dir {output_flag}",
        )
    if in_place and output_dir:
        raise InputError("--in-place and --output-dir exclude each other", "choose one")
    shares = sharing_of(sharing, time_slice_interval, mps_thread_percentage, mps_memory_limit)
    opts = ConvertOptions(
        device_class, _classes(fallback), selector, share_across_pod, shared_claim, gang, topology, shares
    )
    if len(opts.fallback) + 1 > MAX_SUBREQUESTS:
        raise InputError(
            f"--fallback gives {len(opts.fallback)} classes", f"firstAvailable takes at most {MAX_SUBREQUESTS}"
        )
    if selector is not None:
        try:
            compile_selector(selector)
        except UnsupportedSelectorError as e:
            log.warning("--selector: not checked offline: %s", e)
        except SelectorError as e:
            raise InputError(f"--selector does not compile: {e}", "fix the CEL expression") from e
        if kubeconfig or context:  # the API server's own verdict (dry run) wins over the offline one
            for v in validate_live(kubeconfig, context, [selector]):
                if v.server == "rejected":
                    raise InputError(f"--selector is rejected by the API server: {v.server_message}", "fix it")
                if v in worth_reporting([v]):
                    log.warning("--selector: %s", v.describe())
    table = TemplateTable.builtin()
    if templates:
        table = table.extended(templates)

    server = (kubeconfig, context) if dry_run else None
    if "-" in [str(p) for p in paths]:
        _convert_stdin(paths, in_place, output_dir, table, opts, skip_unconvertible, server)
        return
    pairs = find_files(paths)
    streams = [f for f, _ in pairs if not f.is_file()]  # `<(helm template ...)`: a pipe, read once
    if streams and (in_place or output_dir):
        raise InputError(
            f"{streams[0]} is a pipe, not a file: there is no file to rewrite, nor a name to write it under",
            "drop --in-place/--output-dir to see the diff, or `... | dra-migrate convert -` for the converted stream",
        )
    if output_dir:
        check_output_paths(pairs, output_dir)
    with Working(f"converting {len(pairs)} file(s)"):  # about 80 documents a second
        results: list[FileResult] = convert_files(pairs, table, opts)
    problems = [p for r in results for p in r.problems]
    for r in results:
        for w in r.warnings:
            click.echo(f"warning: {w}", err=True)
    for p in problems:
        click.echo(f"{'skipped' if skip_unconvertible else 'error'}: {p}", err=True)
    if problems and not skip_unconvertible:
        click.echo(
            f"error: {len(problems)} unconvertible request(s); nothing written "
            "(fix them, or pass --skip-unconvertible to convert the rest)",
            err=True,
        )
        raise SystemExit(exitcodes.FAILED)

    for r in results:
        for s in r.summary:
            log.info("%s", s)
    if server is not None:
        objects = [o for r in results if r.changed for o in objects_of(r.converted, str(r.path))]
        if not server_dry_run(*server, objects):
            click.echo("error: the API server rejects converted manifests; nothing written", err=True)
            raise SystemExit(exitcodes.FAILED)
    if in_place:  # all files or none
        write_all([(r.path, r.converted) for r in results if r.changed])
    elif output_dir:
        write_all([(output_dir / r.relative, r.converted) for r in results], sources=[r.path for r in results])
    else:
        for r in results:
            emit(r.diff())
    changed = sum(r.changed for r in results)
    click.echo(f"converted {changed} of {len(results)} file(s)", err=True)


def _convert_stdin(
    paths: tuple[Path, ...],
    in_place: bool,
    output_dir: Path | None,
    table: TemplateTable,
    opts: ConvertOptions,
    skip_unconvertible: bool,
    server: tuple[Path | None, str | None] | None,
) -> None:
    """`convert -`: manifests on stdin, the converted stream on stdout (as `kubectl convert -f -`)."""
    if len(paths) > 1 or in_place or output_dir:
        raise InputError(
            "`-` (stdin) is converted alone and written to stdout",
            "give `-` as the only path, without --in-place or --output-dir",
        )
    # bytes, decoded as a file is (convert/files.decode_manifest): a text stdin let a byte that is not UTF-8
    # through as a lone surrogate (surrogateescape locales), refused as an odd character at the wrong line.
    text = decode_manifest(sys.stdin.buffer.read(), "<stdin>")
    with Working("converting the manifests read from stdin"):
        _, result = convert_text(text, "<stdin>", table, opts)
    for w in result.warnings:
        click.echo(f"warning: {w}", err=True)
    for p in result.problems:
        click.echo(f"{'skipped' if skip_unconvertible else 'error'}: {p}", err=True)
    if result.problems and not skip_unconvertible:
        click.echo(
            f"error: {len(result.problems)} unconvertible request(s); nothing written "
            "(fix them, or pass --skip-unconvertible to convert the rest)",
            err=True,
        )
        raise SystemExit(exitcodes.FAILED)
    for s in result.summary:
        log.info("%s", s)
    if server is not None and not server_dry_run(*server, objects_of(result.converted, "<stdin>")):
        click.echo("error: the API server rejects converted manifests; nothing written", err=True)
        raise SystemExit(exitcodes.FAILED)
    click.echo(result.converted, nl=False)
