"""python -m dra_migrate.sim --kubeconfig K --snapshot S [--install-stack] [--load-workloads]
[--timing T --time-scale F]

Plays a snapshot's GPU nodes on the cluster K with KWOK (dra_migrate/sim/kwok.py) until SIGTERM or SIGINT,
then stops cleanly (exit 0); the nodes stay, as a stopped kubelet leaves its Node. Logs go to stderr.
`--timing realistic` plays the real components' delays (dra_migrate/sim/timing.py, with their upstream
sources); `--time-scale 0.1` plays them ten times faster.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.errors import MigrateError
from dra_migrate.sim.kube import new_api_client
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.load import CREATE_WORKERS, load_workloads
from dra_migrate.sim.spec import specs_from_state
from dra_migrate.sim.stack import install_nvidia_stack
from dra_migrate.sim.timing import PROFILES, profile

log = logging.getLogger("dra_migrate.sim")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    description = __doc__.splitlines()[3] if __doc__ else None
    p = argparse.ArgumentParser(prog="python -m dra_migrate.sim", description=description)
    p.add_argument("--kubeconfig", required=True, type=Path, help="cluster to simulate the nodes on")
    p.add_argument("--snapshot", required=True, type=Path, help="snapshot file or directory with the GPU nodes")
    p.add_argument(
        "--install-stack",
        action="store_true",
        help="also create the DRA kubelet plugin DaemonSet and the snapshot's ClusterPolicy",
    )
    p.add_argument("--load-workloads", action="store_true", help="also recreate the snapshot's workloads")
    p.add_argument(
        "--heartbeat-seconds", type=_positive_float, default=10.0, help="how often each node's Lease is renewed"
    )
    p.add_argument("--fleet", default="sim", help="the kwok.x-k8s.io/node annotation's value on its nodes")
    p.add_argument(
        "--timing",
        choices=sorted(PROFILES),
        default="instant",
        help="instant: every change at once (default); realistic: the real kubelet's and plugins' delays",
    )
    p.add_argument(
        "--time-scale",
        type=_positive_float,
        default=1.0,
        metavar="F",
        help="multiply every simulated delay (pods' grace periods included) by F, e.g. 0.1",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        state = load_snapshot(args.snapshot)
        specs = specs_from_state(state)
        if not specs:
            log.error("%s has no GPU nodes", args.snapshot)
            return 1
        timing = profile(args.timing, args.time_scale)
        scratch = tempfile.TemporaryDirectory(prefix="dra-migrate-sim-")
        # kwok renews a Lease at a quarter of its duration.
        lease_s = max(1, round(4 * args.heartbeat_seconds))
        fleet = KwokFleet(
            args.kubeconfig, specs, workdir=Path(scratch.name), timing=timing, lease_s=lease_s, fleet=args.fleet
        )
        try:
            fleet.start()
            if args.install_stack or args.load_workloads:
                api = new_api_client(args.kubeconfig, pool_size=CREATE_WORKERS + 2)
                if args.install_stack:
                    policies = state.of("nvidia.com/ClusterPolicy")
                    install_nvidia_stack(api, cluster_policy=policies[0] if policies else None)
                if args.load_workloads:
                    report = load_workloads(api, state)
                    log.info("loaded %d object(s); %d skipped", sum(report.created.values()), len(report.skipped))
                    for line in report.skipped:
                        log.warning("skipped %s", line)
                api.close()
            log.info("ready: KWOK plays %s", ", ".join(fleet.node_names))
            while not stop.wait(1):
                if not fleet.alive():
                    log.error("kwok exited; its log: %s", fleet.log_path.read_text(errors="replace")[-2000:])
                    return 1
        finally:
            fleet.stop()
            scratch.cleanup()
    except MigrateError as e:
        log.error("%s", e)
        return 1
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
