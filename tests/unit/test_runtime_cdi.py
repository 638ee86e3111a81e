"""`container-runtime-cdi`: a GPU node whose container runtime cannot (or may not) inject the CDI devices the NVIDIA
DRA driver prepares is named by `check`/`plan` before any node is drained, not by its first wave's canary."""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.checks.model import Finding
from dra_migrate.inventory.runtime import CONFIG, UNSUPPORTED, cdi_support
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from tests.unit.test_checks import cluster_policy, findings, fixture, gpu_node, make

RULE = "container-runtime-cdi"


def _runtime(n: dict[str, Any], version: str, kubelet: str = "v1.37.2") -> dict[str, Any]:
    n.setdefault("status", {})["nodeInfo"] = {"kubeletVersion": kubelet, "containerRuntimeVersion": version}
    return n


@pytest.mark.parametrize(
    ("version", "verdict"),
    [
        ("containerd://1.6.38", UNSUPPORTED),  # no CDI in the CRI plugin at all
        ("containerd://1.7.0", UNSUPPORTED),  # CDI from annotations only; the kubelet sends the CRI field
        ("containerd://1.7.1", UNSUPPORTED),
        ("containerd://1.7.2", CONFIG),  # reads the CRI field, behind enable_cdi (default false)
        ("containerd://1.7.27-1", CONFIG),  # Ubuntu/AKS packaging suffix
        ("containerd://1.7.27+bottlerocket", CONFIG),
        ("containerd://v1.7.23", CONFIG),
        ("containerd://2.0.0", None),  # on by default
        ("containerd://v2.0.0", None),
        ("containerd://2.1.4-k3s1", None),
        ("cri-o://1.27.8", UNSUPPORTED),  # CDI from annotations only
        ("cri-o://1.28.0", None),
        ("cri-o://1.31.1", None),
        ("docker://24.0.7", UNSUPPORTED),  # no CDI before Docker 25
        ("docker://27.5.1", CONFIG),  # opt-in CDI, and cri-dockerd's version is not shown
        ("", None),
        ("containerd://", None),
        ("containerd://1.7", None),  # no patch: 1.7.0 and 1.7.27 differ, not judged
        ("containerd://garbage", None),
        ("garbage", None),
        ("1.7.27", None),  # no runtime name
        ("containerd://1.7.27foo", None),
        ("remote://1.0.0", None),  # a runtime not known here
    ],
)
def test_version_parsing(version: str, verdict: str | None) -> None:
    got = cdi_support(version)
    assert (got.verdict if got else None) == verdict
    assert cdi_support(None) is None


def _one(fs: list[Finding]) -> list[tuple[str, tuple[str, ...]]]:
    return [(f.severity.value, tuple(o.name for o in f.objects)) for f in fs]


def test_blocker_per_pool_naming_the_nodes_and_nothing_on_containerd_2() -> None:
    state = make(
        _runtime(gpu_node("a1", pool="old"), "containerd://1.6.38"),
        _runtime(gpu_node("a2", pool="old"), "containerd://1.7.27-1"),
        _runtime(gpu_node("a3", pool="old"), "containerd://2.0.0"),
        _runtime(gpu_node("b1", pool="new"), "containerd://v2.0.0"),
        _runtime(gpu_node("c1", pool="crio"), "cri-o://1.27.1"),
        _runtime(gpu_node("c2", pool="crio"), "cri-o://1.31.1"),
        _runtime(gpu_node("d1", pool="unk"), "garbage"),
    )
    fs = findings(state, RULE)
    got = sorted((f.severity.value, f.message.split(":")[0], tuple(o.name for o in f.objects)) for f in fs)
    assert got == [
        ("blocker", "pool crio", ("c1",)),
        ("blocker", "pool old", ("a1",)),
        ("warning", "pool old", ("a2",)),
    ]
    warning = next(f for f in fs if f.severity.value == "warning")
    assert "enable_cdi" in warning.message + warning.remediation
    assert "containerd://1.7.27-1" in warning.message


def test_clusterpolicy_with_cdi_on_settles_containerd_1_7_but_not_what_cannot() -> None:
    nodes = (
        _runtime(gpu_node("a1"), "containerd://1.7.27"),
        _runtime(gpu_node("a2"), "containerd://1.7.1"),
        _runtime(gpu_node("a3"), "docker://27.5.1"),
    )
    on = make(*nodes, cluster_policy(cdi={"enabled": True}))
    assert sorted(_one(findings(on, RULE))) == [("blocker", ("a2",)), ("warning", ("a3",))]
    # the toolkit is not the operator's: it configures no runtime
    off = make(*nodes, cluster_policy(cdi={"enabled": True}, toolkit={"enabled": False}))
    want = [("blocker", ("a2",)), ("warning", ("a1",)), ("warning", ("a3",))]  # one finding per pool and kind
    assert sorted(_one(findings(off, RULE))) == want
    # not said: the API shows nothing to rely on
    assert sorted(_one(findings(make(*nodes, cluster_policy()), RULE))) == want
    assert sorted(_one(findings(make(*nodes), RULE))) == want


def test_toolkit_switched_off_on_a_node_is_not_settled_by_the_clusterpolicy() -> None:
    n = _runtime(gpu_node("a1", **{"nvidia.com/gpu.deploy.container-toolkit": "false"}), "containerd://1.7.27")
    state = make(n, cluster_policy(cdi={"enabled": True}))
    assert _one(findings(state, RULE)) == [("warning", ("a1",))]


def test_fleet_scale_message_is_compact() -> None:
    nodes = [_runtime(gpu_node(f"n{i:03}"), f"containerd://1.6.{i % 7}") for i in range(200)]
    (f,) = findings(make(*nodes), RULE)
    assert len(f.objects) == 200 and f.message.startswith("pool p: 200 GPU node(s)")
    assert len(f.message) < 700, f.message


def test_plan_leaves_out_the_nodes_that_cannot_and_keeps_the_rest() -> None:
    state = fixture("upstream-ready")  # applicable, every GPU node planned, all on containerd 2.1.4
    old = "aks-h100-35768863-vmss000000"
    (n,) = [n for n in state.of("Node") if n["metadata"]["name"] == old]
    n["status"]["nodeInfo"]["containerRuntimeVersion"] = "containerd://1.6.38"
    plan = build_plan(state, PlanParams())
    assert plan.applicable  # node-scoped: the rest of the fleet is still planned
    excluded = {e["node"]: e["reason"] for e in plan.summary["excludedNodes"]}
    assert list(excluded) == [old] and excluded[old].startswith(f"{RULE}: containerd before 1.7")
    planned = {e.node for s in plan.pool_stages() for w in s.waves for e in w.nodes}
    assert old not in planned and "aks-h100-35768863-vmss000001" in planned
    assert [f["objects"] for f in plan.findings if f["id"] == RULE] == [[f"Node {old}"]]


def test_fixtures_on_containerd_2_do_not_trip_it() -> None:
    for name in ("demo", "upstream-stack", "upstream-ready", "mig-timeslice", "half-migrated"):
        assert findings(fixture(name), RULE) == [], name
