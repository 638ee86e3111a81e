"""`dra-migrate rehearse PLAN` and `dra-migrate twin build|status`: a plan run on a twin of the cluster."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import (
    SourceOptions,
    duration,
    load_state,
    output_for_file,
    output_option,
    plan_argument,
    print_data,
    read_plan,
    refuse_stdin_twice,
    source_options,
)
from dra_migrate.cluster.identity import refuse_other_cluster
from dra_migrate.errors import InputError
from dra_migrate.fileio import write_text_atomic
from dra_migrate.plan.model import Plan, plan_identity
from dra_migrate.render import FORMATS as FORMATS_OF_REHEARSE
from dra_migrate.render import to_json, to_names, to_yaml


@click.command()
@plan_argument(only_reads=True)
@source_options
@click.option(
    "--time-scale",
    type=float,
    default=0.1,
    show_default=True,
    help="Run the twin this much faster than real time (0.1: ten times); durations are reported unscaled.",
)
@click.option(
    "--pending-threshold", default="2m", show_default=True, callback=duration(), help="Health gate, as for apply."
)
@click.option(
    "--drain-timeout",
    callback=duration(),
    help="As for apply: override the plan's drain timeout (time-scaled on the twin like the plan's own).",
)
@click.option(
    "--parallelism",
    type=click.IntRange(min=1),
    help="As for apply: at most N nodes of a wave at once (default: the whole wave).",
)
@output_option(names="the waves rehearsed (stage/wave)")
@click.option(
    "--out",
    "out_file",
    type=click.Path(path_type=Path),
    help="Write the result to FILE (-o format, else the one its extension names).",
)
def rehearse(
    plan_file: Path,
    source: SourceOptions,
    time_scale: float,
    pending_threshold: str,
    drain_timeout: str | None,
    parallelism: int | None,
    output: str,
    out_file: Path | None,
) -> None:
    """Run PLAN on a private twin made from the cluster's snapshot, and report what happened.

    \b
    Examples:
      dra-migrate rehearse plan.yaml --snapshot cluster.jsonl
      dra-migrate rehearse plan.yaml --snapshot cluster.jsonl -o json --out rehearsal.json
      dra-migrate rehearse plan.yaml --kubeconfig ~/.kube/config   # reads the cluster once, read-only

    Rehearse with the --drain-timeout and --parallelism apply will be given: a drain a budget holds longer
    than the plan's timeout, or a wave run a few nodes at a time, plays out as apply will run it.

    Exit codes: 0 the rehearsal passed, 2 it failed (a stalled drain, a failed canary or health gate), 1 error.
    """
    from dra_migrate.plan.params import parse_duration
    from dra_migrate.rehearse.run import rehearse as run_rehearsal
    from dra_migrate.render.rehearsal import rehearsal_document
    from dra_migrate.sim.kwok import require_linux

    require_linux("rehearse (a twin of the cluster: a local control plane and KWOK nodes)")  # before any read
    refuse_stdin_twice(plan_file, source.snapshot)
    if not source.snapshot and not source.kubeconfig and not source.context:
        raise InputError("rehearse needs the cluster's state", "pass --snapshot FILE (or --kubeconfig to read it)")
    output = output_for_file(out_file, output, FORMATS_OF_REHEARSE)
    plan = Plan.from_dict(read_plan(plan_file))  # the rehearsal reads the typed plan
    state = load_state(source)
    # A rehearsal of one cluster's plan on another's state says nothing about either.
    refuse_other_cluster(plan_identity(plan), f"plan {plan_file}", state.source.identity, "the cluster read")
    result = run_rehearsal(
        plan,
        state,
        time_scale=time_scale,
        pending_threshold_s=float(parse_duration(pending_threshold)),
        drain_timeout_s=float(parse_duration(drain_timeout)) if drain_timeout else None,
        parallelism=parallelism,
        log=lambda m: click.echo(m, err=True),
    ).to_dict()
    names = [f"{w['stage']}/{w['wave'] or '-'}" for w in result["waves"]]
    if out_file:
        text = _file_text(output, result, names)
        write_text_atomic(out_file, text if text.endswith("\n") else text + "\n")
        click.echo(f"wrote {out_file}", err=True)
    else:
        print_data(output, result, lambda: rehearsal_document(result), lambda: names)
    sys.exit(exitcodes.OK if result["result"] == "ok" else exitcodes.ACTION_NEEDED)


def _file_text(output: str, result: dict[str, Any], names: list[str]) -> str:
    """The result in the `-o` format, for a file: no colour, no terminal width."""
    from dra_migrate.render.rehearsal import rehearsal_document

    if output == "json":
        return to_json(result)
    if output == "yaml":
        return to_yaml(result)
    if output == "name":
        return to_names(names)
    return rehearsal_document(result).render(output, color=False)


@click.group()
def twin() -> None:
    """The control-plane binaries rehearsals run on.

    \b
    Examples:
      dra-migrate twin status
      dra-migrate twin build
    """


@twin.command("build")
def twin_build() -> None:
    """Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager and KWOK into the user's cache.

    \b
    Examples:
      dra-migrate twin build
      DRA_MIGRATE_K8S_CACHE=/srv/cache dra-migrate twin build
    """
    from dra_migrate.rehearse.twin import build

    sys.exit(exitcodes.OK if build() == 0 else exitcodes.FAILED)


@twin.command("status")
def twin_status() -> None:
    """Where each binary the twin needs was found (cache, KUBEBUILDER_ASSETS, PATH), or that it is missing.

    \b
    Examples:
      dra-migrate twin status
      KUBEBUILDER_ASSETS=/usr/local/kubebuilder/bin dra-migrate twin status
    """
    from dra_migrate.rehearse.twin import BUILD_HINT, find_binaries

    found = find_binaries()
    for name, (path, where) in found.items():
        click.echo(f"{name:25} {where:18} {path or '-'}")
    if any(p is None for p, _ in found.values()):
        click.echo(f"error: binaries missing; {BUILD_HINT}", err=True)
        sys.exit(exitcodes.FAILED)
