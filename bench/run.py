"""Inventory speed and memory against a bare parse of the same snapshot (issue: foundation, item 7).

    python bench/run.py [--nodes 2000 --pods 100000 --workloads 10000] [--keep]

Generates a synthetic fleet snapshot (bench/gen_fleet.py, streamed JSON Lines) under bench/out/, then
runs, each in a fresh process so peak memory is its own:
  * parse:     orjson.loads of every line, nothing kept (the fastest JSON parser we can install);
  * inventory: load_snapshot + build_inventory, what `dra-migrate inventory` does before rendering;
  * plan:      load_snapshot + build_plan + the YAML text of the sealed plan (`dra-migrate plan`).
Prints wall time and peak RSS of each, and the ratios the targets name:
  inventory time <= 2x parse time; inventory peak memory <= 3x the file's size; plan time <= 3x parse time.
Quote ratios from one run, not absolute times: the machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PARSE = """
import orjson, resource, sys, time
t = time.perf_counter()
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        orjson.loads(line)
        n += 1
dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, n)
"""

INVENTORY = """
import resource, sys, time
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.inventory.model import build_inventory
t = time.perf_counter()
inv = build_inventory(load_snapshot(sys.argv[1]))
dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, len(inv.consumers))
"""

PLAN = """
import io, resource, sys, time
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan import io as plan_io
t = time.perf_counter()
plan = plan_io.dumps(plan_io.seal(build_plan(load_snapshot(sys.argv[1]), PlanParams())))
dt = time.perf_counter() - t
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, len(plan))
"""

BASELINE = """
import resource
import orjson
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.inventory.model import build_inventory
print(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, 0)
"""


def measure(code: str, path: Path) -> tuple[float, int, int]:
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=100_000)
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--keep", action="store_true", help="keep the generated snapshot")
    args = ap.parse_args()
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    snap = out / f"fleet-{args.nodes}n-{args.pods}p.jsonl"
    if not snap.exists():
        subprocess.run(
            [
                sys.executable,
                str(HERE / "gen_fleet.py"),
                "--nodes",
                str(args.nodes),
                "--pods",
                str(args.pods),
                "--workloads",
                str(args.workloads),
                "-o",
                str(snap),
            ],
            check=True,
        )
    size = snap.stat().st_size
    parse_t, parse_rss, lines = measure(PARSE, snap)
    inv_t, inv_rss, consumers = measure(INVENTORY, snap)
    plan_t, _, plan_bytes = measure(PLAN, snap)
    _, base_rss, _ = measure(BASELINE, snap)
    result = {
        "file": str(snap.relative_to(ROOT)),
        "fileMiB": round(size / 2**20, 1),
        "objects": lines,
        "consumers": consumers,
        "parseSeconds": round(parse_t, 2),
        "inventorySeconds": round(inv_t, 2),
        "timeRatio": round(inv_t / parse_t, 2),
        "parsePeakMiB": round(parse_rss / 2**20, 1),
        "inventoryPeakMiB": round(inv_rss / 2**20, 1),
        "interpreterBaselineMiB": round(base_rss / 2**20, 1),
        "memoryRatio": round(inv_rss / size, 2),
        "planSeconds": round(plan_t, 2),
        "planKiB": plan_bytes // 1024,
        "planRatio": round(plan_t / parse_t, 2),
        "targets": {"timeRatio": "<= 2", "memoryRatio": "<= 3", "planRatio": "<= 3"},
    }
    print(json.dumps(result, indent=2))
    if not args.keep:
        snap.unlink()


if __name__ == "__main__":
    main()
