"""EKS GPU pools on Bottlerocket: the NVIDIA variants run NVIDIA's device plugin as a host service
(`nvidia-k8s-device-plugin`), not a DaemonSet, so the replacement pool must boot nodes whose OS does not run it.
Each test here failed on the code before the fix (docs/platforms/eks.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.inventory.platform import PoolPlatform
from dra_migrate.plan import io as plan_io
from dra_migrate.plan import validate
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.strategies import bottlerocket_dra, operator_checks, platform_command

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "clusters" / "platforms"


def _await_params(name: str, pool: str) -> dict[str, Any]:
    body = build_plan(load_snapshot(FIXTURES / f"{name}.yaml"), PlanParams()).to_dict()
    assert validate.validate(body) == []
    plan = Plan.from_dict(plan_io.seal(validate.recompute(body)))
    return next(s for s in plan.stages if s.name == f"provision-{pool}").steps[0].params


def _node_group(os_image: str, **kw: Any) -> PoolPlatform:
    return PoolPlatform(
        platform="eks", provisioner="eks-node-group", group="p5-br", owner="platform",
        detail="the device plugin built into the Bottlerocket NVIDIA variant", autoscaler="cluster-autoscaler",
        strategy="replace-pool", switching="", sources=(), os_images=(os_image,), instance_type="p5.48xlarge",
        zones=("us-west-2a",), nodes=2, **kw,
    )  # fmt: skip


def test_a_bottlerocket_karpenter_pool_is_not_replaced_by_nodes_of_the_same_ec2nodeclass() -> None:
    # The old EC2NodeClass boots Bottlerocket with its host device plugin on: a NodePool on it makes the same nodes,
    # which advertise nvidia.com/gpu and no DRA device. The new NodePool names a new EC2NodeClass the check describes.
    params = _await_params("eks-karpenter", "gpu-h100")
    ref = params["manifest"]["spec"]["template"]["spec"]["nodeClassRef"]
    assert ref == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "bottlerocket-gpu-dra"}
    check = " ".join(params["check"])
    assert "EC2NodeClass bottlerocket-gpu-dra" in check and "copy of bottlerocket-gpu" in check
    assert "al2023@latest" in check and "nvidia-k8s-device-plugin" in check
    # The fixture's nodes run Bottlerocket 1.50.0, which has no DRA driver: staying on Bottlerocket is not offered.
    assert "1.50.0" in check and "kubelet-dra-drivers" not in check


def test_a_bottlerocket_node_group_is_replaced_by_an_al2023_one_named_in_the_command() -> None:
    # eksctl picks the AMI family from its own default when the command names none; the AL2023 NVIDIA AMI carries
    # no device plugin (a DaemonSet the user installs), which --install-nvidia-plugin=false keeps off.
    command, _ = platform_command("p5-br", _node_group("Bottlerocket OS 1.50.0 (aws-k8s-1.37-nvidia)"), PlanParams(),
                                  "arn:aws:eks:us-west-2:111122223333:cluster/ml")  # fmt: skip
    assert "--node-ami-family=AmazonLinux2023" in command and "--install-nvidia-plugin=false" in command
    al2023, _ = platform_command("p5", replace(_node_group(""), os_images=("Amazon Linux 2023.9.20251110",)),
                                 PlanParams(), "arn:aws:eks:us-west-2:111122223333:cluster/ml")  # fmt: skip
    assert "--node-ami-family" not in al2023


def test_bottlerocket_with_the_dra_driver_is_offered_with_its_settings() -> None:
    # From Bottlerocket 1.66.0 the Kubernetes 1.34+ NVIDIA variants carry NVIDIA's DRA driver, opt-in, running only
    # while the device plugin is off (bottlerocket v1.66.0, bottlerocket-core-kit#1035 and #914).
    check = " ".join(operator_checks(_node_group("Bottlerocket OS 1.66.0 (aws-k8s-1.36-nvidia)")))
    assert "settings.kubelet-device-plugins.nvidia.enabled = false" in check
    assert "settings.kubelet-dra-drivers.nvidia.enabled = true" in check


def test_the_bottlerocket_dra_driver_needs_its_release_and_a_kubernetes_134_nvidia_variant() -> None:
    assert bottlerocket_dra(("Bottlerocket OS 1.66.0 (aws-k8s-1.34-nvidia)",)) is True
    assert bottlerocket_dra(("Bottlerocket OS 1.70.2 (aws-k8s-1.37-nvidia-fips)",)) is True
    assert bottlerocket_dra(("Bottlerocket OS 1.65.9 (aws-k8s-1.36-nvidia)",)) is False
    assert bottlerocket_dra(("Bottlerocket OS 1.66.0 (aws-k8s-1.33-nvidia)",)) is False
    assert bottlerocket_dra(("Bottlerocket OS 1.66.0 (aws-k8s-1.36)",)) is False  # no NVIDIA driver at all
    # One old node in the pool: the replacement cannot be made like it.
    assert (
        bottlerocket_dra(
            ("Bottlerocket OS 1.66.0 (aws-k8s-1.36-nvidia)", "Bottlerocket OS 1.60.0 (aws-k8s-1.36-nvidia)")
        )
        is False
    )
    assert bottlerocket_dra(("Bottlerocket (EKS Auto) 2025.3.14 (aws-k8s-1.36-standard)",)) is None
    assert bottlerocket_dra(("Amazon Linux 2023.9.20251110",)) is None


def test_an_auto_mode_pool_keeps_its_nodeclass_and_gets_no_bottlerocket_settings() -> None:
    # Auto Mode nodes are Bottlerocket-based but have no user data: AWS chooses DRA or the device plugin on them.
    p = replace(_node_group("Bottlerocket OS 1.66.0 (aws-k8s-1.36-nvidia)"), auto_mode=True)
    check = " ".join(operator_checks(p))
    assert "Bottlerocket" not in check and "kubelet-dra-drivers" not in check and "al2023" not in check


def test_an_auto_mode_pool_is_told_of_auto_modes_static_capacity_not_karpenters_feature_gate() -> None:
    # Auto Mode keeps spec.replicas natively (static-capacity node pools, EKS user guide auto-static-capacity) and runs
    # NVIDIA's DRA driver itself from Kubernetes 1.36: no StaticCapacity gate or Karpenter version is the user's.
    params = _await_params("eks-auto-mode", "gpu")
    assert params["manifest"]["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "default"
    assert params["manifest"]["spec"]["replicas"] == 2
    check = " ".join(params["check"])
    assert "StaticCapacity" not in check and "Bottlerocket" not in check
    assert "auto-static-capacity" in check and "replicas cannot be removed" in check


def test_a_bottlerocket_pool_off_eks_is_not_told_of_eksctl_or_amis() -> None:
    # A pool no cloud names (self-managed Bottlerocket nodes): the generic command, so the check names no eksctl flag.
    p = replace(_node_group("Bottlerocket OS 1.66.0 (aws-k8s-1.36-nvidia)"), provisioner="none", group=None)
    check = " ".join(operator_checks(p))
    assert "nvidia-k8s-device-plugin" in check and "settings.kubelet-dra-drivers.nvidia.enabled = true" in check
    assert "node-ami-family" not in check and "eksctl" not in check and "EC2NodeClass" not in check
