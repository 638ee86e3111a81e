#!/usr/bin/env python3
"""The audit report at fleet scale: `dra-migrate report PLAN` on a plan of N GPU nodes, each format, from the
plan alone, with the cluster (`--snapshot`) and with a journal of the whole migration.

    python bench/report_scale.py [--sizes 2000,10000] [--keep DIR] [--failed 25] [--pool-size K] [--out R.json]

For each size N the fleet and plan are bench/plan_scale.py's (`--keep DIR` reuses them: `fleet-N-4ppn.jsonl`
and `plan-N.yaml`); the journal is made here from the plan (`journal_of`): every step of every node applied
ok, a gate per wave, `--failed` nodes whose canary failed, their steps rolled back, and a second apply
that finished them, so the journal holds about 18 records per node, failures and a rollback among them.
Each `report` runs once in a fresh process (`dra-migrate report PLAN [--snapshot F] [--journal J] -o FMT
--out FILE`); the row gives CPU seconds (user + system), wall seconds, the process's own peak RSS (VmHWM),
the output's bytes and lines, and the largest section of the Markdown in lines. `yaml` (the plan file
loaded with the C YAML loader, as plan_scale.py's) is the floor a plan command pays. A benchmark, never a
test: quote ratios from one run; absolute times depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from plan_scale import YAML_LOAD, one, run  # noqa: E402  (bench/ is not a package)

from dra_migrate.plan import io as plan_io  # noqa: E402
from dra_migrate.plan.model import Plan, PrepareStage  # noqa: E402

ACTOR = "system:serviceaccount:ops:migrator"


def journal_of(plan_file: Path, failed: int) -> list[dict[str, Any]]:
    """A journal of the whole plan applied: `failed` nodes (spread over the plan) fail their canary, are
    rolled back, and a second apply run finishes them."""
    doc = plan_io.load(plan_file)
    plan, digest = Plan.from_dict(doc), doc["digest"]
    out: list[dict[str, Any]] = []
    clock = iter(range(10**9))

    def rec(event: str, **fields: Any) -> None:
        s = next(clock)
        t = f"2026-11-21T{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z"
        out.append({"seq": len(out) + 1, "time": t, "event": event, "actor": ACTOR, "planDigest": digest, **fields})

    nodes = list(plan.nodes())
    every = max(1, len(nodes) // failed) if failed else 0
    bad = {n.node for i, (_, _, n) in enumerate(nodes) if every and i % every == every // 2 and i // every < failed}
    rec("run-start", phase="apply", stages=[s.name for s in plan.stages], dryRun=False)
    for st in plan.stages:
        if isinstance(st, PrepareStage):
            for x in st.steps:
                rec("start", phase="apply", stage=st.name, stepId=x.id, action=str(x.action), target=x.target)
                rec("end", phase="apply", stepId=x.id, result="ok")
    for stage, wave, n in nodes:
        for x in stage.steps_for(n):
            rec("start", phase="apply", stage=stage.name, wave=wave.name, stepId=x.id, action=str(x.action),
                target=x.target)  # fmt: skip
            if n.node in bad and str(x.action) == "canary":
                rec("end", phase="apply", stepId=x.id, result="failed", error="canary pod stayed Pending for 3m")
                break
            rec("end", phase="apply", stepId=x.id, result="ok")
        if n is wave.nodes[-1]:
            rec("gate", stage=stage.name, wave=wave.name, result="ok", pending=[])
    rec("run-end", phase="apply", result="failed" if bad else "ok", error="canary failed" if bad else None)
    if bad:
        rec("run-start", phase="rollback")
        for stage, _, n in nodes:
            if n.node in bad:
                for x in reversed(stage.steps_for(n)[:-1]):
                    rec("start", phase="rollback", stepId=x.id, action=f"undo-{x.action}", target=x.target)
                    rec("end", phase="rollback", stepId=x.id, result="ok")
        rec("run-end", phase="rollback", result="ok")
        rec("run-start", phase="apply", stages=[s.name for s in plan.pool_stages()], dryRun=False)
        for stage, wave, n in nodes:
            if n.node in bad:
                for x in stage.steps_for(n):
                    rec("start", phase="apply", stage=stage.name, wave=wave.name, stepId=x.id,
                        action=str(x.action), target=x.target)  # fmt: skip
                    rec("end", phase="apply", stepId=x.id, result="ok")
        rec("run-end", phase="apply", result="ok")
    return out


def largest_section(markdown: Path) -> tuple[str, int]:
    """The Markdown section (## or ###) with the most lines."""
    best, name, count = ("", 0), "", 0
    for line in markdown.read_text().splitlines():
        if line.startswith("## ") or line.startswith("### "):
            best = max(best, (name, count), key=lambda x: x[1])
            name, count = line.lstrip("# "), 0
        count += 1
    return max(best, (name, count), key=lambda x: x[1])


def measure(n: int, tmp: Path, env: dict[str, str], failed: int, pool_size: int | None) -> dict[str, Any]:
    cut = f"-{pool_size}pp" if pool_size else ""
    snap, plan = tmp / f"fleet-{n}-4ppn{cut}.jsonl", tmp / f"plan-{n}{cut}.yaml"
    if not plan.exists():
        one(n, 4, tmp, env, pool_size)  # plan_scale.py's fleet and plan (and its rows, not kept here)
    journal = tmp / f"journal-{n}{cut}.jsonl"
    records = journal_of(plan, failed)
    journal.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    py, cli = sys.executable, [sys.executable, "-m", "dra_migrate"]
    r: dict[str, Any] = {"nodes": n, "planBytes": plan.stat().st_size, "journalRecords": len(records)}
    r["yaml"] = run([py, "-c", YAML_LOAD, str(plan)], env)
    inputs = {"offline": [], "snapshot": ["--snapshot", str(snap)], "journal": ["--journal", str(journal)]}
    for name, extra in inputs.items():
        for fmt in ("markdown", "html", "json"):
            out = tmp / f"report-{n}{cut}-{name}.{fmt}"
            x = run([*cli, "report", str(plan), *extra, "-o", fmt, "--out", str(out)], env)
            if x["code"] != 0:
                raise SystemExit(f"report {name} -o {fmt} failed at {n} nodes: {x['err']}")
            x["bytes"] = out.stat().st_size
            x["lines"] = out.read_bytes().count(b"\n")
            if fmt == "markdown":
                x["largestSection"] = largest_section(out)
            r[f"{name}/{fmt}"] = x
    return r


def table(results: list[dict[str, Any]]) -> str:
    rows = [f"{'nodes':>6} {'report':18} {'cpu s':>6} {'wall s':>6} {'peak MB':>8} {'out KB':>8} {'lines':>7}"
            "  largest Markdown section (lines)"]  # fmt: skip
    for r in results:
        y = r["yaml"]
        rows.append(f"{r['nodes']:>6} {'(yaml load)':18} {y['cpu']:>6} {y['wall']:>6} {y['rss'] / 2**20:>8.0f}")
        for key, x in r.items():
            if isinstance(x, dict) and "bytes" in x:
                big = x.get("largestSection")
                rows.append(
                    f"{r['nodes']:>6} {key:18} {x['cpu']:>6} {x['wall']:>6} {x['rss'] / 2**20:>8.0f} "
                    f"{x['bytes'] / 1024:>8.0f} {x['lines']:>7}" + (f"  {big[0]} ({big[1]})" if big else "")
                )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2000,10000")
    ap.add_argument("--failed", type=int, default=25, help="nodes whose canary fails in the journal")
    ap.add_argument("--pool-size", type=int, help="GPU nodes per node pool (plan_scale.py's; default: one per model)")
    ap.add_argument("--keep", type=Path, help="keep fleets, plans, journals and reports here (and reuse them)")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as t:
        tmp = args.keep or Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        results = [measure(int(n), tmp, env, args.failed, args.pool_size) for n in args.sizes.split(",")]
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
