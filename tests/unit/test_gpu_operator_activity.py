"""A cluster whose NVIDIA stack the GPU Operator manages: what the operator does to a node's labels on its own
(a driver upgrade, a driver reload, a MIG reconfiguration, its node labelling) and what the plan and `apply`
make of it (dra_migrate/inventory/operator_activity.py; sources in its docstring)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.execute.actions import StepContext, run_step
from dra_migrate.execute.contract import StepFailed
from dra_migrate.inventory.model import build_inventory
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Action, Step
from dra_migrate.plan.params import PlanParams
from dra_migrate.testing.execute import FakeClock, FakeNode, FakeOps
from tests.unit.helpers import obj
from tests.unit.test_plan_placement import DP, ds, gpu_node, make, pool_stages

DP_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DRA = ds("dra-driver-nvidia-gpu-kubelet-plugin", ns="nvidia-dra-driver-gpu",
         nodeSelector={"nvidia.com/dra-kubelet-plugin": "true"})  # fmt: skip
POLICY = obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", {"devicePlugin": {"enabled": True}}, namespace=None)

BUSY = {
    "upgrading": {"nvidia.com/gpu-driver-upgrade-state": "cordon-required"},
    "upgrade-failed": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-failed"},
    "mig-pending": {"nvidia.com/mig.config.state": "pending"},
    # The driver manager paused the node's operands: the device plugin's label reads as "off" to the
    # DaemonSet and comes back "true" when the reload ends.
    "reloading": {DP_LABEL: "paused-for-driver-upgrade"},
    "mig-paused": {DP_LABEL: "paused-for-mig-change", "nvidia.com/mig.config.state": "success"},
}
IDLE = {"done": {"nvidia.com/gpu-driver-upgrade-state": "upgrade-done", "nvidia.com/mig.config.state": "success"}}


def _cluster(*extra: dict[str, Any]) -> Any:
    nodes = [gpu_node(name, **labels) for name, labels in {**BUSY, **IDLE}.items()]
    return make(*nodes, DP, DRA, *extra)


def test_a_node_the_operator_is_working_on_is_left_out_of_the_plan_with_the_reason() -> None:
    plan = build_plan(_cluster(POLICY), PlanParams()).to_dict()
    excluded = {e["node"]: e["reason"] for e in plan["summary"]["excludedNodes"]}
    assert set(excluded) == set(BUSY)
    assert all(r.startswith("gpu-operator-node-busy: ") for r in excluded.values())
    assert "paused-for-driver-upgrade" in excluded["reloading"]
    planned = {n["node"] for s in pool_stages(plan) for w in s["waves"] for n in w["nodes"]}
    assert planned == set(IDLE)
    assert plan["applicable"] is True  # node-scoped: the rest of the fleet goes ahead
    busy = [f for f in plan["findings"] if f["id"] == "gpu-operator-node-busy"]
    assert {f["severity"] for f in busy} == {"blocker"}
    assert {o.split(" ")[-1] for f in busy for o in f["objects"]} == set(BUSY)


def test_a_migrated_node_is_not_reported_busy() -> None:
    """After the migration the operator keeps "false" through its own pauses (maybeSetPaused("false") is
    "false"): a later upgrade on a migrated node is no concern of the plan."""
    done = gpu_node("m", **{DP_LABEL: "false", "nvidia.com/dra-kubelet-plugin": "true",
                            "nvidia.com/gpu-driver-upgrade-state": "drain-required"})  # fmt: skip
    readiness = assess(make(done, DP, DRA, POLICY))
    assert not [f for f in readiness.findings if f.id == "gpu-operator-node-busy"]


def _step(action: Action, params: dict[str, Any], step_id: str) -> Step:
    return Step(f"pool-p/n/{step_id}", action, "Node n", params, "", "1m", None)


def _ops(**labels: str) -> FakeOps:
    return FakeOps([FakeNode("n", "u-1", labels={DP_LABEL: "true", **labels}, resources={"nvidia.com/gpu": 8})],
                   clock=FakeClock())  # fmt: skip


@pytest.mark.parametrize("labels", list(BUSY.values()), ids=list(BUSY))
def test_apply_does_not_cordon_a_node_the_operator_is_working_on(labels: dict[str, str]) -> None:
    ops = _ops(**labels)
    with pytest.raises(StepFailed, match=r"GPU Operator|driver upgrade|MIG"):
        run_step(StepContext(ops, _step(Action.CORDON, {"unschedulable": True}, "cordon"), "n", 30, node_uid="u-1"))
    assert ops.nodes["n"].unschedulable is False  # refused before it changed anything


def test_apply_does_not_switch_the_device_plugin_off_once_a_driver_reload_began() -> None:
    """The reload read "true" before the switch and writes it back after: the device plugin would return
    beside the DRA plugin. A reload that began after the cordon (the drain can take an hour) is caught at
    the switch."""
    ops = _ops(**{DP_LABEL: "paused-for-driver-upgrade", "nvidia.com/gpu-driver-upgrade-state": "upgrade-done"})
    step = _step(Action.SET_LABEL, {"key": DP_LABEL, "value": "false"}, "disable-device-plugin")
    with pytest.raises(StepFailed, match="paused"):
        run_step(StepContext(ops, step, "n", 30, node_uid="u-1"))
    assert ops.nodes["n"].labels[DP_LABEL] == "paused-for-driver-upgrade"
    idle = _ops()
    run_step(StepContext(idle, step, "n", 30, node_uid="u-1"))
    assert idle.nodes["n"].labels[DP_LABEL] == "false"


# --- the operator's node labelling removes some nvidia.com/gpu.deploy.* keys under a ClusterPolicy ----------


def test_under_a_cluster_policy_the_dra_stack_deploy_label_is_no_switch() -> None:
    """gpu-operator v26.7.0 removeGPUStateLabels deletes every state key outside the node's workload set,
    the GPUCluster stack's nvidia.com/gpu.deploy.dra-driver among them: set to start a DRA kubelet plugin,
    it is gone at the next reconcile and the plugin with it."""
    dra = ds("nvidia-dra-driver-gpu-kubelet-plugin", ns="nvidia-dra-driver-gpu",
             nodeSelector={"nvidia.com/gpu.deploy.dra-driver": "true"})  # fmt: skip
    inv = build_inventory(make(gpu_node("a"), DP, dra, POLICY))
    p = inv.nodes[0].dra_placement
    assert p is not None and p.mode == "unknown"
    assert "ClusterPolicy" in p.why and "nvidia.com/gpu.deploy.dra-driver" in p.why
    plan = build_plan(make(gpu_node("a"), gpu_node("b"), DP, dra, POLICY), PlanParams()).to_dict()
    assert {e["reason"].split(":")[0] for e in plan["summary"]["excludedNodes"]} == {"dra-plugin-placement-unknown"}
    # Without a ClusterPolicy (a GPUCluster, or no operator) the label stays where it is set.
    inv = build_inventory(make(gpu_node("a"), DP, dra))
    assert inv.nodes[0].dra_placement is not None and inv.nodes[0].dra_placement.mode == "label"


# --- the operator-validator ----------------------------------------------------------------------------------


def test_the_validator_finding_does_not_advise_switching_the_validator_off() -> None:
    """With nvidia.com/gpu.deploy.operator-validator=false no validator writes /run/nvidia/validations/toolkit-ready
    after a reboot, which GFD, dcgm-exporter and the MIG Manager wait for in their init containers (gpu-operator
    assets/*/0500_daemonset.yaml), and a driver upgrade waits in validation-required for a validator pod that never
    comes (k8s-operator-libs pkg/upgrade/validation_manager.go: no pod, no timeout)."""
    readiness = assess(make(gpu_node("a"), DP, DRA, POLICY))
    (f,) = [f for f in readiness.findings if f.id == "operator-validator-device-plugin"]
    assert "operator-validator=false" not in f.remediation or "do not label" in f.remediation.lower()
    assert "upgrade" in f.message


def test_a_paused_device_plugin_is_not_a_migrated_node() -> None:
    """Where the DRA plugin already runs (the chart's default affinity), a device plugin paused for a driver
    reload looked off: the node counted as migrated, no step touched it, and the reload brought the device
    plugin back beside the DRA plugin."""
    term = {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    everywhere = ds("dra-driver-nvidia-gpu-kubelet-plugin", ns="nvidia-dra-driver-gpu",
                    affinity={"nodeAffinity": required})  # fmt: skip
    state = make(gpu_node("r", **{DP_LABEL: "paused-for-driver-upgrade"}), gpu_node("i"), DP, everywhere, POLICY)
    (r,) = [n for n in build_inventory(state).nodes if n.name == "r"]
    assert not r.migrated and r.device_plugin_enabled
    assert r.dp_placement is not None and (r.dp_placement.label, r.dp_placement.value) == (DP_LABEL, "false")
    plan = build_plan(state, PlanParams()).to_dict()
    assert [e["node"] for e in plan["summary"]["excludedNodes"]] == ["r"]


def test_a_dra_label_the_cluster_policy_deletes_is_refused_as_the_plans_switch() -> None:
    """With no DRA DaemonSet read the plan assumes `--dra-label`; under a ClusterPolicy the operator deletes
    nvidia.com/gpu.deploy.dra-driver from every node at a later reconcile (v26.7.0 removeGPUStateLabels), so
    every migrated node would lose its DRA plugin: refused before a plan is written, naming the label."""
    from dra_migrate.errors import InputError

    with pytest.raises(InputError, match=r"nvidia\.com/gpu\.deploy\.dra-driver"):
        build_plan(make(gpu_node("a"), DP, POLICY), PlanParams(dra_label="nvidia.com/gpu.deploy.dra-driver"))
    build_plan(make(gpu_node("a"), DP), PlanParams(dra_label="nvidia.com/gpu.deploy.dra-driver"))  # no policy
