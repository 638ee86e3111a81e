"""The commands a replace-pool plan prints, against what each platform's CLI takes today.

Found auditing the commands: they named the cluster by its kubeconfig context (GKE's
`gke_<project>_<location>_<cluster>`, an EKS ARN or eksctl's `<user>@<cluster>.<region>.eksctl.io`), put a
node zone where gcloud wants the cluster's location and asked a multi-zone pool for its whole count in each
zone; eksctl installed NVIDIA's device plugin beside the DRA driver on the new nodes; AKS got no GPU driver
where no GPU Operator brings one; and no command carried the old pool's own node labels, which its workloads
may select (the pinned-workloads rule assumed they would follow).
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.inventory.model import build_inventory
from dra_migrate.inventory.platform import PoolPlatform, cloud_cluster, new_node_labels, pool_platforms
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.strategies import operator_checks, platform_command
from tests.unit.helpers import container, pod, pod_spec
from tests.unit.test_checks import gpu_node, make
from tests.unit.test_platforms import _state


def _pool(provisioner: str, platform: str, **kw: Any) -> PoolPlatform:
    base: dict[str, Any] = dict(platform=platform, provisioner=provisioner, group="gpu", owner="platform",
                                detail="", autoscaler="cluster-autoscaler", strategy="replace-pool", switching="",
                                sources=(), instance_type="a3-highgpu-8g", nodes=4)  # fmt: skip
    return PoolPlatform(**{**base, **kw})


def _flags(cmd: str) -> dict[str, str]:
    return dict(a.split("=", 1) for a in shlex.split(cmd) if a.startswith("--") and "=" in a)


def test_the_cloud_cluster_is_read_from_the_context_each_cli_writes() -> None:
    # gcloud container clusters get-credentials: gke_<project>_<location>_<cluster>
    gke = cloud_cluster("gke_acme-ml_us-central1_ml-prod")
    assert (gke.name, gke.project, gke.location) == ("ml-prod", "acme-ml", "us-central1")
    # aws eks update-kubeconfig: the context is the cluster's ARN (also in the China and GovCloud partitions)
    arn = cloud_cluster("arn:aws-cn:eks:cn-north-1:111122223333:cluster/ml-ng")
    assert (arn.name, arn.region) == ("ml-ng", "cn-north-1")
    # eksctl utils write-kubeconfig: <user>@<cluster>.<region>.eksctl.io
    ekctl = cloud_cluster("i-0abc@ci@ml-ng.us-west-2.eksctl.io")
    assert (ekctl.name, ekctl.region) == ("ml-ng", "us-west-2")
    # az aks get-credentials: the cluster's name; any other context is taken as the name
    assert cloud_cluster("aks-ml").name == "aks-ml" and cloud_cluster(None).name == "CLUSTER"


def test_gke_names_the_cluster_its_location_and_the_pools_zones() -> None:
    p = _pool("gke-node-pool", "gke", zones=("us-central1-a", "us-central1-b"), accelerator="nvidia-h100-80gb",
              accelerator_count=8)  # fmt: skip
    flags = _flags(platform_command("a3", p, PlanParams(), "gke_acme-ml_us-central1_ml-prod")[0])
    assert flags["--project"] == "acme-ml" and flags["--cluster"] == "ml-prod"
    # --location is the cluster's (a region for a regional cluster), the zones are the node pool's
    assert flags["--location"] == "us-central1"
    assert flags["--node-locations"] == "us-central1-a,us-central1-b"
    # --num-nodes is per zone: 4 nodes over 2 zones is 2 in each, not 4 in each (8 GPU machines)
    assert flags["--num-nodes"] == "2"


def test_gke_without_a_gcloud_context_leaves_the_location_to_fill_in() -> None:
    p = _pool("gke-node-pool", "gke", zones=("us-central1-a",))
    flags = _flags(platform_command("a3", p, PlanParams(), "prod")[0])
    # one zone does not say whether the cluster is zonal or regional
    assert flags["--location"] == "LOCATION" and flags["--node-locations"] == "us-central1-a"
    assert flags["--num-nodes"] == "4" and "--project" not in flags


def test_eksctl_names_the_cluster_and_region_and_installs_no_device_plugin() -> None:
    p = _pool("eks-node-group", "eks", instance_type="p5.48xlarge", zones=("us-west-2a",))
    cmd = platform_command("p5", p, PlanParams(), "arn:aws:eks:us-west-2:111122223333:cluster/ml-ng")[0]
    flags = _flags(cmd)
    assert flags["--cluster"] == "ml-ng" and flags["--region"] == "us-west-2"
    # eksctl installs NVIDIA's device plugin on a GPU node group unless told not to (eksctl GPU support)
    assert flags["--install-nvidia-plugin"] == "false"


def test_aks_keeps_its_gpu_driver_unless_the_gpu_operator_brings_one() -> None:
    managed = _pool("aks-agent-pool", "aks", instance_type="Standard_ND96isr_H100_v5")
    # A managed pool replaced in a cluster without the GPU Operator: AKS's default GPU pool installs the driver
    # and no device plugin (managementMode Unmanaged); --gpu-driver none would leave the DRA driver no GPU driver.
    assert "--gpu-driver" not in shlex.split(platform_command("h100", managed, PlanParams(), "aks-ml")[0])
    operator = _pool("aks-agent-pool", "aks", instance_type="Standard_ND96isr_H100_v5", gpu_operator=True)
    args = shlex.split(platform_command("h100", operator, PlanParams(), "aks-ml")[0])
    assert args[args.index("--gpu-driver") + 1] == "none"


def test_the_commands_carry_the_pools_own_labels() -> None:
    labels = {"team": "llm", "example.com/tier": "prod", "cloud.google.com/gke-nodepool": "a3",
              "kubernetes.io/hostname": "n1", "node.kubernetes.io/instance-type": "a3-highgpu-8g",
              "nvidia.com/gpu.deploy.device-plugin": "true"}  # fmt: skip
    gke = _flags(platform_command("a3", _pool("gke-node-pool", "gke", labels=labels), PlanParams(), "c")[0])
    node_labels = dict(kv.split("=", 1) for kv in gke["--node-labels"].split(","))
    assert node_labels["team"] == "llm" and node_labels["example.com/tier"] == "prod"
    assert not {"kubernetes.io/hostname", "cloud.google.com/gke-nodepool", "node.kubernetes.io/instance-type"} & set(
        node_labels
    )
    eks = _flags(platform_command("a3", _pool("eks-node-group", "eks", labels=labels), PlanParams(), "c")[0])
    assert "team=llm" in eks["--node-labels"].split(",")
    aks = shlex.split(platform_command("a3", _pool("aks-agent-pool", "aks", labels=labels), PlanParams(), "c")[0])
    assert "team=llm" in aks


def _gke_node(name: str, **labels: str) -> dict[str, Any]:
    n = gpu_node(name, **{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb", **labels})
    n["spec"] = {"providerID": f"gce://acme/us-central1-a/{name}"}
    return n


def gpu_pod(name: str, node: str, gpus: int, selector: dict[str, str]) -> dict[str, Any]:
    req = {"nvidia.com/gpu": str(gpus)}
    return pod(name, pod_spec(container(requests=req, limits=req), nodeSelector=selector), node=node)


def _pinned(state: Any) -> set[str]:
    return {f.message for f in assess(state).findings if f.id == "replace-pool-pinned-workloads"}


def test_pinned_workloads_are_judged_by_what_the_new_nodes_will_carry() -> None:
    # A label of the pool (on every node) is carried by the command: a workload selecting it follows.
    pool_label = make(_gke_node("n1", team="llm"), _gke_node("n2", team="llm"),
                      gpu_pod("p", "n1", 8, selector={"team": "llm"}))  # fmt: skip
    assert _pinned(pool_label) == set()
    # A label one node was given by hand, or the node's own hostname, is on no new node: those pods cannot follow.
    by_hand = make(_gke_node("n1", rack="r7"), _gke_node("n2"), gpu_pod("p", "n1", 8, selector={"rack": "r7"}))
    assert len(_pinned(by_hand)) == 1
    by_host = make(_gke_node("n1"), _gke_node("n2"), gpu_pod("p", "n1", 8, selector={"kubernetes.io/hostname": "n1"}))
    assert len(_pinned(by_host)) == 1


def test_the_plan_says_how_to_retire_the_old_pool() -> None:
    """The old nodes end cordoned and shielded from their autoscaler (scale-down-disabled / do-not-disrupt): no
    autoscaler removes them, so, unless the plan says how, the old GPU pool stays up and billed after the move."""
    from dra_migrate.plan.strategies import retire_command

    gke = _pool("gke-node-pool", "gke", group="a3")
    assert retire_command("a3", gke, "gke_acme-ml_us-central1_ml-prod") == (
        "gcloud container node-pools delete a3 --project=acme-ml --cluster=ml-prod --location=us-central1"
    )
    eks = _pool("eks-node-group", "eks", group="p5")
    assert retire_command("p5", eks, "arn:aws:eks:us-west-2:1:cluster/ml-ng") == (
        "eksctl delete nodegroup --cluster=ml-ng --region=us-west-2 --name=p5"
    )
    aks = _pool(
        "aks-agent-pool", "aks", group="h100", labels={"kubernetes.azure.com/cluster": "MC_rg-ml_aks-ml_eastus2"}
    )
    assert retire_command("h100", aks, "aks-ml") == (
        "az aks nodepool delete --resource-group rg-ml --cluster-name aks-ml --name h100"
    )
    assert retire_command("gpu", _pool("karpenter", "eks", group="gpu"), "c") == "kubectl delete nodepool gpu"
    from dra_migrate.plan.build import build_plan
    from tests.unit.test_platforms import _state

    plan = build_plan(_state("aks-managed"), PlanParams())
    await_pool = next(s for s in plan.stages if s.name == "provision-h100").steps[0]
    assert await_pool.params["retire"].startswith("az aks nodepool delete")


def test_the_commands_carry_the_pools_own_taints_and_no_lifecycle_ones() -> None:
    """A GPU pool kept pods off with a taint of its own (`dedicated=ml:NoSchedule`); the new pool, created
    without it, took every pod that does not tolerate it onto its GPU nodes. Taints Kubernetes, the cloud and the
    autoscalers put on for a node's state (the cordon's, not-ready, Karpenter's disrupted, the autoscaler's
    scale-down marks) are not the pool's: carried, they would keep every pod off the new nodes."""
    nodes = []
    for i, extra in enumerate(
        (
            [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
            [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"}],
            [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}, {"key": "only-here", "effect": "NoSchedule"}],
        )
    ):
        n = _gke_node(f"gke-a3-{i}", **{"cloud.google.com/gke-nodepool": "a3"})
        own = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
               {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]  # fmt: skip
        n["spec"]["taints"] = own + extra
        nodes.append(n)
    state = make(*nodes)
    [p] = pool_platforms(state, {"a3": [n["metadata"]["name"] for n in nodes]}, {}).values()
    assert p.taints == (("dedicated", "ml", "NoSchedule"), ("nvidia.com/gpu", "present", "NoSchedule"))
    # gcloud --node-taints (GKE adds its own nvidia.com/gpu taint to GPU pools: not repeated)
    gke = _flags(platform_command("a3", p, PlanParams(), "c")[0])
    assert gke["--node-taints"] == "dedicated=ml:NoSchedule"
    # az aks nodepool add --node-taints
    aks = shlex.split(platform_command("a3", replace(p, provisioner="aks-agent-pool", platform="aks"), PlanParams(),
                                       "c")[0])  # fmt: skip
    assert aks[aks.index("--node-taints") + 1] == "dedicated=ml:NoSchedule,nvidia.com/gpu=present:NoSchedule"
    # eksctl takes taints from a config file only: the operator is told, with the taints
    eks = replace(p, provisioner="eks-node-group", platform="eks")
    assert "--node-taints" not in platform_command("a3", eks, PlanParams(), "c")[0]
    assert any("dedicated=ml:NoSchedule" in c for c in operator_checks(eks))
    # a pool without taints of its own gets no flag
    bare = _flags(platform_command("a3", replace(p, taints=()), PlanParams(), "c")[0])
    assert "--node-taints" not in bare


# --- GKE: the new pool as Google's DRA procedure makes it, and as the plan's own model of its nodes says ------
# Found auditing the gcloud command against cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra and
# Google's ai-on-gke DRA tutorials: the new nodes had neither nvidia.com/gpu.present=true (the DRA chart's
# default kubelet-plugin affinity, dra-driver-nvidia-gpu v0.4.1 values.yaml, which the GKE procedure installs
# as is: no NFD or GPU Operator labels GKE nodes) nor cloud.google.com/gke-nvidia-gpu-dra-driver=true (GKE's
# cluster autoscaler counts a pool's DRA GPUs by it); and a Spot or Ubuntu pool was replaced by an on-demand
# COS one while `new_node_labels` (which the pinned-workloads rule and the twin read) kept gke-spot and the OS.


def test_gke_new_pool_carries_the_labels_the_dra_driver_and_gkes_autoscaler_select() -> None:
    p = _pool("gke-node-pool", "gke", zones=("us-central1-a",), accelerator="nvidia-h100-80gb", accelerator_count=8)
    labels = dict(kv.split("=", 1) for kv in _flags(platform_command("a3", p, PlanParams(), "prod")[0])
                  ["--node-labels"].split(","))  # fmt: skip
    assert labels["gke-no-default-nvidia-gpu-device-plugin"] == "true"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["cloud.google.com/gke-nvidia-gpu-dra-driver"] == "true"
    assert labels[PlanParams().dra_label] == PlanParams().dra_on


def test_gke_new_pool_is_spot_preemptible_and_of_the_old_image_as_its_nodes_are_modelled() -> None:
    old = {"cloud.google.com/gke-spot": "true", "cloud.google.com/gke-os-distribution": "ubuntu"}
    p = _pool("gke-node-pool", "gke", zones=("us-central1-a",), labels=old)
    args = shlex.split(platform_command("a3", p, PlanParams(), "prod")[0])
    assert "--spot" in args and "--image-type=UBUNTU_CONTAINERD" in args
    # what the plan says the new nodes carry is what the command makes them
    new = new_node_labels("a3", p, old, (PlanParams().dra_label, PlanParams().dra_on))
    assert new["cloud.google.com/gke-spot"] == "true" and new["nvidia.com/gpu.present"] == "true"
    pre = _pool("gke-node-pool", "gke", labels={"cloud.google.com/gke-preemptible": "true"})
    assert "--preemptible" in shlex.split(platform_command("a3", pre, PlanParams(), "prod")[0])
    # an on-demand COS pool gets neither flag, and no image type is forced on it
    plain = shlex.split(platform_command("a3", _pool("gke-node-pool", "gke"), PlanParams(), "prod")[0])
    assert not {"--spot", "--preemptible"} & set(plain)
    assert not any(a.startswith("--image-type") for a in plain)


def test_gke_replace_pool_says_the_new_pool_needs_a_gpu_driver_as_well() -> None:
    # gpu-driver-version=disabled leaves the new nodes without a GPU driver (set-up-dra: install it, then the DRA
    # driver); "install the DRA driver there" alone left them with a kubelet plugin that cannot start.
    p = next(pool.platform for pool in build_inventory(_state("gke-managed")).pools if pool.name == "a3-h100")
    assert p is not None and p.strategy == "replace-pool"
    assert "GPU driver and the DRA driver" in p.switching
