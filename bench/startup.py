"""Start-up time of the CLI against a bare `import click` (issue 18 item 6).

    python bench/startup.py [--runs 15]

Each case runs in a fresh interpreter, `--runs` times; the median wall time is kept (start-up is noisy
on a shared machine, and the median of many runs is what a user feels). Cases:
  * baseline:   python -c "import click"  (the floor: the interpreter and the CLI library)
  * --version, --help, `completion bash`, and completing a subcommand name (what a shell's TAB runs)
  * `inventory --help` and `check --help` (a command module loaded, its heavy imports still deferred)
Target: --version, --help and completion within 3x of the baseline. Quote the ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "dra_migrate"]

CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    "baseline": ([sys.executable, "-c", "import click"], {}),
    "--version": ([*CLI, "--version"], {}),
    "--help": ([*CLI, "--help"], {}),
    "completion bash": ([*CLI, "completion", "bash"], {}),
    "complete 'ch<TAB>'": (
        CLI,
        {"_DRA_MIGRATE_COMPLETE": "bash_complete", "COMP_WORDS": "dra-migrate ch", "COMP_CWORD": "1"},
    ),
    "inventory --help": ([*CLI, "inventory", "--help"], {}),
    "check --help": ([*CLI, "check", "--help"], {}),
}
TARGETED = ("--version", "--help", "completion bash", "complete 'ch<TAB>'")
TARGET = 3.0


def _time(cmd: list[str], extra_env: dict[str, str], runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", **extra_env}
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False)  # warm the page cache
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    medians = {name: _time(cmd, env, args.runs) for name, (cmd, env) in CASES.items()}
    base = medians["baseline"]
    result = {
        "runs": args.runs,
        "medianMs": {k: round(v * 1000, 1) for k, v in medians.items()},
        "ratioToImportClick": {k: round(v / base, 2) for k, v in medians.items() if k != "baseline"},
        "target": f"{', '.join(TARGETED)} <= {TARGET}x",
    }
    result["meetsTarget"] = all(result["ratioToImportClick"][k] <= TARGET for k in TARGETED)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
