"""The plan follows the NVIDIA stack as installed: which label switches each plugin per node, which nodes
are left out and why, and the DRA driver it waits for (`--dra-driver`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.errors import InputError
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import expand
from dra_migrate.plan.params import PlanParams
from tests.unit.cli import run
from tests.unit.helpers import node, obj

ROOT = Path(__file__).resolve().parents[2]
POOL = "cloud.google.com/gke-nodepool"


def fixture(name: str) -> ClusterState:
    return load_snapshot(ROOT / "fixtures" / "clusters" / f"{name}.yaml")


def make(*objects: dict[str, Any]) -> ClusterState:
    b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
    b.add_all(objects)
    return b.state


def gpu_node(name: str, pool: str = "p", **labels: str) -> dict[str, Any]:
    base = {
        POOL: pool,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.deploy.device-plugin": "true",
    }
    return node(name, {**base, **labels}, {"nvidia.com/gpu": "8"})


def ds(name: str, ns: str = "gpu-operator", **spec: Any) -> dict[str, Any]:
    tmpl = {"spec": {"containers": [{"name": "c", "image": "x"}], **spec}}
    return obj("apps/v1", "DaemonSet", name, {"template": tmpl}, namespace=ns)


DP = ds("nvidia-device-plugin-daemonset", nodeSelector={"nvidia.com/gpu.deploy.device-plugin": "true"})


def actions(stage: dict[str, Any]) -> list[str]:
    return [s["id"] for s in stage["nodeSteps"]]


def pool_stages(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in plan["stages"] if "pool" in s]


def test_chart_default_placement_needs_no_enable_step() -> None:
    plan = build_plan(fixture("upstream-stack"), PlanParams()).to_dict()
    stages = pool_stages(plan)
    assert stages and all(
        actions(s)
        == ["protect", "cordon", "drain", "disable-device-plugin", "wait-dra-ready", "canary", "uncordon", "unprotect"]
        for s in stages
    )
    for s in stages:
        for w in s["waves"]:
            for n in w["nodes"]:
                assert n["placement"]["draPlugin"]["mode"] == "runs"
                assert "dra-driver-nvidia-gpu-kubelet-plugin" in n["placement"]["draPlugin"]["why"]
                assert n["placement"]["devicePlugin"]["label"] == "nvidia.com/gpu.deploy.device-plugin"
                assert list(n["original"]["labels"]) == ["nvidia.com/gpu.deploy.device-plugin"]
                assert n["original"]["annotations"] == {"cluster-autoscaler.kubernetes.io/scale-down-disabled": None}


def test_old_kubelets_are_left_out_with_the_reason_and_the_rest_stays_applicable() -> None:
    plan = build_plan(fixture("upstream-stack"), PlanParams()).to_dict()
    excluded = plan["summary"]["excludedNodes"]
    assert [(e["pool"], e["reason"].split(":")[0]) for e in excluded] == [
        ("h100old", "kubelet-version-unsupported"),
        ("h100old", "kubelet-version-unsupported"),
    ]
    planned = {n["node"] for s in pool_stages(plan) for w in s["waves"] for n in w["nodes"]}
    assert not planned & {e["node"] for e in excluded}
    assert plan["applicable"] is True
    assert any(f["id"] == "kubelet-version-unsupported" for f in plan["findings"])
    # Declared on: nothing is left out.
    gates = {"DRAExtendedResource": True}
    declared = build_plan(fixture("upstream-stack"), PlanParams(), feature_gates=gates).to_dict()
    assert declared["summary"]["excludedNodes"] == []


def test_nodeselector_install_sets_the_label_the_daemonset_selects() -> None:
    plan = build_plan(fixture("upstream-ready"), PlanParams()).to_dict()
    for s in pool_stages(plan):
        steps = {x["id"]: x for x in s["nodeSteps"]}
        assert steps["enable-dra-plugin"]["params"] == {"key": "nvidia.com/dra-kubelet-plugin", "value": "true"}
        assert steps["disable-device-plugin"]["params"] == {"key": "nvidia.com/gpu.deploy.device-plugin",
                                                           "value": "false"}  # fmt: skip


def test_operator_gpucluster_daemonset_label_is_used() -> None:
    dra = ds("nvidia-dra-driver-kubelet-plugin", nodeSelector={"nvidia.com/gpu.deploy.dra-driver": "true"})
    plan = build_plan(make(gpu_node("a"), gpu_node("b"), DP, dra), PlanParams(dra_label="ignored.example/x")).to_dict()
    (stage,) = pool_stages(plan)
    steps = {x["id"]: x for x in stage["nodeSteps"]}
    assert steps["enable-dra-plugin"]["params"] == {"key": "nvidia.com/gpu.deploy.dra-driver", "value": "true"}
    node_entry = stage["waves"][0]["nodes"][0]
    concrete = {x["id"].rsplit("/", 1)[1]: x for x in expand(stage, node_entry)}
    assert concrete["enable-dra-plugin"]["inverse"]["restore"]["value"] is None  # label absent before


def test_no_daemonset_read_falls_back_to_the_label_parameters() -> None:
    plan = build_plan(
        make(gpu_node("a")), PlanParams(dra_label="example.com/dra", device_plugin_label="example.com/dp")
    ).to_dict()
    (stage,) = pool_stages(plan)
    steps = {x["id"]: x["params"] for x in stage["nodeSteps"]}
    assert steps["enable-dra-plugin"] == {"key": "example.com/dra", "value": "true"}
    assert steps["disable-device-plugin"] == {"key": "example.com/dp", "value": "false"}
    assert stage["waves"][0]["nodes"][0]["placement"]["draPlugin"]["mode"] == "assumed"


def test_nodes_needing_different_labels_get_separate_stages() -> None:
    one = ds("dra-a", ns="x", nodeSelector={"example.com/dra-a": "true"}, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}})  # fmt: skip
    two = ds("dra-b-kubelet-plugin", ns="x", nodeSelector={"example.com/dra-b": "true", "zone": "b"})
    one["metadata"]["name"] = "dra-driver-a-kubelet-plugin"
    a, b = gpu_node("na", zone="a"), gpu_node("nb", zone="b")
    two["metadata"]["name"] = "dra-driver-b-kubelet-plugin"
    plan = build_plan(make(a, b, DP, one, two), PlanParams()).to_dict()
    stages = pool_stages(plan)
    assert [s["name"] for s in stages] == ["pool-p", "pool-p-2"]
    keys = sorted(next(x for x in s["nodeSteps"] if x["id"] == "enable-dra-plugin")["params"]["key"] for s in stages)
    assert keys == ["example.com/dra-a", "example.com/dra-b"]


def test_a_node_that_no_label_can_switch_is_left_out() -> None:
    standalone = ds("nvidia-device-plugin-daemonset", ns="kube-system")
    plan = build_plan(make(gpu_node("a"), standalone), PlanParams()).to_dict()
    assert pool_stages(plan) == []
    assert plan["summary"]["excludedNodes"][0]["reason"].startswith("device-plugin-placement-unknown")


def test_dra_driver_parameter_reaches_every_step() -> None:
    plan = build_plan(make(gpu_node("a"), DP), PlanParams(dra_driver="gpu.example.com")).to_dict()
    assert plan["parameters"]["draDriver"] == "gpu.example.com"
    prepare = plan["stages"][0]["steps"]
    confirm = next(s for s in prepare if s["action"] == "confirm-dra-driver")
    assert confirm["params"] == {"driver": "gpu.example.com"} and confirm["target"] == "Driver gpu.example.com"
    classes = [s for s in prepare if s["action"] == "create-deviceclass"]
    assert classes and all("'gpu.example.com'" in str(s["params"]["manifest"]["spec"]) for s in classes)
    assert "gpu.nvidia.com'" not in str([s["params"] for s in classes])
    (stage,) = pool_stages(plan)
    steps = {x["id"]: x["params"] for x in stage["nodeSteps"]}
    assert steps["wait-dra-ready"]["driver"] == "gpu.example.com"
    assert steps["canary"]["driver"] == "gpu.example.com"


@pytest.mark.parametrize("bad", ["", "GPU.NVIDIA.COM", "gpu_nvidia", "-gpu.com", "a" * 64])
def test_bad_dra_driver_is_refused(bad: str) -> None:
    with pytest.raises(InputError):
        PlanParams(dra_driver=bad).validate()


def test_dra_driver_option_on_every_command(tmp_path: Path) -> None:
    snap = "fixtures/clusters/upstream-ready.yaml"
    r = run("generate", "deviceclasses", "--snapshot", snap, "--dra-driver", "gpu.amd.com")
    assert r.code == 0 and "device.driver == 'gpu.amd.com'" in r.stdout and "gpu.nvidia.com'" not in r.stdout
    r = run("match", "--snapshot", snap, "--dra-driver", "gpu.amd.com", "-o", "json")
    proposed = [c for c in json.loads(r.stdout)["classes"] if c["proposed"]]
    assert r.code == 0 and proposed and all("'gpu.amd.com'" in c["selectors"][0] for c in proposed)
    assert all(c["devices"] > 0 for c in proposed)  # predicted devices are evaluated under that driver
    r = run("check", "--snapshot", snap, "--dra-driver", "Not_A_Driver")
    assert r.code == 1 and "--dra-driver" in r.stderr
    out = tmp_path / "p.yaml"
    r = run("plan", "--snapshot", snap, "--out", str(out), "--dra-driver", "gpu.amd.com")
    assert r.code == 0 and "driver: gpu.amd.com" in out.read_text()


def test_a_switch_never_rewrites_a_label_with_other_meaning() -> None:
    zoned = ds("dra-driver-z-kubelet-plugin", ns="x", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]}]}}})  # fmt: skip
    plan = build_plan(make(gpu_node("a", team="web"), DP, zoned), PlanParams()).to_dict()
    assert pool_stages(plan) == []  # it would have to relabel team=web as team=ml
    assert plan["summary"]["excludedNodes"][0]["reason"].startswith("dra-plugin-placement-unknown")
    plan = build_plan(make(gpu_node("a"), DP, zoned), PlanParams()).to_dict()  # no team label yet: adding one is fine
    (stage,) = pool_stages(plan)
    assert next(x for x in stage["nodeSteps"] if x["id"] == "enable-dra-plugin")["params"] == {
        "key": "team",
        "value": "ml",
    }


def test_a_node_its_device_plugin_daemonset_no_longer_selects_needs_no_device_plugin_step() -> None:
    # Labelled off, allocatable 0: the device plugin has left; only the DRA plugin needs switching.
    off = gpu_node("b", **{"nvidia.com/gpu.deploy.device-plugin": "false"})
    off["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    (stage,) = pool_stages(build_plan(make(off, DP), PlanParams()).to_dict())
    assert "disable-device-plugin" not in actions(stage) and "enable-dra-plugin" in actions(stage)
    # Labelled off but still advertising: recorded as such; wait-dra-ready is what proves it left.
    leaving = gpu_node("a", **{"nvidia.com/gpu.deploy.device-plugin": "false"})
    (stage,) = pool_stages(build_plan(make(leaving, DP), PlanParams()).to_dict())
    entry = stage["waves"][0]["nodes"][0]
    assert entry["placement"]["devicePlugin"]["mode"] == "off"
    assert "still advertises nvidia.com/gpu" in entry["placement"]["devicePlugin"]["why"]
    assert entry["resources"] == ["nvidia.com/gpu"]  # wait-dra-ready waits for its allocatable 0
