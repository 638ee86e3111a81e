"""Where the twin runs the NVIDIA plugins: the cluster's own DaemonSets' placement (sim/placement.py), the same
in the KWOK Stages (jq, run here by the jq binary) and at registration (Python)."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.sim.kwok import node_manifest
from dra_migrate.sim.placement import LABEL_RULES, PluginRules, jq_selects
from dra_migrate.sim.spec import LABEL_DEVICE_PLUGIN, specs_from_state
from dra_migrate.sim.stages import A_DP, A_DRA, stages
from dra_migrate.sim.timing import REALISTIC

ROOT = Path(__file__).resolve().parents[2]
JQ = shutil.which("jq")
needs_jq = pytest.mark.skipif(JQ is None, reason="the jq binary evaluates the Stages' selectors (apt install jq)")
READY = {"conditions": [{"type": "Ready", "status": "True"}]}


def jq_bool(expr: str, objects: list[dict[str, Any]]) -> list[bool]:
    """`expr` on each object, by jq (kwok evaluates the same expressions with gojq)."""
    assert JQ is not None
    out = subprocess.run(
        [JQ, "-c", f"[.[] | ({expr})]"], input=json.dumps(objects), capture_output=True, text=True, check=True
    )
    return [bool(v) for v in json.loads(out.stdout)]


def upstream_stack() -> tuple[PluginRules, list[dict[str, Any]]]:
    state = load_snapshot(ROOT / "fixtures" / "clusters" / "upstream-stack.yaml")
    nodes = [node_manifest(s, i) for i, s in enumerate(specs_from_state(state))]
    return PluginRules.from_state(state), nodes


def test_the_upstream_charts_dra_plugin_runs_on_every_gpu_node_without_a_toggle_label() -> None:
    """upstream-stack places the DRA kubelet plugin by node affinity (pci-10de.present): a twin that
    started it from toggle labels only published no slice and failed wait-dra-ready."""
    rules, nodes = upstream_stack()
    assert rules.dra and rules.device_plugin
    assert nodes and all(rules.dra_on(n) for n in nodes)
    assert not any(LABEL_RULES.dra_on(n) for n in nodes)  # the old rule: never started
    off = dict(nodes[0], metadata={**nodes[0]["metadata"], "labels": {**nodes[0]["metadata"]["labels"]}})
    off["metadata"]["labels"][LABEL_DEVICE_PLUGIN] = "false"
    assert rules.device_plugin_on(nodes[0]) and not rules.device_plugin_on(off)
    # its DaemonSet tolerates nvidia.com/gpu only: an untolerated taint keeps it off, as the controller does
    tainted = dict(nodes[0], spec={"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]})
    assert not rules.dra_on(tainted)
    # ...but a cordon does not (node.kubernetes.io/unschedulable is tolerated by every daemon pod)
    cordoned = dict(nodes[0], spec={"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]})
    assert rules.dra_on(cordoned)


@needs_jq
def test_the_stages_start_the_dra_plugin_where_the_daemonset_places_it() -> None:
    rules, nodes = upstream_stack()
    (start,) = [s for s in stages(REALISTIC, rules) if s["metadata"]["name"] == "dra-plugin-start"]
    (expr,) = start["spec"]["selector"]["matchExpressions"]
    ready = [dict(n, status={**n["status"], **READY}) for n in nodes]
    assert all(n["metadata"]["annotations"][A_DRA] == "stopped" for n in ready)
    assert jq_bool(f'{expr["jq"]["key"]} == "yes"', ready) == [True] * len(ready)
    (old,) = [s for s in stages(REALISTIC) if s["metadata"]["name"] == "dra-plugin-start"]
    assert jq_bool(f'{old["spec"]["selector"]["matchExpressions"][0]["jq"]["key"]} == "yes"', ready) == [False] * len(
        ready
    )
    # the device plugin runs where its DaemonSet's selector holds: nothing to stop at registration
    assert all(n["metadata"]["annotations"][A_DP] == "running" for n in nodes)


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


POD_SPECS: list[dict[str, Any]] = [
    {},
    {"nodeSelector": {"a": "1"}},
    {"nodeSelector": {"a": "1", "b": "x"}},
    {
        "affinity": affinity(
            {"matchExpressions": [req("a", "In", "1", "2")]},
            {"matchExpressions": [req("b", "Exists"), req("c", "NotIn", "no")]},
        )
    },
    {
        "affinity": affinity(
            {"matchExpressions": [req("n", "Gt", "3"), req("c", "DoesNotExist")]},
            {"matchFields": [req("metadata.name", "In", "node-b")]},
            {},
        ),
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
    {"nodeSelector": {"a": "1"}, "tolerations": [{"key": "gpu", "value": "yes"}, {"operator": "Exists"}]},
    {"tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoExecute"}]},
    {"affinity": affinity({"matchExpressions": [req("n", "Lt", "3")]})},
]

LABELS = [{}, {"a": "1"}, {"a": "2", "b": "x"}, {"a": "1", "b": "x", "c": "no"}, {"n": "7"}, {"n": "1"}, {"n": "x"}]
TAINTS: list[list[dict[str, str]]] = [
    [],
    [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
    [{"key": "gpu", "value": "no", "effect": "NoExecute"}],
    [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    [{"key": "other", "effect": "PreferNoSchedule"}],
]


@needs_jq
def test_jq_placement_agrees_with_the_daemonset_controllers_rule_on_every_case() -> None:
    """The Stages (jq) and registration (inventory.placement, Python) must place a plugin alike, or a
    node's plugin would start at boot and stop at its first Stage (or the reverse)."""
    nodes = [
        {"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}
        for name, labels, taints in itertools.product(["node-a", "node-b"], LABELS, TAINTS)
    ]
    for spec in POD_SPECS:
        rules = PluginRules(dra=(spec,), device_plugin=(spec,))
        want = [rules.dra_on(n) for n in nodes]
        assert jq_bool(jq_selects(spec), nodes) == want, spec
        assert jq_bool(rules.device_plugin_on_jq(), nodes) == [rules.device_plugin_on(n) for n in nodes]
        assert any(want) or spec.get("tolerations"), spec  # each case selects something
    # no DaemonSet read: the toggle labels
    toggles = [
        {"metadata": {"labels": lbl}}
        for lbl in ({}, {LABEL_DEVICE_PLUGIN: "false"}, {"nvidia.com/dra-kubelet-plugin": "true"})
    ]
    assert jq_bool(LABEL_RULES.dra_on_jq(), toggles) == [LABEL_RULES.dra_on(n) for n in toggles] == [False, False, True]
    dp = [LABEL_RULES.device_plugin_on(n) for n in toggles]
    assert jq_bool(LABEL_RULES.device_plugin_on_jq(), toggles) == dp == [True, False, True]
