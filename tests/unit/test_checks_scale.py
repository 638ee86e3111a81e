"""Planning costs what the fleet costs, not pools x nodes.

A fleet of many small node groups (one per zone, instance type or team: 2,000 pools of 5 nodes at 10,000 GPU
nodes) turns any step that walks the whole node list once per pool into a square: `shared-gpu-capacity-loss`
did, for every shared pool, and took 7 of `plan`'s 21 s there (bench/plan_scale.py --pool-size 5). Timing is
left to the benchmark; here the walks are counted, which no machine's load can blur: how often anything reads
the whole list of GPU nodes, of pools or of consumers while a plan is built must not grow with the number of
pools.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.checks import run as checks_run
from dra_migrate.inventory.model import Inventory, build_inventory
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from tests.unit.helpers import container, node, pod, pod_spec
from tests.unit.test_device_plugin_configs import make

WALKS: dict[str, int] = {}


class _Counted(list[Any]):
    """A list that counts how often it is read whole, under its name."""

    def __init__(self, name: str, items: list[Any]) -> None:
        super().__init__(items)
        self.name = name

    def __iter__(self) -> Any:
        WALKS[self.name] = WALKS.get(self.name, 0) + 1
        return super().__iter__()


def _fleet(pools: int) -> Any:
    """`pools` node groups of one 8-GPU node each, every GPU shared 4 ways (GFD's labels), pods on each."""
    objects: list[dict[str, Any]] = []
    for i in range(pools):
        labels = {
            "eks.amazonaws.com/nodegroup": f"ng-{i}",
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "mps" if i % 2 else "time-slicing",
            "nvidia.com/gpu.memory": "81920",
            "nvidia.com/gpu.present": "true",
        }
        objects.append(node(f"g{i}", labels, {"nvidia.com/gpu": "32"}))
        # every other pool on containerd 1.7: `container-runtime-cdi` warns per pool (rules_runtime.py)
        runtime = "containerd://1.7.27" if i % 2 else "containerd://2.1.4"
        objects[-1]["status"]["nodeInfo"] = {"kubeletVersion": "v1.37.2", "containerRuntimeVersion": runtime}
        gpu = pod_spec(container(requests={"nvidia.com/gpu": "1"}))
        objects += [pod(f"p{i}-{k}", gpu, node=f"g{i}") for k in range(3)]
    return make(*objects)


def _walks_to_plan(pools: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    def counted(*args: Any, **kwargs: Any) -> Inventory:
        inv = build_inventory(*args, **kwargs)
        inv.nodes = _Counted("nodes", inv.nodes)
        inv.pools = _Counted("pools", inv.pools)
        inv.consumers = _Counted("consumers", inv.consumers)
        return inv

    monkeypatch.setattr(checks_run, "build_inventory", counted)
    WALKS.clear()
    plan = build_plan(_fleet(pools), PlanParams())
    shared = [f for f in plan.findings if f["id"] == "shared-gpu-capacity-loss"]
    assert len(shared) == pools and len(plan.pool_stages()) == pools  # every pool judged and planned
    assert len([f for f in plan.findings if f["id"] == "container-runtime-cdi"]) == pools // 2
    return dict(WALKS)


def test_no_step_walks_the_fleet_once_per_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    few, many = _walks_to_plan(4, monkeypatch), _walks_to_plan(16, monkeypatch)
    assert few["nodes"] > 0 and many == few, f"whole-list reads for 4 pools: {few}; for 16: {many}"


def test_the_end_of_apply_reads_each_joined_node_once_whatever_the_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """apply's closing line on nodes that joined a migrated pool (execute/lifecycle.py) once asked every node's
    pool for every pool: 2,000 pools x 15,000 nodes at the end of a many-pool apply."""
    from dra_migrate.execute import lifecycle

    asked: list[str] = []
    real = lifecycle.pool_of

    def counted(labels: dict[str, str], *args: Any) -> str:
        asked.append(labels.get("kubernetes.io/hostname", ""))
        return real(labels, *args)

    monkeypatch.setattr(lifecycle, "pool_of", counted)
    for pools in (4, 16):
        plan = build_plan(_fleet(pools), PlanParams())
        states: dict[str, dict[str, Any]] = {
            n: {"uid": uid, "labels": {"eks.amazonaws.com/nodegroup": f"ng-{n[1:]}"}}
            for n, uid in plan.node_uids().items()
        }
        for j in range(3):  # three nodes that joined pool ng-0 since the plan, on the device plugin
            states[f"new-{j}"] = {"uid": f"n{j}", "labels": {"eks.amazonaws.com/nodegroup": "ng-0",
                                                              "kubernetes.io/hostname": f"new-{j}"}}  # fmt: skip
        done = {s.id for st in plan.pool_stages() for w in st.waves for e in w.nodes for s in st.steps_for(e)}
        asked.clear()
        [line] = lifecycle.joined_on_the_device_plugin(plan, states, done)
        assert "pool ng-0: 3 node(s) joined" in line, line
        assert sorted(asked) == ["new-0", "new-1", "new-2"], (pools, asked)
