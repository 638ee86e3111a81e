"""Run a reviewed plan on a twin and say what happened (README "Rehearsal").

The twin is made from the snapshot: its GPU nodes (labels, taints, capacity, device plugin and DRA plugin as
the snapshot shows them) are played by the simulator, its namespaces, workloads, PodDisruptionBudgets,
DeviceClasses and NVIDIA stack objects are created on a private control plane, and the real scheduler and
controllers place the pods. The plan's stages run unchanged through the real executor; only what ties the
plan to the real cluster is re-taken on the twin (the fingerprint: uids and versions differ) and its
durations are scaled by the time scale (soaks, timeouts, the health gate), as the simulator's timings are.
Durations in the result are unscaled back to real time. Nothing here ever contacts the real cluster.
"""

from __future__ import annotations

import contextlib
import math
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.live import LiveCluster, LiveOptions, read_objects
from dra_migrate.cluster.state import ClusterState, StateBuilder
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.dra.devices import node_devices
from dra_migrate.errors import ClusterError, InputError
from dra_migrate.execute.journal import journal_path, read_journal
from dra_migrate.execute.ops import POLL_CAP_S, LiveOps, live_ops
from dra_migrate.execute.runner import RESUME_HINT, STOPPED, ApplyOptions, RunResult
from dra_migrate.execute.session import ApplySession
from dra_migrate.inventory.dra import NVIDIA_DRA_DRIVER
from dra_migrate.inventory.fleet import parse_version
from dra_migrate.inventory.operator import dra_plugin_daemonset_objects
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.actions import Action
from dra_migrate.plan.fingerprint import fingerprint
from dra_migrate.plan.model import Plan, PoolStage, Stage, Step
from dra_migrate.plan.params import format_duration, parse_duration
from dra_migrate.rehearse.apf import RequestMeter, tool_identity
from dra_migrate.rehearse.continuity import ContinuityWatch, kueue_served, plan_pairs
from dra_migrate.rehearse.model import Rehearsal, from_journal
from dra_migrate.rehearse.twin import K8S_VERSION, TWIN_GOGC, Twin, go_env
from dra_migrate.rehearse.twinops import NewPools, WatchingOps, scheduler_reason
from dra_migrate.sim.kube import Kube, new_api_client
from dra_migrate.sim.kueue import FETCH_HINT, KUEUE_VERSION, install_kueue_crds, kueue_crd_dir
from dra_migrate.sim.kwok import NODES, KwokFleet, content_pending
from dra_migrate.sim.load import CREATE_WORKERS, DEPENDENT_KEYS, LoadReport, load_dependents, load_workloads
from dra_migrate.sim.placement import LABEL_RULES, PluginRules
from dra_migrate.sim.spec import (
    GpuNodeSpec,
    specs_from_state,
)
from dra_migrate.sim.stack import install_nvidia_stack
from dra_migrate.sim.timing import REALISTIC, TimingProfile, profile

Log = Callable[[str], None]
# A scaled step timeout never below this. API round trips do not scale, nor does the simulator's own work:
# it plays a wave's kubelets from one process, so a 60-node wave of the 2,000-node fleet took over 10 s of
# real time to post allocatable 0 — a floor of 10 s failed a wave a real cluster passes.
MIN_TIMEOUT_S = 60
# ... plus this much per node of the stage's largest wave, on the twin only. The executor switches a wave's
# plugins in one step and then waits on every node; how soon the twin plays all of them is the twin's
# own lag, growing with the wave (one KWOK and one API server play them all), not the cluster's: a real
# node's kubelet and plugins run on that node. On a loaded 2,000-node twin an 80-node wave had 80 device-
# plugin stops unplayed 35 s after the switch, writes taking up to 0.7 s each, and one node missed the
# flat 60 s. The plan's own timeouts (what apply uses on a cluster) are not changed: only the twin's copy.
TWIN_LAG_PER_WAVE_NODE_S = 1.0


def twin_floor_s(wave_nodes: int) -> int:
    """The least a time-scaled step timeout may be on the twin, for a stage whose largest wave has
    `wave_nodes` nodes: 60 s, and 1 s more per node (100 nodes: 160 s)."""
    return MIN_TIMEOUT_S + math.ceil(TWIN_LAG_PER_WAVE_NODE_S * max(0, wave_nodes))


# The twin's kubelets heartbeat in real time: the node lifecycle controller that reads them runs in real
# time too (its grace period is not scaled). Kubelet renews every 10 s against a 50 s grace
# (pkg/kubelet/apis/config/v1beta1/defaults.go; KCM --node-monitor-grace-period); the twin keeps that
# ratio but beats no more than MAX_RENEWALS_PER_S in all: 2,000 nodes at 10 s are 200 writes a second,
# which on 2 cores took CPU the scheduler and the controllers needed. At 50 a second the renewals were
# still 14 % of every request the API server served in a 2,000-node rehearsal (6.95 PUTs of 50.2 per
# migrated node, issue 25); nothing the cutover does reads them (the node lifecycle controller only needs
# each renewal inside its grace, which scales with the beat).
HEARTBEAT_S = 10.0
MAX_RENEWALS_PER_S = 10
GRACE_PER_HEARTBEAT = 5
LEASE_PER_HEARTBEAT = 4  # kubelet: a 40 s Lease renewed every 10 s; KWOK renews at a quarter of the duration
# The twin's controllers and scheduler do in minutes what the cluster's did over months (every pod of
# every workload at once), at their client rate: 20 requests/s for the controller manager by default.
# One request per node and a few per pod at once need more; the twin is private, so it loads no one.
MIN_CLIENT_QPS = 50
# The executor's polls of the twin, all lanes together, at most this many a second once they have grown
# to their cap (see _scaled_ops).
POLL_BUDGET_PER_S = 100


def twin_heartbeat_s(nodes: int) -> float:
    """Seconds between a simulated kubelet's Lease renewals: kubelet's 10 s, longer for a big twin."""
    return max(HEARTBEAT_S, nodes / MAX_RENEWALS_PER_S)


# The least real time between a canary's binding and its end on the twin (see twin_timing).
CANARY_WINDOW_S = 0.25


def twin_timing(scale: float) -> TimingProfile:
    """The realistic profile at `scale`, the canary's start and run included, but never shorter in all
    than CANARY_WINDOW_S of real time.

    A canary that ends sooner after binding than the executor reads its claim loses the claim: the
    resourceclaim controller deletes a generated claim once its pod is terminal (k8s.io/kubernetes@v1.37.2
    pkg/controller/resourceclaim/controller.go L1650-1668). The executor then judges it by the node's
    published devices only (ops.LiveOps._judge_canary), a weaker path a real cluster rarely takes. The
    executor reads the claim from its claims watch as soon as the pods watch shows the canary bound (the
    scheduler writes the claim in PreBind, before the binding: KEP-5004), so the window only has to cover a
    watch event's delivery in a busy process, not a poll: a quarter of a second. Before the executor
    watched, it polled, and the twin ran the canary's start and run at their real 1.5 s — on every wave's
    critical path, unscaled (45 s of a 2,000-node rehearsal's 30 waves).
    """
    scaled = profile("realistic", scale)
    window = scaled.container_start_s + scaled.canary_run_s
    return replace(scaled, canary_run_s=scaled.canary_run_s + max(0.0, CANARY_WINDOW_S - window))


def canary_real_s(timing: TimingProfile, scale: float) -> float:
    """Of a canary's window on the twin, what ran at real speed rather than scaled: the floor's share
    (counted at its real length in the rehearsed duration, as the API round trips are)."""
    window = timing.container_start_s + timing.canary_run_s
    scaled = (REALISTIC.container_start_s + REALISTIC.canary_run_s) * scale
    return max(0.0, window - scaled)


def _scaled(text: str, scale: float, floor: int) -> str:
    seconds = parse_duration(text)
    if seconds == 0:
        return text
    return format_duration(max(floor, math.ceil(seconds * scale)))


def pool_labels(plan: Plan) -> tuple[str, ...]:
    """The node labels the plan read pools from (its `parameters.poolLabels`)."""
    return tuple(plan.parameters.get("poolLabels") or ())


def twin_plan(plan: Plan, twin_state: ClusterState, scale: float, twin_fp: dict[str, Any] | None = None) -> Plan:
    """The reviewed plan's stages, fingerprinted on the twin and time-scaled, sealed anew. `twin_fp`: the
    fingerprint of `twin_state` when it is known already (`stable_state` made it to compare its reads): the
    same function of the same state, so it is not made again (the checks' pass over a 2,000-node twin took
    0.6 s on the rehearsal's critical path)."""
    twin = twin_state.source.identity
    labels = pool_labels(plan)
    if twin_fp is None:
        twin_fp = fingerprint(twin_state, assess(twin_state, pool_labels=labels))
    derived = replace(
        plan,
        edited=None,
        # The executor runs it on the twin, a cluster of its own: recorded as the operator's cluster, the plan
        # was refused by apply's other-cluster check (cluster/identity.py) whenever it came from a live read.
        cluster_identity=twin if twin.uid else None,
        fingerprint=twin_fp,
        stages=tuple(_time_scaled(stage, scale) for stage in plan.stages),
        digests=None,
        digest=None,
    )
    return plan_io.seal_plan(derived)


def _time_scaled(stage: Stage, scale: float) -> Stage:
    """A stage with its steps' timeouts and its waves' soaks scaled. Floors keep them usable: a timeout is
    at least the twin's floor for the stage's largest wave (`twin_floor_s`), a soak at least 1 s."""
    largest = max((len(w.nodes) for w in stage.waves), default=0) if isinstance(stage, PoolStage) else 0
    floor = twin_floor_s(largest)

    def step(s: Step) -> Step:
        return replace(s, timeout=_scaled(s.timeout, scale, floor))

    if isinstance(stage, PoolStage):
        waves = tuple(replace(w, soak_after=_scaled(w.soak_after, scale, 1)) for w in stage.waves)
        return replace(stage, node_steps=tuple(map(step, stage.node_steps)), waves=waves)
    return replace(stage, steps=tuple(map(step, stage.steps)))


def largest_wave(plan: Plan) -> int:
    """Nodes in the plan's largest wave: the executor's lanes at once."""
    sizes = [len(w.nodes) for s in plan.stages for w in s.waves]
    return max(sizes, default=1)


def _scaled_ops(kubeconfig: Path, scale: float, lanes: int) -> LiveOps:
    """Live ops on the twin whose polls are scaled with its clock: a 2 s poll at scale 0.01 would read
    as 200 s of rehearsed time — but no faster than POLL_BUDGET_PER_S for all `lanes` together. The
    executor and the simulated kubelets share one Python process: 80 lanes polling every 0.1 s were 800
    requests a second, which starved the kubelets of the interpreter (a wave of the 2,000-node fleet
    failed wait-dra-ready after 60 s, its nodes' status never posted). The pool fits every lane."""
    ops = live_ops(kubeconfig, None, parallelism=lanes)
    ops.poll_s, ops.poll_cap_s = scaled_polls(ops.poll_s, scale, lanes)
    return ops


def scaled_polls(first_s: float, scale: float, lanes: int) -> tuple[float, float]:
    """(first poll, poll cap) for `lanes` at `scale`: the executor's own scaled, the cap no lower than
    all lanes together at POLL_BUDGET_PER_S, the first poll as far below the cap as the executor's is."""
    cap = max(0.1, POLL_CAP_S * scale, lanes / POLL_BUDGET_PER_S)
    return max(0.02, first_s * scale, cap * first_s / POLL_CAP_S), cap


def recreate(api: Any, state: ClusterState) -> LoadReport:
    """The snapshot's NVIDIA stack (the DRA driver when the snapshot shows it), ClusterPolicy, namespaces,
    workloads, budgets and classes on the cluster `api` talks to (its GPU nodes: `KwokFleet`); then its
    ResourceQuotas and Kueue queues (under Kueue's own CRDs when they are fetched: sim/kueue.py)."""
    policies = state.of("nvidia.com/ClusterPolicy")
    # A snapshot's own DRA kubelet-plugin DaemonSet is recreated with the workloads (and places the twin's
    # plugins, sim.placement); a stand-in is installed only for slices whose DaemonSet was not read: the GPU
    # driver's, never another driver's (dranet's dra.net, compute-domain.nvidia.com) the twin does not run.
    gpu_slices = any(
        (s.get("spec") or {}).get("driver") == NVIDIA_DRA_DRIVER for s in state.of("resource.k8s.io/ResourceSlice")
    )
    stand_in = gpu_slices and not dra_plugin_daemonset_objects(state)
    install_nvidia_stack(api, dra_driver=stand_in, cluster_policy=policies[0] if policies else None)
    notes: list[str] = []
    if any(state.of(k) for k in DEPENDENT_KEYS if k.startswith("kueue.")):
        crds = kueue_crd_dir()
        if crds is not None:
            install_kueue_crds(api, crds)
        else:
            notes.append(
                f"Kueue's CRDs v{KUEUE_VERSION} were not found: its queues were recreated under permissive CRDs "
                f"(nothing checks their fields); {FETCH_HINT}"
            )
    loaded = load_workloads(api, state, devices_only=True)
    dependents = load_dependents(api, state)
    loaded.created.update(dependents.created)
    loaded.existing.update(dependents.existing)
    loaded.skipped.extend(dependents.skipped + notes)
    return loaded


def read_cluster(kubeconfig: Path) -> ClusterState:
    """The state of the cluster at `kubeconfig`, read as `snapshot` reads it."""
    cluster = LiveCluster(LiveOptions(kubeconfig=kubeconfig))
    info, objects = read_objects(cluster, TemplateTable.builtin())
    builder = StateBuilder(info)
    builder.add_all(objects)
    return builder.state


def stable_state(
    kubeconfig: Path,
    labels: tuple[str, ...],
    timeout_s: float,
    rules: PluginRules = LABEL_RULES,
    kube: Kube | None = None,
) -> tuple[ClusterState, dict[str, Any]]:
    """The twin, and its fingerprint (as `twin_plan` takes it), once what a plan fingerprints has stopped
    moving: no node has a change still to come in what is fingerprinted of it (`sim.kwok.content_pending`),
    and two reads a second apart agree on what apply's staleness check compares.

    Right after the nodes register, the node lifecycle controller lifts their not-ready taints (and sets
    their beta OS and arch labels), and on a booted node the Stages post Ready first: a plan fingerprinted
    in the middle of that is stale a moment later, and apply would rightly refuse it. Two reads agreeing
    alone did not rule that out (a read takes seconds on a loaded twin, the controller may lag it); the
    nodes' own state says whether a change is still due.

    What is compared is each object's uid and content hash and the server's version: a resourceVersion that
    moved with nothing else is not drift (plan/drift.py `_objects`: status only), so apply does not refuse
    for it. A 2,000-node rehearsal waited two reads more on a GPU DaemonSet's status (its pods starting) and
    on the nodes' status writes (Ready, the DRA plugin's annotations), none of which makes a plan stale.
    """
    deadline = time.monotonic() + timeout_s
    if kube is not None:
        # With `kube`, the nodes are first seen to settle in a LIST of nodes alone: a whole read (every pod
        # and workload) took 7 s on the 2,000-node twin while its controllers still wrote, and loaded it.
        while pending_nodes(kube.list_all(NODES)[0], rules) and time.monotonic() < deadline:
            time.sleep(0.5)
    before: tuple[Any, ...] | None = None
    while True:
        state = read_cluster(kubeconfig)
        pending = pending_nodes(state.of("Node"), rules)
        fp = None if pending else fingerprint(state, assess(state, pool_labels=labels))
        now = None if fp is None else compared(fp)
        if fp is not None and now == before:
            return state, fp
        if time.monotonic() >= deadline and (pending or before is not None):
            if pending:
                first = ", ".join(f"{n}: {why}" for n, why in pending[:3])
                what = f"{len(pending)} node(s) still settling (first: {first})"
            else:
                assert now is not None and before is not None
                moving = _moving(list(before[1]), list(now[1]))
                what = f"{len(moving)} object(s) kept changing (first: {', '.join(moving[:3])})"
            raise InputError(
                f"the twin did not settle within {timeout_s:.0f}s: {what}",
                "run again with --debug to see the simulator's log",
            )
        before = now
        time.sleep(1.0)


def pending_nodes(nodes: Iterable[dict[str, Any]], rules: PluginRules) -> list[tuple[str, str]]:
    """(name, why) of each node with a change still due in what a plan fingerprints of it."""
    out = []
    for node in nodes:
        why = content_pending(node, rules)
        if why is not None:
            out.append((str((node.get("metadata") or {}).get("name")), why))
    return out


def compared(fp: dict[str, Any]) -> tuple[Any, ...]:
    """What of a fingerprint apply's staleness check compares (plan/drift.py): each object's identity, uid
    and content hash, and the server's version; not the resourceVersions."""
    keep = ("kind", "group", "namespace", "name", "uid", "content")
    return (fp.get("kubernetesVersion"), tuple({k: o.get(k) for k in keep} for o in fp.get("objects") or []))


def _moving(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    def key(o: dict[str, Any]) -> str:
        ns = str(o.get("namespace") or "")
        return f"{o.get('kind')} {ns + '/' if ns else ''}{o.get('name')}"

    old = {key(o): o for o in before}
    new = {key(o): o for o in after}
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def settle(kube: Kube, timeout_s: float) -> None:
    """Until the scheduler has looked at every pod the controllers made (bound, or reported unschedulable)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        items, _ = kube.list_all("/api/v1/pods", [("fieldSelector", "status.phase=Pending,spec.nodeName=")])
        if all(scheduler_reason(p) != "not yet scheduled" for p in items):
            return
        time.sleep(0.5)


@contextlib.contextmanager
def _terminated_as_exit() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C: the twin's control plane and kwok are stopped on the way out (Python's
    default SIGTERM ends the process at once and left them running)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def rehearse(
    plan: Plan,
    state: ClusterState,
    *,
    time_scale: float = 0.1,
    pending_threshold_s: float = 120.0,
    drain_timeout_s: float | None = None,
    parallelism: int | None = None,
    log: Log | None = None,
) -> Rehearsal:
    """`drain_timeout_s`, `parallelism`: apply's --drain-timeout and --parallelism (`apply_options`)."""
    say = log or (lambda _m: None)
    if drain_timeout_s is not None and drain_timeout_s <= 0:
        raise InputError("--drain-timeout 0s leaves no time to drain", "give a duration such as 10m")
    if not 0 < time_scale <= 1:
        raise InputError(f"--time-scale {time_scale} is out of range", "give a factor in (0, 1], e.g. 0.1")
    if not plan.applicable:
        blockers = plan.blockers
        raise InputError(
            f"the plan is not applicable (blockers: {', '.join(blockers) or '?'}): apply would refuse it",
            "resolve the blockers and make a new plan, then rehearse that",
        )
    specs = specs_from_state(state)
    if not specs:
        raise InputError(f"{state.source.location}: the snapshot has no GPU nodes to rehearse on", "")
    say("starting the twin's control plane")
    qps = max(MIN_CLIENT_QPS, len(specs) // 5)
    heartbeat = twin_heartbeat_s(len(specs))
    with (
        _terminated_as_exit(),
        Twin.start(
            client_qps=qps,
            node_grace_s=round(heartbeat * GRACE_PER_HEARTBEAT),
            audit=False,
            # The snapshot's nodes register steady (sim.kwok.node_manifest): no not-ready taint for the node
            # lifecycle controller to lift from 2,000 of them before the twin settles (12 s of a 2,000-node
            # rehearsal, eight PATCHes at a time). A booted node brings its own.
            disable_admission=("TaintNodesByCondition",),
            go_gc=TWIN_GOGC,
        ) as twin,
        tempfile.TemporaryDirectory(prefix="dra-migrate-rehearsal-") as scratch,
    ):
        api = new_api_client(twin.kubeconfig, "dra-migrate-rehearsal", pool_size=CREATE_WORKERS + 2)
        kube = Kube(api)
        timing = twin_timing(time_scale)
        with (
            KwokFleet(
                twin.kubeconfig,
                specs,
                workdir=Path(scratch) / "kwok",
                timing=timing,
                lease_s=round(heartbeat * LEASE_PER_HEARTBEAT),
                # The plugins run where the cluster's own DaemonSets place them (an upstream chart's node
                # affinity runs the DRA plugin on every GPU node, no toggle label involved).
                rules=PluginRules.from_state(state),
                steady=True,  # the snapshot's nodes were up, their plugins running: not booted anew
                env=go_env(TWIN_GOGC),
            ) as fleet,
            contextlib.ExitStack() as stack,  # the new pools' nodes, once a replace-pool plan asks for them
        ):
            say(f"twin: {len(fleet.node_names)} GPU node(s) played by KWOK")
            loaded = recreate(api, state)
            say(f"twin: {sum(loaded.created.values())} object(s) recreated, {len(loaded.skipped)} skipped")
            mark = time.monotonic()
            settle(kube, 60 + len(specs) / 10)
            say(f"twin: the scheduler has seen every pod ({time.monotonic() - mark:.1f}s)")
            labels = pool_labels(plan)
            mark = time.monotonic()
            settled, settled_fp = stable_state(twin.kubeconfig, labels, 60 + len(specs) / 10, fleet.rules, kube)
            derived = twin_plan(plan, settled, time_scale, settled_fp)
            say(f"twin: settled, the plan fingerprinted on it ({time.monotonic() - mark:.1f}s)")
            path = Path(scratch) / "rehearsal.plan.yaml"
            plan_io.write(derived, path)
            # The executor runs as the tool's ServiceAccount, classified by deploy/apf.yaml's FlowSchema: the
            # API server then counts its requests apart from the twin's own (kwok, controllers, scheduler).
            tool_kubeconfig = tool_identity(kube, twin.kubeconfig, Path(scratch))

            made: list[str] = []

            def new_fleet(new: list[GpuNodeSpec]) -> Any:
                """A replace-pool's new nodes: their own KWOK fleet (its own annotation), beside the twin's. Its
                plugins follow the toggle labels NewPools sets: the platform's switch, not a DaemonSet."""
                made.append(new[0].name)
                n = len(made)  # one fleet per new pool
                return stack.enter_context(KwokFleet(
                    twin.kubeconfig, new, workdir=Path(scratch) / f"kwok-new-{n}", timing=timing,
                    lease_s=round(heartbeat * LEASE_PER_HEARTBEAT), fleet=f"new-pool-{n}", env=go_env(TWIN_GOGC),
                ))  # fmt: skip

            pools = NewPools(derived, specs, node_devices(state), new_fleet, say)
            lanes = min(parallelism or largest_wave(derived), largest_wave(derived))
            ops = WatchingOps(_scaled_ops(tool_kubeconfig, time_scale, lanes), pools.provision)
            session = ApplySession(
                Plan.from_dict(plan_io.load(path)),
                path,
                ops=ops,
                lock_api=ops.api,
                actor="dra-migrate rehearse",
                log=say,
            )
            # The same policy as a real apply: applicable, not stale (against the twin), locked, journaled.
            session.refuse_if_not_applicable()
            session.refuse_if_stale(lambda: read_cluster(twin.kubeconfig))
            # Quota continuity (issue 27): every state of the twin's quotas and queues while the plan runs.
            continuity = ContinuityWatch(kube, plan_pairs(derived.to_dict()), kueue=kueue_served(kube))
            continuity.start()
            meter = RequestMeter(kube)
            meter.start()
            started = time.monotonic()
            try:
                opts = apply_options(derived, time_scale, pending_threshold_s, drain_timeout_s, parallelism)
                result = session.apply(opts)
            finally:
                wall = time.monotonic() - started
                meter.stop()
                checked = continuity.stop()
            refuse_unfinished(result)
            records = read_journal(journal_path(path))
            after = read_cluster(twin.kubeconfig)
        api.close()
    rehearsal = from_journal(
        plan,
        records,
        time_scale=time_scale,
        wall_seconds=wall,
        ok=result.ok,
        failure=result.failure,
        reasons=ops.reasons,
        after=after,
        unreproduced=_unreproduced(state, loaded),
        real_s_per_wave=canary_real_s(timing, time_scale),
    )
    rehearsal.api_requests = meter.summary(int(rehearsal.end_state.get("nodesMigrated") or 0))
    rehearsal.judge_continuity(checked.to_dict(), checked.failure())
    return rehearsal


def apply_options(
    plan: Plan, scale: float, pending_threshold_s: float, drain_timeout_s: float | None, parallelism: int | None
) -> ApplyOptions:
    """The executor's options on the twin: apply's, time-scaled as the plan's own durations are (`_time_scaled`;
    an overriding drain timeout is at least the twin's floor for the plan's largest wave). Without apply's
    --drain-timeout and --parallelism, a drain a budget held past the plan's timeout failed its rehearsal though
    apply, given the longer timeout, would wait it out; and a wave rehearsed whole evicted at once what apply
    evicts a few nodes at a time."""
    timeouts: dict[str, float] = {}
    if drain_timeout_s is not None:
        timeouts[str(Action.DRAIN)] = float(max(twin_floor_s(largest_wave(plan)), math.ceil(drain_timeout_s * scale)))
    return ApplyOptions(pending_threshold_s=pending_threshold_s * scale, parallelism=parallelism, timeouts=timeouts)


def refuse_unfinished(result: RunResult) -> None:
    """A run the executor stopped rather than failed is no verdict on the plan: a transient error of the twin
    (its API server not answering in time, on a loaded machine) or the loss of its lock. Reported as a failed
    rehearsal (exit 2) it read as a plan that fails, with apply's hint to resume a run that no longer exists."""
    if result.outcome != STOPPED:
        return
    what = (result.failure or "stopped").split(f" ({RESUME_HINT}")[0]
    raise ClusterError(
        f"the rehearsal stopped before its end, on an error of the twin, not a verdict on the plan: {what}",
        "rehearse again (a larger --time-scale loads the twin less); run with --debug to see the twin's logs",
    )


def _unreproduced(state: ClusterState, loaded: LoadReport) -> list[str]:
    out = list(loaded.skipped)
    theirs, ours = parse_version(state.source.kubernetes_version), parse_version(K8S_VERSION)
    if theirs is not None and ours is not None and theirs[:2] != ours[:2]:
        # The twin's API server, scheduler and controllers are v{K8S_VERSION} whatever the cluster runs: its
        # feature defaults and scheduling (KEP-5004 DRAExtendedResource: alpha 1.34, beta 1.36, GA 1.37) are
        # those of that release, not the cluster's.
        out.append(
            f"the twin's control plane is Kubernetes v{K8S_VERSION}, the cluster's "
            f"{state.source.kubernetes_version}: scheduling and feature defaults are those of v{K8S_VERSION}"
        )
    if loaded.without_devices:
        kinds = ", ".join(f"{k.rpartition('/')[2]} {n}" for k, n in sorted(loaded.without_devices.items()))
        out.append(
            f"workloads whose pods use no devices are not recreated ({kinds}): the twin plays only the GPU nodes"
        )
    out.extend(f"{kind}: {n} object(s) not read into the snapshot" for kind, n in sorted(state.skipped.items()))
    if state.other_pods_read:
        out.append(
            f"{state.other_pods_read} pod(s) without devices: the snapshot counts them, not their specs, so the twin "
            "runs none of them (their CPU and memory load and their budgets' pods are absent)"
        )
    out.append(
        "pods of built-in controllers (Deployments, StatefulSets, Jobs) are placed by the twin's scheduler, "
        "not pinned to their nodes in the snapshot"
    )
    out.append("ResourceClaims' allocations are not copied: the twin's scheduler allocates anew")
    return out
