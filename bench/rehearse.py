#!/usr/bin/env python3
"""What a rehearsal costs on this machine: wall time, peak memory, and the simulator's cost per node.

    python bench/rehearse.py [--sizes 200,2000] [--pods-per-node 4] [--time-scale 0.01] [--out FILE]
                             [--plan-args "--pools gpu-l4"] [--watch-twin]

For each size N: a synthetic fleet of N GPU nodes (bench/gen_fleet.py, deterministic; N/2 CPU nodes the
twin does not play, N x pods-per-node pods of which about a quarter use GPUs), `plan --snapshot`, then
`rehearse PLAN --snapshot` exactly as an operator runs it (a fresh twin control plane each time). While it
runs, every second: the resident memory of the rehearse process (the simulator and the executor live in
it) and of the twin's etcd, kube-apiserver, scheduler and controller manager (found by the twin's scratch
directory in their command lines). Phases are timed from the rehearsal's own log lines on stderr.

The simulator's per-node cost is the difference between two sizes over the difference in nodes (CPU
seconds of the rehearse process, and its peak RSS): what one more node costs, without the fixed cost of
Python, the client and the executor. A benchmark, never a test: quote ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
TWIN_MARK = "dra-migrate-twin-"  # dra_migrate/rehearse/twin.py: the twin's scratch directory prefix
PHASES = (
    ("twin-up", "twin:"),  # first "twin: N simulated GPU node(s)" line: control plane up, nodes registered
    ("recreated", "object(s) recreated"),
    ("scheduled", "the scheduler has seen every pod"),
    ("settled", "twin: settled"),
    ("applied", "wrote "),
)


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def rss(pid: int) -> int:
    fields = _read(f"/proc/{pid}/statm").split()
    return int(fields[1]) * PAGE if len(fields) > 1 else 0


def cpu_seconds(pid: int) -> float:
    stat = _read(f"/proc/{pid}/stat")
    rest = stat.rsplit(")", 1)[-1].split()
    return (int(rest[11]) + int(rest[12])) / TICKS if len(rest) > 12 else 0.0


def twin_pids() -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and TWIN_MARK in _read(f"/proc/{entry}/cmdline"):
            out.append(int(entry))
    return out


class Sampler(threading.Thread):
    """Peak RSS of the rehearse process and of the twin's processes, and the process's last CPU time."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_tool = 0
        self.last_tool = 0  # the latest sample: read at each phase, it shows where the memory goes
        self.peak_twin = 0
        self.cpu = 0.0
        self.loads: list[float] = []  # the 1-minute load average, each second: the machine's other work
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            load = _read("/proc/loadavg").split()
            if load:
                self.loads.append(float(load[0]))
            self.last_tool = rss(self.pid)
            self.peak_tool = max(self.peak_tool, self.last_tool)
            self.peak_twin = max(self.peak_twin, sum(rss(p) for p in twin_pids() if p != self.pid))
            self.cpu = max(self.cpu, cpu_seconds(self.pid))


# Lines of the twin's logs that say a watcher fell behind or a KWOK play failed (counted by TwinWatch).
LOG_MARKS = {
    "apiserver.log": ("Forcing", "too old resource version", "Terminating all watchers", "timeout"),
    "kwok.log": ("retrying for failed job", "Failed to sync lease", "too old resource version", "level=ERROR"),
}
TWIN_ANN = "twin.dra-migrate.io/"  # dra_migrate/sim/stages.py ANNOTATION


class TwinWatch(threading.Thread):
    """--watch-twin: every `every` s, how far KWOK is behind the twin's API server, read from outside.

    Backlog: nodes whose device-plugin label is off while the Stages still show the plugin running, and
    nodes whose DRA label is on while they show it stopped (transitions KWOK has not played yet), pods
    past their deletion time (a pod-kill not played yet); and counts of the log lines that say a watcher
    was dropped or a play failed. One list of nodes and one of terminating pods each time (resourceVersion=0:
    from the API server's watch cache, not etcd)."""

    def __init__(self, every: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.every = every
        # Other sessions' twins share /tmp: only the directories that appear after this one starts are ours.
        self.before = set(self._glob())
        self.samples: list[dict[str, Any]] = []
        self.done = threading.Event()

    def run(self) -> None:
        started = time.perf_counter()
        while not self.done.wait(self.every):
            try:
                sample = self.sample()
            except Exception as e:  # the twin is starting or stopping
                sample = {"error": str(e)[:120]}
            self.samples.append({"t": round(time.perf_counter() - started), **sample})

    @staticmethod
    def _glob() -> list[str]:
        import glob

        return glob.glob("/tmp/dra-migrate-twin-*/k8s/kubeconfig") + glob.glob(
            "/tmp/dra-migrate-rehearsal-*/kwok/kwok.log"
        )

    def dirs(self) -> tuple[Path | None, Path | None]:
        new = [Path(p) for p in self._glob() if p not in self.before]
        twins = [p.parent for p in new if p.name == "kubeconfig"]
        kwoks = [p.parent for p in new if p.name == "kwok.log"]
        return (twins[0] if twins else None, kwoks[0] if kwoks else None)

    def sample(self) -> dict[str, Any]:
        from datetime import datetime

        twin, kwok = self.dirs()
        out: dict[str, Any] = {}
        for where, name in ((twin, "apiserver.log"), (kwok, "kwok.log")):
            text = _read(str(where / name)) if where else ""
            out[name] = {m: text.count(m) for m in LOG_MARKS[name] if text.count(m)}
        if twin is None:
            return out
        sys.path.insert(0, str(ROOT))
        from dra_migrate.sim.kube import Kube, new_api_client

        api = new_api_client(twin / "kubeconfig", "dra-migrate-bench")
        try:
            kube = Kube(api)
            nodes, _ = kube.list_all("/api/v1/nodes", [("resourceVersion", "0")])
            dp, dra = 0, 0
            for n in nodes:
                meta = n.get("metadata") or {}
                labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
                dp += (
                    labels.get("nvidia.com/gpu.deploy.device-plugin") == "false"
                    and ann.get(TWIN_ANN + "device-plugin") == "running"
                )
                dra += (
                    labels.get("nvidia.com/dra-kubelet-plugin") == "true"
                    and ann.get(TWIN_ANN + "dra-plugin") == "stopped"
                )
            pods, _ = kube.list_all("/api/v1/pods", [("resourceVersion", "0")])
            now = time.time()
            late = []
            for p in pods:
                meta = p.get("metadata") or {}
                if meta.get("deletionTimestamp"):
                    due = datetime.fromisoformat(meta["deletionTimestamp"].replace("Z", "+00:00")).timestamp()
                    late.append(now - due)
            out.update(nodes=len(nodes), dpStopPending=dp, draStartPending=dra, pods=len(pods))
            out.update(podsPastDeletion=sum(1 for x in late if x > 0), worstPodLateS=round(max(late, default=0), 1))
        finally:
            api.close()
        return out


def fleet(nodes: int, pods_per_node: int, out: Path) -> None:
    subprocess.run(
        [sys.executable, str(HERE / "gen_fleet.py"), "--nodes", str(nodes), "--pods", str(nodes * pods_per_node),
         "--workloads", str(max(20, nodes)), "-o", str(out)],
        check=True,
    )  # fmt: skip


# The NVIDIA DRA driver's kubelet plugin as its chart installs it (nodeSelector on the per-node label the
# plan switches): gen_fleet's fleets run the device plugin only, and a fleet without the driver has a
# cluster-wide blocker (`dra-driver-missing`) no rehearsal gets past.
DRA_DRIVER = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "nvidia-dra-driver-gpu-kubelet-plugin", "namespace": "nvidia-dra-driver-gpu",
                 "uid": "5b1c0a6e-0d2f-4c1e-9a53-6f1f0d1e2a01", "resourceVersion": "100",
                 "creationTimestamp": "2026-10-01T08:00:00Z"},
    "spec": {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "nvidia-dra-driver-gpu-kubelet-plugin"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "nvidia-dra-driver-gpu-kubelet-plugin"}},
            "spec": {
                "nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "gpus", "image": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"}],
            },
        },
    },
}  # fmt: skip


def with_dra_driver(snap: Path) -> None:
    """Add the DRA driver's DaemonSet. A file the tool sealed (dra_migrate/cluster/sealed.py: gen_fleet.py
    writes one) keeps its seal: the line goes before the closing line, which is written again."""
    sys.path.insert(0, str(ROOT))
    from dra_migrate.cluster.sealed import Seal, is_end

    data = snap.read_bytes()
    line = json.dumps(DRA_DRIVER, separators=(",", ":")).encode() + b"\n"
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1  # the last line's start
    try:
        sealed = is_end(json.loads(data[cut:]))
    except ValueError:
        sealed = False
    if not sealed:
        snap.write_bytes(data + line)
        return
    seal = Seal(data[:cut])  # the CRC of the header and objects, one run of bytes
    seal.objects = data.count(b"\n", 0, cut) - 1
    seal.add(line)
    with snap.open("r+b") as fh:
        fh.seek(cut)
        fh.write(line + seal.end_line())
        fh.truncate()


PLAN_ARGS: list[str] = []  # --plan-args: more `plan` options, e.g. "--pools gpu-l4 --max-unavailable 25%"


def make_plan(cli: list[str], snap: Path, plan: Path) -> list[str]:
    """A plan of the pools that can be migrated; the pools a pool-scoped blocker stops are left out."""
    excluded: list[str] = []
    for _ in range(2):
        extra = (["--exclude-pools", ",".join(excluded)] if excluded else []) + PLAN_ARGS
        made = subprocess.run([*cli, "plan", "--snapshot", str(snap), "--out", str(plan), "--force", *extra],
                              cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
        if made.returncode != 0:
            raise SystemExit(f"plan failed: {made.stderr.strip().splitlines()[-1:]}")
        body = json.loads(subprocess.run([*cli, "show", str(plan), "-o", "json"], cwd=ROOT, capture_output=True,
                                         text=True, check=True).stdout)  # fmt: skip
        if body["applicable"]:
            return excluded
        blocked = {p for f in body["findings"] if f["severity"] == "blocker" for p in f.get("pools") or []}
        if not blocked or blocked <= set(excluded):
            raise SystemExit(f"the fleet cannot be planned: {[f['id'] for f in body['findings']]}")
        excluded = sorted(set(excluded) | blocked)
    raise SystemExit("the fleet cannot be planned")


def one(nodes: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    snap, plan, result = tmp / f"fleet-{nodes}.jsonl", tmp / f"plan-{nodes}.yaml", tmp / f"rehearsal-{nodes}.json"
    fleet(nodes, args.pods_per_node, snap)
    with_dra_driver(snap)
    cli = [sys.executable, "-m", "dra_migrate"]
    excluded = make_plan(cli, snap, plan)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*cli, "rehearse", str(plan), "--snapshot", str(snap), "--time-scale", str(args.time_scale), "-o", "json",
         "--out", str(result)],
        cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    sampler = Sampler(proc.pid)
    sampler.start()
    watch = TwinWatch() if args.watch_twin else None
    if watch is not None:
        watch.start()
    phases: dict[str, float] = {}
    rss_at: dict[str, int] = {}
    tail: list[str] = []
    assert proc.stderr is not None
    timeline: list[tuple[float, int, str]] = []
    for line in proc.stderr:
        tail = [*tail, line.rstrip()][-5:]
        timeline.append(
            (round(time.perf_counter() - started, 1), round(sampler.last_tool / 2**20), line[:100].rstrip())
        )
        for name, mark in PHASES:
            if name not in phases and mark in line:
                phases[name] = round(time.perf_counter() - started, 1)
                rss_at[name] = round(sampler.last_tool / 2**20)
    code = proc.wait()
    wall = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    if watch is not None:
        watch.done.set()
    if code not in (0, 2):
        raise SystemExit(f"rehearse of {nodes} nodes failed ({code}): {tail}")
    r = json.loads(result.read_text())
    waves = [w for w in r["waves"] if w["wave"]]
    return {
        "gpuNodes": nodes,
        "gpuPods": sum(1 for _ in _gpu_pods(snap)),
        "excludedPools": excluded,
        "migratedNodes": r["endState"]["nodesMigrated"],
        "waves": len(waves),
        "result": r["result"],
        "failure": r["failure"],
        "wallSeconds": round(wall, 1),
        "phases": phases,
        "toolCpuSeconds": round(sampler.cpu, 1),
        "toolPeakRssMiB": round(sampler.peak_tool / 2**20),
        "toolRssMiBAt": rss_at,
        "timeline": timeline if args.timeline else None,
        "twinPeakRssMiB": round(sampler.peak_twin / 2**20),
        "loadAverage1m": {
            "min": min(sampler.loads, default=None),
            "max": max(sampler.loads, default=None),
            "mean": round(sum(sampler.loads) / len(sampler.loads), 2) if sampler.loads else None,
        },
        "rehearsedSeconds": r["rehearsedSeconds"],
        "estimatedDuration": r["estimatedDuration"],
        "timeScale": args.time_scale,
        "apiRequests": r.get("apiRequests"),
        "waveSeconds": [w["seconds"] for w in waves],
        "waveTiming": wave_timing_summary(waves),
        "twinWatch": watch.samples if watch is not None else None,
    }


def wave_timing_summary(waves: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over waves of each point of a wave's `timing` (rehearse/model.py wave_timing), real seconds
    from the wave's first step: when its last lane ended each step, its gate (after the soak), and its
    canaries' created / bound / ended / deleted points (the wave's median canary and its slowest)."""
    import statistics

    timed = [w["timing"] for w in waves if w.get("timing")]
    if not timed:
        return {}

    def med(values: list[float]) -> float | None:
        return round(statistics.median(values), 2) if values else None

    steps = {a: med([t["steps"][a] for t in timed if a in t["steps"]]) for a in timed[0]["steps"]}
    canary = {
        name: {stat: med([t["canary"][name][stat] for t in timed if name in t.get("canary", {})])
               for stat in ("median", "max")}
        for name in (timed[0].get("canary") or {})
    }  # fmt: skip
    return {"steps": steps, "gate": med([t["gate"] for t in timed if "gate" in t]), "canary": canary}


def _gpu_pods(snap: Path) -> Any:
    import orjson

    with snap.open("rb") as fh:
        for line in fh:
            obj = orjson.loads(line)
            if obj.get("kind") != "Pod":
                continue
            for c in (obj.get("spec") or {}).get("containers") or []:
                if any(k.startswith("nvidia.com/") for k in ((c.get("resources") or {}).get("limits") or {})):
                    yield obj
                    break


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200,2000", help="GPU node counts, comma-separated (the last is quoted)")
    ap.add_argument("--pods-per-node", type=int, default=4, help="at 10, pools time-slice: no migration")
    ap.add_argument("--time-scale", type=float, default=0.01)
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    ap.add_argument("--timeline", action="store_true", help="record each log line with the process's RSS then")
    ap.add_argument("--watch-twin", action="store_true", help="sample KWOK's backlog and the twin's logs (15 s)")
    ap.add_argument("--plan-args", default="", help='more `plan` options, e.g. "--pools gpu-l4"')
    args = ap.parse_args()
    PLAN_ARGS.extend(args.plan_args.split())
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one(n, args, Path(tmp)) for n in sizes]
    out: dict[str, Any] = {"runs": runs}
    if len(runs) >= 2:
        small, big = runs[0], runs[-1]
        dn = big["gpuNodes"] - small["gpuNodes"]
        out["perNode"] = {
            "toolCpuMs": round(1000 * (big["toolCpuSeconds"] - small["toolCpuSeconds"]) / dn, 1),
            "toolRssKiB": round(1024 * (big["toolPeakRssMiB"] - small["toolPeakRssMiB"]) / dn, 1),
            "twinRssKiB": round(1024 * (big["twinPeakRssMiB"] - small["twinPeakRssMiB"]) / dn, 1),
        }
    text = json.dumps(out, indent=2)
    for run in runs:  # where a wave's time goes, on stderr: the JSON's `waveTiming`
        print(f"{run['gpuNodes']} nodes, a wave's median timing (s from its first step): "
              f"{json.dumps(run['waveTiming'])}", file=sys.stderr)  # fmt: skip
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
