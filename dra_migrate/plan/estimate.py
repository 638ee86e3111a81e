"""How long applying a plan takes: the same timing model the simulator plays (`dra_migrate.sim.timing`,
each figure with its upstream source) walked along the executor's steps.

A wave's nodes run concurrently, so a wave takes as long as its slowest node; a node takes, step by
step:
  cordon            a few API round trips;
  drain             the evictions (issued together), then the longest terminationGracePeriodSeconds of
                    the pods actually evicted from it (a pod stays Terminating up to its grace: preStop
                    and SIGTERM both run inside it), noticed at the executor's next poll;
  two label writes  device plugin off, DRA plugin on;
  wait-dra-ready    the later of: the device plugin's pod gone and kubelet's next node-status sync
                    posting allocatable 0 (a sync is up to one period away: over n nodes ticking at
                    spread phases the slowest waits n/(n+1) of it), and the DRA plugin's start-up
                    with its ResourceSlice published; then one poll;
  canary            scheduling, the container's start and run (`nvidia-smi -L`), one poll, cleanup;
  uncordon.
Then the soak after the wave and the health gate. Pods whose grace the snapshot does not hold (the
non-GPU pods a `--drain all` evicts are only counted) are taken at Kubernetes' default 30 s.

A client-side rate limit bounds a wave from below by its requests over the limit's QPS (`qps`).
The sequential model (`concurrent=False`) is the runner before nodes ran concurrently: every step in
turn on every node of the wave, so drains and canaries add up across the wave.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_migrate.plan.actions import Action, api_requests
from dra_migrate.plan.params import parse_duration
from dra_migrate.sim.timing import DEFAULT_GRACE_S, REALISTIC, TimingProfile

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


@dataclass(frozen=True)
class ExecutorCosts:
    """What the executor itself adds, beside what the cluster's components take."""

    request_s: float = 0.02  # one API round trip on a healthy control plane
    poll_s: float = 0.5  # waits re-read state this often (LiveOps.poll_s): a change is seen ≤ one poll late
    # The scheduler allocating the canary's device through DRA and binding it (measured on the test
    # control plane: bench/apply.py's canary step, 0.6 s with its first poll).
    scheduling_s: float = 0.25
    qps: float | None = None  # the client's rate limit, when known (None: unbounded)
    # The canary passes when its container has run (`nvidia-smi -L`) and exited 0, not when it is bound.
    canary_waits_for_exit: bool = True


@dataclass(frozen=True)
class NodeEstimate:
    node: str
    steps: dict[str, float]  # step -> seconds
    requests: int

    @property
    def seconds(self) -> float:
        return sum(self.steps.values())


def evicted_grace_periods(pods: Iterable[Mapping[str, Any]], node: str) -> list[float]:
    """terminationGracePeriodSeconds of the pods a drain of `node` evicts (live, neither DaemonSet
    pods nor mirror pods: the executor's filters, after kubectl's)."""
    out = []
    for p in pods:
        spec = p.get("spec") or {}
        if spec.get("nodeName") != node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        meta = p.get("metadata") or {}
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            continue
        if any(r.get("controller") and r.get("kind") == "DaemonSet" for r in meta.get("ownerReferences") or []):
            continue
        grace = spec.get("terminationGracePeriodSeconds")
        out.append(float(grace) if isinstance(grace, (int, float)) and grace >= 0 else float(DEFAULT_GRACE_S))
    return out


def node_estimate(
    node: str,
    grace_periods: Sequence[float],
    *,
    wave_size: int = 1,
    profile: TimingProfile = REALISTIC,
    costs: ExecutorCosts = ExecutorCosts(),
) -> NodeEstimate:
    """One node's steps, in seconds, when it is one of `wave_size` nodes running at once."""
    rt, poll = costs.request_s, costs.poll_s
    evictions = len(grace_periods)
    terminating = max((profile.termination_s(g) for g in grace_periods), default=0.0)
    drain = rt + (rt + terminating + poll / 2 + rt if evictions else 0.0)
    # The slowest of `wave_size` nodes whose status syncs tick at uniformly spread phases.
    sync_wait = profile.node_status_sync_s * wave_size / (wave_size + 1)
    allocatable_zero = profile.plugin_exit_s + sync_wait
    # The DRA label is written one step (two requests) after the device-plugin label.
    slices_published = profile.dra_plugin_start_s - 2 * rt
    wait_ready = max(allocatable_zero - 2 * rt, slices_published, 0.0) + poll / 2 + rt
    run = profile.container_start_s + profile.canary_run_s if costs.canary_waits_for_exit else 0.0
    canary = 3 * rt + costs.scheduling_s + run + poll / 2 + 3 * rt
    steps = {
        Action.CORDON: 3 * rt,
        Action.DRAIN: drain,
        "disable-device-plugin": 2 * rt,
        "enable-dra-plugin": 2 * rt,
        Action.WAIT_DRA_READY: wait_ready,
        Action.CANARY: canary,
        Action.UNCORDON: 2 * rt,
    }
    polls_terminating = math.ceil((terminating + poll / 2) / poll) if evictions and poll > 0 else 0
    polls_ready = math.ceil(wait_ready / poll) if poll > 0 else 1
    count = (
        api_requests(Action.CORDON)
        + api_requests(Action.DRAIN)
        + evictions
        + polls_terminating
        + 2 * api_requests(Action.SET_LABEL)
        + api_requests(Action.WAIT_DRA_READY) * max(polls_ready, 1)
        + api_requests(Action.CANARY)
        + api_requests(Action.UNCORDON)
    )
    return NodeEstimate(node, steps, count)


@dataclass(frozen=True)
class WaveEstimate:
    stage: str
    wave: str
    seconds: float  # the wave's steps, soak excluded
    soak_s: float
    slowest: NodeEstimate | None
    requests: int

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.wave}"

    def to_dict(self) -> dict[str, Any]:
        """As the plan's `summary.waveEstimates[<stage>/<wave>]` holds it (soak excluded)."""
        return {"estimate": format_seconds(self.seconds), "slowestNode": self.slowest.node if self.slowest else None}


def wave_estimate(
    stage: str,
    wave: str,
    nodes: Mapping[str, Sequence[float]],
    soak_s: float,
    *,
    profile: TimingProfile = REALISTIC,
    costs: ExecutorCosts = ExecutorCosts(),
    concurrent: bool = True,
) -> WaveEstimate:
    """A wave of `nodes` (node -> grace periods of the pods its drain evicts)."""
    size = len(nodes) if concurrent else 1
    # By name, so ties go to the same node whatever the wave's order (a reordered plan is the same plan).
    per_node = [node_estimate(n, nodes[n], wave_size=size, profile=profile, costs=costs) for n in sorted(nodes)]
    slowest = max(per_node, key=lambda e: e.seconds, default=None)
    requests = sum(e.requests for e in per_node) + 1  # + the health gate's list
    seconds = _sequential(per_node) if not concurrent else slowest.seconds if slowest else 0.0
    if costs.qps:
        seconds = max(seconds, requests / costs.qps)
    return WaveEstimate(stage, wave, seconds, soak_s, slowest, requests)


def _sequential(per_node: Sequence[NodeEstimate]) -> float:
    """Every step in turn across the wave: a step's waits add up, except `wait-dra-ready`, whose
    plugins switched for every node one step earlier (only the first node waits, the rest are ready)."""
    total = 0.0
    for step in per_node[0].steps if per_node else ():
        times = [e.steps[step] for e in per_node]
        total += max(times) if step == Action.WAIT_DRA_READY else sum(times)
    return total


def format_seconds(seconds: float) -> str:
    """A duration rounded up to whole seconds, as plans write durations ("1m5s")."""
    total = math.ceil(seconds - 1e-9)
    h, rest = divmod(max(total, 0), 3600)
    m, s = divmod(rest, 60)
    return ((f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")) or "0s"


def drain_grace_by_node(pods: Iterable[Mapping[str, Any]], gpu_pods: Mapping[str, int]) -> dict[str, int]:
    """What the plan records for the estimate (`summary.drainGraceSeconds`): per node with GPU pods,
    the longest terminationGracePeriodSeconds of those its drain evicts (0 when none is evictable,
    e.g. only DaemonSet pods), only where it is not Kubernetes' default 30 s: most plans record none."""
    wanted = {n for n, count in gpu_pods.items() if count > 0}
    by_node: dict[str, list[Mapping[str, Any]]] = {n: [] for n in wanted}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node in wanted:
            by_node[str(node)].append(p)
    out = {}
    for n, ps in sorted(by_node.items()):
        longest = max(evicted_grace_periods(ps, n), default=0.0)
        if longest != DEFAULT_GRACE_S:
            out[n] = int(longest)
    return out


def _scope(stage: Mapping[str, Any]) -> str:
    """The drain scope of a pool stage (its drain step's params), "gpu" by default."""
    for step in stage.get("nodeSteps") or []:
        if isinstance(step, Mapping) and step.get("action") == Action.DRAIN:
            return str((step.get("params") or {}).get("scope", "gpu"))
    return "gpu"


# More pods than any node runs: upstream's large-cluster guidance is 110 per node ("Considerations for large
# clusters", kubernetes.io/docs/setup/best-practices/cluster-large/) and kubelet --max-pods is set per node;
# a count above this is an edit, refused by plan.validate. The estimate clamps to it so that such an edit
# is refused with its line instead of allocating a list per pod before validation runs (rebase recomputes
# the summary first).
MAX_PODS_PER_NODE = 10_000


def entry_grace_periods(entry: Mapping[str, Any], scope: str, drain_grace: Mapping[str, float]) -> list[float]:
    """The grace periods a node entry's drain waits on: its GPU pods at the recorded longest grace (the
    drain waits for the longest), and with scope "all" its other pods at the default."""
    gpu = min(int(entry.get("gpuPods") or 0), MAX_PODS_PER_NODE)
    other = min(int(entry.get("otherPods") or 0), MAX_PODS_PER_NODE) if scope == "all" else 0
    longest = float(drain_grace.get(str(entry.get("node")), DEFAULT_GRACE_S))
    return [longest] * gpu + [float(DEFAULT_GRACE_S)] * other


def plan_estimate(
    stages: Sequence[Mapping[str, Any]],
    drain_grace: Mapping[str, float],
    *,
    profile: TimingProfile = REALISTIC,
    costs: ExecutorCosts = ExecutorCosts(),
    concurrent: bool = True,
) -> tuple[float, list[WaveEstimate]]:
    """The whole plan (stages in the file's shape, `drain_grace` as `summary.drainGraceSeconds`) in
    seconds, soaks included, and each wave's estimate. A function of the plan alone, so an edited plan's
    summary can be checked and recomputed (`plan.validate`)."""
    total = 0.0
    waves: list[WaveEstimate] = []
    for stage in stages:
        if "waves" not in stage:  # prepare: a few requests per step
            total += 3 * costs.request_s * len(stage.get("steps") or [])
            continue
        scope = _scope(stage)
        for w in stage.get("waves") or []:
            nodes = {str(n["node"]): entry_grace_periods(n, scope, drain_grace) for n in w.get("nodes") or []}
            soak = float(parse_duration(str(w.get("soakAfter", "0s"))))
            est = wave_estimate(
                str(stage["name"]), str(w["name"]), nodes, soak, profile=profile, costs=costs, concurrent=concurrent
            )
            waves.append(est)
            total += est.seconds + soak + costs.request_s
    return total, waves


def summary_estimate(stages: Sequence[Mapping[str, Any]], drain_grace: Mapping[str, int]) -> dict[str, Any]:
    """The plan summary's estimate fields, from the stages and the recorded drain grace periods."""
    seconds, waves = plan_estimate(stages, drain_grace)
    return {
        "estimatedDuration": format_seconds(seconds),
        # Keyed by "<stage>/<wave>", so a diff of two plans pairs the same waves whatever their order.
        "waveEstimates": {w.key: w.to_dict() for w in waves},
        "drainGraceSeconds": dict(sorted(drain_grace.items())),
    }
