"""Gangs: inventory of all-or-nothing groups and whether they can still be placed whole (README "Gangs")."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.dra import gangfit
from dra_migrate.dra.gangfit import fits
from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.inventory.gangs import Gang, Role
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, obj, pod, pod_spec, template
from tests.unit.test_checks import GPU, gpu_node, make, severities

SCHED = "scheduling.k8s.io/v1beta1"


def pytorchjob(name: str, workers: int, gpus: int, **spec: Any) -> dict[str, Any]:
    ps = pod_spec(container(requests={GPU: gpus}))
    return obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        name,
        {"pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": template(ps)}}, **spec},
    )


def workers(job: dict[str, Any], nodes: list[str], gpus: int, phase: str = "Running") -> list[dict[str, Any]]:
    ps = pod_spec(container(requests={GPU: gpus}))
    return [pod(f"{job['metadata']['name']}-w-{i}", ps, owner=job, node=n, phase=phase) for i, n in enumerate(nodes)]


# --- packing -------------------------------------------------------------------------------------------------


def test_packing_is_per_node_not_a_sum_of_totals() -> None:
    # 64 free GPUs, but on sixteen nodes with 4 each: eight pods of 8 do not fit; eight of 4 do.
    half_used = {f"n{i}": {GPU: 4} for i in range(16)}
    assert not fits([{GPU: 8}] * 8, half_used)
    assert fits([{GPU: 4}] * 16, half_used)
    assert not fits([{GPU: 4}] * 17, half_used)


def test_packing_never_gives_a_gpu_twice_and_mixes_shapes() -> None:
    nodes = {"a": {GPU: 8}, "b": {GPU: 8}}
    assert fits([{GPU: 6}, {GPU: 2}, {GPU: 6}, {GPU: 2}], nodes)
    assert not fits([{GPU: 6}, {GPU: 6}, {GPU: 6}], nodes)
    # Two resources: a pod needs both on one node.
    mixed = {"a": {GPU: 8, "nvidia.com/mig-1g.10gb": 0}, "b": {"nvidia.com/mig-1g.10gb": 7}}
    assert not fits([{GPU: 1, "nvidia.com/mig-1g.10gb": 1}], mixed)
    assert fits([{GPU: 8}, {"nvidia.com/mig-1g.10gb": 7}], mixed)


def _one_pod_at_a_time(pods: list[dict[str, int]], capacity: dict[str, dict[str, int]]) -> bool:
    """Best-fit decreasing as it was written before runs of alike pods were placed a node at a time."""
    shape = gangfit._shape
    free = gangfit.shapes(capacity)
    for p in sorted(pods, key=lambda p: (-sum(p.values()), shape(p))):
        size, best, best_slack = sum(p.values()), None, 0
        for s in free:
            have = dict(s)
            if all(have.get(r, 0) >= v for r, v in p.items()):
                slack = sum(have.values()) - size
                if best is None or slack < best_slack or (slack == best_slack and s < best):
                    best, best_slack = s, slack
        if best is None:
            return False
        free[best] -= 1
        if not free[best]:
            del free[best]
        left = dict(best)
        for r, v in p.items():
            left[r] -= v
        free[shape(left)] += 1
    return True


def test_packing_a_node_at_a_time_decides_as_one_pod_at_a_time() -> None:
    """Runs of alike pods are packed a node at a time (issue 29): the verdict is the one-by-one packing's
    on every fleet and gang, including part-full nodes, several resources and pods that ask for nothing."""
    rng = random.Random(29)
    mig = "nvidia.com/mig-1g.10gb"
    agree = disagree = 0
    for _ in range(3000):
        capacity = {
            f"n{i}": {r: rng.choice((0, 1, 2, 3, 4, 7, 8)) for r in rng.sample((GPU, mig), rng.randint(1, 2))}
            for i in range(rng.randint(0, 12))
        }
        kinds = [{r: rng.randint(1, 5) for r in rng.sample((GPU, mig), rng.randint(0, 2))} for _ in range(3)]
        pods = [dict(rng.choice(kinds)) for _ in range(rng.randint(1, 40))]
        if fits(pods, capacity) == _one_pod_at_a_time(pods, capacity):
            agree += 1
        else:
            disagree += 1
    assert disagree == 0, disagree
    assert agree == 3000


def test_placement_runs_are_the_placement_set_counted() -> None:
    """The gang check packs `placement_runs` (made from the roles once per gang): the pods of
    `placement_set`, counted per shape, whatever the roles, their order and the minCount."""
    rng = random.Random(37)
    mig = "nvidia.com/mig-1g.10gb"
    for _ in range(500):
        roles = [
            Role(rng.randint(0, 6), {r: rng.randint(0, 4) for r in rng.sample((GPU, mig), rng.randint(0, 2))})
            for _ in range(rng.randint(0, 4))
        ]
        g = Gang("PyTorchJob", "ns", "j", "framework", rng.randint(1, 20), roles)
        assert gangfit.placement_runs(g) == Counter(gangfit._shape(p) for p in g.placement_set())


def _judge_point_by_point(
    gang: Gang, points: list[gangfit.Point], requested: dict[str, dict[str, int]], own: dict[str, dict[str, int]]
) -> tuple[str | None, str | None]:
    """The verdict as it was reached before the fleet's points were shaped once: every point's nodes in
    service packed on their own, the gang's own nodes given back at each."""
    pods = gang.placement_set()
    serving = [p.serving() for p in points]
    if not points or not fits(pods, serving[0]):
        return None, None
    whole = beside = None
    for p, capacity in zip(points[1:], serving[1:], strict=True):
        if whole is None and not fits(pods, capacity):
            whole = p.name
        if beside is None and whole is None:
            left = gangfit.minus(capacity, requested)
            for n, held in own.items():
                if n in capacity:
                    left[n] = {r: min(v, left[n].get(r, 0) + held.get(r, 0)) for r, v in capacity[n].items()}
            if not fits(pods, left):
                beside = p.name
    return whole, beside


_Map = dict[str, dict[str, int]]


def _random_fleet(rng: random.Random) -> tuple[list[GpuNode], _Map, _Map, _Map]:
    mig = "nvidia.com/mig-1g.10gb"
    nodes: list[GpuNode] = []
    before: _Map = {}
    after: _Map = {}
    for pool in range(rng.randint(1, 6)):
        for i in range(rng.randint(1, 8)):
            name = f"p{pool}-{i}"
            cap = {r: rng.choice((1, 2, 4, 8)) for r in rng.sample((GPU, mig), rng.randint(1, 2))}
            nodes.append(GpuNode(name, f"p{pool}", {}, cap, cap, {}, {}))
            before[name] = dict(cap)
            after[name] = {r: rng.choice((v, v, v - 1 if v else 0, 0)) for r, v in cap.items()}
    requested = {n: {r: rng.randint(0, v) for r, v in c.items()} for n, c in before.items() if rng.random() < 0.5}
    return nodes, before, after, requested


def test_shaping_the_fleet_once_judges_as_every_point_on_its_own() -> None:
    """`judge` packs each gang once per map and asks each point only what its wave takes away (issue 29:
    quadratic in pools x gangs before); the verdicts are those of packing every point's nodes on their own,
    over random fleets, waves, gangs, what other pods hold and which nodes the gang's own pods hold."""
    rng = random.Random(29)
    mig = "nvidia.com/mig-1g.10gb"
    verdicts: Counter[tuple[bool, bool]] = Counter()
    for _ in range(500):
        nodes, before, after, requested = _random_fleet(rng)
        points = gangfit.migration_points(nodes, before, after, fraction=rng.choice((0.1, 0.3, 0.5)))
        moments = gangfit.Moments(points, requested)
        for _ in range(3):
            roles = [
                Role(rng.randint(1, 6), {r: rng.randint(1, 4) for r in rng.sample((GPU, mig), rng.randint(1, 2))})
                for _ in range(rng.randint(1, 3))
            ]
            g = Gang("PyTorchJob", "ns", "j", "framework", rng.randint(1, 12), roles)
            own = {n: dict(requested[n]) for n in rng.sample(sorted(requested), min(len(requested), 3))}
            v = gangfit.judge(g, moments, own)
            expected = _judge_point_by_point(g, points, requested, own)
            assert (v.failed_whole, v.failed_beside_others) == expected, (g, own)
            verdicts[(v.failed_whole is not None, v.failed_beside_others is not None)] += 1
    assert len(verdicts) == 4 and min(verdicts.values()) > 20, verdicts  # blocked, warned and clear, all many times


def _packings(monkeypatch: pytest.MonkeyPatch, pools: int) -> int:
    """How many packings the gang check runs on a fleet of `pools` pools of five nodes, and a two-worker
    gang on each pool."""
    calls = 0
    real = gangfit.pack

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args)

    monkeypatch.setattr(gangfit, "pack", counted)
    objects: list[dict[str, Any]] = []
    for k in range(pools):
        objects += _fleet(5, pool=f"q{k}")
        job = pytorchjob(f"job-{k}", 2, 8)
        objects += [job, *workers(job, [f"q{k}-0", f"q{k}-1"], 8)]
    assert severities(make(*objects), "gang-capacity-after") == []
    return calls


def test_the_gang_check_packs_each_gang_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools and gangs both grow with the fleet: packing every gang at every pool's point made 4x the
    pools cost 16x the packings (400 pools of five nodes: 7 s of a 9.6 s `plan`). Linear is 4x."""
    small, large = _packings(monkeypatch, 10), _packings(monkeypatch, 40)
    assert large <= 5 * small, (small, large)


# --- inventory -----------------------------------------------------------------------------------------------


def test_framework_jobs_are_gangs_with_their_min_count() -> None:
    job = pytorchjob("llama", 4, 8, runPolicy={"schedulingPolicy": {"minAvailable": 3}})
    inv = build_inventory(make(gpu_node("a"), gpu_node("b"), job, *workers(job, ["a", "b", "a", "b"], 8)))
    [gang] = inv.gangs
    assert (gang.kind, gang.name, gang.min_count, gang.pods, gang.live_pods) == ("PyTorchJob", "llama", 3, 4, 4)
    assert gang.to_dict()["roles"] == [{"count": 4, "resources": {GPU: 8}}]
    assert gang.pools == {"p"}


def test_min_available_counts_the_pods_that_ask_for_no_gpu_too() -> None:
    """`minAvailable` is the PodGroup's minMember, which counts every pod of the job (training-operator v1.9.0
    pkg/controller.v1/common/job.go `calcPGMinResources`/minMember = the sum of all replicas unless
    schedulingPolicy.minAvailable; Volcano's Job minAvailable likewise counts all its tasks' pods). A TFJob's
    parameter servers ask for no GPU: of minAvailable 5, two can be them, so 3 GPU workers must be placed
    together, not 4: counting 4 made gangs look bigger than any scheduler asks and blamed waves for them."""
    cpu = template(pod_spec(container(requests={"cpu": "4"})))
    gpu = template(pod_spec(container(requests={GPU: 1})))
    specs = {"PS": {"replicas": 2, "template": cpu}, "Worker": {"replicas": 4, "template": gpu}}
    tf = obj("kubeflow.org/v1", "TFJob", "tf",
             {"tfReplicaSpecs": specs, "runPolicy": {"schedulingPolicy": {"minAvailable": 5}}})  # fmt: skip
    [gang] = build_inventory(make(gpu_node("a"), tf)).gangs
    assert (gang.pods, gang.min_count) == (4, 3)
    vj = obj("batch.volcano.sh/v1alpha1", "Job", "vj",
             {"minAvailable": 2, "tasks": [{"name": "ps", "replicas": 2, "template": cpu},
                                           {"name": "w", "replicas": 4, "template": gpu}]})  # fmt: skip
    assert [g.min_count for g in build_inventory(make(gpu_node("a"), vj)).gangs] == [1], "2 of 6: CPU pods suffice"
    unset = obj("kubeflow.org/v1", "TFJob", "all", {"tfReplicaSpecs": specs})
    assert [g.min_count for g in build_inventory(make(gpu_node("a"), unset)).gangs] == [4], "every worker"


def test_volcano_min_available_and_single_pod_jobs() -> None:
    ps = pod_spec(container(requests={GPU: 1}))
    vj = obj(
        "batch.volcano.sh/v1alpha1",
        "Job",
        "vj",
        {"minAvailable": 2, "tasks": [{"name": "w", "replicas": 5, "template": template(ps)}]},
    )
    single = pytorchjob("solo", 1, 8)
    inv = build_inventory(make(gpu_node("a"), vj, single))
    [gang] = inv.gangs  # a one-pod job is no gang
    assert (gang.kind, gang.min_count, gang.pods) == ("Job", 2, 5)


def _raycluster(**spec: Any) -> dict[str, Any]:
    gpu = template(pod_spec(container(requests={GPU: 8})))
    head = template(pod_spec(container(requests={"cpu": "4"})))
    groups = [{"groupName": "w", "replicas": 6, "minReplicas": 2, "maxReplicas": 8, "template": gpu}]
    return obj(
        "ray.io/v1", "RayCluster", "rc", {"headGroupSpec": {"template": head}, "workerGroupSpecs": groups, **spec}
    )


def test_an_autoscaling_ray_cluster_is_a_gang_of_its_head_and_minimum_workers() -> None:
    """KubeRay gives a gang scheduler minMember = the workers' minReplicas x numOfHosts + the head when in-tree
    autoscaling is on (kuberay v1.4.2 volcano_scheduler.go): the autoscaler adds the rest one by one. Counting
    every replica made gangs no scheduler asks for, and false `gang-capacity-after` blockers."""
    [fixed] = build_inventory(make(gpu_node("a"), _raycluster())).gangs
    [scaled] = build_inventory(make(gpu_node("a"), _raycluster(enableInTreeAutoscaling=True))).gangs
    assert (fixed.pods, fixed.min_count) == (scaled.pods, fixed.pods)
    assert scaled.min_count == 2, scaled.to_dict()  # 2 workers and the head, which asks for no GPU


def test_podgroups_and_their_pods() -> None:
    pg = obj(SCHED, "PodGroup", "train-workers-0", {"schedulingPolicy": {"gang": {"minCount": 2}}})
    basic = obj(SCHED, "PodGroup", "loose", {"schedulingPolicy": {"basic": {}}})
    ps = pod_spec(container(requests={GPU: 4}), schedulingGroup={"podGroupName": "train-workers-0"})
    members = [pod(f"m{i}", ps, node=n) for i, n in enumerate(["a", "b"])]
    wl = obj(
        SCHED,
        "Workload",
        "other",
        {"podGroupTemplates": [{"name": "w", "schedulingPolicy": {"gang": {"minCount": 4}}}]},
    )
    inv = build_inventory(make(gpu_node("a"), gpu_node("b"), pg, basic, wl, *members))
    by_kind = {g.kind: g for g in inv.gangs}
    assert set(by_kind) == {"PodGroup", "Workload"}
    assert by_kind["PodGroup"].min_count == 2 and by_kind["PodGroup"].live_pods == 2
    assert by_kind["PodGroup"].to_dict()["roles"] == [{"count": 2, "resources": {GPU: 4}}]
    assert by_kind["Workload"].min_count == 4 and by_kind["Workload"].pods == 0


# --- gang-capacity-after -------------------------------------------------------------------------------------


def _fleet(n: int, pool: str = "p") -> list[dict[str, Any]]:
    return [gpu_node(f"{pool}-{i}", pool=pool) for i in range(n)]


def test_gang_that_needs_every_node_is_blocked_by_any_wave() -> None:
    # Eight nodes, a gang of eight 8-GPU workers: whichever wave is out, the gang cannot be whole.
    job = pytorchjob("big", 8, 8)
    nodes = _fleet(8)
    s = make(*nodes, job, *workers(job, [f"p-{i}" for i in range(8)], 8))
    assert severities(s, "gang-capacity-after") == ["blocker"]
    [f] = [f for f in assess(s).findings if f.id == "gang-capacity-after"]
    assert "during p" in f.message and "PyTorchJob ml/big" in map(str, f.objects)


def test_gang_with_room_elsewhere_is_fine() -> None:
    job = pytorchjob("small", 4, 8)
    nodes = _fleet(10)  # 10 nodes, one wave of 1 out: nine left for four workers
    s = make(*nodes, job, *workers(job, ["p-0", "p-1", "p-2", "p-3"], 8))
    assert severities(s, "gang-capacity-after") == []


def test_gang_that_fits_only_by_evicting_others_warns() -> None:
    job = pytorchjob("mid", 4, 8)
    other = pytorchjob("batch", 1, 8)  # a one-pod job is no gang, but its pods hold GPUs
    nodes = _fleet(5)
    others = [pod(f"o{i}", pod_spec(container(requests={GPU: 8})), owner=other, node=f"p-{4 - i}") for i in range(1)]
    s = make(*nodes, job, other, *workers(job, ["p-0", "p-1", "p-2", "p-3"], 8), *others)
    # Five nodes: one out for its wave leaves four, one of which the other pod holds.
    assert severities(s, "gang-capacity-after") == ["warning"]


def test_gang_that_cannot_run_today_is_not_blamed_on_the_migration() -> None:
    job = pytorchjob("stuck", 4, 8)
    ps = pod_spec(container(requests={GPU: 8}))
    pending = [pod(f"stuck-pending-{i}", ps, owner=job, node=None, phase="Pending") for i in range(2)]
    s = make(*_fleet(2), job, *workers(job, ["p-0", "p-1"], 8), *pending)
    assert build_inventory(s).gangs[0].live_pods == 4
    assert severities(s, "gang-capacity-after") == []


# --- gang-scheduling-unavailable -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("served", "gates", "expected"),
    [
        (None, {}, ["warning"]),  # off by default in 1.37; a snapshot that says nothing
        (None, {"GenericWorkload": True}, []),
        (("v1", "scheduling.k8s.io/v1"), {}, ["warning"]),  # the beta version is not served
        (("v1", SCHED), {}, []),
        (("v1", SCHED), {"GenericWorkload": False}, ["warning"]),
    ],
)
def test_gang_scheduling_unavailable(
    served: tuple[str, ...] | None, gates: dict[str, bool], expected: list[str]
) -> None:
    pg = obj(SCHED, "PodGroup", "g", {"schedulingPolicy": {"gang": {"minCount": 2}}})
    s = make(gpu_node("a"), pg, served=served)
    assert severities(s, "gang-scheduling-unavailable", feature_gates=gates) == expected
    assert severities(make(gpu_node("a"), served=served), "gang-scheduling-unavailable", feature_gates=gates) == []


# --- planning ------------------------------------------------------------------------------------------------


def _plan(*objects: dict[str, Any], **params: Any) -> dict[str, Any]:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    return build_plan(make(*objects), PlanParams(**params)).to_dict()


def _waves_of(plan: dict[str, Any]) -> list[list[str]]:
    return [[n["node"] for n in w["nodes"]] for st in plan["stages"] for w in st.get("waves") or []]


def test_a_gangs_nodes_migrate_in_one_wave_when_the_wave_allows() -> None:
    # Ten nodes, waves of 4: the gang on p-1, p-5 and p-8 would be broken in three waves by load order.
    job = pytorchjob("llama", 3, 8)
    nodes = _fleet(10)
    idle = [pod(f"busy-{i}", pod_spec(container(requests={GPU: 1})), node=f"p-{i}") for i in (0, 2, 3, 4, 6, 7, 9)]
    plan = _plan(*nodes, job, *workers(job, ["p-1", "p-5", "p-8"], 8), *idle, max_unavailable="4")
    waves = _waves_of(plan)
    assert all(len(w) <= 4 for w in waves) and sorted(n for w in waves for n in w) == sorted(
        f"p-{i}" for i in range(10)
    )
    [home] = [w for w in waves if "p-1" in w]
    assert {"p-1", "p-5", "p-8"} <= set(home)
    assert plan["summary"]["gangs"] == [
        {"gang": "PyTorchJob ml/llama", "waves": [plan["stages"][1]["name"] + "/" + "wave-1"]}
    ]


def test_a_gang_wider_than_a_wave_is_cut_in_wave_sized_pieces() -> None:
    job = pytorchjob("wide", 6, 8)
    plan = _plan(*_fleet(6), job, *workers(job, [f"p-{i}" for i in range(6)], 8), max_unavailable="2")
    waves = _waves_of(plan)
    assert [len(w) for w in waves] == [2, 2, 2]
    assert len(plan["summary"]["gangs"][0]["waves"]) == 3
