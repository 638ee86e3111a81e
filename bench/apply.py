"""Cutover benchmark: `apply` on a real control plane with KWOK GPU nodes (sim/kwok.py) playing the realistic
timing profile (dra_migrate/sim/timing.py), time-scaled to fit the machine.

    python bench/apply.py --nodes 200 --max-unavailable 100% --time-scale 0.05
    python bench/apply.py --nodes 2000 --max-unavailable 10% --time-scale 0.05 --heartbeat 20

Starts a control plane (tools/k8s/up, audit log on), a KWOK fleet of N one-GPU nodes in one pool
(every delay of the realistic profile, and the pods' grace periods, multiplied by --time-scale),
installs the DRA kubelet plugin's DaemonSet, puts --pods-per-node bare GPU pods with
terminationGracePeriodSeconds --grace on every node, plans (soak 0s) and applies with the CLI.
Per wave it reports, from the journal and the API server's audit log:
  * wallSeconds: first step start to last step end of the wave;
  * slowestNodeSeconds: the largest sum of one node's own step durations (what the wave would take if
    its nodes did not wait for one another), and wall / slowest (goal <= 1.2);
  * apiRequestsPerNode: requests of the tool's user agent during the wave (audit log), per node;
  * journalRecordsPerNode: the wave's step records, per node;
  * estimateSeconds: dra_migrate.plan.estimate for the same wave with the same scaled profile, the model
    matching the runner seen (concurrent when a wave's nodes overlap in the journal, else sequential),
    and estimate / wall (goal within 0.75..1.25).
Also the executor's own per-node time for the instant steps (cordon, two label switches, uncordon)
against the same four node PATCH requests made directly with one client (the floor for that work).
A benchmark, never a test: quote ratios from one run; absolute times depend on the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import controlplane  # noqa: E402

from dra_migrate.kube import USER_AGENT  # noqa: E402
from dra_migrate.plan import io as plan_io  # noqa: E402
from dra_migrate.plan.estimate import ExecutorCosts, plan_estimate  # noqa: E402
from dra_migrate.sim.kube import Kube, new_api_client, path_of  # noqa: E402
from dra_migrate.sim.kwok import KwokFleet  # noqa: E402
from dra_migrate.sim.spec import GpuNodeSpec  # noqa: E402
from dra_migrate.sim.stack import PAUSE_IMAGE, ensure_namespace, install_nvidia_stack  # noqa: E402
from dra_migrate.sim.timing import REALISTIC, profile  # noqa: E402

INSTANT_STEPS = ("cordon", "disable-device-plugin", "enable-dra-plugin", "uncordon")
NAMESPACE = "bench-work"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--max-unavailable", default="100%", help="the plan's wave size (default: one wave)")
    ap.add_argument("--time-scale", type=float, default=0.05, help="multiplies every simulated delay")
    ap.add_argument("--grace", type=int, default=30, help="terminationGracePeriodSeconds of the drained pods")
    ap.add_argument("--pods-per-node", type=int, default=1)
    ap.add_argument("--heartbeat", type=float, default=10, help="node Lease renewal (s), by KWOK; 20 for 2,000")
    ap.add_argument("--apply-arg", action="append", default=[], help="extra argument for apply (repeatable)")
    ap.add_argument("--canary-run", type=float, default=REALISTIC.canary_run_s,
                    help="seconds a simulated canary runs (unscaled); longer hides the claim race")  # fmt: skip
    ap.add_argument("--waves", type=int, default=0, help="stop apply (SIGKILL) once this many waves are done")
    ap.add_argument("--out", type=Path, help="also write the JSON result here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cp = controlplane.start(Path(tmp) / "k8s")
        try:
            result = run(cp, args, Path(tmp))
        finally:
            controlplane.stop(cp)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def run(cp: controlplane.ControlPlane, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    # The pods' own start and the canary's run stay at full length: a canary that ends faster than the
    # executor's next poll (0.5 s) after binding has its claim deleted by the resourceclaim controller
    # before the executor reads it (k8s.io/kubernetes@v1.37.2 pkg/controller/resourceclaim/controller.go
    # L1650-1668 deletes a generated claim once its pod is terminal) — a real race, not the bench's.
    timing = replace(
        profile("realistic", args.time_scale),
        container_start_s=REALISTIC.container_start_s,
        canary_run_s=args.canary_run,
    )
    specs = [
        GpuNodeSpec.small(f"bench-{i:04d}", gpus=1, pool="bench", driver_version="580.95.05") for i in range(args.nodes)
    ]
    api = new_api_client(cp.kubeconfig, "dra-migrate-bench")
    kube = Kube(api)
    started = time.perf_counter()
    # kwok renews a node's Lease at a quarter of its duration.
    with KwokFleet(cp.kubeconfig, specs, workdir=tmp / "kwok", timing=timing, lease_s=round(4 * args.heartbeat)):
        install_nvidia_stack(api, dra_driver=True)
        wait_untainted(kube, len(specs))
        create_pods(kube, specs, args.pods_per_node, args.grace)
        wait_running(kube, len(specs) * args.pods_per_node)
        setup_s = time.perf_counter() - started
        plan = tmp / "plan.yaml"
        cli = [sys.executable, "-m", "dra_migrate"]
        plan_args = ["--out", str(plan), "--soak", "0s", "--max-unavailable", args.max_unavailable]
        subprocess.run([*cli, "plan", "--kubeconfig", str(cp.kubeconfig), *plan_args],
                       check=True, cwd=ROOT, capture_output=True)  # fmt: skip
        audit = cp.dir / "audit.log"
        audit_from = audit.stat().st_size
        t0 = time.perf_counter()
        journal = tmp / "plan.yaml.journal.jsonl"
        stopped = apply(cli, plan, cp.kubeconfig, args.apply_arg, journal, args.waves)
        apply_s = time.perf_counter() - t0
        requests = tool_requests(audit, audit_from)
        floor = patch_floor(kube, [s.name for s in specs[: min(len(specs), 200)]])
    body = plan_io.load(plan)
    records = read_journal(journal)
    waves = measure_waves(records, requests)
    if stopped:
        waves = waves[: args.waves]  # the one it was killed in is not measured
    concurrent = any(w.overlapping for w in waves)
    # Today's canary passes once bound with a DRA allocation (a few tenths of a second); one that waits
    # for its container to exit takes at least the unscaled container start.
    canary_s = [st["canary"] for w in waves for st in w.node_steps.values() if "canary" in st]
    waits_for_exit = bool(canary_s) and sum(canary_s) / len(canary_s) >= REALISTIC.container_start_s
    costs = ExecutorCosts(canary_waits_for_exit=waits_for_exit)
    drain_grace = body["summary"].get("drainGraceSeconds") or {}
    _, estimates = plan_estimate(body["stages"], drain_grace, profile=timing, costs=costs, concurrent=concurrent)
    by_key = {e.key: e for e in estimates}
    per_wave = [w.report(by_key[w.key].seconds) for w in waves]
    instant = [d for w in waves for n, steps in w.node_steps.items() for s, d in steps.items() if s in INSTANT_STEPS]
    nodes = sum(len(w.node_steps) for w in waves)
    return {
        "nodes": args.nodes,
        "maxUnavailable": args.max_unavailable,
        "timeScale": args.time_scale,
        "podGraceSeconds": args.grace,
        "podsPerNode": args.pods_per_node,
        "canaryRunSeconds": args.canary_run,
        "applyArgs": args.apply_arg,
        "runner": "concurrent" if concurrent else "sequential",
        "canaryWaitsForExit": waits_for_exit,
        "stoppedAfterWaves": args.waves if stopped else None,
        "setupSeconds": round(setup_s, 1),
        "applySeconds": round(apply_s, 1),
        "waves": per_wave,
        "executorInstantStepsSecondsPerNode": round(sum(instant) / max(nodes, 1), 4),
        "fourPatchesSecondsPerNode": round(floor, 4),
        "executorVsBarePatches": round(sum(instant) / max(nodes, 1) / floor, 2) if floor else None,
        "targets": {"wallOverSlowestNode": "<= 1.2", "estimateOverWall": "0.75 .. 1.25"},
    }


def apply(cli: list[str], plan: Path, kubeconfig: Path, extra: list[str], journal: Path, waves: int) -> bool:
    """Run apply to the end (False), or SIGKILL it when wave `waves` + 1 starts (True)."""
    log = journal.with_name("apply.log")
    with log.open("w") as out:  # a file, not a pipe: nobody reads a pipe while apply runs
        proc = subprocess.Popen([*cli, "apply", str(plan), "--kubeconfig", str(kubeconfig), "--yes", *extra],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        while proc.poll() is None:
            if waves and journal.exists():
                seen = {f"{r['stage']}/{r['wave']}" for r in read_journal(journal) if r.get("wave")}
                if len(seen) > waves:
                    proc.kill()
                    proc.wait()
                    return True
            time.sleep(0.5)
    if proc.returncode != 0:
        raise SystemExit(f"apply failed (exit {proc.returncode}):\n{log.read_text()[-3000:]}")
    return False


def read_journal(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_bytes().splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):  # a line being written
            out.append(orjson.loads(line))
    return out


# -- set-up ----------------------------------------------------------------------------------------


def wait_untainted(kube: Kube, n: int, timeout: float = 300) -> None:
    """Until every bench node is Ready without the not-ready taint the node lifecycle controller sets."""
    deadline = time.monotonic() + timeout
    while True:
        items, _ = kube.list_all("/api/v1/nodes")
        ready = [i for i in items if i["metadata"]["name"].startswith("bench-") and not i["spec"].get("taints")]
        if len(ready) >= n:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(ready)} of {n} nodes became ready")
        time.sleep(1)


def create_pods(kube: Kube, specs: list[GpuNodeSpec], per_node: int, grace: int) -> None:
    """Bare GPU pods bound to each node (no controller recreates them once evicted: the wave's drain is
    the pods' grace, not a rescheduling storm the health gate would stop)."""
    ensure_namespace(kube, NAMESPACE)
    deadline = time.monotonic() + 60
    while kube.get_or_none(path_of("v1", "serviceaccounts", "default", NAMESPACE)) is None:
        if time.monotonic() > deadline:
            raise SystemExit("no default service account")
        time.sleep(0.2)
    pods = path_of("v1", "pods", namespace=NAMESPACE)
    for s in specs:
        for i in range(per_node):
            container = {"name": "work", "image": PAUSE_IMAGE, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{s.name}-w{i}"},
                "spec": {"nodeName": s.name, "terminationGracePeriodSeconds": grace, "containers": [container]},
            }
            kube.create(pods, body)


def wait_running(kube: Kube, n: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        items, _ = kube.list_all(path_of("v1", "pods", namespace=NAMESPACE))
        running = sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")
        if running >= n:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {running} of {n} pods Running")
        time.sleep(1)


def patch_floor(kube: Kube, nodes: list[str]) -> float:
    """Seconds per node for the same four node writes (cordon, two labels, uncordon), made directly."""
    started = time.perf_counter()
    for name in nodes:
        path = path_of("v1", "nodes", name)
        kube.merge_patch(path, {"spec": {"unschedulable": True}})
        kube.merge_patch(path, {"metadata": {"labels": {"bench": "a"}}})
        kube.merge_patch(path, {"metadata": {"labels": {"bench": None}}})
        kube.merge_patch(path, {"spec": {"unschedulable": False}})
    return (time.perf_counter() - started) / max(len(nodes), 1)


# -- measuring -------------------------------------------------------------------------------------


def _t(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def tool_requests(audit: Path, offset: int) -> list[float]:
    """Times of the requests the tool (its user agent) made, from the audit log after `offset`."""
    marker = f'"userAgent":"{USER_AGENT}'.encode()
    out = []
    with audit.open("rb") as f:
        f.seek(offset)
        for line in f:
            if marker in line:
                out.append(_t(orjson.loads(line)["requestReceivedTimestamp"]))
    return sorted(out)


def requests_in(times: list[float], span: tuple[float, float]) -> list[float]:
    return [t for t in times if span[0] <= t <= span[1]]


@dataclass
class WaveRun:
    key: str
    node_steps: dict[str, dict[str, float]]  # node -> step -> seconds
    spans: dict[str, list[tuple[float, float]]]  # node -> step spans
    records: int
    requests: list[float]

    @property
    def start(self) -> float:
        return min(a for spans in self.spans.values() for a, _ in spans)

    @property
    def end(self) -> float:
        return max(b for spans in self.spans.values() for _, b in spans)

    @property
    def overlapping(self) -> bool:
        """Whether two nodes' steps ran at the same time (a concurrent runner)."""
        spans = sorted((a, b, n) for n, ss in self.spans.items() for a, b in ss)
        return any(spans[i + 1][0] < spans[i][1] and spans[i + 1][2] != spans[i][2] for i in range(len(spans) - 1))

    def report(self, estimate_s: float) -> dict[str, Any]:
        nodes = len(self.node_steps)
        wall = self.end - self.start
        slowest_node, slowest = max(((n, sum(s.values())) for n, s in self.node_steps.items()), key=lambda x: x[1])
        steps: dict[str, float] = defaultdict(float)
        for s in self.node_steps.values():
            for k, v in s.items():
                steps[k] += v / nodes
        return {
            "wave": self.key,
            "nodes": nodes,
            "wallSeconds": round(wall, 2),
            "slowestNode": slowest_node,
            "slowestNodeSeconds": round(slowest, 2),
            "wallOverSlowestNode": round(wall / slowest, 2) if slowest else None,
            "apiRequestsPerNode": round(len(requests_in(self.requests, (self.start, self.end))) / nodes, 1),
            "journalRecordsPerNode": round(self.records / nodes, 1),
            "estimateSeconds": round(estimate_s, 2),
            "estimateOverWall": round(estimate_s / wall, 2) if wall else None,
            "meanStepSecondsPerNode": {k: round(v, 3) for k, v in sorted(steps.items())},
        }


def measure_waves(records: list[dict[str, Any]], requests: list[float]) -> list[WaveRun]:
    """Per wave (in order), each node's step durations from the journal's start and end records."""
    started: dict[str, tuple[str, float]] = {}
    waves: dict[str, WaveRun] = {}
    for r in records:
        if r.get("phase") != "apply" or "stepId" not in r:
            continue
        step_id = str(r["stepId"])
        if r["event"] == "start" and r.get("wave"):
            key = f"{r['stage']}/{r['wave']}"
            started[step_id] = (key, _t(r["time"]))
            waves.setdefault(key, WaveRun(key, {}, {}, 0, requests)).records += 1
        elif r["event"] == "end" and step_id in started:
            key, t0 = started.pop(step_id)
            _, node, step = step_id.rsplit("/", 2)
            wave = waves[key]
            wave.records += 1
            wave.node_steps.setdefault(node, {})[step] = _t(r["time"]) - t0
            wave.spans.setdefault(node, []).append((t0, _t(r["time"])))
    return list(waves.values())


if __name__ == "__main__":
    main()
