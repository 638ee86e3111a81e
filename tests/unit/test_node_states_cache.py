"""`LiveOps.node_states` converts each Node once per resourceVersion.

It runs before every wave (the pool budget's nodes that joined since the plan, execute/budget.py): a fleet of
2,000 pools of 5 nodes has 10,000 waves, and converting the 15,000 Nodes of the cluster each time took 0.15 s a
wave. The watched copy hands the same objects until a Node changes; what changed is converted again, what is gone
is forgotten.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.execute import ops as ops_module
from dra_migrate.execute.ops import LiveOps


class _Watched:
    alive = True

    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.items = nodes

    def nodes(self) -> list[dict[str, Any]]:
        return list(self.items)


def _node(name: str, version: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": version, "labels": labels}}


def test_each_node_is_converted_once_per_resource_version(monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[str] = []
    real = ops_module._node_state

    def counting(obj: dict[str, Any]) -> dict[str, Any]:
        converted.append(obj["metadata"]["name"])
        return real(obj)

    monkeypatch.setattr(ops_module, "_node_state", counting)
    ops = LiveOps(None)
    watched = _Watched([_node(f"n{i}", "1", pool="a") for i in range(50)])
    ops.watched = watched  # type: ignore[assignment]
    first = ops.node_states(watched=True)
    assert len(converted) == 50 and first["n3"]["labels"] == {"pool": "a"}
    for _ in range(20):  # twenty waves of an unchanged cluster
        assert ops.node_states(watched=True) == first
    assert len(converted) == 50

    watched.items[3] = _node("n3", "2", pool="b")  # a node changed
    del watched.items[7]  # one deleted
    watched.items.append(_node("n99", "1", pool="a"))  # one joined
    now = ops.node_states(watched=True)
    assert converted[50:] == ["n3", "n99"]
    assert now["n3"]["labels"] == {"pool": "b"} and "n7" not in now and "n99" in now
    assert "n7" not in ops._converted
