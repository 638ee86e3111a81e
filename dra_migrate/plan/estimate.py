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

What the estimate cannot know it gives as a range. A PodDisruptionBudget that allows fewer disruptions than
the wave evicts of its pods holds those drains until replacements are Ready elsewhere (image pulls,
start-up, readiness probes: nothing a plan can see), up to the drain step's timeout, after which the wave
fails. `drain_holds` records such nodes in the plan (`summary.drainHolds`, node -> budget); the estimate's
low end takes no wait (`estimatedDuration`), its high end each held drain at its timeout
(`estimatedMaxDuration`, only in a plan with holds).

A client-side rate limit bounds a wave from below by its requests over the limit's QPS (`qps`).
The sequential model (`concurrent=False`) is the runner before nodes ran concurrently: every step in
turn on every node of the wave, so drains and canaries add up across the wave.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.podmeta import drain_skips, is_finished
from dra_migrate.inventory.placement import pdb_selects
from dra_migrate.plan.actions import Action, api_requests
from dra_migrate.plan.model import NodeEntry, PoolStage, PrepareStage, Stage, Step, stage_from_dict
from dra_migrate.plan.phases import PHASE_QUANTILES as PHASE_QUANTILES  # the reader's side: plan/phases.py
from dra_migrate.plan.phases import PHASE_SHOWN as PHASE_SHOWN
from dra_migrate.plan.phases import ExecutorCosts as ExecutorCosts
from dra_migrate.plan.phases import _wait_ready
from dra_migrate.plan.phases import estimate_text as estimate_text
from dra_migrate.plan.phases import format_seconds as format_seconds
from dra_migrate.plan.phases import phase_range as phase_range
from dra_migrate.plan.phases import sync_wait as sync_wait
from dra_migrate.sim.timing import DEFAULT_GRACE_S, REALISTIC, TimingProfile

_COSTS = ExecutorCosts()  # the defaults


@dataclass(frozen=True)
class NodeEstimate:
    node: str
    steps: dict[str, float]  # step -> seconds
    requests: int

    @property
    def seconds(self) -> float:
        return sum(self.steps.values())


def evicted(pod: Mapping[str, Any]) -> bool:
    """Whether a drain of the pod's node evicts it (live, neither a DaemonSet pod nor a mirror pod: the
    executor's filters, after kubectl's)."""
    return not is_finished(pod) and not drain_skips(pod)


def evicted_grace_periods(pods: Iterable[Mapping[str, Any]], node: str) -> list[float]:
    """terminationGracePeriodSeconds of the pods a drain of `node` evicts (`evicted`)."""
    out = []
    for p in pods:
        spec = p.get("spec") or {}
        if spec.get("nodeName") != node or not evicted(p):
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
    costs: ExecutorCosts = _COSTS,
) -> NodeEstimate:
    """One node's steps, in seconds, when it is one of `wave_size` nodes running at once."""
    rt, poll = costs.request_s, costs.poll_s
    evictions = len(grace_periods)
    terminating = max((profile.termination_s(g) for g in grace_periods), default=0.0)
    drain = rt + (rt + terminating + poll / 2 + rt if evictions else 0.0)
    wait_ready = _wait_ready(profile, costs, sync_wait(profile.node_status_sync_s, wave_size))
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
    max_seconds: float = 0.0  # the same with every budget-held drain at its timeout (>= seconds)

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
    costs: ExecutorCosts = _COSTS,
    concurrent: bool = True,
    held: Iterable[str] = (),
    drain_timeout_s: float = 0.0,
) -> WaveEstimate:
    """A wave of `nodes` (node -> grace periods of the pods its drain evicts); the drains of `held` nodes
    can wait on a budget up to `drain_timeout_s` (the range's high end)."""
    size = len(nodes) if concurrent else 1
    # By name, so ties go to the same node whatever the wave's order (a reordered plan is the same plan).
    per_node = [node_estimate(n, nodes[n], wave_size=size, profile=profile, costs=costs) for n in sorted(nodes)]
    slowest = max(per_node, key=lambda e: e.seconds, default=None)
    requests = sum(e.requests for e in per_node) + 1  # + the health gate's list
    seconds = _sequential(per_node) if not concurrent else slowest.seconds if slowest else 0.0
    held = set(held)
    extra = {e.node: max(drain_timeout_s - e.steps["drain"], 0.0) if e.node in held else 0.0 for e in per_node}
    if concurrent:
        most = max((e.seconds + extra[e.node] for e in per_node), default=0.0)
    else:
        most = seconds + sum(extra.values())
    if costs.qps:
        seconds = max(seconds, requests / costs.qps)
        most = max(most, seconds)
    return WaveEstimate(stage, wave, seconds, soak_s, slowest, requests, max(most, seconds))


def _sequential(per_node: Sequence[NodeEstimate]) -> float:
    """Every step in turn across the wave: a step's waits add up, except `wait-dra-ready`, whose
    plugins switched for every node one step earlier (only the first node waits, the rest are ready)."""
    total = 0.0
    for step in per_node[0].steps if per_node else ():
        times = [e.steps[step] for e in per_node]
        total += max(times) if step == Action.WAIT_DRA_READY else sum(times)
    return total


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


def _drain_step(stage: PoolStage) -> Step | None:
    """A pool stage's drain step (None when it has none)."""
    return next((s for s in stage.node_steps if s.action == Action.DRAIN), None)


def drain_scope(stage: PoolStage) -> str:
    """The drain scope of a pool stage (its drain step's params), "gpu" by default."""
    step = _drain_step(stage)
    return str(step.params.get("scope", "gpu")) if step is not None else "gpu"


def _drain_timeout(stage: PoolStage) -> float:
    """The drain step's timeout: how long a budget can hold a drain before the wave fails."""
    step = _drain_step(stage)
    return step.timeout_s if step is not None else 0.0


def disruptions_allowed(pdb: Mapping[str, Any]) -> int | None:
    """How many of its pods a budget lets go at once: its `status.disruptionsAllowed` as the disruption
    controller last wrote it, else `maxUnavailable` when it is a count; None when the snapshot does not say."""
    status = pdb.get("status") or {}
    if isinstance(status.get("disruptionsAllowed"), int):
        return max(int(status["disruptionsAllowed"]), 0)
    value = (pdb.get("spec") or {}).get("maxUnavailable")
    if isinstance(value, int):
        return max(value, 0)
    return 0 if value == "0%" else None


def drain_holds(
    pdbs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], waves: Iterable[Iterable[str]]
) -> dict[str, str]:
    """node -> the PodDisruptionBudget ("namespace/name") that can hold its drain: in the node's wave, the
    drains evict more of the budget's pods than it allows at once (or the snapshot does not say how many
    it allows). The Eviction API refuses the rest (429) until replacements are Ready elsewhere (policy/v1
    Eviction; k8s.io/kubernetes@v1.37.2 pkg/registry/core/pod/storage/eviction.go), a wait no plan can
    size. `pods` are the pods the drains evict (the snapshot keeps those that use devices)."""
    # Each budget looks only at its namespace's evicted pods, and adds them up per wave through the node's
    # wave: scanning every wave's nodes and pods once per budget grew with budgets x (nodes + pods), and a
    # fleet's budgets grow with it (one a workload is common).
    by_namespace: dict[Any, list[tuple[str, Mapping[str, Any]]]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node and evicted(p):
            by_namespace.setdefault((p.get("metadata") or {}).get("namespace"), []).append((str(node), p))
    waves_of: dict[str, list[int]] = {}  # node -> the waves it is in (one, in a plan), in order
    for i, wave in enumerate(waves):
        for n in dict.fromkeys(wave):
            waves_of.setdefault(n, []).append(i)
    # node -> (wave, budget) of the first budget to hold it, in the order of waves, then of budgets
    first: dict[str, tuple[int, int, str]] = {}
    for j, pdb in enumerate(pdbs):
        meta = pdb.get("metadata") or {}
        ns = meta.get("namespace")
        covered = Counter(node for node, p in by_namespace.get(ns, ()) if pdb_selects(dict(pdb), dict(p)))
        per_wave: Counter[int] = Counter()
        for n, count in covered.items():
            for i in waves_of.get(n, ()):
                per_wave[i] += count
        allowed = disruptions_allowed(pdb)
        held = {i for i, total in per_wave.items() if total and (allowed is None or total > allowed)}
        for n in covered:
            for i in waves_of.get(n, ()):
                known = first.get(n)
                if i in held and (known is None or (i, j) < known[:2]):
                    first[n] = (i, j, f"{ns}/{meta.get('name')}")
    out = {n: ref for n, (_, _, ref) in first.items()}
    return dict(sorted(out.items()))


# More pods than any node runs: upstream's large-cluster guidance is 110 per node ("Considerations for large
# clusters", kubernetes.io/docs/setup/best-practices/cluster-large/) and kubelet --max-pods is set per node;
# a count above this is an edit, refused by plan.validate. The estimate clamps to it so that such an edit
# is refused with its line instead of allocating a list per pod before validation runs (rebase recomputes
# the summary first).
MAX_PODS_PER_NODE = 10_000


def entry_grace_periods(entry: NodeEntry, scope: str, drain_grace: Mapping[str, float]) -> list[float]:
    """The grace periods a node entry's drain waits on: its GPU pods at the recorded longest grace (the
    drain waits for the longest), and with scope "all" its other pods at the default."""
    gpu = min(entry.gpu_pods, MAX_PODS_PER_NODE)
    other = min(entry.other_pods, MAX_PODS_PER_NODE) if scope == "all" else 0
    longest = float(drain_grace.get(entry.node, DEFAULT_GRACE_S))
    return [longest] * gpu + [float(DEFAULT_GRACE_S)] * other


def _typed(stages: Sequence[Stage | Mapping[str, Any]]) -> list[Stage]:
    """Stages as the model has them; a caller holding the file's shapes (bench/apply.py) has the codec
    read them (`stage_from_dict`), so the estimate itself reads only the model."""
    return [s if isinstance(s, PoolStage | PrepareStage) else stage_from_dict(s, f"stages[{i}]")
            for i, s in enumerate(stages)]  # fmt: skip


def plan_estimate(
    stages: Sequence[Stage | Mapping[str, Any]],
    drain_grace: Mapping[str, float],
    *,
    profile: TimingProfile = REALISTIC,
    costs: ExecutorCosts = _COSTS,
    concurrent: bool = True,
    holds: Mapping[str, str] | None = None,
) -> tuple[float, list[WaveEstimate]]:
    """The whole plan (its stages, `drain_grace` as `summary.drainGraceSeconds`, `holds` as
    `summary.drainHolds`) in seconds, soaks included, and each wave's estimate (with its high end). A
    function of the plan alone, so an edited plan's summary can be checked and recomputed (`plan.validate`)."""
    total = 0.0
    waves: list[WaveEstimate] = []
    for stage in _typed(stages):
        if not isinstance(stage, PoolStage):  # prepare: a few requests per step
            total += 3 * costs.request_s * len(stage.steps)
            continue
        scope, timeout = drain_scope(stage), _drain_timeout(stage)
        for w in stage.waves:
            nodes = {n.node: entry_grace_periods(n, scope, drain_grace) for n in w.nodes}
            est = wave_estimate(
                stage.name, w.name, nodes, w.soak_s, profile=profile, costs=costs, concurrent=concurrent,
                held=[n for n in nodes if n in (holds or {})], drain_timeout_s=timeout,
            )  # fmt: skip
            waves.append(est)
            total += est.seconds + w.soak_s + costs.request_s
    return total, waves


def plan_range(
    stages: Sequence[Stage], drain_grace: Mapping[str, float], holds: Mapping[str, str]
) -> tuple[float, float]:
    """(low, high) seconds of the whole plan: no budget waits, and every held drain at its timeout."""
    low, waves = plan_estimate(stages, drain_grace, holds=holds)
    return low, low + sum(w.max_seconds - w.seconds for w in waves)


def summary_estimate(
    stages: Sequence[Stage], drain_grace: Mapping[str, int], holds: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The plan summary's estimate fields, from the stages, the recorded drain grace periods and the
    budget-held drains (the range's high end and the holds only when there are any)."""
    holds = dict(sorted((holds or {}).items()))
    seconds, waves = plan_estimate(stages, drain_grace, holds=holds)
    out: dict[str, Any] = {"estimatedDuration": format_seconds(seconds)}
    if holds:
        out["estimatedMaxDuration"] = format_seconds(seconds + sum(w.max_seconds - w.seconds for w in waves))
    out.update(
        # Keyed by "<stage>/<wave>", so a diff of two plans pairs the same waves whatever their order.
        waveEstimates={w.key: w.to_dict() for w in waves},
        drainGraceSeconds=dict(sorted(drain_grace.items())),
    )
    if holds:
        out["drainHolds"] = holds
    return out
