"""A cluster state is read, never changed in place (cluster/state.py). The sealed reader hands one object to
every pod that repeats a value word for word (cluster/sealed.py `_Shared`), so a consumer that edited one
pod's tolerations or containers would edit them in every pod of its workload, and a manifest generated from
a ResourceQuota by editing it would change the quota every later reader sees. Every consumer of a state
runs here over each fixture, read from its YAML and from a sealed snapshot of it, and the state must be as
it was read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot, snapshot_header, write_snapshot
from dra_migrate.cluster.state import ClusterState
from dra_migrate.convert.dependents import dependent_changes
from dra_migrate.dra.deviceclasses import generate as generate_classes
from dra_migrate.inventory.model import build_inventory
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.drift import drift
from dra_migrate.plan.params import PlanParams
from dra_migrate.sim.spec import specs_from_state

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").rglob("*.yaml"))
COPIES = 2  # more pods of the same workload per pod: their repeated values are shared


def sealed_copy(fixture: Path, tmp_path: Path) -> Path:
    """The fixture as `dra-migrate snapshot --format jsonl` writes it, each pod with two more of its workload
    (another name and uid, every other value the same)."""
    state = load_snapshot(fixture)
    items: list[dict[str, Any]] = []
    for _, obj in state.all_objects():
        items.append(obj)
        if obj.get("kind") == "Pod":
            for i in range(COPIES):
                meta = {**obj["metadata"], "name": f"{obj['metadata']['name']}-copy{i}"}
                meta["uid"] = f"{meta.get('uid', meta['name'])}-copy{i}"
                items.append({**obj, "metadata": meta})
    path = tmp_path / f"{fixture.stem}.jsonl"
    with path.open("wb") as out:
        write_snapshot(out, snapshot_header(state.source, "test"), items, "jsonl")
    return path


def run_every_consumer(state: ClusterState) -> None:
    inventory = build_inventory(state)
    generation = generate_classes(state, inventory, "gpu.nvidia.com")
    dependent_changes(state, [(p.name, p.extended_resource_name) for p in generation.proposals])
    plan = build_plan(state, PlanParams(drain="all", max_unavailable="2"))
    drift(plan, state)
    specs_from_state(state)
    build_plan(state, PlanParams())  # a second reader after the first: what the first left is what it reads


def shared_values(state: ClusterState) -> int:
    """How many pod values are one object in two pods (the sealed reader's sharing at work)."""
    seen: dict[int, int] = {}
    for pod in state.of("Pod"):
        for part in (pod.get("spec") or {}).values():
            if isinstance(part, (dict, list)) and part:
                seen[id(part)] = seen.get(id(part), 0) + 1
    return sum(1 for n in seen.values() if n > 1)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.relative_to(ROOT / "fixtures").as_posix() for f in FIXTURES])
@pytest.mark.parametrize("form", ["yaml", "sealed"])
def test_no_consumer_changes_the_state_it_reads(fixture: Path, form: str, tmp_path: Path) -> None:
    state = load_snapshot(fixture if form == "yaml" else sealed_copy(fixture, tmp_path))
    if form == "sealed" and state.of("Pod"):
        assert shared_values(state), "the sealed copy shares no value: the test would not see an edit through one"
    before = copy.deepcopy(state.objects)
    run_every_consumer(state)
    assert state.objects == before
