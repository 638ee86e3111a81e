"""Build a plan from one cluster state: a pure function of the state and the parameters.

Stage 0 `prepare` creates the DeviceClasses `generate deviceclasses` proposes and confirms the DRA
driver; then one stage per pool, in a safe order (pools whose consumers fit after migration first,
then the least disruptive), each in waves of at most `max_unavailable` nodes, least-loaded nodes
first. Per node: cordon, drain, device plugin off, DRA plugin on, wait until the node serves its GPUs
through DRA only, canary, uncordon — each with the inverse that restores the original values.

What "device plugin off" and "DRA plugin on" mean comes from the DaemonSets as installed
(`inventory.operator.*_placement`): the label each one selects on, or no step at all when the DRA
plugin already runs on the node (the DRA chart's default placement) or the device plugin already does
not. Nodes that cannot be migrated (a kubelet without DRA-backed extended resources, or a plugin no
label can switch) are left out, each with its reason, in `summary.excludedNodes`; the blockers that say
so concern only those nodes and do not make the rest of the plan inapplicable.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dra_migrate import __version__
from dra_migrate.checks.ignore import Acceptance, Accepted, split_accepted
from dra_migrate.cluster.identity import ClusterIdentity
from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.devices import node_devices
from dra_migrate.errors import InputError
from dra_migrate.gcpause import paused_gc
from dra_migrate.inventory.fleet import GpuNode, Pool
from dra_migrate.inventory.gangs import Gang
from dra_migrate.inventory.operator_activity import CLUSTER_POLICY_SWEPT
from dra_migrate.inventory.platform import REPLACE_POOL, PoolPlatform
from dra_migrate.plan import strategies
from dra_migrate.plan.derived import NODE_SCOPED
from dra_migrate.plan.exclusions import excluded_list, excluded_nodes
from dra_migrate.plan.fingerprint import fingerprint
from dra_migrate.plan.model import FORMAT_VERSION, NodeEntry, Plan, PoolStage, Stage, Wave
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.placement import Switch, placement_record, switch_groups
from dra_migrate.plan.steps import node_steps, prepare_stage
from dra_migrate.plan.summary import review_section, summary_section

if TYPE_CHECKING:
    from dra_migrate.checks.run import Readiness


def _refuse_a_swept_dra_label(state: ClusterState, readiness: Any, params: PlanParams) -> None:
    """`--dra-label` is the switch wherever no DRA DaemonSet was read; under a ClusterPolicy the GPU Operator
    deletes the GPUCluster stack's deploy labels from every node at a later reconcile (CLUSTER_POLICY_SWEPT),
    so each node it was set on would lose its DRA plugin after its canary passed."""
    if params.dra_label not in CLUSTER_POLICY_SWEPT or not state.of("nvidia.com/ClusterPolicy"):
        return
    if any(n.dra_placement is None or n.dra_placement.mode == "assumed" for n in readiness.inventory.nodes):
        raise InputError(
            f"--dra-label {params.dra_label}: the GPU Operator deletes this label from every node under a "
            "ClusterPolicy (gpu-operator v26.7.0 state_manager.go removeGPUStateLabels), and the DRA plugin with it",
            "install the DRA driver with a kubelet-plugin nodeSelector of its own (its chart's default "
            "nvidia.com/dra-kubelet-plugin=true) and plan with that label",
        )


@paused_gc()  # a fleet's plan is millions of objects: no collector pass rescans them (cluster/state.py)
def build_plan(
    state: ClusterState,
    params: PlanParams,
    *,
    feature_gates: dict[str, bool] | None = None,
    acceptances: Sequence[Acceptance] = (),
    today: dt.date | None = None,
) -> Plan:
    """The typed plan (without digests: `plan.io.seal` adds them when it is written). Findings the ignore file accepts
    (`acceptances`, unexpired on `today`) do not count; the review section records them as accepted risks."""
    # Imported here: the checks pull in the CEL engine, which a command that only reads a plan (show,
    # status, apply's refusal; they import this module for node_steps) must not pay for at start-up.
    from dra_migrate.checks.run import assess

    params = params.validate()
    gates = feature_gates or {}
    readiness = assess(state, pool_labels=params.pool_labels, feature_gates=gates, dra_driver=params.dra_driver)
    accepted: list[Accepted] = []
    if acceptances:
        readiness.findings, accepted, _ = split_accepted(readiness.findings, acceptances, today or dt.date.today())
    _refuse_a_swept_dra_label(state, readiness, params)
    excluded = excluded_nodes(readiness, gates, params.dra_driver)
    readiness.__dict__["_excluded"] = excluded
    selected, excluded_pools = _select_pools(readiness, params)
    stages = [prepare_stage(readiness, params)] + [
        s
        for pool in _pool_order(readiness, params, selected, excluded_pools)
        for s in _pool_stages(state, readiness, params, pool)
    ]
    stages = [s for s in stages if s.pool is None or s.waves]
    scoped = [{**f.to_record(), **readiness.scope_of(f)} for f in readiness.findings]
    # A finding about left-out pools only concerns no stage of this plan: it is recorded with them.
    chosen = set(selected)
    findings = [f for f in scoped if f["scope"] == "cluster" or chosen.intersection(f["pools"])]
    left_out: dict[str, list[dict[str, Any]]] = {}  # by pool, in finding order
    for f in scoped:
        if f["scope"] != "cluster" and not chosen.intersection(f["pools"]):
            for pool in f["pools"]:
                left_out.setdefault(pool, []).append(f)
    excluded_pools = [{**x, "findings": left_out.get(x["pool"], [])} for x in excluded_pools]
    return Plan(
        format_version=FORMAT_VERSION,
        tool={"name": "dra-migrate", "version": __version__},
        cluster=state.source.name,
        cluster_identity=_identity(state),
        parameters=params.to_dict(),
        fingerprint=fingerprint(state, readiness),
        # As a whole; `apply --stage` may run a stage no blocker stops (`stage_blockers`). A node-scoped
        # blocker only leaves its node out (summary.excludedNodes).
        applicable=not any(f["severity"] == "blocker" and f["id"] not in NODE_SCOPED for f in findings),
        findings=tuple(findings),
        summary={
            **summary_section(stages, params, state),
            "gangs": gang_disruption(stages, readiness),
            "excludedNodes": excluded_list(readiness, excluded),
        },
        review={
            **review_section(readiness, selected, excluded_pools),
            **({"acceptedRisks": [a.to_record() for a in accepted]} if accepted else {}),
        },
        stages=tuple(stages),
    )


# --- partial migrations: which pools, and which blockers stop which stage ------------------------------


def _select_pools(readiness: Readiness, params: PlanParams) -> tuple[list[str], list[dict[str, Any]]]:
    """The pools to plan (--pools, else all, minus --exclude-pools), and the left-out ones with why."""
    known = [p.name for p in readiness.inventory.pools]
    for flag, names in (("--pools", params.pools), ("--exclude-pools", params.exclude_pools)):
        unknown = [p for p in names if p not in known]
        if unknown:
            raise InputError(
                f"{flag} names unknown pool(s): {', '.join(unknown)}", f"pools: {', '.join(known) or 'none'}"
            )
    both = sorted(set(params.pools) & set(params.exclude_pools))
    if both:
        raise InputError(f"--pools and --exclude-pools both name {', '.join(both)}", "name each pool in one of them")
    selected: list[str] = []
    excluded: list[dict[str, Any]] = []
    for pool in known:
        if params.pools and pool not in params.pools:
            excluded.append({"pool": pool, "reason": "not named by --pools"})
        elif pool in params.exclude_pools:
            excluded.append({"pool": pool, "reason": "left out by --exclude-pools"})
        elif not _to_migrate(readiness, pool) and not _has_excluded_nodes(readiness, pool):
            excluded.append({"pool": pool, "reason": "already served by DRA: nothing to migrate"})
        else:
            selected.append(pool)
    return selected, excluded


@dataclass
class _Fleet:
    """What every pool's stage asks of the fleet, indexed once per plan: with pools growing with the fleet,
    each pool reading every node, gang, pool and capacity again made planning quadratic (issue 29: 2,000
    pools of five nodes spent 15 s of `plan` in those scans)."""

    nodes: dict[str, list[GpuNode]]  # by pool, in the inventory's order
    pools: dict[str, Pool]
    unfit: set[str]  # pools some of whose consumers would not fit after migration
    gpu_pods: Counter[str]  # node -> live pods on it (what a `--drain gpu` evicts)
    gang_nodes: list[tuple[Gang, set[str]]]  # each gang on more than one node, with its nodes
    gangs: dict[str, list[set[str]]]  # node -> the node sets of the gangs running on it (and elsewhere)


def _fleet(readiness: Readiness) -> _Fleet:
    found: _Fleet | None = readiness.__dict__.get("_fleet")
    if found is None:
        nodes: dict[str, list[GpuNode]] = {}
        for n in readiness.inventory.nodes:
            nodes.setdefault(n.pool, []).append(n)
        gang_nodes = _find_gang_nodes(readiness)
        gangs: dict[str, list[set[str]]] = {}
        for _, members in gang_nodes:
            for m in members:
                gangs.setdefault(m, []).append(members)
        found = _Fleet(
            nodes,
            {p.name: p for p in readiness.inventory.pools},
            {c.pool for c in readiness.capacity if not c.fits},
            _count_gpu_pods(readiness),
            gang_nodes,
            gangs,
        )
        readiness.__dict__["_fleet"] = found
    return found


def _has_excluded_nodes(readiness: Readiness, pool: str) -> bool:
    """Nodes of the pool left out by a node-scoped blocker: the pool stays planned (its findings with it),
    though it may have no stage (summary.excludedNodes says why)."""
    excluded = readiness.__dict__.get("_excluded") or {}
    return any(n.name in excluded for n in _fleet(readiness).nodes.get(pool, ()))


def _pool_fits(readiness: Readiness, pool: str) -> bool:
    return pool not in _fleet(readiness).unfit


def _to_migrate(readiness: Readiness, pool: str) -> list[GpuNode]:
    """Nodes of the pool still on the device plugin (already migrated ones need no steps), less the
    excluded ones."""
    excluded = readiness.__dict__.get("_excluded") or {}
    return [
        n
        for n in _fleet(readiness).nodes.get(pool, ())
        if not (n.dra_plugin_enabled and not n.device_plugin_enabled) and n.name not in excluded
    ]


def _pool_order(
    readiness: Readiness, params: PlanParams, selected: list[str], left_out: Sequence[dict[str, Any]] = ()
) -> list[str]:
    pools = [p for p in selected if _to_migrate(readiness, p)]
    unknown = [p for p in params.order if p not in pools]
    if unknown:
        why = {x["pool"]: x["reason"] for x in left_out}
        known = {p.name for p in readiness.inventory.pools}
        said = [
            f"{p}: {why.get(p) or ('no node of it can be migrated now' if p in known else 'no such pool')}"
            for p in unknown
        ]
        raise InputError(f"--order names pools this plan does not migrate ({'; '.join(said)})",
                         f"pools it migrates: {', '.join(pools) or 'none'}")  # fmt: skip

    def safe(pool: str) -> tuple[bool, int, str]:
        gpu_pods = sum(_gpu_pods(readiness, n.name) for n in _to_migrate(readiness, pool))
        return (not _pool_fits(readiness, pool), gpu_pods, pool)

    rest = sorted((p for p in pools if p not in params.order), key=safe)
    return list(params.order) + rest


def _gpu_pods(readiness: Readiness, node: str) -> int:
    """Live pods on the node that use devices (what a `--drain gpu` evicts)."""
    return int(_fleet(readiness).gpu_pods.get(node, 0))


def _count_gpu_pods(readiness: Readiness) -> Counter[str]:
    return Counter(
        str((p.get("spec") or {}).get("nodeName"))
        for p in readiness.inventory.state.of("Pod")
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


def _platform_of(readiness: Readiness, pool: str) -> PoolPlatform | None:
    found = _fleet(readiness).pools.get(pool)
    return found.platform if found is not None else None


def _pool_stages(state: ClusterState, readiness: Readiness, params: PlanParams, pool: str) -> list[Stage]:
    """One stage per pool, or one per group of its nodes when they need different labels switched; a pool
    the platform's stack serves is replaced instead (plan/strategies.py)."""
    platform = _platform_of(readiness, pool)
    if platform is not None and strategies.choose(platform).name == REPLACE_POOL:
        return _replace_pool_stages(state, readiness, params, pool, platform)
    groups = switch_groups(_to_migrate(readiness, pool), params)
    protect = platform.protect_annotation if platform is not None else None
    return [
        _pool_stage(state, readiness, params, pool, f"pool-{pool}" if i == 0 else f"pool-{pool}-{i + 1}", g, protect)
        for i, g in enumerate(groups)
    ]


def _pool_stage(
    state: ClusterState,
    readiness: Readiness,
    params: PlanParams,
    pool: str,
    name: str,
    group: tuple[Switch, Switch, list[GpuNode]],
    protect: str | None = None,
) -> Stage:
    dp_switch, dra_switch, nodes = group
    devices = node_devices(state, params.dra_driver)
    gpu_pods = {n.name: _gpu_pods(readiness, n.name) for n in nodes}
    ordered = sorted(nodes, key=lambda n: (gpu_pods[n.name], n.name))
    size = params.wave_size(len(nodes))
    resources = tuple(sorted({r for n in nodes for r in n.capacity}))
    keys = [s[0] for s in (dp_switch, dra_switch) if s is not None]
    waves = []
    by_node = _fleet(readiness).gangs
    gangs = list({id(g): g for n in nodes for g in by_node.get(n.name, ())}.values())  # the ones on these nodes
    groups = _group_waves(ordered, size, gangs)
    for i, members in enumerate(groups, 1):
        entries = tuple(
            NodeEntry(
                node=n.name,
                gpu_pods=gpu_pods[n.name],
                other_pods=state.other_pods.get(n.name, 0),
                expected_devices=devices[n.name].count if n.name in devices else 0,
                resources=tuple(sorted(n.capacity)),
                canary_resource=_canary_resource(n, readiness, params.dra_driver),
                original={
                    "unschedulable": n.unschedulable,
                    "labels": {k: n.labels.get(k) for k in keys},
                    **({"annotations": {protect: _annotations(state).get(n.name, {}).get(protect)}} if protect else {}),
                },
                placement=placement_record(n, params),
            )
            for n in members
        )
        evicted = sum(e.gpu_pods + (e.other_pods if params.drain == "all" else 0) for e in entries)
        soak = params.soak if i < len(groups) else "0s"
        waves.append(Wave(f"wave-{i}", entries, evicted, soak))
    return PoolStage(name, pool, resources, node_steps(params, dp_switch, dra_switch, protect), tuple(waves))


def _replace_pool_stages(
    state: ClusterState, readiness: Readiness, params: PlanParams, pool: str, platform: PoolPlatform
) -> list[Stage]:
    """`provision-<pool>` (the new pool up, proven, big enough), then `pool-<pool>`: the old nodes
    protected from their autoscaler, cordoned and drained, in the waves an in-place stage would have."""
    nodes = _to_migrate(readiness, pool)
    stage = _pool_stage(state, readiness, params, pool, f"pool-{pool}", (None, None, nodes))
    assert isinstance(stage, PoolStage)
    protect = platform.protect_annotation
    annotations = _annotations(state)
    waves = tuple(
        replace(
            w,
            nodes=tuple(
                replace(
                    e,
                    placement={},  # no plugin is switched on the old nodes
                    original={
                        **e.original,
                        "annotations": {protect: annotations.get(e.node, {}).get(protect)} if protect else {},
                    },
                )
                for e in w.nodes
            ),
        )
        for w in stage.waves
    )
    devices = node_devices(state, params.dra_driver)
    per_node = max((devices[n.name].count for n in nodes if n.name in devices), default=0)
    pool_obj = _fleet(readiness).pools[pool]
    canary = _canary_resource(nodes[0], readiness, params.dra_driver) if nodes else "nvidia.com/gpu"
    provision = strategies.replace_pool_provision(
        pool,
        platform,
        params,
        state.source.context or state.source.name,
        devices_per_node=per_node,
        demand=sum(pool_obj.requested.values()),
        canary_resource=canary,
    )
    steps = strategies.replace_pool_node_steps(params, protect)
    return [provision, replace(stage, node_steps=steps, waves=waves, strategy=REPLACE_POOL)]


def _annotations(state: ClusterState) -> dict[str, dict[str, Any]]:
    """Each node's annotations, by name: read once per plan, not once per replaced pool."""
    found: dict[str, dict[str, Any]] = state.memo(
        "plan.build.annotations",
        lambda: {
            str((n.get("metadata") or {}).get("name")): (n.get("metadata") or {}).get("annotations") or {}
            for n in state.of("Node")
        },
    )
    return found


def _gang_nodes(readiness: Readiness) -> list[tuple[Gang, set[str]]]:
    return _fleet(readiness).gang_nodes


def _find_gang_nodes(readiness: Readiness) -> list[tuple[Gang, set[str]]]:
    """Each gang with the nodes its live pods run on; gangs on one node need no grouping. Worked out once
    per plan (`_Fleet`), from the pods' nodes the inventory read: every pool's stage asks, and each asking
    read every pod of the fleet again (pools x pods)."""
    pods = readiness.inventory.pod_requests
    found = []
    for g in readiness.inventory.gangs:
        nodes = {node for node, _ in (pods.get(ref, (None, {})) for ref in g.pod_names) if isinstance(node, str)}
        if len(nodes) > 1:
            found.append((g, nodes))
    return found


def _group_waves(ordered: list[GpuNode], size: int, gangs: list[set[str]]) -> list[list[GpuNode]]:
    """Waves of at most `size` nodes, least-loaded first, with the nodes of one gang in one wave where the
    wave is wide enough: a gang evicted once restarts once, while one spread over k waves is broken k times
    (README "Gangs"). Nodes linked by any gang form one unit; a unit wider than a wave is cut in wave-sized
    pieces; units are placed first-fit, so waves stay full and keep the least-loaded-first order."""
    index = {n.name: i for i, n in enumerate(ordered)}
    parent = list(range(len(ordered)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for gang in gangs:
        members = sorted(index[n] for n in gang if n in index)
        for m in members[1:]:
            parent[root(m)] = root(members[0])
    units: dict[int, list[GpuNode]] = {}
    for i, n in enumerate(ordered):
        units.setdefault(root(i), []).append(n)
    pieces = [u[j : j + size] for u in units.values() for j in range(0, len(u), size)]
    waves: list[list[GpuNode]] = []
    for piece in sorted(pieces, key=lambda p: index[p[0].name]):
        home = next((w for w in waves if len(w) + len(piece) <= size), None)
        if home is None:
            waves.append(list(piece))
        else:
            home.extend(piece)
    return waves


def gang_disruption(stages: list[Stage], readiness: Readiness) -> list[dict[str, Any]]:
    """Per gang, the waves whose drains evict its pods: one is the least a migration can do."""
    wave_of = {e.node: f"{s.name}/{w.name}" for s in stages for w in s.waves for e in w.nodes}
    out = []
    for gang, nodes in _gang_nodes(readiness):
        waves = sorted({wave_of[n] for n in nodes if n in wave_of})
        if waves:
            out.append({"gang": gang.ref, "waves": waves})
    return out


def _canary_resource(node: GpuNode, readiness: Readiness, driver: str) -> str:
    """The node's GPU resource that a DeviceClass will map (what its pods will request): first one whose class
    matches a device of the node (`dra_served`: a resource left at 0, or one its devices do not serve, would make
    a canary no device can serve), else the first mapped."""
    from dra_migrate.dra.capacity import class_for, dra_served  # the CEL engine's importer: see build_plan

    served = [r for r, ok in dra_served(readiness.inventory.state, node, readiness.classes, driver).items() if ok]
    mapped = [r for r in sorted(node.capacity) if class_for(r, readiness.classes) is not None]
    return (served or mapped or sorted(node.capacity) or ["nvidia.com/gpu"])[0]


def _identity(state: ClusterState) -> ClusterIdentity | None:
    """The cluster the plan is made from, when the source knows it (a ClusterSnapshot or a live read)."""
    identity = state.source.identity
    return identity if identity.uid else None
