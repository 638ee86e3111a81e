"""The pure parts of `dra-migrate probe` (dra_migrate/execute/probe.py): what a node publishes, and a selector
none of it satisfies, checked with the project's own CEL evaluator as the scheduler would run it."""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.cel import compile_selector
from dra_migrate.execute.probe import ProbeResult, mismatch_selector, published_devices

DRIVER = "gpu.nvidia.com"


def device(name: str, memory: str | None, uuid: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {"uuid": {"string": uuid}, "type": {"string": "gpu"}}}
    if memory:
        d["capacity"] = {"memory": {"value": memory}}
    return d


def slice_(node: str, gen: int, devices: list[dict[str, Any]], driver: str = DRIVER) -> dict[str, Any]:
    return {"spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": gen}, "devices": devices}}


def test_published_devices_take_the_newest_generation_of_this_node_and_driver() -> None:
    slices = [
        slice_("n1", 1, [device("gpu-0", "40Gi", "GPU-old")]),
        slice_("n1", 2, [device("gpu-1", "80Gi", "GPU-b"), device("gpu-0", "40Gi", "GPU-a")]),
        slice_("n2", 5, [device("gpu-0", "40Gi", "GPU-other-node")]),
        slice_("n1", 9, [device("x", None, "X")], driver="other.example.com"),
    ]
    out = published_devices(slices, "n1", DRIVER)
    assert [(d["name"], d["attributes"]["uuid"], d["capacity"]) for d in out] == [
        ("gpu-0", "GPU-a", {"memory": "40Gi"}),
        ("gpu-1", "GPU-b", {"memory": "80Gi"}),
    ]


def test_mismatch_selector_asks_more_memory_than_the_largest_device() -> None:
    devs = published_devices([slice_("n1", 1, [device("a", "40Gi", "A"), device("b", "81559Mi", "B")])], "n1", DRIVER)
    sel = mismatch_selector(devs, DRIVER)
    assert sel == f"device.capacity['{DRIVER}'].memory.compareTo(quantity('{81559 * 2**20 + 1}')) >= 0"
    raw = [device("a", "40Gi", "A"), device("b", "81559Mi", "B")]
    assert not any(compile_selector(sel).matches(d, DRIVER) for d in raw)
    # The same selector one byte lower is satisfied by the largest device: the bound is tight, not vacuous.
    lower = sel.replace(str(81559 * 2**20 + 1), str(81559 * 2**20))
    assert [d["name"] for d in raw if compile_selector(lower).matches(d, DRIVER)] == ["b"]


def test_mismatch_selector_without_memory_names_another_driver() -> None:
    devs = published_devices([slice_("n1", 1, [device("a", None, "A")])], "n1", DRIVER)
    sel = mismatch_selector(devs, DRIVER)
    assert sel == f"device.driver != '{DRIVER}'"
    assert not compile_selector(sel).matches(device("a", None, "A"), DRIVER)


def test_result_is_ok_only_without_problems() -> None:
    r = ProbeResult("n1", DRIVER)
    assert r.to_dict()["result"] == "ok" and r.to_dict()["formatVersion"] == 1
    r.problems.append("x")
    assert r.to_dict()["result"] == "failed"
    assert set(r.to_dict()) >= {"formatVersion", "node", "devices", "match", "mismatch", "result"}
