"""`operator.Placements`: the plugins' placement computed once per placement shape, not per node, and equal
to computing it per node (`dra_plugin_placement`, `device_plugin_placement`) on random fleets and DaemonSets."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.inventory import operator, placement
from dra_migrate.inventory.fleet import build_gpu_nodes
from dra_migrate.inventory.operator import OPERATOR_DEVICE_PLUGIN_OFF, Placements
from dra_migrate.inventory.resources import GpuNames

KEYS = ["gpu", "zone", "nvidia.com/dra-kubelet-plugin", OPERATOR_DEVICE_PLUGIN_OFF[0], "team", "node-role"]
VALUES = ["true", "false", "a", "b", "1", "7", ""]

expressions = st.fixed_dictionaries(
    {
        "key": st.sampled_from(KEYS),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]),
        "values": st.lists(st.sampled_from(VALUES), max_size=2),
    }
)
fields = st.fixed_dictionaries(
    {
        "key": st.just("metadata.name"),
        "operator": st.sampled_from(["In", "NotIn"]),
        "values": st.lists(st.sampled_from(["n0", "n1", "n2"]), max_size=2),
    }
)
terms = st.fixed_dictionaries(
    {}, optional={"matchExpressions": st.lists(expressions, max_size=2), "matchFields": st.lists(fields, max_size=1)}
)
taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["gpu", "node.kubernetes.io/unschedulable", "x"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
        },
        optional={"value": st.sampled_from(VALUES)},
    ),
    max_size=2,
)
tolerations = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(["gpu", "x", ""]),
            "operator": st.sampled_from(["Exists", "Equal"]),
            "value": st.sampled_from(VALUES),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
        },
    ),
    max_size=2,
)
pod_specs = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
        "affinity": st.builds(
            lambda ts: {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ts}}},
            st.lists(terms, max_size=2),
        ),
        "tolerations": tolerations,
    },
)


def _daemonset(i: int, spec: dict[str, Any], owner: str) -> dict[str, Any]:
    return {
        "kind": "DaemonSet",
        "metadata": {"name": f"{owner}-{i}", "namespace": "gpu"},
        "spec": {"template": {"spec": spec}},
    }


nodes = st.builds(
    lambda name, labels, t, gpus: {
        "metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}},
        "spec": {"taints": t} if t else {},
        "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "8"}},
    },
    st.sampled_from(["n0", "n1", "n2", "n3"]),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4),
    taints,
    st.sampled_from(["0", "8", "x"]),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pod_specs, max_size=2), st.lists(pod_specs, max_size=2), st.lists(nodes, min_size=1, max_size=8))
def test_placements_equal_computing_each_node(
    dra_specs: list[dict[str, Any]], dp_specs: list[dict[str, Any]], fleet: list[dict[str, Any]]
) -> None:
    dra = [_daemonset(i, s, "dra") for i, s in enumerate(dra_specs)]
    dp = [_daemonset(i, s, "dp") for i, s in enumerate(dp_specs)]
    memo = Placements(dra, dp)
    for n in fleet:
        assert memo.of(n) == (operator.dra_plugin_placement(n, dra), operator.device_plugin_placement(n, dp))


def test_a_pool_of_like_nodes_is_placed_once() -> None:
    """Counted: the GPU nodes of a pool, differing only in name and in labels no DaemonSet reads, are placed
    by one computation, however many they are."""
    dra = [_daemonset(0, {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}}, "dra")]
    dp = [_daemonset(0, {"nodeSelector": {"gpu": "true"}}, "dp")]
    calls = []
    for size in (20, 200):
        fleet = [
            {
                "metadata": {"name": f"n{i}", "labels": {"gpu": "true", "kubernetes.io/hostname": f"n{i}"}},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}},
            }
            for i in range(size)
        ]
        with mock.patch.object(operator, "node_selects", wraps=placement.node_selects) as spy:
            got = build_gpu_nodes(fleet, GpuNames(), (), {}, dra, dp)
        calls.append(spy.call_count)
        assert len(got) == size
        assert {(g.dra_placement and g.dra_placement.mode, g.dp_placement and g.dp_placement.mode) for g in got} == {
            ("label", "label")
        }
    assert calls[0] == calls[1]


@settings(max_examples=300, deadline=None)
@given(pod_specs, nodes, st.booleans())
def test_node_selects_with_the_callers_labels_is_node_selects(
    spec: dict[str, Any], node: dict[str, Any], daemon: bool
) -> None:
    """`_reserved_demand` makes each node's labels once for all its pod specs (`selector_labels`)."""
    labels = placement.selector_labels(node)
    assert placement.node_selects(spec, node, daemon=daemon, labels=labels) == placement.node_selects(
        spec, node, daemon=daemon
    )
