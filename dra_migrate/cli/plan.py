"""`dra-migrate plan`: write the reviewed artifact that apply runs; `--rebase` accepts an intended edit.

Like `terraform plan`, it shows what it planned (on stdout, `-o` as everywhere) and, with
`--detailed-exitcode`, exits 2 when the plan cannot be applied as a whole.
"""

from __future__ import annotations

import datetime as dt
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.check import NOTHING_TO_MIGRATE, load_acceptances
from dra_migrate.cli.options import (
    SourceOptions,
    load_state,
    next_step,
    output_option,
    pool_label_option,
    print_data,
    source_options,
)
from dra_migrate.errors import InputError
from dra_migrate.plan.estimate import estimate_text
from dra_migrate.plan.model import Plan, PrepareStage
from dra_migrate.plan.params import PlanParams


def _names(value: str | None, flag: str) -> tuple[str, ...]:
    """ "a, b" -> ("a", "b"); an empty name (",," or "") is refused, not ignored."""
    if value is None:
        return ()
    names = tuple(p.strip() for p in value.split(","))
    if not value.strip() or any(not n for n in names):
        raise InputError(f"{flag} {value!r} has an empty pool name", f"write {flag} POOL[,POOL...]")
    return names


@click.command(
    epilog="""\b
Examples:
  dra-migrate plan --snapshot cluster.yaml
  dra-migrate plan --kubeconfig ~/.kube/config --exclude-pools a100-shared --out plans/prod.yaml
  dra-migrate plan --snapshot cluster.yaml --pools h100-pool --max-unavailable 2 --soak 10m --detailed-exitcode

Exit codes: 0 written (or nothing to migrate), 1 error; with --detailed-exitcode, as Terraform's:
0 no changes, 2 changes present, 1 error.
"""
)
@source_options
@click.option(
    "--out", type=click.Path(path_type=Path), help="Plan file (default plans/<cluster>-<yyyymmdd-hhmmss>.yaml)."
)
@click.option("--force", is_flag=True, help="Overwrite an existing plan file.")
@click.option("--pools", "pools", metavar="POOL[,POOL...]", help="Plan only these pools (a partial migration).")
@click.option("--exclude-pools", "exclude_pools", metavar="POOL[,POOL...]", help="Leave these pools out.")
@click.option("--order", help="Pools to migrate first, comma-separated; the rest follow in the safe order.")
@click.option("--max-unavailable", default="10%", show_default=True, help="Nodes per wave: N or N% (at least 1).")
@click.option("--soak", default="5m", show_default=True, help="Wait between waves (0s allowed).")
@click.option("--drain", type=click.Choice(["gpu", "all"]), default="gpu", show_default=True, help="Pods to evict.")
@pool_label_option()
@click.option("--feature-gate", "feature_gates", multiple=True, metavar="NAME=BOOL", help="Declare a gate.")
@click.option("--device-plugin-label", default=PlanParams.device_plugin_label, show_default=True)
@click.option("--dra-label", default=PlanParams.dra_label, show_default=True)
@click.option("--dra-driver", default=PlanParams.dra_driver, show_default=True, metavar="NAME",
              help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).")  # fmt: skip
@click.option("--canary-image", default=PlanParams.canary_image, show_default=True, help="Image of the canary pod.")
@click.option("--canary-command", default=PlanParams.canary_command, metavar="CMD",
              help="Shell command line (sh -c) the canary runs; exit 0 only when it sees its devices. "
                   "Default: counts nvidia-smi -L lines.")  # fmt: skip
@click.option("--canary-namespace", default=PlanParams.canary_namespace, show_default=True, metavar="NAMESPACE",
              help="Namespace the canary pods run in (its Pod Security, quotas and policies apply).")  # fmt: skip
@click.option("--canary-pull-secret", "canary_pull_secrets", multiple=True, metavar="SECRET",
              help="imagePullSecret (in the canary namespace) for --canary-image from a private registry; "
                   "repeatable.")  # fmt: skip
@click.option("--rebase", "rebase", type=click.Path(path_type=Path), help="Re-digest an intentionally edited PLAN.")
@click.option("--against", type=click.Path(path_type=Path), help="With --rebase: the plan the edit started from.")
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="As Terraform's: exit 0 when the plan changes nothing, 2 when it has changes, 1 on error.",
)
@click.option(
    "--ignore-file",
    type=click.Path(path_type=Path),
    help="Accepted findings (default: ./.dra-migrate-ignore.yaml when it exists); recorded as accepted risks.",
)
@output_option(formats=("table", "wide", "json", "yaml", "markdown", "name"), names="the plan file written")
def plan(
    source: SourceOptions,
    out: Path | None,
    force: bool,
    pools: str | None,
    exclude_pools: str | None,
    order: str | None,
    max_unavailable: str,
    soak: str,
    drain: str,
    pool_labels: tuple[str, ...],
    feature_gates: tuple[str, ...],
    device_plugin_label: str,
    dra_label: str,
    dra_driver: str,
    canary_image: str,
    canary_command: str,
    canary_namespace: str,
    canary_pull_secrets: tuple[str, ...],
    rebase: Path | None,
    against: Path | None,
    detailed_exitcode: bool,
    ignore_file: Path | None,
    output: str,
) -> None:
    """Write a migration plan and show its summary (a plan with blockers is written, marked not applicable).

    A pool's blocker blocks only that pool's stage; a cluster-wide one blocks the whole plan. Leave a
    blocked pool out with --exclude-pools, or `apply --stage` the stages that are applicable.
    """
    from dra_migrate.checks.context import parse_feature_gates, unread_gates
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.build import build_plan

    if rebase is not None:
        from dra_migrate.render.diff import plan_diff_document

        rebased = plan_io.rebase_checked(rebase, against)
        # What the edit changed, on stderr before anything is written (stdout stays free for data).
        touched = ", ".join(str(e) for e in rebased.edited) or "nothing (the digests still matched)"
        click.echo(f"edited since it was made: {touched}", err=True)
        vs = "the original plan" if rebased.against_original else "the file as edited (what rebase recomputed)"
        click.echo(f"semantic diff against {vs}:", err=True)
        click.echo(plan_diff_document(rebased.diff.to_dict()).render("table", color=False), err=True, nl=False)
        if rebased.originals_unchecked:
            click.echo(
                "warning: the nodes' recorded original values (what rollback restores) were not compared with "
                "the plan as made: pass --against ORIGINAL to check them (apply refuses a node whose live "
                "values differ from them)",
                err=True,
            )
        plan_io.write(rebased.plan, out or rebase)
        click.echo(f"rebased {rebase}: validated, re-digested, recorded as edited", err=True)
        return
    if against is not None:
        raise InputError("--against goes with --rebase", "dra-migrate plan --rebase EDITED --against ORIGINAL")
    params = PlanParams(
        max_unavailable=max_unavailable,
        soak=soak,
        drain=drain,
        order=tuple(p.strip() for p in order.split(",") if p.strip()) if order else (),
        device_plugin_label=device_plugin_label,
        dra_label=dra_label,
        canary_image=canary_image,
        canary_command=canary_command,
        canary_namespace=canary_namespace,
        canary_pull_secrets=canary_pull_secrets,
        pool_labels=pool_labels,
        dra_driver=dra_driver,
        pools=_names(pools, "--pools"),
        exclude_pools=_names(exclude_pools, "--exclude-pools"),
    ).validate()
    gates = parse_feature_gates(feature_gates)  # a bad one refused before the cluster is read
    for warning in unread_gates(gates):
        click.echo(f"warning: {warning}", err=True)
    if out is not None:
        _refuse_overwrite(out, force)  # before reading the cluster: a refusal costs nothing
    acceptances = load_acceptances(ignore_file)
    state = load_state(source)
    from dra_migrate.cli.progress import Working

    with Working("planning"):
        plan = build_plan(
            state,
            params,
            feature_gates=gates,
            acceptances=acceptances,
            today=dt.date.today(),
        )
    inventory = (plan.review or {}).get("inventory") or {}
    if not inventory.get("gpuNodes") and not inventory.get("consumers"):
        click.echo(f"{NOTHING_TO_MIGRATE}: no plan written", err=True)
        return
    path = out or Path("plans") / f"{plan.cluster}-{dt.datetime.now():%Y%m%d-%H%M%S}.yaml"
    _refuse_overwrite(path, force)
    sealed = plan_io.write_sealed(plan, path)
    click.echo(f"wrote {path}", err=True)
    summary = planned(sealed, path)
    sizes = [len(w.nodes) for st in plan.pool_stages() for w in st.waves]
    print_data(output, summary, lambda: planned_document(summary, sizes), lambda: [str(path)])
    quoted = shlex.quote(str(path))
    if sealed.applicable:
        next_step(f"dra-migrate show {quoted}, then dra-migrate apply {quoted} --kubeconfig ...")
    elif any(st["applicable"] for st in summary["stages"] if st["pool"]):
        stage = next(st["name"] for st in summary["stages"] if st["pool"] and st["applicable"])
        next_step(
            f"dra-migrate show {quoted}; resolve the blockers, or apply one stage: "
            f"dra-migrate apply {quoted} --stage {stage}"
        )
    else:
        next_step(f"resolve the blockers (dra-migrate show {quoted}), then plan again")
    if detailed_exitcode and has_changes(sealed):
        sys.exit(exitcodes.ACTION_NEEDED)


def has_changes(plan: Plan) -> bool:
    """Terraform's "changes present": any step the plan would take (cluster-wide, or on a node)."""
    return any((isinstance(s, PrepareStage) and bool(s.steps)) or any(w.nodes for w in s.waves) for s in plan.stages)


def _refuse_overwrite(path: Path, force: bool) -> None:
    if path.is_dir():
        raise InputError(f"{path} is a directory", "give --out a file name")
    if path.exists() and not force:
        raise InputError(f"{path} exists", "pass --force to overwrite it, or choose another --out")


def planned(plan: Plan, path: Path) -> dict[str, Any]:
    """What `plan` prints: the summary, the blockers and what each stage may do (JSON: this object)."""
    from dra_migrate.plan.scope import blockers_by_stage
    from dra_migrate.plan.view import excluded_pools_json, plan_cluster

    blockers = [f for f in plan.findings if f["severity"] == "blocker"]
    blocked_by = blockers_by_stage(plan.findings)  # read once: per stage it was stages x findings
    review = plan.review or {}
    return {
        "formatVersion": 1,
        "path": str(path),
        "cluster": plan_cluster(plan),
        "digest": plan.digest,
        "applicable": plan.applicable,
        "summary": plan.summary,
        "blockers": [
            {"id": f["id"], "scope": f.get("scope", "cluster"), "pools": f.get("pools", []), "message": f["message"]}
            for f in blockers
        ],
        "stages": [
            {
                "name": s.name,
                "pool": s.pool,
                "nodes": sum(len(w.nodes) for w in s.waves),
                "waves": len(s.waves),
                "evictedPods": sum(w.evicted_pods for w in s.waves),
                "applicable": not blocked_by(s.pool),
                "blockedBy": blocked_by(s.pool),
            }
            for s in plan.stages
        ],
        "excludedPools": excluded_pools_json(review.get("excludedPools", [])),
    }


def planned_document(p: dict[str, Any], wave_sizes: list[int]) -> Any:
    from dra_migrate.render import Document, styled, verdict

    doc = Document()
    s = p["summary"]
    doc.heading(f"Plan {p['path']}")
    doc.line(
        f"{len(s['pools'])} pool(s), {s['nodes']} node(s), {s['waves']} wave(s), {s['evictedPods']} pod(s) evicted, "
        f"estimated {estimate_text(s, wave_sizes=wave_sizes)}"
    )
    doc.line(
        verdict(p["applicable"], "applicable", "NOT applicable as a whole")
        + (f" · {len(p['blockers'])} blocker(s)" if p["blockers"] else "")
    )
    doc.table(
        ["stage", "nodes", "waves", "pods evicted", "applicable", "blocked by"],
        [
            [st["name"], st["nodes"], st["waves"], st["evictedPods"], verdict(st["applicable"]), st["blockedBy"] or "-"]
            for st in p["stages"]
        ],
    )
    for b in p["blockers"]:
        where = "cluster-wide" if b["scope"] == "cluster" else f"pool {', '.join(b['pools'])}"
        doc.line(styled(f"blocker {b['id']} ({where}): {b['message']}", "bad"))
    for x in p["excludedPools"]:
        about = [f"{f['id']} ({f['severity']})" for f in x.get("findings") or []]
        doc.line(f"left out: {x['pool']}: {x['reason']}" + (f"; its findings: {', '.join(about)}" if about else ""))
    return doc
