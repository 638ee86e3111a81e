"""`dra-migrate report PLAN`: the audit report for change review, as Markdown, HTML or JSON."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from dra_migrate import __version__
from dra_migrate.checks.run import Readiness, assess
from dra_migrate.cli.options import (
    SourceOptions,
    journal_state_option,
    load_state,
    namespace_name,
    output_for_file,
    output_option,
    plan_argument,
    read_plan,
    refuse_stdin_twice,
    source_options,
)
from dra_migrate.cli.progress import Working
from dra_migrate.cluster.identity import refuse_other_cluster
from dra_migrate.errors import ClusterError, InputError
from dra_migrate.execute.journal import journal_path, read_records
from dra_migrate.execute.journals import IN_CLUSTER, ClusterStore, read_checked, resolve_state
from dra_migrate.fileio import write_text_atomic
from dra_migrate.plan.diff import diff_plans
from dra_migrate.plan.model import Plan, plan_identity
from dra_migrate.render import emit
from dra_migrate.report.model import Identity, build_report
from dra_migrate.report.render import FORMATS, render

log = logging.getLogger("dra_migrate")


@click.command(
    epilog="""\b
Examples:
  dra-migrate report plans/prod.yaml > prod.report.md
  dra-migrate report plans/prod.yaml -o html --out prod.report.html
  dra-migrate report plans/prod.yaml --rehearsal prod.rehearsal.json -o html --out prod.report.html
  dra-migrate report plans/prod.yaml --kubeconfig ~/.kube/config -o html --out after.html   # and what changed
"""
)
@plan_argument(only_reads=True)
@click.option(
    "--journal",
    "journal_file",
    type=click.Path(path_type=Path),
    help="The apply journal (default: <PLAN>.journal.jsonl beside the plan, when it exists).",
)
@click.option("--against", type=click.Path(path_type=Path), metavar="OLDER_PLAN", help="Diff against an older plan.")
@click.option(
    "--rehearsal",
    "rehearsal_file",
    type=click.Path(path_type=Path),
    help="A rehearsal of this plan (`rehearse PLAN -o json --out FILE`): adds its section.",
)
@output_option(formats=FORMATS, default="markdown", deprecated_format=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Write the report to FILE (default: stdout); without -o its extension names the format (.html, .md, .json).",
)
@click.option(
    "--allow-other-cluster",
    is_flag=True,
    help="Combine a plan, snapshot, older plan or journal of two different clusters (on purpose).",
)
@journal_state_option
@click.option(
    "--lock-namespace",
    default="kube-system",
    show_default=True,
    callback=namespace_name,
    help="With --state in-cluster: the namespace of apply's lock and journal.",
)
@source_options
def report(
    plan_file: Path,
    journal_file: Path | None,
    against: Path | None,
    rehearsal_file: Path | None,
    output: str,
    out: Path | None,
    allow_other_cluster: bool,
    state: str,
    lock_namespace: str,
    source: SourceOptions,
) -> None:
    """Write the audit report of PLAN: cluster, identity, findings, DeviceClasses, capacity, stages and
    waves, a rehearsal of it (--rehearsal), the diff against an older plan, the execution timeline and the
    final verification.

    The plan alone is enough, offline: it records the capacity and inventory summary it was made from.
    With the cluster (--snapshot FILE, or --kubeconfig/--context to read it live, which also records who
    you are through a SelfSubjectReview) the report adds every consumer and what changed since.
    """
    output = output_for_file(out, output, FORMATS)
    refuse_stdin_twice(plan_file, journal_file, against, rehearsal_file, source.snapshot)
    file_given = journal_file is not None or bool(source.snapshot)
    state = resolve_state(state, source.kubeconfig, plan_file, file_given=file_given)
    if state == IN_CLUSTER and (journal_file is not None or source.snapshot):
        raise InputError("--state in-cluster reads the journal from the cluster", "drop --journal and --snapshot")
    plan = read_plan(plan_file)
    typed = Plan.from_dict(plan)  # what the report reads (the mapping: the identity and diff checks)
    ours = plan_identity(plan)
    live = source.kubeconfig is not None or source.context is not None
    readiness: Readiness | None = None
    identity: Identity | None = None
    if source.snapshot or live:
        cluster_state = load_state(source)
        refuse_other_cluster(
            ours, f"plan {plan_file}", cluster_state.source.identity, "the cluster read", allow=allow_other_cluster
        )
        with Working("checking"):
            readiness = assess(
                cluster_state,
                pool_labels=tuple(plan["parameters"].get("poolLabels") or ()),
                dra_driver=str(plan["parameters"].get("draDriver") or "gpu.nvidia.com"),
            )
    if live:
        identity = _identity(source)
    older = None
    if against is not None:
        older_plan = read_plan(against)
        refuse_other_cluster(
            plan_identity(older_plan), f"plan {against}", ours, f"plan {plan_file}", allow=allow_other_cluster
        )
        older = diff_plans(older_plan, plan).to_dict()
    if state == IN_CLUSTER:
        guard = None if allow_other_cluster else ours
        records, where = _cluster_records(str(typed.digest), source, lock_namespace, guard)
    else:
        if journal_file is None and journal_path(plan_file).exists():
            journal_file = journal_path(plan_file)
        if journal_file is not None and not journal_file.exists():
            raise InputError(f"journal {journal_file} does not exist", "check the path, or leave --journal out")
        records = (
            read_records(
                journal_file,
                plan_digest=str(typed.digest),
                require_owner=False,
                cluster=None if allow_other_cluster else ours,
            )
            if journal_file is not None
            else None
        )
        where = str(journal_file) if journal_file is not None else None
    rehearsal = None
    if rehearsal_file is not None:
        from dra_migrate.rehearse.model import load_rehearsal

        rehearsal = load_rehearsal(rehearsal_file, str(typed.digest))
    model = build_report(
        typed,
        plan_path=str(plan_file),
        readiness=readiness,
        identity=identity,
        diff=older,
        journal=where,
        records=records,
        rehearsal=rehearsal,
        tool_version=__version__,
    )
    text = render(model, output)
    if out is None:
        emit(text)
    else:
        _write(out, text)
        click.echo(f"wrote {out}", err=True)


def _identity(source: SourceOptions) -> Identity | None:
    """Who the API server says we are; None (with a warning) when it will not say."""
    from dra_migrate.cluster.live import LiveCluster, LiveOptions
    from dra_migrate.kube import RetryPolicy
    from dra_migrate.report.identity import who_am_i

    try:
        cluster = LiveCluster(LiveOptions(source.kubeconfig, source.context))
        return who_am_i(cluster.kube.with_retry(RetryPolicy(retries=2)))
    except ClusterError as e:
        log.warning("identity not recorded: SelfSubjectReview failed: %s", e)
        return None


def _write(path: Path, text: str) -> None:
    """Beside the target, then renamed: a failure never leaves half a report."""
    write_text_atomic(path, text)


def _cluster_records(
    digest: str, source: SourceOptions, namespace: str, cluster: Any
) -> tuple[list[Any] | None, str | None]:
    """The in-cluster journal (`apply --state in-cluster`); none when it has no records (not run yet)."""
    from dra_migrate.cluster.kubeconfig import checked_api_client

    store = ClusterStore(checked_api_client(source.kubeconfig, source.context), namespace)
    records = read_checked(store, plan_digest=digest, require_owner=False, cluster=cluster)
    return (records, store.where(digest)) if records else (None, None)
