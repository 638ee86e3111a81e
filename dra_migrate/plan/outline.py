"""What `show` draws of a plan, typed: its sections, and per node only the cells a reviewer reads.

`show` of a 10,000-node plan must not hold the plan's every node entry (labels, annotations, placement,
the profile it shares) as Python objects: the model of the whole plan costs ~40x the file's size
(issue 29, item 4: `show`'s memory <= 5x the file). An outline keeps, per node, one small slotted record
of the table's six cells; the streaming reader (`plan/stream.py`) fills it a chunk of rows at a time,
and `outline_of` makes the same outline of a plan already in memory (format 1, an edited plan under
review, `apply`'s summary), so both paths draw through one renderer (`render/plan.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from dra_migrate.plan.step import Step

if TYPE_CHECKING:
    from dra_migrate.plan.model import Plan  # not imported to draw a streamed plan: a module is `show`'s memory


class NodeLine(NamedTuple):
    """One node as `show` lists it: a tuple in the order of show's node table, whose row it is as it is (a
    10,000-node plan's rows were copies: `show`'s peak is held to 5x the file, issue 29)."""

    wave: str
    node: str
    gpu_pods: Any  # as the file holds them (the model checks their types; show only prints them)
    other_pods: Any
    expected_devices: Any
    canary_resource: Any


@dataclass(frozen=True)
class WaveOutline:
    name: str
    evicted_pods: Any
    soak_after: Any
    nodes: tuple[str, ...]  # the node names, in order


@dataclass(frozen=True)
class StageOutline:
    name: str
    pool: str | None  # None: the prepare stage
    resources: tuple[str, ...]
    steps: tuple[Step, ...]  # a pool stage's node steps (once for every node), or prepare's steps
    waves: tuple[WaveOutline, ...]
    nodes: tuple[NodeLine, ...]  # every node of the stage, wave by wave


@dataclass(frozen=True)
class PlanOutline:
    cluster: str
    kubernetes_version: str | None
    applicable: bool
    edited: bool  # edited and rebased (`edited` recorded)
    parameters: Mapping[str, Any]
    summary: Mapping[str, Any]
    review: Mapping[str, Any]
    findings: tuple[Mapping[str, Any], ...]
    stages: tuple[StageOutline, ...]


def steps_of(value: Any, path: str) -> tuple[Step, ...]:
    return tuple(Step.from_dict(s, f"{path}[{i}]") for i, s in enumerate(value or []))


def head_outline(plan: Mapping[str, Any], stages: tuple[StageOutline, ...]) -> PlanOutline:
    """The sections of the model's mapping (or a file's, whose head is the same), with `stages`."""
    fp = plan.get("fingerprint")
    version = fp.get("kubernetesVersion") if isinstance(fp, Mapping) else None
    return PlanOutline(
        cluster=str(plan.get("cluster")),
        kubernetes_version=None if version is None else str(version),
        applicable=bool(plan.get("applicable")),
        edited=bool(plan.get("edited")),
        parameters=plan.get("parameters") or {},
        summary=plan.get("summary") or {},
        review=plan.get("review") or {},
        findings=tuple(plan.get("findings") or []),
        stages=stages,
    )


def stage_outline(
    stage: Mapping[str, Any],
    path: str,
    nodes: tuple[NodeLine, ...],
    wave_nodes: list[tuple[str, ...]],
    typed: dict[int, tuple[Step, ...]] | None = None,
) -> StageOutline:
    """A stage's head (the model's shape, or a format-2 stage's: the same keys but `waves`' nodes), with
    its nodes and each wave's node names (in the order of `waves`). `typed`: the steps already typed, by
    the list they were read from: the stages of a file that state their steps once (`sameAs`) share them
    (a plan of 400 five-node pools typed the same ten steps 400 times)."""
    pool = stage.get("pool")
    steps = stage.get("nodeSteps") if pool is not None else stage.get("steps")
    waves = tuple(
        WaveOutline(str(w.get("name")), w.get("evictedPods"), w.get("soakAfter"), names)
        for w, names in zip(stage.get("waves") or [], wave_nodes, strict=True)
    )
    step_path = f"{path}.nodeSteps" if pool is not None else f"{path}.steps"
    if typed is None:
        typed_steps = steps_of(steps, step_path)
    else:
        typed_steps = typed.get(id(steps)) or typed.setdefault(id(steps), steps_of(steps, step_path))
    return StageOutline(
        name=str(stage.get("name")),
        pool=None if pool is None else str(pool),
        resources=tuple(stage.get("resources") or ()),
        steps=typed_steps,
        waves=waves,
        nodes=nodes,
    )


def node_line(wave: str, entry: Mapping[str, Any]) -> NodeLine:
    return NodeLine(
        wave, str(entry.get("node")), entry.get("gpuPods"), entry.get("otherPods"), entry.get("expectedDevices"),
        entry.get("canaryResource"),
    )  # fmt: skip


def outline_of(plan: Mapping[str, Any] | Plan) -> PlanOutline:
    """The outline of a plan in memory: typed, or the model's mapping (`io.load`, `load_for_review`)."""
    doc = plan if isinstance(plan, Mapping) else plan.to_dict()
    stages = []
    for i, st in enumerate(doc.get("stages") or []):
        waves = st.get("waves") or []
        nodes = tuple(node_line(str(w.get("name")), n) for w in waves for n in w.get("nodes") or [])
        names = [tuple(str(n.get("node")) for n in w.get("nodes") or []) for w in waves]
        stages.append(stage_outline(st, f"stages[{i}]", nodes, names))
    return head_outline(doc, tuple(stages))


def recorded_cluster(doc: Mapping[str, Any]) -> tuple[Any, Any]:
    """(cluster name, server version) a plan's mapping records, read without the whole model: `show`'s
    header needs only these of a plan it prints as it streams."""
    fingerprint = doc.get("fingerprint")
    return doc.get("cluster"), fingerprint.get("kubernetesVersion") if isinstance(fingerprint, Mapping) else None
