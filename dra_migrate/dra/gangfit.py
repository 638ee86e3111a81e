"""Can a gang still be placed whole, at each point of a migration? Per-node packing, not a sum of totals.

A gang of eight pods that each need 8 GPUs needs eight nodes with 8 free GPUs each; a pool with 64 free
GPUs spread over sixteen half-used nodes cannot take it. So each point of the migration is a map of what
every schedulable GPU node can serve, and the gang's pods are packed onto it.

Points (the plan's exact order is not known to `check`, so the points bound every order from below):
- `before`: every node on the device plugin (its allocatable);
- `during <pool>`: one wave of that pool out of service (cordoned and drained: its nodes with the most
  capacity, the width of the plan's default wave), and every other node at the lesser of what it serves
  through the device plugin and through DRA — it may be on either side at that moment;
- `after`: every node through DRA (the devices the class mapping the name matches on it).

Packing is best-fit decreasing over identical node shapes: exact for one pod shape on nodes of one shape,
and a heuristic otherwise that can only err towards "does not fit" (a finding to look at, never a false
"fits").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.capacity import ClassSelectors, class_for, matching_devices
from dra_migrate.dra.devices import node_devices
from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.inventory.gangs import Gang

# The plan's default wave (`plan --max-unavailable 10%`, rounded down, never below one node).
DEFAULT_WAVE_FRACTION = 0.10

Shape = tuple[tuple[str, int], ...]  # sorted (resource, GPUs) pairs
NodeCapacity = dict[str, dict[str, int]]  # node -> resource -> GPUs it can serve at that point


@dataclass(frozen=True)
class Point:
    name: str  # "before", "during <pool>", "after"
    capacity: NodeCapacity


def _shape(resources: dict[str, int]) -> Shape:
    return tuple(sorted((r, v) for r, v in resources.items() if v > 0))


def shapes(capacity: NodeCapacity) -> Counter[Shape]:
    """How many nodes of each shape a capacity map holds: what packing works on."""
    return Counter(_shape(c) for c in capacity.values())


def fits(pods: Iterable[dict[str, int]], capacity: NodeCapacity | Counter[Shape]) -> bool:
    """Whether every pod gets a node with room for all it asks, no GPU given twice. `capacity` may be
    given as its `shapes` already (a fleet's points are shaped once, not once per gang: issue 29).

    Best-fit decreasing, one pod at a time: each pod, largest first, takes the node shape that holds it
    with the least room left over. The pods of a gang are mostly alike, and a run of alike pods is placed
    a node at a time, not a pod at a time, with the same outcome: the node a pod lands on is left with
    less room than any other that holds the pod, so the next alike pod lands there too, until it is full
    (the last pods of a run may leave one node part-full). Placing pods one by one made a gang of 1,000
    pods cost 1,000 scans of the shapes (issue 29)."""
    return fits_runs(Counter(_shape(p) for p in pods), capacity)


def fits_runs(runs: Counter[Shape], capacity: NodeCapacity | Counter[Shape]) -> bool:
    """`fits`, of the pods given as how many ask each shape (`placement_runs`)."""
    free: Counter[Shape] = Counter(capacity) if isinstance(capacity, Counter) else shapes(capacity)
    known: dict[Shape, tuple[dict[str, int], int]] = {}  # a shape's map and total, made once per call
    for asked, count in sorted(runs.items(), key=lambda run: (-sum(v for _, v in run[0]), run[0])):
        if not _place_run(free, known, asked, count):
            return False
    return True


def _place_run(free: Counter[Shape], known: dict[Shape, tuple[dict[str, int], int]], asked: Shape, count: int) -> bool:
    """Place `count` alike pods that each ask `asked`: each node the best fit, filled before the next."""
    while count:
        best = _best_fit(free, known, asked)
        if best is None:
            return False
        if not asked:
            return True  # a pod that asks for nothing fits anywhere and takes nothing
        have = known[best][0]
        per_node = min(have[r] // v for r, v in asked)
        nodes = min(free[best], count // per_node)
        if nodes:
            _take(free, best, asked, per_node, nodes)
            count -= nodes * per_node
        else:
            _take(free, best, asked, count, 1)
            count = 0
    return True


def _best_fit(free: Counter[Shape], known: dict[Shape, tuple[dict[str, int], int]], asked: Shape) -> Shape | None:
    """The shape that holds `asked` with the least room left over (the lesser shape on a tie)."""
    size = sum(v for _, v in asked)
    best: Shape | None = None
    best_slack = 0
    for shape in free:
        if shape not in known:
            known[shape] = (dict(shape), sum(v for _, v in shape))
        have, total = known[shape]
        if all(have.get(r, 0) >= v for r, v in asked):
            slack = total - size
            if best is None or slack < best_slack or (slack == best_slack and shape < best):
                best, best_slack = shape, slack
    return best


def _take(free: Counter[Shape], shape: Shape, asked: Shape, pods: int, nodes: int) -> None:
    """`nodes` nodes of `shape` each take `pods` pods that ask `asked`."""
    free[shape] -= nodes
    if not free[shape]:
        del free[shape]
    left = dict(shape)
    for r, v in asked:
        left[r] -= v * pods
    free[_shape(left)] += nodes


def _schedulable(nodes: list[GpuNode]) -> list[GpuNode]:
    return [n for n in nodes if not n.unschedulable and n.ready is not False]


def capacity_before(nodes: list[GpuNode]) -> NodeCapacity:
    return {n.name: dict(n.allocatable) for n in _schedulable(nodes)}


def capacity_after(state: ClusterState, nodes: list[GpuNode], classes: list[ClassSelectors]) -> NodeCapacity:
    """What each node serves once migrated: per resource it serves today, the devices its class matches."""
    devices = node_devices(state)
    out: NodeCapacity = {}
    for n in _schedulable(nodes):
        served: dict[str, int] = {}
        nd = devices.get(n.name)
        for resource in set(n.capacity) | set(n.allocatable):
            cls = class_for(resource, classes)
            served[resource] = len(matching_devices(state, cls, nd)) if cls is not None and nd is not None else 0
        out[n.name] = served
    return out


def wave_width(pool_nodes: int, fraction: float = DEFAULT_WAVE_FRACTION) -> int:
    return max(1, int(pool_nodes * fraction))


def migration_points(
    nodes: list[GpuNode], before: NodeCapacity, after: NodeCapacity, *, fraction: float = DEFAULT_WAVE_FRACTION
) -> list[Point]:
    lesser = {n: {r: min(v, after.get(n, {}).get(r, 0)) for r, v in c.items()} for n, c in before.items()}
    points = [Point("before", before)]
    pools: dict[str, list[str]] = {}
    for n in nodes:
        if n.name in before:
            pools.setdefault(n.pool, []).append(n.name)
    for pool, members in sorted(pools.items()):
        biggest = sorted(members, key=lambda m: (-sum(before[m].values()), m))[: wave_width(len(members), fraction)]
        out = set(biggest)
        points.append(Point(f"during {pool}", {n: c for n, c in lesser.items() if n not in out}))
    points.append(Point("after", after))
    return points


def minus(capacity: NodeCapacity, used: dict[str, dict[str, int]]) -> NodeCapacity:
    """Capacity less what other pods hold on each node (never below 0)."""
    return {n: {r: max(0, v - used.get(n, {}).get(r, 0)) for r, v in c.items()} for n, c in capacity.items()}


def placement_runs(gang: Gang) -> Counter[Shape]:
    """`gang.placement_set()` as how many pods ask each shape, made from its roles once per gang rather
    than as a list of every pod shaped again at every point."""
    runs: Counter[Shape] = Counter()
    left = gang.min_count
    for role in sorted(gang.roles, key=lambda r: (sum(r.resources.values()), sorted(r.resources.items()))):
        if left <= 0:
            break
        take = min(max(role.count, 0), left)
        if take:
            runs[_shape(role.resources)] += take
            left -= take
    return runs


@dataclass(frozen=True)
class GangVerdict:
    gang: Gang
    failed_whole: str | None  # the first point where it cannot be placed even on empty nodes
    failed_beside_others: str | None  # the first point where it fits only if other pods are evicted


def judge(
    gang: Gang,
    points: list[Point],
    requested: dict[str, dict[str, int]],
    own: dict[str, dict[str, int]],
    *,
    free_at: dict[str, Any] | None = None,
) -> GangVerdict:
    """Where the gang can no longer be placed whole; only points after one where it could (a gang that
    does not fit before the migration is not the migration's doing). `requested`: what every pod holds per
    node; `own`: what the gang's pods hold. `free_at` caches each point's capacity less `requested` and the
    node shapes of both, so a fleet of gangs costs one subtraction and one shaping per point, and each gang
    only gives back its own few nodes (shaping per gang made checks quadratic in the fleet: issue 29)."""
    pods = placement_runs(gang)
    whole = beside = None
    cache = free_at if free_at is not None else {}

    def shaped(key: str, capacity: NodeCapacity) -> Counter[Shape]:
        if key not in cache:
            cache[key] = shapes(capacity)
        found: Counter[Shape] = cache[key]
        return found

    if not points or not fits_runs(pods, shaped(f"whole/{points[0].name}", points[0].capacity)):
        return GangVerdict(gang, None, None)
    for p in points[1:]:
        if whole is None and not fits_runs(pods, shaped(f"whole/{p.name}", p.capacity)):
            whole = p.name
        if beside is None and whole is None:
            if p.name not in cache:
                cache[p.name] = minus(p.capacity, requested)
            base: NodeCapacity = cache[p.name]
            free = Counter(shaped(f"beside/{p.name}", base))
            for node, held in own.items():  # give back the gang's own few nodes
                if node in p.capacity:
                    free[_shape(base[node])] -= 1
                    mine = {r: min(v, base[node].get(r, 0) + held.get(r, 0)) for r, v in p.capacity[node].items()}
                    free[_shape(mine)] += 1
            if not fits_runs(pods, +free):
                beside = p.name
    return GangVerdict(gang, whole, beside)
