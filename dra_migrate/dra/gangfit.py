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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.dra.capacity import ClassSelectors, class_for, matching_devices, unhealthy_gpus
from dra_migrate.dra.devices import node_devices
from dra_migrate.inventory.fleet import GpuNode
from dra_migrate.inventory.gangs import Gang

# The plan's default wave (`plan --max-unavailable 10%`, rounded down, never below one node).
DEFAULT_WAVE_FRACTION = 0.10

Shape = tuple[tuple[str, int], ...]  # sorted (resource, GPUs) pairs
NodeCapacity = dict[str, dict[str, int]]  # node -> resource -> GPUs it can serve at that point


@dataclass(frozen=True)
class Point:
    """A moment of the migration: what every node in service can serve then.

    The `during` points of a fleet share one map (every node at the lesser of its two sides) and differ
    only in the wave that is out of service (`out`), so a fleet of many pools is one map, not a copy of
    the fleet per pool: with pools and gangs both growing with the fleet, a copy per pool made the gang
    check quadratic (issue 29: 400 pools of 5 nodes took 7 s of a 9.6 s `plan`)."""

    name: str  # "before", "during <pool>", "after"
    capacity: NodeCapacity  # the map this point reads, shared between points of the same `base`
    base: str = ""  # which map `capacity` is: "before", "lesser", "after" (the caches' key); "" = name
    out: frozenset[str] = frozenset()  # nodes of `capacity` out of service at this point

    def serving(self) -> NodeCapacity:
        """The nodes in service at this point, and what each serves."""
        return {n: c for n, c in self.capacity.items() if n not in self.out}

    @property
    def key(self) -> str:
        return self.base or self.name


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
    return pack(runs, free) is not None


def pack(runs: Counter[Shape], free: Counter[Shape]) -> Counter[Shape] | None:
    """Pack the pods onto `free` (node shapes and how many of each; consumed): None when they do not fit,
    else how many nodes of each shape the packing left untouched. Whatever nodes are taken away later,
    if no shape loses more nodes than the packing left untouched of it, the same packing still fits."""
    known: dict[Shape, tuple[dict[str, int], int]] = {}  # a shape's map and total, made once per call
    made: Counter[Shape] = Counter()  # nodes a pod has already been put on, by the shape they are left with
    for asked, count in sorted(runs.items(), key=lambda run: (-sum(v for _, v in run[0]), run[0])):
        if not _place_run(free, made, known, asked, count):
            return None
    return +(free - made)


def _place_run(
    free: Counter[Shape],
    made: Counter[Shape],
    known: dict[Shape, tuple[dict[str, int], int]],
    asked: Shape,
    count: int,
) -> bool:
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
            _take(free, made, best, asked, per_node, nodes)
            count -= nodes * per_node
        else:
            _take(free, made, best, asked, count, 1)
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


def _take(free: Counter[Shape], made: Counter[Shape], shape: Shape, asked: Shape, pods: int, nodes: int) -> None:
    """`nodes` nodes of `shape` each take `pods` pods that ask `asked`; nodes already used are taken first
    (alike nodes are interchangeable), so the untouched ones are as many as can be."""
    free[shape] -= nodes
    if not free[shape]:
        del free[shape]
    again = min(made[shape], nodes)
    if again:
        made[shape] -= again
        if not made[shape]:
            del made[shape]
    left = dict(shape)
    for r, v in asked:
        left[r] -= v * pods
    after = _shape(left)
    free[after] += nodes
    made[after] += nodes


def _schedulable(nodes: list[GpuNode]) -> list[GpuNode]:
    return [n for n in nodes if not n.unschedulable and n.ready is not False]


def capacity_before(nodes: list[GpuNode]) -> NodeCapacity:
    return {n.name: dict(n.allocatable) for n in _schedulable(nodes)}


def capacity_after(state: ClusterState, nodes: list[GpuNode], classes: list[ClassSelectors]) -> NodeCapacity:
    """What each node serves once migrated: per resource it serves today, the devices its class matches, less
    the GPUs its device plugin reports unhealthy on a node not yet publishing (`capacity.unhealthy_gpus`)."""
    devices = node_devices(state)
    out: NodeCapacity = {}
    for n in _schedulable(nodes):
        served: dict[str, int] = {}
        nd = devices.get(n.name)
        for resource in set(n.capacity) | set(n.allocatable):
            cls = class_for(resource, classes)
            served[resource] = len(matching_devices(state, cls, nd)) if cls is not None and nd is not None else 0
            if nd is not None and nd.source == "predicted":  # GPUs the device plugin reports broken: capacity.py
                served[resource] = max(0, served[resource] - unhealthy_gpus(n, resource))
        out[n.name] = served
    return out


def wave_width(pool_nodes: int, fraction: float = DEFAULT_WAVE_FRACTION) -> int:
    return max(1, int(pool_nodes * fraction))


def migration_points(
    nodes: list[GpuNode], before: NodeCapacity, after: NodeCapacity, *, fraction: float = DEFAULT_WAVE_FRACTION
) -> list[Point]:
    lesser = {n: {r: min(v, after.get(n, {}).get(r, 0)) for r, v in c.items()} for n, c in before.items()}
    points = [Point("before", before, "before")]
    pools: dict[str, list[str]] = {}
    for n in nodes:
        if n.name in before:
            pools.setdefault(n.pool, []).append(n.name)
    for pool, members in sorted(pools.items()):
        biggest = sorted(members, key=lambda m: (-sum(before[m].values()), m))[: wave_width(len(members), fraction)]
        points.append(Point(f"during {pool}", lesser, "lesser", frozenset(biggest)))
    points.append(Point("after", after, "after"))
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


def judge(gang: Gang, moments: Moments, own: dict[str, dict[str, int]]) -> GangVerdict:
    """Where the gang can no longer be placed whole; only points after one where it could (a gang that
    does not fit before the migration is not the migration's doing). `own`: what the gang's pods hold, by
    node; `moments`: the fleet's points, shaped once for all its gangs.

    The gang is packed once per map; a point then only asks whether its wave takes away more nodes of
    some shape than that packing left untouched, and the points whose waves take away alike nodes share
    the answer (`Moments.waves`), so a gang costs what the fleet's distinct waves cost, not one packing per
    pool. Only when the answer is no is a wave packed on its own (the map's shapes less the wave's).
    With pools and gangs both growing with the fleet, packing every gang at every pool's point was
    quadratic (issue 29: 400 pools of five nodes spent 7 s of a 9.6 s `plan` here)."""
    runs = placement_runs(gang)
    packed: dict[tuple[str, str], Counter[Shape] | None] = {}  # this gang's packing on each map

    def fits(base: tuple[str, str], free: Counter[Shape], lost: Counter[Shape]) -> bool:
        if base not in packed:
            packed[base] = pack(runs, Counter(free))
        untouched = packed[base]
        if untouched is not None and all(untouched[s] >= k for s, k in lost.items()):
            return True
        return pack(runs, +(free - lost)) is not None

    whole: int | None = None  # the first point where the gang cannot be placed
    for wave in moments.waves("whole"):
        if (whole is None or wave.first < whole) and not fits(wave.base, moments.shapes[wave.base], wave.lost):
            whole = wave.first
    if whole == 0:
        return GangVerdict(gang, None, None)  # it does not fit before the migration either
    end = len(moments.points) if whole is None else whole
    beside = _GivenBack(moments, own).first_failing(fits, end)
    return GangVerdict(
        gang,
        None if whole is None else moments.points[whole].name,
        None if beside is None else moments.points[beside].name,
    )


@dataclass(frozen=True)
class Wave:
    """The points whose waves take away alike nodes from one map: they share every gang's answer."""

    base: tuple[str, str]  # ("whole" or "beside", the map's key)
    lost: Counter[Shape]  # the nodes out of service, as shapes
    points: tuple[int, ...]  # the points, in order

    @property
    def first(self) -> int:
        return self.points[0]


class Moments:
    """The fleet's points as node shapes, made once for all its gangs: each map's shapes, whole and less
    what every pod holds, and the points grouped by the nodes their waves take away."""

    def __init__(self, points: list[Point], requested: dict[str, dict[str, int]]) -> None:
        self.points = points
        self.maps = {p.key: p.capacity for p in points}  # the distinct maps: "before", "lesser", "after"
        self.minus = {k: minus(c, requested) for k, c in self.maps.items()}
        self.shapes: dict[tuple[str, str], Counter[Shape]] = {("whole", k): shapes(c) for k, c in self.maps.items()}
        self.shapes.update({("beside", k): shapes(c) for k, c in self.minus.items()})
        self.out_at: dict[str, list[int]] = {}  # node -> the points whose wave takes it
        for i, p in enumerate(points):
            for n in p.out:
                self.out_at.setdefault(n, []).append(i)
        self._waves = {side: self._group(side) for side in ("whole", "beside")}

    def _group(self, side: str) -> list[Wave]:
        grouped: dict[Any, list[int]] = {}
        lost: dict[Any, Counter[Shape]] = {}
        for i, p in enumerate(self.points):
            capacity = p.capacity if side == "whole" else self.minus[p.key]
            taken = Counter(_shape(capacity[n]) for n in p.out if n in capacity)
            key = ((side, p.key), frozenset(taken.items()))
            grouped.setdefault(key, []).append(i)
            lost.setdefault(key, taken)
        return [Wave(key[0], lost[key], tuple(idx)) for key, idx in grouped.items()]

    def waves(self, side: str) -> list[Wave]:
        return self._waves[side]


_Fits = Callable[[tuple[str, str], Counter[Shape], Counter[Shape]], bool]  # `judge`'s: map, its shapes, the wave's


class _GivenBack:
    """One gang's view of the fleet less what every pod holds: its own few nodes given back to it."""

    def __init__(self, moments: Moments, own: dict[str, dict[str, int]]) -> None:
        self.m, self.own = moments, own
        self.maps: dict[str, tuple[Counter[Shape], dict[str, Shape]]] = {}
        # The points whose wave takes one of the gang's nodes: each is judged on its own.
        self.alone = sorted({i for n in own for i in moments.out_at.get(n, ())})

    def _map(self, key: str) -> tuple[Counter[Shape], dict[str, Shape]]:
        """The map less `requested`, the gang's nodes given back, and the shapes they are given back as."""
        if key not in self.maps:
            base = self.m.minus[key]
            capacity = self.m.maps[key]
            mine = {n: _shape(_give_back(capacity[n], base[n], held)) for n, held in self.own.items() if n in base}
            free = Counter(self.m.shapes[("beside", key)])
            for n, shape in mine.items():
                free[_shape(base[n])] -= 1
                free[shape] += 1
            self.maps[key] = (+free, mine)
        return self.maps[key]

    def first_failing(self, fits: _Fits, end: int) -> int | None:
        """The first point after the first, and before `end`, where the gang fits only if other pods go."""
        found: int | None = None
        for i in self.alone:
            if 0 < i < end and not self._fits_alone(fits, i):
                found = i
                break
        alone = set(self.alone)
        for wave in self.m.waves("beside"):
            first = next((i for i in wave.points if i > 0 and i not in alone), None)
            if first is None or first >= (end if found is None else min(end, found)):
                continue
            if not fits(wave.base, self._map(wave.base[1])[0], wave.lost):
                found = first
        return found

    def _fits_alone(self, fits: _Fits, i: int) -> bool:
        p = self.m.points[i]
        free, mine = self._map(p.key)
        base = self.m.minus[p.key]
        lost = Counter(_shape(base[n]) for n in p.out if n in base)
        for n in p.out.intersection(mine):  # out of service with the rest of its wave
            lost[_shape(base[n])] -= 1
            lost[mine[n]] += 1
        return fits(("beside", p.key), free, +lost)


def _give_back(capacity: dict[str, int], left: dict[str, int], held: dict[str, int]) -> dict[str, int]:
    return {r: min(v, left.get(r, 0) + held.get(r, 0)) for r, v in capacity.items()}
