"""The `az aks nodepool add` a replace-pool plan prints, against Microsoft's AKS documentation
(MicrosoftDocs/azure-aks-docs, articles/aks/, snapshot of 2026-08-21).

Found auditing it: the new pool was made regional where the old one was zonal (its zonal disks' pods could not
follow), on AKS's default OS where the old one ran Azure Linux (and the GPU Operator "isn't compatible with
multiple OS versions on the same AKS cluster"), regular where the old one was Spot, with AKS's own Spot taint
copied in `--node-taints` (a reserved `kubernetes.azure.com/` key); a managed GPU pool's replacement relied on a
default the managed-GPU page states two ways; and `--gpu-driver none` was emitted wherever a ClusterPolicy was,
even one whose driver is off (the operator running on AKS's preinstalled driver): the new nodes had no driver.
"""

from __future__ import annotations

import shlex
from typing import Any

from dra_migrate.inventory.platform import PoolPlatform, pool_platforms
from dra_migrate.plan.params import PlanParams
from dra_migrate.plan.strategies import operator_checks, platform_command
from tests.unit.test_checks import POOL, cluster_policy, gpu_node, make


def _pool(**kw: Any) -> PoolPlatform:
    base: dict[str, Any] = dict(platform="aks", provisioner="aks-agent-pool", group="h100", owner="platform",
                                detail="", autoscaler="cluster-autoscaler", strategy="replace-pool", switching="",
                                sources=(), instance_type="Standard_ND96isr_H100_v5", nodes=4)  # fmt: skip
    return PoolPlatform(**{**base, **kw})


def _args(p: PoolPlatform) -> list[str]:
    return shlex.split(platform_command("h100", p, PlanParams(), "aks-ml")[0])


def _values(args: list[str], flag: str) -> list[str]:
    """The words after `flag` up to the next flag (az takes lists as separate words: `--zones 1 2 3`)."""
    if flag not in args:
        return []
    out = []
    for a in args[args.index(flag) + 1 :]:
        if a.startswith("--"):
            break
        out.append(a)
    return out


def test_a_zonal_pool_is_replaced_in_its_zones() -> None:
    # AKS labels a zonal node topology.kubernetes.io/zone=<region>-<zone> and a regional one "0" (use-labels.md,
    # reliability-zone-resiliency-recommendations.md); `az aks nodepool add --zones 1 2 3`
    # (reliability-availability-zones-configure.md).
    args = _args(_pool(zones=("eastus2-1", "eastus2-3")))
    assert _values(args, "--zones") == ["1", "3"]
    assert "--zones" not in _args(_pool(zones=("0",)))
    assert "--zones" not in _args(_pool())


def test_the_new_pool_runs_the_old_pools_os_sku() -> None:
    # kubernetes.azure.com/os-sku-requested "exactly matches requested sku from API" (use-labels.md)
    requested = _pool(labels={"kubernetes.azure.com/os-sku": "AzureLinux",
                              "kubernetes.azure.com/os-sku-requested": "AzureLinux3"})  # fmt: skip
    assert _values(_args(requested), "--os-sku") == ["AzureLinux3"]
    older = _pool(labels={"kubernetes.azure.com/os-sku": "AzureLinux"})
    assert _values(_args(older), "--os-sku") == ["AzureLinux"]
    assert "--os-sku" not in _args(_pool())


def test_a_spot_pool_is_replaced_by_a_spot_pool_without_copying_aks_own_taint() -> None:
    # "A Spot node pool has the kubernetes.azure.com/scalesetpriority:spot label, the
    # kubernetes.azure.com/scalesetpriority=spot:NoSchedule taint" (spot-node-pool.md); kubernetes.azure.com/ is
    # an AKS reserved prefix (use-labels.md): AKS puts the taint on a pool made with --priority Spot itself.
    spot = _pool(
        labels={"kubernetes.azure.com/scalesetpriority": "spot"},
        taints=(("dedicated", "ml", "NoSchedule"), ("kubernetes.azure.com/scalesetpriority", "spot", "NoSchedule")),
    )
    args = _args(spot)
    assert _values(args, "--priority") == ["Spot"]
    assert _values(args, "--node-taints") == ["dedicated=ml:NoSchedule"]
    assert "--priority" not in _args(_pool())


def test_a_managed_gpu_pools_replacement_opts_out_of_the_managed_stack() -> None:
    # aks-managed-gpu-nodes.md gives the full managed stack (AKS's device plugin) as "--enable-managed-gpu=true (or
    # neither flag)" and also the driver-only profile as the default: the replacement says which it wants, or
    # AKS's device plugin may advertise nvidia.com/gpu beside the DRA driver on the same GPUs.
    managed = _pool(labels={"kubernetes.azure.com/dcgm-exporter": "enabled"})
    assert "--enable-managed-gpu=false" in _args(managed)
    # "--gpu-driver None is ignored when --enable-managed-gpu=true": skipping the driver needs both
    both = _args(_pool(labels={"kubernetes.azure.com/dcgm-exporter": "enabled"}, gpu_operator=True))
    assert "--enable-managed-gpu=false" in both and _values(both, "--gpu-driver") == ["none"]


def _aks_state(*extra: dict[str, Any]) -> Any:
    nodes = [gpu_node(f"aks-h100-{i}", pool="h100", **{"kubernetes.azure.com/agentpool": "h100"}) for i in range(2)]
    for n in nodes:  # an AKS node: no GKE pool label, an Azure provider ID
        del n["metadata"]["labels"][POOL]
        n.setdefault("spec", {})["providerID"] = f"azure:///subscriptions/s/vm-{n['metadata']['name']}"
    return make(*nodes, *extra), {"h100": [n["metadata"]["name"] for n in nodes]}


def test_gpu_driver_none_only_where_the_gpu_operator_installs_the_driver() -> None:
    # The GPU Operator on AKS's preinstalled driver (ClusterPolicy driver.enabled=false, NVIDIA "GPU Operator with
    # Azure Kubernetes Service", default AKS configuration): a pool made with --gpu-driver none has no driver at all.
    state, pools = _aks_state(cluster_policy(driver={"enabled": False}))
    [p] = pool_platforms(state, pools, {}).values()
    assert p.provisioner == "aks-agent-pool"
    assert "--gpu-driver" not in _args(p)
    state, pools = _aks_state(cluster_policy(driver={"enabled": True}))
    [p] = pool_platforms(state, pools, {}).values()
    assert _values(_args(p), "--gpu-driver") == ["none"]
    state, pools = _aks_state(cluster_policy())  # the ClusterPolicy's default: the operator installs the driver
    [p] = pool_platforms(state, pools, {}).values()
    assert _values(_args(p), "--gpu-driver") == ["none"]


def test_a_node_auto_provisioning_pool_is_told_about_its_aksnodeclass() -> None:
    # NAP (Karpenter on AKS) enables the managed GPU stack by the AKSNodeClass tag EnableManagedGPUExperience
    # (aks-managed-gpu-nodes.md, "Node Auto Provisioning node pool"): the copied NodePool keeps the old
    # nodeClassRef, so the new nodes would run AKS's device plugin again.
    ref = {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "managed-gpu-class"}
    nap = _pool(provisioner="karpenter", autoscaler="karpenter",
                raw_nodepool={"spec": {"template": {"spec": {"nodeClassRef": ref}}}})  # fmt: skip
    checks = " ".join(operator_checks(nap))
    assert "EnableManagedGPUExperience" in checks and "managed-gpu-class" in checks


def test_a_mig_pool_is_replaced_by_a_pool_partitioned_the_same_way() -> None:
    # AKS partitions a pool's GPUs at creation by `--gpu-instance-profile MIG1g` (MIG1g..MIG7g: gpu-multi-instance.md);
    # the DRA driver publishes the MIG devices a GPU has and the whole GPU where it has none
    # (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices, static MIG): a
    # replacement without the flag serves no claim for a 1g.10gb device.
    nodes = []
    for i in range(2):
        n = gpu_node(f"aks-mig-{i}", pool="mig", **{"kubernetes.azure.com/agentpool": "mig"})
        del n["metadata"]["labels"][POOL]
        n["spec"] = {"providerID": f"azure:///subscriptions/s/vm-{i}"}
        n["status"]["capacity"] = n["status"]["allocatable"] = {"nvidia.com/mig-1g.10gb": "56", "cpu": "96"}
        nodes.append(n)
    [p] = pool_platforms(make(*nodes), {"mig": [n["metadata"]["name"] for n in nodes]}, {}).values()
    assert _values(_args(p), "--gpu-instance-profile") == ["MIG1g"]
    # the single strategy shows the profile in GPU feature discovery's product label only
    single = gpu_node("aks-mig-s", pool="mig", **{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb",
                                                  "kubernetes.azure.com/agentpool": "mig"})  # fmt: skip
    del single["metadata"]["labels"][POOL]
    [p] = pool_platforms(make(single), {"mig": ["aks-mig-s"]}, {}).values()
    assert _values(_args(p), "--gpu-instance-profile") == ["MIG3g"]
    assert "--gpu-instance-profile" not in _args(_pool())
    # one profile a pool: a pool partitioned two ways cannot be made again by one command; the operator is told
    mixed = _pool(mig_sizes=(1, 3))
    assert "--gpu-instance-profile" not in _args(mixed)
    assert any("--gpu-instance-profile" in c for c in operator_checks(mixed))


def test_node_auto_provisioning_takes_replicas_without_a_feature_gate_to_set() -> None:
    # AKS NAP runs Karpenter for you and documents static node pools (`replicas`: node-auto-provisioning-node-pools.md,
    # "Static node pools"): there is no StaticCapacity gate for the operator to turn on, and asking for one sends
    # them to remove replicas (and the new pool then waits for pending pods that ask for DRA devices).
    ref = {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "gpu"}
    nap = _pool(provisioner="karpenter", autoscaler="karpenter",
                raw_nodepool={"spec": {"template": {"spec": {"nodeClassRef": ref}}}})  # fmt: skip
    checks = " ".join(operator_checks(nap))
    assert "StaticCapacity" not in checks and "static node pool" in checks
    eks = _pool(platform="eks", provisioner="karpenter", autoscaler="karpenter", raw_nodepool={})
    assert "StaticCapacity" in " ".join(operator_checks(eks))


def test_the_aks_fixtures_plan_prints_the_command_as_the_pool_was_made() -> None:
    """End to end from the snapshot: the managed H100 pool in eastus2-1 (fixtures/clusters/platforms/aks-managed)."""
    from tests.unit.test_platforms import _plan

    [stage] = [s for s in _plan("aks-managed").stages if s.name == "provision-h100"]
    args = shlex.split(stage.steps[0].params["command"])
    assert _values(args, "--zones") == ["1"] and "--enable-managed-gpu=false" in args
    assert "--gpu-driver" not in args and "--gpu-instance-profile" not in args
    assert _values(args, "--node-taints") == ["nvidia.com/gpu=present:NoSchedule"]
