"""A plan as the runner walks it: units (the prepare stage, or one wave of a pool stage), their lanes (a node's
steps), and the concrete steps in plan order. Pure functions of the typed plan."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from dra_migrate.plan.model import Plan, PoolStage, PrepareStage, Step, Wave


@dataclass(frozen=True)
class PlannedStep:
    stage: str
    wave: str | None
    node: str | None
    step: Step

    @property
    def id(self) -> str:
        return self.step.id


@dataclass(frozen=True)
class Unit:
    """What runs as one: the prepare stage (one lane) or one wave of a pool stage (a lane per node)."""

    stage: str
    wave: Wave | None
    lanes: tuple[tuple[PlannedStep, ...], ...]

    @property
    def steps(self) -> Iterator[PlannedStep]:
        for lane in self.lanes:
            yield from lane


def units(plan: Plan) -> Iterator[Unit]:
    for stage in plan.stages:
        if isinstance(stage, PrepareStage):
            yield Unit(stage.name, None, (tuple(PlannedStep(stage.name, None, None, s) for s in stage.steps),))
            continue
        for wave in stage.waves:
            yield Unit(stage.name, wave, tuple(_lane(stage, wave, n.node, stage.steps_for(n)) for n in wave.nodes))


def _lane(stage: PoolStage, wave: Wave, node: str, steps: tuple[Step, ...]) -> tuple[PlannedStep, ...]:
    return tuple(PlannedStep(stage.name, wave.name, node, s) for s in steps)


def planned_steps(plan: Plan) -> Iterator[PlannedStep]:
    """Every concrete step of the plan in plan order (in a wave: step by step across its nodes)."""
    for unit in units(plan):
        width = max((len(lane) for lane in unit.lanes), default=0)
        for i in range(width):
            for lane in unit.lanes:
                if i < len(lane):
                    yield lane[i]


def planned_step_ids(plan: Plan) -> Iterator[str]:
    """The ids of `planned_steps`, in its order, without making the steps: those fill every step's
    parameters for every node, which `status` (it only counts) paid at fleet size (issue 29)."""
    for stage in plan.stages:
        if isinstance(stage, PrepareStage):
            yield from (s.id for s in stage.steps)
            continue
        for wave in stage.waves:
            for step in stage.node_steps:  # step by step across the wave's nodes, as `planned_steps`
                for n in wave.nodes:
                    yield f"{stage.name}/{n.node}/{step.id}"


def nodes_touched(plan: Plan, step_ids: Iterable[str]) -> frozenset[str]:
    """The nodes these steps (a journal's touched ones) act on."""
    ids = set(step_ids)
    return frozenset(p.node for p in planned_steps(plan) if p.node and p.id in ids)


def stage_steps(plan: Plan, action: str) -> dict[str, Step]:
    """Each pool stage's node step of `action` (its drain, its DRA readiness wait), by stage name."""
    return {stage.name: s for stage in plan.pool_stages() for s in stage.node_steps if s.action == action}
