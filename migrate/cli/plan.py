"""`dra-migrate plan`: write the reviewed artifact that apply runs; `--rebase` accepts an intended edit."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from migrate.checks.context import parse_feature_gates
from migrate.cli.options import SourceOptions, load_state, source_options
from migrate.errors import InputError
from migrate.plan import io as plan_io
from migrate.plan.build import build_plan
from migrate.plan.params import PlanParams
from migrate.render.diff import plan_diff_document


@click.command()
@source_options
@click.option("--out", type=click.Path(path_type=Path), help="Plan file (default plans/<cluster>-<yyyymmdd>.yaml).")
@click.option("--order", help="Pools to migrate first, comma-separated; the rest follow in the safe order.")
@click.option("--max-unavailable", default="10%", show_default=True, help="Nodes per wave: N or N% (at least 1).")
@click.option("--soak", default="5m", show_default=True, help="Wait between waves (0s allowed).")
@click.option("--drain", type=click.Choice(["gpu", "all"]), default="gpu", show_default=True, help="Pods to evict.")
@click.option("--pool-label", "pool_labels", multiple=True, metavar="KEY", help="Node label that names a pool.")
@click.option("--feature-gate", "feature_gates", multiple=True, metavar="NAME=BOOL", help="Declare a gate.")
@click.option("--device-plugin-label", default=PlanParams.device_plugin_label, show_default=True)
@click.option("--dra-label", default=PlanParams.dra_label, show_default=True)
@click.option("--dra-driver", default=PlanParams.dra_driver, show_default=True, metavar="NAME",
              help="The DRA driver that serves the GPUs (its ResourceSlices' spec.driver).")  # fmt: skip
@click.option("--canary-image", default=PlanParams.canary_image, show_default=True, help="Image of the canary pod.")
@click.option("--canary-command", default=PlanParams.canary_command, metavar="CMD",
              help="Shell command line (sh -c) the canary runs; exit 0 only when it sees its devices. "
                   "Default: counts nvidia-smi -L lines.")  # fmt: skip
@click.option("--rebase", "rebase", type=click.Path(path_type=Path), help="Re-digest an intentionally edited PLAN.")
@click.option("--against", type=click.Path(path_type=Path), help="With --rebase: the plan the edit started from.")
def plan(
    source: SourceOptions,
    out: Path | None,
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
    rebase: Path | None,
    against: Path | None,
) -> None:
    """Write a migration plan (a plan with blockers is written, marked not applicable)."""
    if rebase is not None:
        rebased = plan_io.rebase_checked(rebase, against)
        # What the edit changed, on stderr before anything is written (stdout stays free for data).
        touched = ", ".join(str(e) for e in rebased.edited) or "nothing (the digests still matched)"
        click.echo(f"edited since it was made: {touched}", err=True)
        vs = "the original plan" if rebased.against_original else "the file as edited (what rebase recomputed)"
        click.echo(f"semantic diff against {vs}:", err=True)
        click.echo(plan_diff_document(rebased.diff.to_dict()).render("table", color=False), err=True, nl=False)
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
        pool_labels=pool_labels,
        dra_driver=dra_driver,
    )
    state = load_state(source)
    body = build_plan(state, params, feature_gates=parse_feature_gates(feature_gates))
    path = out or Path("plans") / f"{body['cluster']}-{dt.date.today():%Y%m%d}.yaml"
    if path.exists() and path.is_dir():
        raise InputError(f"{path} is a directory", "give --out a file name")
    plan_io.write(plan_io.seal(body), path)
    s = body["summary"]
    verdict = "applicable" if body["applicable"] else "NOT applicable (blockers: see dra-migrate show)"
    click.echo(
        f"wrote {path}: {len(s['pools'])} pool(s), {s['nodes']} node(s), {s['waves']} wave(s), {verdict}", err=True
    )
