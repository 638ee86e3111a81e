"""The executor's own overhead per node, on a real control plane with simulated GPU nodes.

    python bench/apply.py [--nodes 100]

Starts a control plane (tools/k8s/up) and a simulated fleet of N one-GPU nodes in one pool, installs
the DRA kubelet plugin's DaemonSet, plans (soak 0s, all nodes in one wave) and applies. Every step logs
its duration; the waits — drain (eviction and pods leaving), wait-dra-ready (the simulated plugin
publishing), canary (the scheduler placing a pod) — are the cluster's time, the rest (cordon, two
label switches, uncordon: the API calls, the journal's fsync'd records, the runner's bookkeeping) is
the executor's. It prints both per node, and the executor's per-node time against the time of the
same four node PATCH requests made directly with the same client (the floor for that work).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import controlplane  # noqa: E402

from migrate.sim.fleet import SimulatedFleet  # noqa: E402
from migrate.sim.kube import Kube, new_api_client, path_of  # noqa: E402
from migrate.sim.spec import GpuNodeSpec  # noqa: E402
from migrate.sim.stack import install_nvidia_stack  # noqa: E402

WAITS = ("drain", "wait-dra-ready", "canary")
STEP_LINE = re.compile(r"^(?P<id>\S+/(?P<node>[^/]+)/(?P<step>[a-z-]+)): ok \((?P<s>[0-9.]+)s\)$")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cp = controlplane.start(Path(tmp) / "k8s")
        try:
            print(json.dumps(run(cp, args.nodes, Path(tmp)), indent=2))
        finally:
            controlplane.stop(cp)


def run(cp: controlplane.ControlPlane, n: int, tmp: Path) -> dict[str, object]:
    specs = [GpuNodeSpec.small(f"bench-{i:03d}", gpus=1, pool="bench", driver_version="580.95.05") for i in range(n)]
    api = new_api_client(cp.kubeconfig, "dra-migrate-bench")
    kube = Kube(api)
    with SimulatedFleet(cp.kubeconfig, specs, heartbeat_seconds=10):
        install_nvidia_stack(api, dra_driver=True)
        deadline = time.monotonic() + 120
        while any(kube.get(path_of("v1", "nodes", s.name))["spec"].get("taints") for s in specs):
            if time.monotonic() > deadline:
                raise SystemExit("nodes did not become ready")
            time.sleep(1)
        plan = tmp / "plan.yaml"
        cli = [sys.executable, "-m", "migrate"]
        subprocess.run([*cli, "plan", "--kubeconfig", str(cp.kubeconfig), "--out", str(plan), "--soak", "0s",
                        "--max-unavailable", "100%"], check=True, cwd=ROOT, capture_output=True)  # fmt: skip
        started = time.perf_counter()
        r = subprocess.run([*cli, "apply", str(plan), "--kubeconfig", str(cp.kubeconfig), "--yes"],
                           cwd=ROOT, capture_output=True, text=True, check=False)  # fmt: skip
        total = time.perf_counter() - started
        if r.returncode != 0:
            raise SystemExit(r.stderr[-2000:])
        per_step: dict[str, float] = {}
        for line in r.stderr.splitlines():
            m = STEP_LINE.match(line.strip())
            if m:
                per_step[m["step"]] = per_step.get(m["step"], 0.0) + float(m["s"])
        waits = sum(v for k, v in per_step.items() if k in WAITS)
        executor = sum(v for k, v in per_step.items() if k not in WAITS)
        floor = patch_floor(kube, [s.name for s in specs])
    return {
        "nodes": n,
        "applySeconds": round(total, 1),
        "waitSecondsPerNode": round(waits / n, 3),
        "executorSecondsPerNode": round(executor / n, 3),
        "fourPatchesSecondsPerNode": round(floor / n, 3),
        "executorVsBarePatches": round(executor / floor, 2),
        "perStepSeconds": {k: round(v, 1) for k, v in sorted(per_step.items())},
    }


def patch_floor(kube: Kube, nodes: list[str]) -> float:
    """The same four node writes per node (cordon, two labels, uncordon), made directly."""
    started = time.perf_counter()
    for name in nodes:
        path = path_of("v1", "nodes", name)
        kube.merge_patch(path, {"spec": {"unschedulable": True}})
        kube.merge_patch(path, {"metadata": {"labels": {"bench": "a"}}})
        kube.merge_patch(path, {"metadata": {"labels": {"bench": None}}})
        kube.merge_patch(path, {"spec": {"unschedulable": False}})
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
