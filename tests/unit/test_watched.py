"""The executor's watched copies (execute/watched.py): indexed by node as the watch events say."""

from __future__ import annotations

from typing import Any

from dra_migrate.execute.watched import Watched
from dra_migrate.kube import ADDED, DELETED, MODIFIED, Event


def _pod(name: str, node: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "spec": {"nodeName": node}}


def test_pods_and_slices_are_found_by_node_and_leave_on_delete() -> None:
    w = Watched(kube=None)  # type: ignore[arg-type]  # no informer runs: events are fed by hand
    w._index("pods", Event(ADDED, _pod("a", "n1")))
    w._index("pods", Event(ADDED, _pod("b", "n1")))
    w._index("pods", Event(ADDED, _pod("c", "n2")))
    assert sorted(p["metadata"]["name"] for p in w.pods_on("n1")) == ["a", "b"]
    w._index("pods", Event(MODIFIED, _pod("a", "n1", rv="2")))
    assert {p["metadata"]["resourceVersion"] for p in w.pods_on("n1") if p["metadata"]["name"] == "a"} == {"2"}
    w._index("pods", Event(DELETED, _pod("a", "n1", rv="3")))
    assert [p["metadata"]["name"] for p in w.pods_on("n1")] == ["b"]
    assert w.pods_on("n3") == []
    s = {"metadata": {"name": "n2-gpu"}, "spec": {"nodeName": "n2", "driver": "gpu.nvidia.com"}}
    w._index("slices", Event(ADDED, s))
    assert w.slices_of("n2") == [s] and w.slices_of("n1") == []
    w._index("slices", Event(DELETED, s))
    assert w.slices_of("n2") == []


def test_an_object_that_moves_is_indexed_under_its_new_node_only() -> None:
    w = Watched(kube=None)  # type: ignore[arg-type]
    s = {"metadata": {"name": "s"}, "spec": {"nodeName": "n1"}}
    w._index("slices", Event(ADDED, s))
    w._index("slices", Event(MODIFIED, {"metadata": {"name": "s"}, "spec": {"nodeName": "n2"}}))
    assert w.slices_of("n1") == [] and len(w.slices_of("n2")) == 1
