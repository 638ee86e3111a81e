"""`gpu-daemonset`: DaemonSets whose pods hold device-plugin GPUs on nodes still to migrate.

Found reading the drain against the switch: the drain skips DaemonSet pods (as kubectl does), so a GPU
DaemonSet's pod kept its device-plugin GPU while the DRA driver published the same GPU, and DRA could give
it to the canary or to any pod after the uncordon. The disable-device-plugin step's stated precondition ("no
pod on the node requests a device-plugin GPU") was not true of such a node, and nothing said so.
"""

from __future__ import annotations

from typing import Any

from tests.unit.helpers import container, obj, pod, pod_spec
from tests.unit.test_checks import GPU, findings, gpu_node, make


def _daemonset(name: str, limits: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    template = {"spec": pod_spec(container(limits=limits or {}), **spec)}
    return obj("apps/v1", "DaemonSet", name, {"template": template, "selector": {"matchLabels": {"app": name}}})


def _pods_of(ds: dict[str, Any], *nodes: str) -> list[dict[str, Any]]:
    return [pod(f"{ds['metadata']['name']}-{n}", ds["spec"]["template"]["spec"], owner=ds, node=n) for n in nodes]


def test_a_daemonset_holding_gpus_in_a_pool_to_migrate_is_flagged_with_its_pools() -> None:
    probe = _daemonset("gpu-health-probe", {GPU: "1"})
    state = make(gpu_node("h-1", pool="h100"), gpu_node("a-1", pool="a100"), probe, *_pods_of(probe, "h-1", "a-1"))
    (f,) = findings(state, "gpu-daemonset")
    assert f.severity.value == "warning" and [str(o) for o in f.objects] == ["apps/DaemonSet ml/gpu-health-probe"]
    assert f.pools == ("a100", "h100")
    assert "ml/gpu-health-probe" in f.message and "NotIn" in f.remediation


def test_daemonsets_that_hold_no_gpu_are_not_flagged() -> None:
    agent = _daemonset("log-agent")
    tolerant = _daemonset("dcgm-like", None, tolerations=[{"key": GPU, "operator": "Exists"}])
    state = make(gpu_node("h-1", pool="h100"), agent, tolerant, *_pods_of(agent, "h-1"), *_pods_of(tolerant, "h-1"))
    assert findings(state, "gpu-daemonset") == []


def test_a_deployment_holding_gpus_is_the_drains_not_this_rules() -> None:
    deploy = obj(
        "apps/v1", "Deployment", "serve", {"replicas": 1, "template": {"spec": pod_spec(container(limits={GPU: "1"}))}}
    )
    assert findings(make(gpu_node("h-1", pool="h100"), deploy), "gpu-daemonset") == []


def test_a_daemonset_only_on_migrated_nodes_is_not_flagged() -> None:
    migrated = gpu_node(
        "h-1", pool="h100", **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    )
    migrated["status"]["allocatable"].pop(GPU)
    probe = _daemonset("gpu-health-probe", {GPU: "1"})
    assert findings(make(migrated, probe, *_pods_of(probe, "h-1")), "gpu-daemonset") == []
