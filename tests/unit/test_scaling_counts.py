"""No step of reading a fleet or planning it looks at the objects a number of times that grows faster than
the fleet (issue 29 item 4). Counted, not timed: each test counts the visits to a kind's objects at two
fleet sizes, and a step that scans a kind once per consumer (quadratic) multiplies them by the square of
the size ratio. bench/plan_scale.py times the same at 2,000 and 10,000 nodes.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.state import ClusterState
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, node, obj, pod, pod_spec, state, template


class _Counted(list[Any]):
    """A kind's objects in the state, counting every object handed out by iteration."""

    visits = 0

    def __iter__(self) -> Any:
        for item in super().__iter__():
            _Counted.visits += 1
            yield item


class _Calls:
    """Counts the calls of a function patched in where the code under test looks it up."""

    def __init__(self, monkeypatch: Any, real: Any, *where: tuple[Any, str]) -> None:
        self.n = 0
        for owner, name in where:
            monkeypatch.setattr(owner, name, self._counting(real), raising=False)

    def _counting(self, real: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.n += 1
            return real(*args, **kwargs)

        return counted


def _fleet(consumers: int) -> ClusterState:
    gpu = {"nvidia.com/gpu": "8"}
    nodes = [node(f"gpu-{i}", {"pool": "p", "nvidia.com/gpu.present": "true"}, gpu) for i in range(consumers // 4 + 1)]
    spec = pod_spec(container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    deployments = [
        obj("apps/v1", "Deployment", f"d{i}", {"replicas": 1, "template": template(spec)}, labels={"app": "x"})
        for i in range(consumers)
    ]
    return state(*nodes, *deployments)


def _visits(consumers: int) -> int:
    s = _fleet(consumers)
    s.objects["apps/Deployment"] = _Counted(s.objects["apps/Deployment"])
    _Counted.visits = 0
    readiness = assess(s, pool_labels=("pool",))
    assert len(readiness.inventory.consumers) == consumers  # every Deployment is a GPU consumer
    return _Counted.visits


def test_the_checks_visit_each_workload_a_bounded_number_of_times() -> None:
    """The gitops-owned rule scanned every object of a consumer's kind for each consumer: 16x the visits
    for 4x the consumers. Linear is 4x (a little more for fixed costs)."""
    small, large = _visits(50), _visits(200)
    assert large <= 5 * small, (small, large)


def test_building_and_writing_a_plan_run_no_collector_pass() -> None:
    """A full pass of the cyclic collector rescans every object built so far, and more passes run the larger
    the fleet: building and writing a 10,000-node plan spent 13x the GC time of a 2,000-node one. Both
    pause the collector (and leave it as they found it)."""
    import gc
    from pathlib import Path

    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.plan import io as plan_io
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    demo = load_snapshot(Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml")
    build_plan(demo, PlanParams())  # imports and memos first: only the work itself is watched
    passes: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    assert gc.isenabled()
    # A young pass runs once 700 objects more are alive than when the last ran: a section of `build_plan` left
    # unpaused that made fewer (a small fixture, memos warm from earlier tests) ran none, and this test passed
    # while `build_plan` ran with the collector on (a decorator left on the helper written above it). At a
    # threshold of 100 any unpaused stretch of its work runs one; the few objects made before its pause begins
    # do not, and the pause's freeze settles the count at its end.
    gc.collect()
    threshold = gc.get_threshold()
    gc.set_threshold(100, *threshold[1:])
    gc.callbacks.append(watch)
    try:
        body = build_plan(demo, PlanParams())
        gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
        sealed = plan_io.seal(body)  # small (digests): run as anything else runs
        # The objects `seal` made while it paused the collector still count towards the next young pass
        # (a pause stops passes, not the count), which would run as `dumps` begins: settle them first.
        gc.collect(0)
        gc.callbacks.append(watch)
        text = plan_io.dumps(sealed)
    finally:
        if watch in gc.callbacks:
            gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
    assert gc.isenabled()
    assert text.startswith("# dra-migrate plan")
    assert passes == []


def _node_visits(pools: int, monkeypatch: Any) -> int:
    """Visits to the inventory's GPU nodes while a plan of `pools` pools of four nodes is built, after the
    checks (which the tests above bound)."""
    from dra_migrate.checks import run
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    real = run.assess

    def counted_assess(*args: Any, **kwargs: Any) -> Any:
        readiness = real(*args, **kwargs)
        readiness.inventory.nodes = _Counted(readiness.inventory.nodes)
        _Counted.visits = 0
        return readiness

    monkeypatch.setattr(run, "assess", counted_assess)
    gpu = {"nvidia.com/gpu": "8"}
    nodes = [node(f"gpu-{i}", {"pool": f"p{i // 4}", "nvidia.com/gpu.present": "true"}, gpu) for i in range(4 * pools)]
    plan = build_plan(state(*nodes), PlanParams(pool_labels=("pool",)))
    assert sum(1 for s in plan.stages if s.pool is not None) == pools
    return _Counted.visits


def test_planning_visits_each_node_a_bounded_number_of_times(monkeypatch: Any) -> None:
    """Each pool's stage read every node of the fleet again (its nodes, whether any was left out), and
    every pool and gang: with pools growing with the fleet, 4x the pools cost 16x the visits (2,000 pools
    of five nodes: 15 s of `plan`). Linear is 4x."""
    small, large = _node_visits(10, monkeypatch), _node_visits(40, monkeypatch)
    assert large <= 5 * small, (small, large)


def _topology_lookups(consumers: int, monkeypatch: Any) -> int:
    from dra_migrate.inventory import topology

    calls = _Calls(monkeypatch, topology._node_whole_gpus, (topology, "_node_whole_gpus"))
    gpu = {"nvidia.com/gpu": "8"}
    nodes = [node(f"gpu-{i}", {"pool": "p", "nvidia.com/gpu.present": "true"}, gpu) for i in range(consumers // 4 + 1)]
    spec = pod_spec(container(requests={"nvidia.com/gpu": "2"}, limits={"nvidia.com/gpu": "2"}))
    deployments = [
        obj("apps/v1", "Deployment", f"d{i}", {"replicas": 1, "template": template(spec)}, labels={"app": "x"})
        for i in range(consumers)
    ]
    readiness = assess(state(*nodes, *deployments), pool_labels=("pool",))
    assert len(readiness.inventory.topology) == consumers  # each takes 2 of a node's 8 GPUs
    return calls.n


def test_multi_gpu_consumers_look_their_nodes_up_a_bounded_number_of_times(monkeypatch: Any) -> None:
    """Topology (partial-node multi-GPU consumers) looked at every GPU node once per consumer: 16x the
    look-ups for 4x the consumers (19 of 72 profiled CPU seconds of `plan` at 10,000 nodes). Each pool's
    nodes are now summed up once per resource."""
    small, large = _topology_lookups(50, monkeypatch), _topology_lookups(200, monkeypatch)
    assert large <= 5 * small, (small, large)


def _shape_visits(pods: int, monkeypatch: Any) -> int:
    from collections import Counter

    from dra_migrate.dra import gangfit

    visits = 0

    class Shapes(Counter[Any]):
        """gangfit's Counters (node shapes -> how many), counting every shape looked at."""

        def __iter__(self) -> Any:
            nonlocal visits
            for shape in super().__iter__():
                visits += 1
                yield shape

    monkeypatch.setattr(gangfit, "Counter", Shapes)
    # Nodes of 8 GPUs, some with 3 taken: two node shapes; a gang of 1-GPU workers and two 4-GPU leaders.
    capacity = {f"n{i}": {"nvidia.com/gpu": 8 if i % 3 else 5} for i in range(pods // 4)}
    gang = [{"nvidia.com/gpu": 4}] * 2 + [{"nvidia.com/gpu": 1}] * pods
    assert gangfit.fits(gang, capacity)
    assert not gangfit.fits(gang + [{"nvidia.com/gpu": 8}] * pods, capacity)
    return visits


def test_packing_a_gang_looks_at_the_node_shapes_a_bounded_number_of_times(monkeypatch: Any) -> None:
    """Gang packing looked through the node shapes once per pod: a 50-pods-per-node fleet's gangs asked
    ~3,000 packings and ~500,000 pod placements (a quarter of `plan`'s checks). Alike pods are now placed a
    node at a time: the shapes looked at grow with the node shapes a run fills, not with its pods."""
    small, large = _shape_visits(64, monkeypatch), _shape_visits(256, monkeypatch)
    assert small > 0 and large <= small + 8, (small, large)


def _request_reads(jobs: int, monkeypatch: Any) -> tuple[int, int]:
    """(pods, pod_requests calls) of `assess` on a fleet of running 4-worker PyTorchJobs (gangs) and a PodGroup."""
    from dra_migrate.checks import rules_gangs
    from dra_migrate.inventory import consumers, gangs, resources

    modules = (consumers, gangs, resources, rules_gangs)
    calls = _Calls(monkeypatch, resources.pod_requests, *((m, "pod_requests") for m in modules))
    gpu = {"nvidia.com/gpu": "8"}
    nodes = [node(f"gpu-{i}", {"pool": "p", "nvidia.com/gpu.present": "true"}, gpu) for i in range(jobs)]
    spec = pod_spec(container(requests={"nvidia.com/gpu": "2"}, limits={"nvidia.com/gpu": "2"}))
    objects: list[Any] = []
    for j in range(jobs):
        job = obj("kubeflow.org/v1", "PyTorchJob", f"job-{j}",
                  {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": template(spec)}}})  # fmt: skip
        objects += [job, *(pod(f"job-{j}-w-{w}", spec, owner=job, node=f"gpu-{j}") for w in range(4))]
    grouped = {**spec, "schedulingGroup": {"podGroupName": "pg"}}
    group = obj("scheduling.k8s.io/v1beta1", "PodGroup", "pg", {"schedulingPolicy": {"gang": {"minCount": 2}}})
    objects += [group, *(pod(f"pg-{w}", grouped, node="gpu-0") for w in range(2))]
    readiness = assess(state(*nodes, *objects), pool_labels=("pool",))
    assert len(readiness.inventory.gangs) == jobs + 1
    return 4 * jobs + 2, calls.n


def test_each_pods_gpu_requests_are_worked_out_once(monkeypatch: Any) -> None:
    """Consumers, gangs and the gang-capacity check each worked out every pod's GPU requests (twice
    per pod on a fleet of gangs: 0.6 s of `plan` at 50 pods per node). The inventory works them out
    once and keeps them (`Inventory.pod_requests`); the templates add one per template."""
    pods, calls = _request_reads(20, monkeypatch)
    assert calls <= pods + 20 + 2, (pods, calls)


def test_each_node_is_matched_against_a_class_once(monkeypatch: Any) -> None:
    """Pool capacity and the gang check each matched every node's devices against the classes (the
    check compiles its own): every device was matched twice, a tenth of `plan` at 10,000 nodes. The
    matches are kept per state, node and selectors."""
    from dra_migrate.dra import cel

    calls = _Calls(monkeypatch, cel.Selector.matches, (cel.Selector, "matches"))
    nodes = 12
    gpu = {"nvidia.com/gpu": "8"}
    labels = {"pool": "p", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}  # fmt: skip
    fleet = [node(f"gpu-{i}", labels, gpu) for i in range(nodes)]
    spec = pod_spec(container(requests={"nvidia.com/gpu": "8"}, limits={"nvidia.com/gpu": "8"}))
    job = obj("kubeflow.org/v1", "PyTorchJob", "job",
              {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": template(spec)}}})  # fmt: skip
    workers = [pod(f"job-w-{w}", spec, owner=job, node=f"gpu-{w}") for w in range(4)]
    readiness = assess(state(*fleet, job, *workers), pool_labels=("pool",))
    assert readiness.inventory.gangs and calls.n > 0
    assert calls.n <= nodes * 8, calls.n  # each of the fleet's 96 GPUs once, against the one class


def test_each_objects_owner_is_looked_up_once(monkeypatch: Any) -> None:
    """Consumers and gangs each walked every pod up its owners (pod, ReplicaSet, Deployment: three
    look-ups a pod, twice), and a Deployment's pods each walked their ReplicaSet again. One index now
    serves the inventory, and each object's top owner is walked to once."""
    from dra_migrate.inventory import consumers

    lookups = _Calls(monkeypatch, consumers._controller_ref, (consumers, "_controller_ref"))
    spec = pod_spec(container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    objects: list[Any] = [node("gpu-0", {"pool": "p", "nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "8"})]
    for d in range(5):
        deployment = obj("apps/v1", "Deployment", f"d{d}", {"replicas": 8, "template": template(spec)})
        rs = obj("apps/v1", "ReplicaSet", f"d{d}-rs", {"replicas": 8, "template": template(spec)}, owner=deployment)
        objects += [deployment, rs, *(pod(f"d{d}-{i}", spec, owner=rs, node="gpu-0") for i in range(8))]
    readiness = assess(state(*objects), pool_labels=("pool",))
    assert len(readiness.inventory.consumers) == 5
    assert lookups.n <= len(objects), (lookups.n, len(objects))


def _pod_visits_planning(pools: int) -> int:
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    gpu = {"nvidia.com/gpu": "8"}
    nodes = [node(f"gpu-{i}", {"pool": f"p{i % pools}", "nvidia.com/gpu.present": "true"}, gpu) for i in range(16)]
    spec = pod_spec(container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    job = obj("kubeflow.org/v1", "PyTorchJob", "job",
              {"pytorchReplicaSpecs": {"Worker": {"replicas": 48, "template": template(spec)}}})  # fmt: skip
    workers = [pod(f"job-w-{w}", spec, owner=job, node=f"gpu-{w % 16}") for w in range(48)]
    s = state(*nodes, job, *workers)
    s.objects["Pod"] = _Counted(s.objects["Pod"])
    _Counted.visits = 0
    build_plan(s, PlanParams(pool_labels=("pool",)))
    return _Counted.visits


def test_planning_visits_the_pods_a_number_of_times_that_does_not_grow_with_the_pools() -> None:
    """Each pool's stage read every pod of the fleet again to find the nodes of each gang: pools x pods.
    The same 48 pods on the same 16 nodes, in 2 pools or in 8, are now visited as often."""
    two, eight = _pod_visits_planning(2), _pod_visits_planning(8)
    assert eight <= two, (two, eight)


class _Watched(dict[str, Any]):
    """A pod whose reads are counted."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        _Watched.reads += 1
        return super().get(key, default)


def _pod_reads_weighing_budgets(workloads: int) -> int:
    """Pod reads of `drain_holds` on a fleet of `workloads` namespaces, each a budget and 4 pods on 2 nodes,
    in 10 waves (the default --max-unavailable 10%)."""
    from dra_migrate.plan.estimate import drain_holds

    spec = pod_spec(container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    pods, pdbs, nodes = [], [], []
    for w in range(workloads):
        pdbs.append(obj("policy/v1", "PodDisruptionBudget", f"b{w}", {"selector": {"matchLabels": {"app": "x"}}},
                        namespace=f"ns{w}"))  # fmt: skip
        nodes += [f"n{w}-a", f"n{w}-b"]
        for i in range(4):
            p = pod(f"p{w}-{i}", spec, node=nodes[-1 - i % 2])
            p["metadata"].update(namespace=f"ns{w}", labels={"app": "x"})
            pods.append(p)
    watched = [_Watched(p) for p in pods]
    waves = [nodes[i::10] for i in range(10)]
    _Watched.reads = 0
    holds = drain_holds(pdbs, watched, waves)
    assert len(holds) == len(nodes)  # no status: each budget may hold its drains
    return _Watched.reads


def test_weighing_budgets_reads_each_pod_a_bounded_number_of_times() -> None:
    """Each wave's drains were weighed against every budget by a scan of every node's pods in the wave:
    budgets x pods, and a fleet's budgets grow with it (one a workload). Each budget now reads only its
    namespace's pods: 4x the workloads, 4x the reads."""
    small, large = _pod_reads_weighing_budgets(20), _pod_reads_weighing_budgets(80)
    assert large <= 5 * small, (small, large)


def _budget_checks(workloads: int, monkeypatch: Any) -> int:
    """pdb_selects calls of `assess` on `workloads` namespaces, each a budget allowing no disruption over
    its 2 GPU pods."""
    from dra_migrate.checks import rules

    calls = _Calls(monkeypatch, rules.pdb_selects, (rules, "pdb_selects"))
    spec = pod_spec(container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    objects: list[Any] = [node("gpu-0", {"pool": "p", "nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "8"})]
    for w in range(workloads):
        budget = obj("policy/v1", "PodDisruptionBudget", f"b{w}", {"selector": {}, "maxUnavailable": 0},
                     namespace=f"ns{w}")  # fmt: skip
        budget["status"] = {"disruptionsAllowed": 0}
        objects.append(budget)
        for i in range(2):
            p = pod(f"p{w}-{i}", spec, node="gpu-0")
            p["metadata"]["namespace"] = f"ns{w}"
            objects.append(p)
    readiness = assess(state(*objects), pool_labels=("pool",))
    assert sum(f.id == "pdb-blocks-drain" for f in readiness.findings) == workloads
    return calls.n


def test_budgets_that_allow_no_disruption_look_at_their_own_namespaces_pods(monkeypatch: Any) -> None:
    """`pdb-blocks-drain` matched each budget allowing no disruption against every bound pod of the
    fleet: budgets x pods (a workload's budget with maxUnavailable 0 is common). Each looks at its
    namespace's pods now: 4x the workloads, 4x the matches."""
    small, large = _budget_checks(10, monkeypatch), _budget_checks(40, monkeypatch)
    assert large <= 5 * small, (small, large)


def test_replacing_pools_reads_each_pod_once() -> None:
    """`replace-pool-pinned-workloads` read every pod of the fleet once per pool to replace (pools x
    pods); it reads the pods once and looks at each pool's nodes' own."""
    from pathlib import Path

    from dra_migrate.checks import rules_platforms
    from dra_migrate.checks.context import CheckContext
    from dra_migrate.cluster.snapshot import load_snapshot

    s = load_snapshot(Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "platforms" / "gke-managed.yaml")
    readiness = assess(s)
    replaced = [p for p in readiness.inventory.pools if p.platform and p.platform.strategy == "replace-pool"]
    assert len(replaced) == 2
    s.objects["Pod"] = _Counted(s.objects["Pod"])
    _Counted.visits = 0
    ctx = CheckContext(s, readiness.inventory, readiness.generation, readiness.capacity)
    list(rules_platforms.replace_pool_pinned(ctx))
    assert 0 < _Counted.visits <= len(s.objects["Pod"]), (_Counted.visits, len(s.objects["Pod"]))


def test_each_nodes_labels_are_copied_once_for_the_pool_platforms(monkeypatch: Any) -> None:
    """The node's platform, provisioner and platform plugin, and its pool's common labels, zones and
    sharing each copied the node's labels (six copies a node: a fifth of the inventory of a sparse fleet,
    whose GPU nodes carry dozens of GPU Feature Discovery labels). One copy a node serves them all."""
    from dra_migrate.inventory import platform

    calls = _Calls(monkeypatch, platform._labels, (platform, "_labels"))
    nodes = 10
    gpu = {"nvidia.com/gpu": "8"}
    fleet = [node(f"gpu-{i}", {"pool": f"p{i % 2}", "nvidia.com/gpu.present": "true"}, gpu) for i in range(nodes)]
    inventory = build_inventory(state(*fleet), pool_labels=("pool",))
    assert [p.platform is not None for p in inventory.pools] == [True, True]
    assert calls.n == nodes, calls.n


def test_planning_makes_the_predicted_devices_of_one_node_per_shape(monkeypatch: Any) -> None:
    """A plan reads how many devices each node will have and matches its classes on one node of each shape;
    every node's devices were made all the same, each with its placeholder uuids (a tenth of `plan`'s own
    work on a sparse fleet). They are made when read; the counts are the recipes'."""
    from dra_migrate.dra import devices
    from dra_migrate.plan.build import build_plan
    from dra_migrate.plan.params import PlanParams

    calls = _Calls(monkeypatch, devices._cook, (devices, "_cook"))
    nodes, gpus = 10, 8
    labels = {"pool": "p", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus),
              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}  # fmt: skip
    fleet = [node(f"gpu-{i}", labels, {"nvidia.com/gpu": str(gpus)}) for i in range(nodes)]
    plan = build_plan(state(*fleet), PlanParams(pool_labels=("pool",)))
    expected = [e.expected_devices for s in plan.pool_stages() for w in s.waves for e in w.nodes]
    assert expected == [gpus] * nodes
    assert calls.n == gpus, calls.n  # one node's devices, matched against the classes


def test_daemonsets_that_ask_for_no_gpu_are_not_counted_over_the_fleet(monkeypatch: Any) -> None:
    """A DaemonSet's pods are counted over every node it selects. The inventory counted them for every
    DaemonSet and then kept only those that ask for GPUs: a cluster's CNI, log shipper and exporters were
    each counted over the whole fleet for nothing. Only a GPU DaemonSet's nodes are counted now."""
    from dra_migrate.inventory import placement

    calls = _Calls(monkeypatch, placement.node_selects, (placement, "node_selects"))
    nodes = 20
    gpu = {"nvidia.com/gpu": "1"}
    fleet = [node(f"gpu-{i}", {"pool": "p", "nvidia.com/gpu.present": "true"}, gpu) for i in range(nodes)]
    plain = pod_spec(container())
    daemons = [obj("apps/v1", "DaemonSet", f"agent-{i}", {"template": template(plain)}) for i in range(5)]
    asks = pod_spec(container(requests=gpu, limits=gpu))
    probe = obj("apps/v1", "DaemonSet", "gpu-probe", {"template": template(asks)})
    inventory = build_inventory(state(*fleet, *daemons, probe), pool_labels=("pool",))
    assert [(c.name, c.totals) for c in inventory.consumers] == [("gpu-probe", {"nvidia.com/gpu": nodes})]
    assert calls.n == nodes, calls.n  # the GPU DaemonSet's, over the fleet once


def test_the_platform_checks_visit_each_pool_a_bounded_number_of_times() -> None:
    """`platform-sharing-unsupported` looked each pool up again among all the pools by its name: pools x
    pools visits (a fleet of 2,000 five-node pools: 0.4 s of `plan`). Linear is 4x for 4x the pools."""
    from types import SimpleNamespace

    from dra_migrate.checks.rules_platforms import platform_sharing_unsupported

    def visits(pools: int) -> int:
        gpu = {"nvidia.com/gpu": "8"}
        fleet = [node(f"gpu-{i}", {"pool": f"p{i}", "nvidia.com/gpu.present": "true"}, gpu) for i in range(pools)]
        inventory = build_inventory(state(*fleet), pool_labels=("pool",))
        assert len(inventory.pools) == pools and all(p.platform is not None for p in inventory.pools)
        _Counted.visits = 0
        ctx = SimpleNamespace(inventory=SimpleNamespace(pools=_Counted(inventory.pools)))
        assert list(platform_sharing_unsupported(ctx)) == []  # type: ignore[arg-type]
        return _Counted.visits

    small, large = visits(10), visits(40)
    assert large <= 4 * small, (small, large)


class _Name(str):
    """A pool name that counts the comparisons made with it (a list's `in` compares with every item)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _Name.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_the_review_section_looks_each_planned_pool_up_once() -> None:
    """The review's strategies asked of every pool whether it is planned, in the list of planned pools:
    pools x pools comparisons (2,000 pools: 2 million). A set answers each with one."""
    from dra_migrate.plan.summary import review_section

    pools = 40
    gpu = {"nvidia.com/gpu": "8"}
    fleet = [node(f"gpu-{i}", {"pool": f"p{i:02d}", "nvidia.com/gpu.present": "true"}, gpu) for i in range(pools)]
    readiness = assess(state(*fleet), pool_labels=("pool",))
    selected: list[str] = [_Name(p.name) for p in readiness.inventory.pools]
    _Name.compared = 0
    review = review_section(readiness, selected, [])
    assert len(review["strategies"]) == pools
    assert _Name.compared <= 2 * pools, _Name.compared


def _pool_platform_visits(pools: int) -> int:
    """Visits to the Deployments and Karpenter NodePools while the inventory is built: `pools` pools of
    Karpenter nodes and as many of nodes no cloud names, beside `pools` Deployments and NodePools."""
    gpu = {"nvidia.com/gpu": "8"}
    labels = {"nvidia.com/gpu.present": "true"}
    karpenter = [node(f"k-{i}", {**labels, "karpenter.sh/nodepool": f"np{i}"}, gpu) for i in range(pools)]
    plain = [node(f"g-{i}", {**labels, "pool": f"g{i}"}, gpu) for i in range(pools)]
    nodepools = [obj("karpenter.sh/v1", "NodePool", f"np{i}", {}, namespace=None) for i in range(pools)]
    web = pod_spec(container())
    deployments = [
        obj("apps/v1", "Deployment", f"web-{i}", {"replicas": 1, "template": template(web)}) for i in range(pools)
    ]
    s = state(*karpenter, *plain, *nodepools, *deployments)
    for key in ("apps/Deployment", "karpenter.sh/NodePool"):
        s.objects[key] = _Counted(s.objects[key])
    _Counted.visits = 0
    inventory = build_inventory(s, pool_labels=("pool",))
    assert len(inventory.pools) == 2 * pools
    by_name = {p.name: p.platform for p in inventory.pools}
    assert by_name["np0"] is not None and by_name["np0"].raw_nodepool is not None  # the pool's own NodePool
    assert by_name["g0"] is not None and by_name["g0"].autoscaler is None  # no cluster autoscaler runs
    return _Counted.visits


def test_pool_platforms_read_the_deployments_and_nodepools_once() -> None:
    """Each pool looked for a cluster-autoscaler Deployment among all the Deployments, and a Karpenter
    pool for its NodePool among all the NodePools: pools x objects. Linear is 4x for 4x the pools."""
    small, large = _pool_platform_visits(10), _pool_platform_visits(40)
    assert large <= 5 * small, (small, large)


def test_replace_pool_checks_read_each_pools_nodes_from_the_pool() -> None:
    """`replace-pool-pinned-workloads` found a replaced pool's nodes by scanning every GPU node of the fleet
    for each pool: pools x nodes (2,000 GKE pools of five nodes: 20 million looks). The pool lists them."""
    from dra_migrate.checks.context import CheckContext
    from dra_migrate.checks.rules_platforms import replace_pool_pinned

    def visits(pools: int) -> int:
        gpu = {"nvidia.com/gpu": "1"}
        fleet = []
        for i in range(pools):
            gke = {"cloud.google.com/gke-nodepool": f"gpu-{i}", "cloud.google.com/gke-accelerator": "nvidia-l4"}
            n = node(f"gke-{i}", gke, gpu)
            n["spec"]["providerID"] = f"gce://project/zone/gke-{i}"
            fleet.append(n)
        pinned = pod_spec(container(requests=gpu, limits=gpu), nodeSelector={"cloud.google.com/gke-nodepool": "gpu-0"})
        s = state(*fleet, pod("pinned", pinned, node="gke-0"))
        r = assess(s)
        assert all(p.platform is not None and p.platform.strategy == "replace-pool" for p in r.inventory.pools)
        r.inventory.nodes = _Counted(r.inventory.nodes)
        _Counted.visits = 0
        ctx = CheckContext(s, r.inventory, r.generation, r.capacity, {}, "gpu.nvidia.com")
        assert [f.message.split(" is replaced")[0] for f in replace_pool_pinned(ctx)] == ["pool gpu-0"]
        return _Counted.visits

    small, large = visits(10), visits(40)
    assert large <= 4 * small + 4, (small, large)


def test_loading_a_fleet_and_its_inventory_run_no_collector_pass() -> None:
    """The same for the two other builds of millions of objects (cluster/snapshot.py, inventory/model.py),
    at the threshold that catches any stretch of their work left unpaused."""
    import gc
    from pathlib import Path

    from dra_migrate.cluster.snapshot import load_snapshot
    from dra_migrate.inventory.model import build_inventory

    demo = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"
    build_inventory(load_snapshot(demo))  # imports and memos first
    passes: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            passes.append(info["generation"])

    gc.collect()
    threshold = gc.get_threshold()
    gc.set_threshold(100, *threshold[1:])
    gc.callbacks.append(watch)
    try:
        inventory = build_inventory(load_snapshot(demo))
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
    assert inventory.nodes and passes == []
