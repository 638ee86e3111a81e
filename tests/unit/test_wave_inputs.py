"""A node of a later wave whose GPU labels change during the run is not migrated on the plan's stale prediction.

The plan predicts each node's DRA device count (`expectedDevices`, what wait-dra-ready waits for) and its canary
from the labels GFD, the MIG Manager, the device plugin's config manager and the GPU Operator write. An apply runs
for hours; the staleness check ran at its start. A node the MIG Manager reconfigured meanwhile (a new
`nvidia.com/mig.config`: the DRA driver then publishes its MIG devices, not the plan's whole GPUs) used to be
cordoned, drained, switched, waited for the whole wait-dra-ready timeout and rolled back.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.execute.journal import Journal
from dra_migrate.execute.runner import ApplyOptions, Runner
from dra_migrate.execute.wave_inputs import WaveInputs, gpu_inputs
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan, PoolStage
from dra_migrate.plan.params import PlanParams
from dra_migrate.testing.execute import FakeClock, FakeOps

DP = "nvidia.com/gpu.deploy.device-plugin"
DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "demo.yaml"
GFD = {
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/mig.config": "all-disabled",
    "nvidia.com/mig.config.state": "success",
    "nvidia.com/device-plugin.config": "default",
    "nvidia.com/gfd.timestamp": "1700000000",
    "nvidia.com/cuda.driver.major": "550",
}


def _plan(max_unavailable: str = "2") -> tuple[Plan, PoolStage]:
    body = build_plan(load_snapshot(DEMO), PlanParams(soak="0s", max_unavailable=max_unavailable)).to_dict()
    plan = Plan.from_dict(plan_io.seal(body))
    stage = next(s for s in plan.pool_stages() if s.name == "pool-h100-pool")
    assert len(stage.waves) >= 2 and len(stage.waves[1].nodes) == min(2, int(max_unavailable))
    return plan, stage


def _ops(plan: Plan) -> FakeOps:
    ops = FakeOps.for_plan(plan, FakeClock())
    for node in ops.nodes.values():
        node.labels.update(GFD)
    return ops


def _during_first_wave(ops: FakeOps, stage: PoolStage, change: Any) -> None:
    """Run `change` once, while the stage's first wave drains (hours before the second wave)."""
    first = stage.waves[0].nodes[0].node
    real = ops.drain
    done: list[bool] = []

    def drain(node: str, *args: Any, **kw: Any) -> Any:
        if node == first and not done:
            done.append(True)
            change()
        return real(node, *args, **kw)

    ops.drain = drain  # type: ignore[method-assign]


def _apply(plan: Plan, ops: FakeOps, stage: PoolStage, tmp_path: Path, **kw: Any) -> Any:
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        return Runner(plan, ops, j, actor="t", clock=ops.clock, **kw).apply(ApplyOptions(until=stage.name), set())


def _untouched(ops: FakeOps, nodes: list[str]) -> None:
    for n in nodes:
        assert ops.nodes[n].labels.get(DP) != "false" and not ops.nodes[n].unschedulable, f"{n} was touched"
        assert not {("set_annotation", n), ("set_unschedulable", n), ("drain", n)} & set(ops.calls), f"{n} touched"


def test_a_node_the_mig_manager_reconfigured_mid_run_stops_the_run_before_its_wave(tmp_path: Path) -> None:
    plan, stage = _plan()
    ops = _ops(plan)
    second = [n.node for n in stage.waves[1].nodes]
    target = ops.nodes[second[1]]

    def reconfigure() -> None:  # the MIG Manager applied a new config: 7 MIG devices per GPU are published
        target.labels.update({"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/gpu.count": "56"})
        target.devices = 56

    _during_first_wave(ops, stage, reconfigure)
    result = _apply(plan, ops, stage, tmp_path)
    assert not result.ok and result.outcome == "failed"
    assert result.failure is not None and second[1] in result.failure
    assert "nvidia.com/mig.config 'all-disabled' -> 'all-1g.10gb'" in result.failure
    assert "make a new plan" in result.failure and "nothing of the wave was touched" in result.failure
    _untouched(ops, second)
    assert not result.rolled_back, "the wave never started: nothing to undo"
    assert all(ops.nodes[n.node].labels.get(DP) == "false" for n in stage.waves[0].nodes), "wave 1 done"


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("nvidia.com/device-plugin.config", "time-sliced-4", "device-plugin.config"),
        ("nvidia.com/gpu.replicas", "4", "gpu.replicas"),
        ("nvidia.com/mig.strategy", "mixed", "mig.strategy"),
        ("nvidia.com/gpu-driver-upgrade-state", "upgrade-required", "a GPU driver upgrade is under way"),
        (DP, "paused-for-mig-change", "paused"),
    ],
)
def test_any_gpu_label_a_prediction_rests_on_stops_the_wave(tmp_path: Path, key: str, value: str, said: str) -> None:
    plan, stage = _plan()
    ops = _ops(plan)
    second = [n.node for n in stage.waves[1].nodes]
    _during_first_wave(ops, stage, lambda: ops.nodes[second[0]].labels.__setitem__(key, value))
    result = _apply(plan, ops, stage, tmp_path)
    assert not result.ok and result.failure is not None
    assert second[0] in result.failure and said in result.failure, result.failure
    assert "nothing of the wave was touched" in result.failure and not result.rolled_back
    _untouched(ops, second)


def test_labels_no_prediction_rests_on_do_not_stop_the_run(tmp_path: Path) -> None:
    """GFD's timestamp (a GFD restart), the driver version (an upgrade that finished) and an idle upgrade state."""
    plan, stage = _plan()
    ops = _ops(plan)
    node = ops.nodes[stage.waves[1].nodes[0].node]

    def benign() -> None:
        node.labels.update({"nvidia.com/gfd.timestamp": "1800000000", "nvidia.com/cuda.driver.major": "570",
                            "nvidia.com/gpu-driver-upgrade-state": "upgrade-done", "team": "ml"})  # fmt: skip

    _during_first_wave(ops, stage, benign)
    result = _apply(plan, ops, stage, tmp_path)
    assert result.ok, result.failure


def test_a_node_the_migration_touched_before_is_not_judged(tmp_path: Path) -> None:
    """A resumed run: its own label writes on a node of the wave are not a change since the plan."""
    plan, stage = _plan()
    ops = _ops(plan)
    node = stage.waves[1].nodes[0].node
    _during_first_wave(ops, stage, lambda: ops.nodes[node].labels.__setitem__("nvidia.com/mig.strategy", "single"))
    result = _apply(plan, ops, stage, tmp_path, touched_nodes=frozenset({node}))
    assert result.ok, result.failure


def test_the_check_reads_the_watched_copy_once_per_node_and_wave(tmp_path: Path) -> None:
    """Bounded: every planned node once at the first wave, each wave's node once before its wave (2N reads of
    the watched copy in a run, no API request per node), not a node per node per wave."""
    plan, stage = _plan(max_unavailable="1")
    ops = _ops(plan)
    reads: list[str] = []
    real = WaveInputs._read

    def counted(self: WaveInputs, o: Any, node: str) -> Any:
        reads.append(node)
        return real(self, o, node)

    WaveInputs._read = counted  # type: ignore[method-assign]
    try:
        result = _apply(plan, ops, stage, tmp_path)
    finally:
        WaveInputs._read = real  # type: ignore[method-assign]
    assert result.ok, result.failure
    planned = {e.node for _, _, e in plan.nodes()}
    assert len(reads) <= len(planned) + sum(len(w.nodes) for w in stage.waves)


def test_the_inputs_are_the_nvidia_labels_but_the_timestamp_and_driver_versions() -> None:
    assert gpu_inputs({"nvidia.com/gfd.timestamp": "1", "nvidia.com/gpu.count": "8", "a": "b"}) == {
        "nvidia.com/gpu.count": "8"
    }
    idle = {"nvidia.com/cuda.driver.major": "550", "nvidia.com/gpu-driver-upgrade-state": "upgrade-done"}
    assert gpu_inputs(idle) == {}


def test_a_bare_gpu_pod_started_on_a_later_wave_node_stops_the_run_before_the_wave(tmp_path: Path) -> None:
    """A notebook no controller owns, started on a node of wave 2 after the plan: its drain refuses to delete it for
    good. Found by that drain, the wave's other node was already protected, cordoned and drained, then rolled back."""
    plan, stage = _plan()
    ops = _ops(plan)
    second = [n.node for n in stage.waves[1].nodes]
    _during_first_wave(ops, stage, lambda: ops.nodes[second[1]].unowned.__setitem__("ml/notebook-7", "uid-nb7"))
    result = _apply(plan, ops, stage, tmp_path)
    assert not result.ok and result.failure is not None
    assert second[1] in result.failure and "ml/notebook-7" in result.failure, result.failure
    assert "--delete-unowned-pods" in result.failure and "nothing of the wave was touched" in result.failure
    assert not result.rolled_back
    _untouched(ops, second)


def test_delete_unowned_pods_lets_the_wave_run(tmp_path: Path) -> None:
    plan, stage = _plan()
    ops = _ops(plan)
    node = stage.waves[1].nodes[1].node
    _during_first_wave(ops, stage, lambda: ops.nodes[node].unowned.__setitem__("ml/notebook-7", "uid-nb7"))
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        runner = Runner(plan, ops, j, actor="t", clock=ops.clock)
        result = runner.apply(ApplyOptions(until=stage.name, delete_unowned_pods=True), set())
    assert result.ok, result.failure


class _Copy:
    """The executor's watched copy of a node's pods (`Watched.pods_on`)."""

    alive = True

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["spec"]["nodeName"] == node]


def _pod(name: str, *, owner: str | None = None, gpu: bool = True, phase: str = "Running") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x", "controller": True, "apiVersion": "apps/v1"}]
    limits = {"nvidia.com/gpu": "1"} if gpu else {"cpu": "1"}
    spec = {"nodeName": "n1", "containers": [{"name": "c", "resources": {"limits": limits}}]}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_live_ops_reads_the_pods_a_drain_would_refuse_from_the_watched_copy_only() -> None:
    from dra_migrate.execute.ops import LiveOps

    ops = LiveOps(None)  # no API client: a request would fail the test
    assert ops.unreviewed_pods("n1", "gpu", frozenset()) == [], "not watching: no request per node"
    pods = [_pod("bare"), _pod("reviewed"), _pod("owned", owner="ReplicaSet"), _pod("ds", owner="DaemonSet"),
            _pod("cpu-only", gpu=False), _pod("done", phase="Succeeded")]  # fmt: skip
    ops.watched = _Copy(pods)  # type: ignore[assignment]
    assert ops.unreviewed_pods("n1", "gpu", {"uid-reviewed"}) == ["ml/bare"]
    assert ops.unreviewed_pods("n1", "all", {"uid-reviewed"}) == ["ml/bare", "ml/cpu-only"]
    assert ops.unreviewed_pods("n2", "gpu", frozenset()) == []


# ----------------------------------------------------------------------------- the NVIDIA stack's objects

_KINDS = {"ConfigMap": "ConfigMap", "ClusterPolicy": "nvidia.com/ClusterPolicy", "DaemonSet": "apps/DaemonSet"}


def _with_stack(ops: FakeOps) -> FakeOps:
    """The demo cluster's ClusterPolicy, device-plugin ConfigMap and device-plugin DaemonSet, as the API serves them."""
    state = load_snapshot(DEMO)
    for key in _KINDS.values():
        for o in state.of(key):
            meta = o.get("metadata") or {}
            ops.stack[(key, str(meta.get("namespace") or ""), str(meta.get("name")))] = copy.deepcopy(o)
    return ops


def _one(ops: FakeOps, kind: str) -> tuple[tuple[str, str, str], dict[str, Any]]:
    return next((k, o) for k, o in ops.stack.items() if k[0] == _KINDS[kind])


def _stops_wave_2(tmp_path: Path, change: Any, said: str) -> None:
    plan, stage = _plan()
    ops = _with_stack(_ops(plan))
    _during_first_wave(ops, stage, lambda: change(ops))
    result = _apply(plan, ops, stage, tmp_path)
    assert not result.ok and result.failure is not None and said in result.failure, result.failure
    assert "nothing of the wave was touched" in result.failure and not result.rolled_back
    _untouched(ops, [n.node for n in stage.waves[1].nodes])


def test_the_device_plugin_config_changed_mid_run_stops_the_run_before_the_next_wave(tmp_path: Path) -> None:
    """Time-slicing replicas edited in the device plugin's ConfigMap: the node's device prediction is stale."""

    def edit(ops: FakeOps) -> None:
        _, cm = _one(ops, "ConfigMap")
        cm["data"] = {k: str(v).replace("replicas: 4", "replicas: 2") + "\n# edited" for k, v in cm["data"].items()}

    _stops_wave_2(tmp_path, edit, "ConfigMap gpu-operator/time-slicing-config changed since the run began")


def test_the_cluster_policy_changed_mid_run_stops_the_run(tmp_path: Path) -> None:
    def disable(ops: FakeOps) -> None:
        _one(ops, "ClusterPolicy")[1].setdefault("spec", {})["devicePlugin"] = {"enabled": False}

    _stops_wave_2(tmp_path, disable, "ClusterPolicy cluster-policy changed")


def test_a_plugin_daemonset_deleted_or_moved_mid_run_stops_the_run(tmp_path: Path) -> None:
    _stops_wave_2(tmp_path, lambda ops: ops.stack.pop(_one(ops, "DaemonSet")[0]), "was deleted since the run began")

    def reselect(ops: FakeOps) -> None:
        pod = _one(ops, "DaemonSet")[1]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), "example.com/gpu-stack": "v2"}

    (tmp_path / "2").mkdir()
    _stops_wave_2(tmp_path / "2", reselect, "DaemonSet gpu-operator/nvidia-device-plugin-daemonset changed")


def test_a_rollout_restart_of_a_plugin_daemonset_does_not_stop_the_run(tmp_path: Path) -> None:
    plan, stage = _plan()
    ops = _with_stack(_ops(plan))

    def restart() -> None:
        template = _one(ops, "DaemonSet")[1]["spec"]["template"]
        template.setdefault("metadata", {}).setdefault("annotations", {})["kubectl.kubernetes.io/restartedAt"] = "now"

    _during_first_wave(ops, stage, restart)
    result = _apply(plan, ops, stage, tmp_path)
    assert result.ok, result.failure


def test_the_stack_is_read_a_few_times_a_wave_not_per_node(tmp_path: Path) -> None:
    plan, stage = _plan(max_unavailable="1")
    ops = _with_stack(_ops(plan))
    result = _apply(plan, ops, stage, tmp_path)
    assert result.ok, result.failure
    reads = [c for c in ops.calls if c[0] == "stack_object"]
    objects = {c[1] for c in reads}
    assert len(objects) == 3, objects
    waves = sum(1 for s in plan.pool_stages() if s.name <= stage.name for _ in s.waves)
    assert len(reads) <= len(objects) * (len(stage.waves) + waves + 1)


def test_live_ops_reads_a_stack_object_with_one_list_of_its_name() -> None:
    """A list selecting the one name, which the read-only role grants (`list`), not a GET, which no role apply
    runs with grants for these kinds: a refused read is not judged, so the check would never have run."""
    from dra_migrate.execute.ops import LiveOps

    class Kube:
        def __init__(self) -> None:
            self.reads: list[tuple[str, list[tuple[str, str]]]] = []

        def list_all(self, path: str, query: list[tuple[str, str]]) -> tuple[list[dict[str, Any]], str]:
            self.reads.append((path, query))
            return ([{"metadata": {"uid": "u"}}] if "daemonsets" in path else []), "1"

    ops = LiveOps(None)
    ops.kube = kube = Kube()  # type: ignore[assignment]
    assert ops.stack_object("apps/DaemonSet", "nvidia-dra-driver-gpu", "kubelet-plugin") == {"metadata": {"uid": "u"}}
    assert ops.stack_object("nvidia.com/ClusterPolicy", "", "cluster-policy") is None
    assert ops.stack_object("nvidia.com/NVIDIADriver", "", "default") is None
    assert ops.stack_object("ConfigMap", "gpu-operator", "dp-config") is None
    assert kube.reads == [
        (
            "/apis/apps/v1/namespaces/nvidia-dra-driver-gpu/daemonsets",
            [("fieldSelector", "metadata.name=kubelet-plugin")],
        ),
        ("/apis/nvidia.com/v1/clusterpolicies", [("fieldSelector", "metadata.name=cluster-policy")]),
        ("/apis/nvidia.com/v1alpha1/nvidiadrivers", [("fieldSelector", "metadata.name=default")]),
        ("/api/v1/namespaces/gpu-operator/configmaps", [("fieldSelector", "metadata.name=dp-config")]),
    ]


def test_a_node_replaced_mid_run_stops_the_run_before_its_wave(tmp_path: Path) -> None:
    """An autoscaler or a repair recycled a node of wave 2: same name and labels, a new uid. Its cordon step
    refused it, after the wave's other node was protected and cordoned, then rolled back."""
    plan, stage = _plan()
    ops = _ops(plan)
    second = [n.node for n in stage.waves[1].nodes]
    _during_first_wave(ops, stage, lambda: setattr(ops.nodes[second[1]], "uid", "uid-recycled"))
    result = _apply(plan, ops, stage, tmp_path)
    assert not result.ok and result.failure is not None
    # said by the check against the plan's uids (execute/lifecycle.py gone_from_wave), which runs first
    assert f"node {second[1]} of {stage.name}/wave-2 was replaced since the plan" in result.failure, result.failure
    assert not result.rolled_back
    _untouched(ops, second)


def test_only_the_gpu_operators_cluster_policy_is_a_stack_object() -> None:
    """Kyverno's ClusterPolicy shares the kind's name with the GPU Operator's: the kind is looked up by its group
    (cluster/kinds.py), so a Kyverno policy's change never stops a run, and the GPU Operator's is read at its own
    path."""
    from dra_migrate.execute.wave_inputs import StackObjects

    plan, _ = _plan()
    objects = [
        {"kind": "ClusterPolicy", "group": "kyverno.io", "namespace": "", "name": "require-labels"},
        {"kind": "ClusterPolicy", "group": "nvidia.com", "namespace": "", "name": "cluster-policy"},
    ]
    plan = dataclasses.replace(plan, fingerprint={**plan.fingerprint, "objects": objects})
    keys = [k for k in StackObjects(plan).keys if k[0].endswith("ClusterPolicy")]
    assert keys == [("nvidia.com/ClusterPolicy", "", "cluster-policy")]
