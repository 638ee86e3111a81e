"""`dra-migrate check`: can this cluster migrate? Findings with stable ids, capacity before and after."""

from __future__ import annotations

import datetime as dt
import logging
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dra_migrate.checks.grouping import group_findings
from dra_migrate.checks.model import objects_json
from dra_migrate.cli import exitcodes
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
from dra_migrate.dra.validate import existing_class_selectors, live_selector_warnings
from dra_migrate.errors import InputError
from dra_migrate.inventory.dra import check_driver_name
from dra_migrate.render import Document

if TYPE_CHECKING:
    from dra_migrate.checks.ignore import Acceptance
    from dra_migrate.checks.run import Readiness

NOTHING_TO_MIGRATE = "nothing to migrate: no GPU nodes and no workloads requesting GPUs"


def nothing_to_migrate(readiness: Readiness) -> bool:
    """A cluster with no GPU node and no GPU consumer: one line and exit 0, never a misleading blocker."""
    inv = readiness.inventory
    return not inv.nodes and not inv.consumers


def load_acceptances(ignore_file: Path | None) -> list[Acceptance]:
    """--ignore-file, else ./.dra-migrate-ignore.yaml when it exists, else none."""
    from dra_migrate.checks.catalog import all_rules
    from dra_migrate.checks.ignore import DEFAULT_FILE, load_ignore_file

    if ignore_file is None:
        default = Path(DEFAULT_FILE)
        if not default.is_file():
            return []
        ignore_file = default
    elif not ignore_file.exists():  # not is_file(): `--ignore-file <(...)` is a pipe, and is read as one
        raise InputError(f"ignore file {ignore_file} does not exist", "check --ignore-file")
    return load_ignore_file(ignore_file, [r.id for r in all_rules()])


def rule_list() -> list[dict[str, Any]]:
    """Every registered rule: id, severities, summary (what `check --list-rules` prints)."""
    from dra_migrate.checks.catalog import all_rules

    return [{"id": r.id, "severities": [s.value for s in r.severities], "summary": r.summary} for r in all_rules()]


@click.command(
    epilog="""\b
Examples:
  dra-migrate check --snapshot cluster.yaml
  dra-migrate check --kubeconfig ~/.kube/config -o json | jq '.findings[] | select(.severity=="blocker")'
  dra-migrate check --snapshot cluster.yaml --feature-gate DRAExtendedResource=true || echo "blockers"

Exit codes: 0 no blockers, 1 error, 2 blockers found.
"""
)
@source_options
@pool_label_option()
@click.option(
    "--feature-gate",
    "feature_gates",
    multiple=True,
    metavar="NAME=BOOL",
    help="Declare a gate as the cluster runs it (e.g. DRAExtendedResource=true on 1.34-1.35).",
)
@click.option(
    "--dra-driver",
    default="gpu.nvidia.com",
    show_default=True,
    metavar="NAME",
    help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).",
)
@click.option(
    "--ignore-file",
    type=click.Path(path_type=Path),
    help="Accepted findings (rule, objects, reason, expires); default: ./.dra-migrate-ignore.yaml when it exists.",
)
@click.option("--list-rules", is_flag=True, help="List every rule (id, severities, what it checks) and exit.")
@output_option(names="the ids of the findings")
def check(
    source: SourceOptions,
    pool_labels: tuple[str, ...],
    feature_gates: tuple[str, ...],
    dra_driver: str,
    ignore_file: Path | None,
    list_rules: bool,
    output: str,
) -> None:
    """Readiness findings (exit 2 when any blocker) and capacity per pool before and after.

    Findings of one rule and cause are shown as one, their objects counted (-o wide and -o json give every
    finding); accepted ones (the ignore file) are shown apart and do not count.
    """
    from dra_migrate.checks.context import parse_feature_gates, unread_gates
    from dra_migrate.checks.ignore import split_accepted
    from dra_migrate.checks.run import assess
    from dra_migrate.render.checks import check_document, rules_document

    if list_rules:
        rules = rule_list()
        print_data(output, {"rules": rules}, lambda: rules_document(rules), lambda: [r["id"] for r in rules])
        return
    gates = parse_feature_gates(feature_gates)
    for warning in unread_gates(gates):
        click.echo(f"warning: {warning}", err=True)
    driver = check_driver_name(dra_driver)
    acceptances = load_acceptances(ignore_file)
    from dra_migrate.cli.progress import Working

    state = load_state(source)
    with Working("checking"):
        readiness = assess(state, pool_labels=pool_labels, feature_gates=gates, dra_driver=driver)
    if nothing_to_migrate(readiness):
        if output in ("json", "yaml"):  # the report's own shape, so a consumer reads it as any other
            readiness.findings = []  # what a GPU-less cluster would be told (a version, a driver) does not apply
            doc = {**readiness.to_dict(), "groups": [], "accepted": [], "nothingToMigrate": True}
            print_data(output, {**doc, "cluster": readiness.inventory.cluster_dict()}, Document)
        click.echo(NOTHING_TO_MIGRATE, err=True)
        return
    readiness.findings, accepted, expired = split_accepted(readiness.findings, acceptances, dt.date.today())
    for a in expired:
        logging.getLogger("dra_migrate").warning(
            "%s: the acceptance of %s expired on %s: its findings count again", a.where, a.rule, a.expires
        )
    if source.snapshot is None:  # a live cluster: its API server judges every selector (dry run)
        exprs = existing_class_selectors(state) + [p.selector for p in readiness.generation.proposals]
        for line in live_selector_warnings(source.kubeconfig, source.context, exprs):
            logging.getLogger("dra_migrate").warning("%s", line)
    report: dict[str, Any] = {**readiness.to_dict(), "cluster": readiness.inventory.cluster_dict()}
    report["groups"] = [g.to_dict() for g in group_findings(report["findings"])]
    report["accepted"] = [{**a.to_record(), "objects": objects_json(a.finding.objects)} for a in accepted]
    print_data(
        output,
        report,
        lambda: check_document(report, markdown=output == "markdown", wide=output == "wide"),
        lambda: list(dict.fromkeys(f["id"] for f in report["findings"])),
    )
    args = source_args(source) + "".join(f" --pool-label {shlex.quote(k)}" for k in pool_labels)
    args += "".join(f" --feature-gate {shlex.quote(g)}" for g in feature_gates)
    if readiness.blockers:
        pools = sorted({c.pool for c in readiness.capacity if not c.fits})
        hint = f" --exclude-pools {','.join(pools)}" if pools else ""
        next_step(f"resolve the blockers, or plan around them: dra-migrate plan {args}{hint}")
        sys.exit(exitcodes.ACTION_NEEDED)
    next_step(f"dra-migrate plan {args}")
