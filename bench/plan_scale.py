#!/usr/bin/env python3
"""The plan at fleet scale (issue 29 item 4): each phase's time at two fleet sizes, and the ratios.

    python bench/plan_scale.py [--sizes 2000,10000] [--pods-per-node 4] [--pool-size K] [--keep DIR]

Two fleets are worth quoting: `--pods-per-node 4` (the default; the snapshot parse is small next to the
per-node work, so inventory and plan ratios are at their hardest) and `--pods-per-node 50`, the fleet the
issue's inventory and plan targets were set on (bench/run.py's 2,000 nodes with 100,000 pods).
`--pool-size 5` cuts the GPU pools into node pools of five nodes (400 pools at 2,000 nodes, 2,000 at
10,000), as a fleet of many node groups is: a step that costs pools x nodes, or pools x gangs, shows there.

For each size N: a synthetic fleet of N GPU nodes (bench/gen_fleet.py, deterministic; N/2 CPU nodes,
N pods-per-node pods, N workloads, the DRA driver's DaemonSet added so that pools can be planned), then,
each in a fresh process:
  * parse        orjson.loads of every line of the snapshot (the floor any reader pays);
  * inventory    load_snapshot, build_inventory                  (target: <= 1.5x parse); the fleet is
    written as `dra-migrate snapshot` writes it, closing line and all (dra_migrate/cluster/sealed.py), and
    `inventoryPlain` reads the same lines without it, as a kubectl export is read (no target);
  * plan         load_snapshot, build_plan, seal, dumps          (target: <= 2.5x parse);
  * yaml         `python -c` loading the plan file with the C YAML loader (the floor for a plan command);
  * show, show -o json, show -o yaml, status, apply's refusal (`apply PLAN --snapshot F`, refused after
    reading the plan), each a whole `python -m dra_migrate` process (target: each <= 3x yaml; -o yaml has
    none: ruamel's pure-Python representer writes it);
  * yaml x2, diff  two plans (default, and --max-unavailable 20%) loaded, and diffed  (target: <= 2x);
  * the plan file's bytes per GPU node (target: <= 300); peak memory of `show` (and `show -o json`,
    `-o yaml`) above an idle `dra-migrate --version`, over the file's size (target: <= 5x). Peaks are
    each process's own VmHWM (see `PEAK`: the rusage of a child carries its parent's over exec).
Inside inventory and plan each phase is timed, so a step that grows faster than the fleet shows
between the two sizes; and each ratio is also given for the growth between the smallest and the largest
fleet (`growth`): what a command pays once (imports, start-up) cancels there, leaving what it pays per node.
Times are CPU seconds (user + system) of the process: the machines are shared,
and wall time there measures the neighbours; wall time is printed beside them. parse, inventory and plan
are each the quicker of two runs (a cold page cache, and the system time of page faults, vary between
runs); the other commands run once. Quote ratios from one run of this script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from rehearse import with_dra_driver  # noqa: E402  (bench/ is not a package)

PARSE = """
import json, orjson, sys, time
t = time.process_time()
with open(sys.argv[1], "rb") as f:
    for line in f:
        orjson.loads(line)
print(json.dumps({"orjson": round(time.process_time() - t, 3)}))
"""

PHASES = """
import json, sys, time
from dra_migrate.cluster.snapshot import load_snapshot
phases = {}
def timed(name, fn):
    t = time.process_time()
    out = fn()
    phases[name] = round(time.process_time() - t, 3)
    return out
state = timed("load_snapshot", lambda: load_snapshot(sys.argv[1]))
if sys.argv[2] == "inventory":
    from dra_migrate.inventory.model import build_inventory
    timed("build_inventory", lambda: build_inventory(state))
else:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams
    from dra_migrate.plan import io as plan_io
    body = timed("build_plan", lambda: build_plan(state, PlanParams()))
    sealed = timed("seal", lambda: plan_io.seal(body))
    text = timed("dumps", lambda: plan_io.dumps(sealed))
print(json.dumps(phases))
"""

YAML_LOAD = """
import sys, yaml
for p in sys.argv[1:]:
    with open(p) as f:
        yaml.load(f, Loader=yaml.CSafeLoader)
print("{}")
"""


# Each process measures its own peak. A child's ru_maxrss is no measure of it: on exec Linux carries the
# high-water mark of the memory image it replaces over (fs/exec.c `exec_mmap` -> `setmax_mm_hiwater_rss`),
# here the bench's own, which grows with the output it reads back (at 10,000 nodes `idle` and `bare`
# both measured 31 MB, twice what they use). VmHWM in /proc/self/status is the new image's own peak; the
# wrapper runs the command (`-m MODULE ...` or `-c CODE ...`) and writes it at exit.
PEAK = """
import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(os.environ["PLAN_SCALE_PEAK"], "w") as out:
        out.write(kb)
atexit.register(_peak)
rest = sys.argv[1:]
if rest[0] == "-m":
    sys.argv = rest[1:]
    runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c", *rest[2:]]
    exec(compile(rest[1], "<string>", "exec"), {"__name__": "__main__"})
"""


def run(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """CPU and wall seconds, peak RSS (bytes) of the process, and the JSON it printed last (if any)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory() as d:
        peak = Path(d) / "peak"
        t = time.perf_counter()
        proc = subprocess.Popen(
            [args[0], "-c", PEAK, *args[1:]], cwd=ROOT, env={**env, "PLAN_SCALE_PEAK": str(peak)}, stdout=out,
            stderr=err,
        )  # fmt: skip
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        rss = int(peak.read_text()) * 1024 if peak.exists() else 0
    last = text.strip().splitlines()[-1] if text.strip() else "{}"
    try:
        data = json.loads(last)
    except ValueError:
        data = {}
    return {
        "cpu": round(usage.ru_utime + usage.ru_stime, 3), "wall": round(wall, 3), "rss": rss,
        "phases": data if isinstance(data, dict) else {}, "code": proc.returncode,
        "err": errors.strip().splitlines()[-1:] if proc.returncode else [],
    }  # fmt: skip


def one(n: int, ppn: int, tmp: Path, env: dict[str, str], pool_size: int | None = None) -> dict[str, Any]:
    # The pods per node (and pool size) are in the name: a --keep directory reused with another makes new fleets.
    cut = f"-{pool_size}pp" if pool_size else ""
    snap = tmp / f"fleet-{n}-{ppn}ppn{cut}.jsonl"
    plan, other = tmp / f"plan-{n}{cut}.yaml", tmp / f"plan-{n}{cut}-b.yaml"
    if not snap.exists():
        subprocess.run(
            [sys.executable, str(HERE / "gen_fleet.py"), "--nodes", str(n), "--pods", str(n * ppn),
             "--workloads", str(max(20, n)), "-o", str(snap),
             *(["--pool-size", str(pool_size)] if pool_size else [])],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        with_dra_driver(snap)
    py, cli = sys.executable, [sys.executable, "-m", "dra_migrate"]
    r: dict[str, Any] = {"nodes": n, "snapshotBytes": snap.stat().st_size}
    # The parse is the denominator of two ratios: a cold page cache (the first read of a snapshot another
    # process's memory pushed out) charged its sys time to it and read 3.0 s where a warm parse is 1.4 s,
    # halving the ratios. The file is read once first, and the quicker of two parses kept.
    with snap.open("rb") as f:
        while f.read(1 << 24):
            pass
    r["parse"] = quicker(lambda: run([py, "-c", PARSE, str(snap)], env))
    # Its numerators the same way: the system time of their page faults (a 10,000-node inventory holds
    # 0.9 GB; the parse, nothing) varied 0.8-2.0 s between runs of the same build on this VM.
    r["inventory"] = quicker(lambda: run([py, "-c", PHASES, str(snap), "inventory"], env))
    # The same lines without the closing line's announcement: read as a kubectl export is, every line parsed
    # whole and checked (dra_migrate/cluster/sealed.py reads the sealed file).
    r["inventoryPlain"] = run([py, "-c", PHASES, str(unsealed(snap)), "inventory"], env)
    r["plan"] = quicker(lambda: run([py, "-c", PHASES, str(snap), "plan"], env))
    made = run([*cli, "plan", "--snapshot", str(snap), "--out", str(plan), "--force"], env)
    run([*cli, "plan", "--snapshot", str(snap), "--out", str(other), "--force", "--max-unavailable", "20%"], env)
    r["planCommand"] = made
    if made["code"] != 0:
        raise SystemExit(f"plan failed at {n} nodes: {made['err']}")
    r["planBytes"] = plan.stat().st_size
    r["yaml"] = run([py, "-c", YAML_LOAD, str(plan)], env)
    r["yaml2"] = run([py, "-c", YAML_LOAD, str(plan), str(other)], env)
    r["idle"] = run([*cli, "--version"], env)
    r["bare"] = run([py, "-c", "import yaml"], env)
    r["show"] = run([*cli, "show", str(plan)], env)
    r["showJson"] = run([*cli, "show", str(plan), "-o", "json"], env)
    r["showYaml"] = run([*cli, "show", str(plan), "-o", "yaml"], env)
    r["status"] = run([*cli, "status", str(plan)], env)
    r["applyRefusal"] = run([*cli, "apply", str(plan), "--snapshot", str(snap)], env)
    r["diff"] = run([*cli, "diff", str(plan), str(other)], env)
    return r


def quicker(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The quicker of two runs, by CPU time."""
    return min((measure() for _ in range(2)), key=lambda x: x["cpu"])


def unsealed(snap: Path) -> Path:
    """A copy of a snapshot whose header does not announce its closing line."""
    plain = snap.with_name(snap.stem + "-plain.jsonl")
    if not plain.exists():
        with snap.open("rb") as src, plain.open("wb") as out:
            head = json.loads(src.readline())
            head.get("metadata", {}).pop("closedBy", None)
            out.write(json.dumps(head, separators=(",", ":")).encode() + b"\n")
            while chunk := src.read(1 << 24):
                out.write(chunk)
    return plain


def parts(r: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Each ratio's numerator and denominator."""
    parse = sum(r["parse"]["phases"].values())  # in-process, as inventory and plan (imports excluded)
    return {
        "inventory/parse": (sum(r["inventory"]["phases"].values()), parse),
        "inventory/parse, no closing line": (sum(r["inventoryPlain"]["phases"].values()), parse),
        "plan/parse": (sum(r["plan"]["phases"].values()), parse),
        "show/yaml": (r["show"]["cpu"], r["yaml"]["cpu"]),
        "show -o json/yaml": (r["showJson"]["cpu"], r["yaml"]["cpu"]),
        "status/yaml": (r["status"]["cpu"], r["yaml"]["cpu"]),
        "apply refusal/yaml": (r["applyRefusal"]["cpu"], r["yaml"]["cpu"]),
        "diff/yaml x2": (r["diff"]["cpu"], r["yaml2"]["cpu"]),
        "bytes per node": (r["planBytes"], r["nodes"]),
        "show memory/file": (r["show"]["rss"] - r["idle"]["rss"], r["planBytes"]),
        "show -o json memory/file": (r["showJson"]["rss"] - r["idle"]["rss"], r["planBytes"]),
        "show -o yaml memory/file": (r["showYaml"]["rss"] - r["idle"]["rss"], r["planBytes"]),
        "yaml memory/file": (r["yaml"]["rss"] - r["bare"]["rss"], r["planBytes"]),
    }


def _q(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("inf")


def ratios(r: dict[str, Any]) -> dict[str, float]:
    return {key: _q(a, b) for key, (a, b) in parts(r).items()}


def growth(small: dict[str, Any], large: dict[str, Any]) -> dict[str, float]:
    """Each ratio of what the larger fleet costs more than the smaller: its numerator's growth over its
    denominator's. A cost paid once per command (imports, a process's start) cancels out, so this is the
    ratio the command tends to as the fleet grows; one above its ratio at either size means a step grows
    faster than the fleet."""
    a, b = parts(small), parts(large)
    return {key: _q(b[key][0] - a[key][0], b[key][1] - a[key][1]) for key in a}


TARGETS: dict[str, float | None] = {
    "inventory/parse": 1.5, "inventory/parse, no closing line": None,
    "plan/parse": 2.5, "show/yaml": 3, "show -o json/yaml": 3, "status/yaml": 3,
    "apply refusal/yaml": 3, "diff/yaml x2": 2, "bytes per node": 300, "show memory/file": 5,
    "show -o json memory/file": 5, "show -o yaml memory/file": None, "yaml memory/file": None,
}  # fmt: skip
# `yaml memory/file`: what the bare C loader itself needs over `import yaml`, for scale (no target).
# `show -o yaml memory/file`: no target: YAML output is ruamel's dumper (as every command's -o yaml), whose
# modules alone are ~4x a 2,000-node plan file.
# `inventory/parse, no closing line`: the full path every snapshot from another writer takes (no target).


def table(results: list[dict[str, Any]]) -> str:
    sizes = [r["nodes"] for r in results]
    head = "| phase | " + " | ".join(f"{n:,} nodes: CPU s (wall s)" for n in sizes) + " |"
    lines = [head, "|" + "---|" * (len(sizes) + 1)]
    rows = ["parse", "inventory", "inventoryPlain", "plan", "yaml", "show", "showJson", "showYaml", "status"]
    rows += ["applyRefusal"]
    rows += ["yaml2", "diff"]
    for name in rows:
        lines.append(
            f"| {name} | " + " | ".join(f"{r[name]['cpu']:.2f} ({r[name]['wall']:.2f})" for r in results) + " |"
        )
        for sub in results[0][name]["phases"]:
            cells = " | ".join(f"{r[name]['phases'].get(sub, 0):.2f}" for r in results)
            lines.append(f"| &nbsp;&nbsp;{name}.{sub} | {cells} |")
    lines.append("")
    lines.append("| ratio | target | " + " | ".join(f"{n:,} nodes" for n in sizes) + " |")
    lines.append("|" + "---|" * (len(sizes) + 2))
    rs = [ratios(r) for r in results]
    grown = growth(results[0], results[-1]) if len(results) > 1 else None
    if grown is not None:
        lines[-2] += f" growth {sizes[0]:,} -> {sizes[-1]:,} |"
        lines[-1] += "---|"
    for key, target in TARGETS.items():
        bound = "-" if target is None else f"<= {target}"
        extra = f" {grown[key]} |" if grown is not None else ""
        lines.append(f"| {key} | {bound} | " + " | ".join(str(x[key]) for x in rs) + " |" + extra)
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2000,10000")
    ap.add_argument("--pods-per-node", type=int, default=4, help="at 10, pools time-slice")
    ap.add_argument("--pool-size", type=int, help="GPU nodes per node pool (default: one pool per GPU model)")
    ap.add_argument("--keep", type=Path, help="keep fleets and plans here (and reuse the fleets)")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measured as installed: compiled modules cached
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "dra_migrate")], check=True, env=env)
    with tempfile.TemporaryDirectory() as t:
        tmp = args.keep or Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        results = []
        for n in (int(x) for x in args.sizes.split(",")):
            results.append(one(n, args.pods_per_node, tmp, env, args.pool_size))
            print(f"{n} nodes done", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    failed = [f"{r['nodes']}:{k}" for r in results for k in ("show", "status", "diff") if r[k]["code"] not in (0, 2)]
    print(table(results))
    if failed:
        print(f"\nfailed: {failed}", file=sys.stderr)


if __name__ == "__main__":
    main()
