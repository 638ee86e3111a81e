"""`dra-migrate demo`: the workflow on the bundled demo fleet, offline, into a directory.

It runs the real commands in this process (inventory, check, plan, show, report) on the fleet that ships
in the package (`dra_migrate.bundled`), each writing one file, so what a new user reads is what those
commands print for their own cluster.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path

import click

from dra_migrate.cli import exitcodes
from dra_migrate.cli.options import next_step
from dra_migrate.errors import InputError

# The bundled fleets (fixtures/clusters/README.md describes them): `demo` is a GKE fleet with blockers to
# find (no DRA driver yet, a time-sliced pool that would not fit); `ready` is a fleet once they are fixed,
# whose plan is applicable and can be rehearsed and applied.
FLEETS = {"demo": "fixtures/clusters/demo.yaml", "ready": "fixtures/clusters/upstream-ready.yaml"}

# (file written, the command's arguments after the snapshot source or plan); {plan} is the plan's path.
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("inventory.md", ("inventory", "--snapshot", "{fleet}", "-o", "markdown")),
    ("check.md", ("check", "--snapshot", "{fleet}", "-o", "markdown")),
    ("plan.md", ("plan", "--snapshot", "{fleet}", "--out", "{plan}", "-o", "markdown")),
    ("show.md", ("show", "{plan}", "-o", "markdown")),
    ("report.md", ("report", "{plan}", "--snapshot", "{fleet}", "-o", "markdown")),
    ("report.html", ("report", "{plan}", "--snapshot", "{fleet}", "-o", "html", "--out", "{dir}/report.html")),
)
# check exits 2 when it finds blockers: the demo fleet has some on purpose (a pool that does not fit).
EXPECTED = {exitcodes.OK, exitcodes.ACTION_NEEDED}


@click.command(
    epilog="""\b
Examples:
  dra-migrate demo                      # into ./dra-migrate-demo
  dra-migrate demo --fleet ready --dir ready   # a fleet without blockers: its plan can be applied
  dra-migrate demo --dir /tmp/demo --force
"""
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("dra-migrate-demo"),
    show_default=True,
    help="Directory to write into (created).",
)
@click.option(
    "--fleet",
    "fleet_name",
    type=click.Choice(sorted(FLEETS)),
    default="demo",
    show_default=True,
    help="demo: a GKE fleet with blockers to find; ready: one with none, to rehearse and apply.",
)
@click.option("--force", is_flag=True, help="Overwrite the files of an earlier demo in --dir.")
def demo(directory: Path, fleet_name: str, force: bool) -> None:
    """Run inventory, check, plan, show and report on a bundled demo fleet (offline: no cluster needed).

    Writes the fleet's snapshot (cluster.yaml), the plan (plan.yaml), each command's output as Markdown
    and the audit report as HTML into --dir, and prints the files written (one a line).
    """
    from dra_migrate.bundled import bundled
    from dra_migrate.cli.main import cli

    fleet, plan = directory / "cluster.yaml", directory / "plan.yaml"
    if fleet.exists() and not force:
        raise InputError(f"{directory} holds an earlier demo", "pass --force to overwrite it, or choose --dir")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundled(FLEETS[fleet_name]), fleet)
    plan.unlink(missing_ok=True)
    written = [fleet, plan]
    for name, template in STEPS:
        args = [a.format(fleet=fleet, plan=plan, dir=directory) for a in template]
        click.echo(f"demo: dra-migrate {' '.join(args)}", err=True)
        out = directory / name
        with out.open("w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
            try:
                code = cli.main(args, standalone_mode=False)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else exitcodes.FAILED
        if code not in EXPECTED:
            raise InputError(f"the demo's `{args[0]}` failed (exit {code})", "rerun it with --debug")
        if out.stat().st_size == 0:
            out.unlink()
        else:
            written.append(out)
    written.append(directory / "report.html")
    for path in dict.fromkeys(written):
        click.echo(str(path))
    next_step(f"open {directory / 'report.html'}; then read the README walkthrough (rehearse, apply, report)")
    sys.exit(exitcodes.OK)
