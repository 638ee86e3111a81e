"""Hostile inputs from device-plugin configurations as k8s-device-plugin v0.18.0 implements them.

Each test names the upstream file whose behaviour it pins; the node shapes are what the device plugin and GPU
Feature Discovery (GFD) write for that configuration.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.run import assess
from dra_migrate.cluster.state import ClusterState, SourceInfo, StateBuilder
from dra_migrate.dra.deviceclasses import generate, mig_profile_of
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, node, obj, pod, pod_spec

POOL = "eks.amazonaws.com/nodegroup"


def make(*objects: dict[str, Any]) -> ClusterState:
    b = StateBuilder(SourceInfo(kind="snapshot", location="t", kubernetes_version="v1.37.2"))
    b.add_all(objects)
    return b.state


def config_map(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    cm = obj("v1", "ConfigMap", name, namespace=namespace)
    cm.pop("spec")
    cm["data"] = data
    return cm


def gpu_pods(resource: str, n: int, node_name: str) -> list[dict[str, Any]]:
    return [pod(f"p{i}", pod_spec(container(requests={resource: "1"})), node=node_name) for i in range(n)]


# ---------------------------------------------------------------------------------------------------------------
# A time-sliced MIG profile under renameByDefault: `nvidia.com/mig-<profile>.shared`


MIXED_RENAMED = """\
version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    renameByDefault: true
    resources:
    - name: nvidia.com/mig-1g.10gb
      replicas: 2
"""


def _mixed_renamed_node() -> dict[str, Any]:
    # GFD labels the profile under its own name (internal/lm/resource.go: resourceName is the unrenamed one; no
    # -SHARED suffix on a renamed resource), the device plugin advertises <name>.shared (api/config/v1
    # replicas.go DefaultSharedRename) with 7 x 8 instances x 2 replicas.
    labels = {
        POOL: "mig",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig-1g.10gb.count": "56",
        "nvidia.com/mig-1g.10gb.replicas": "2",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "time-slicing",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
    }
    return node("g1", labels, {"nvidia.com/mig-1g.10gb.shared": "112"})


def test_a_shared_mig_name_is_no_mig_profile() -> None:
    assert mig_profile_of("nvidia.com/mig-1g.10gb.shared") is None
    assert mig_profile_of("nvidia.com/mig-1g.23gb.me.shared") is None
    assert mig_profile_of("nvidia.com/mig-1g.23gb.me.all") == "1g.23gb+me.all"


def test_a_renamed_time_sliced_mig_profile_gets_no_device_class_for_a_profile_that_does_not_exist() -> None:
    st = make(
        _mixed_renamed_node(),
        config_map("dp", "nvidia-device-plugin", {"default": MIXED_RENAMED}),
        *gpu_pods("nvidia.com/mig-1g.10gb.shared", 70, "g1"),
    )
    gen = generate(st, build_inventory(st))
    assert [p.extended_resource_name for p in gen.proposals] == []
    assert [(n.extended_resource_name, "time-slicing/MPS shared name" in n.reason) for n in gen.not_generated] == [
        ("nvidia.com/mig-1g.10gb.shared", True)
    ]
    report = assess(st)
    assert "unmapped-gpu-resource" in {f.id for f in report.findings}
    (cap,) = [c for c in report.capacity if c.resource == "nvidia.com/mig-1g.10gb.shared"]
    assert (cap.before, cap.after, cap.replicas) == (112, None, 2)


# ---------------------------------------------------------------------------------------------------------------
# Time-slicing known only from the device plugin's config: the standalone chart runs without GFD by default
# (deployments/helm/nvidia-device-plugin values.yaml `gfd.enabled: false`), so no `nvidia.com/gpu.replicas` label


TIME_SLICED = """\
version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
PLAIN = "version: v1\n"


def chart_daemonset(config_map_name: str, default_config: str = "") -> dict[str, Any]:
    """The k8s-device-plugin v0.18.0 chart's DaemonSet with `config.map` set (templates/daemonset-device-plugin.yml):
    the config-manager init container and sidecar pick a key, the `available-configs` volume mounts the map."""
    env = [
        {"name": "NODE_LABEL", "value": "nvidia.com/device-plugin.config"},
        {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
        {"name": "DEFAULT_CONFIG", "value": default_config},
        {"name": "FALLBACK_STRATEGIES", "value": "named,single"},
    ]
    image = "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"
    spec = {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "nvidia-device-plugin"}},
            "spec": {
                "initContainers": [
                    {"name": "nvidia-device-plugin-init", "image": image, "command": ["config-manager"], "env": env}
                ],
                "containers": [
                    {"name": "nvidia-device-plugin-sidecar", "image": image, "command": ["config-manager"], "env": env},
                    {"name": "nvidia-device-plugin-ctr", "image": image, "command": ["nvidia-device-plugin"]},
                ],
                "volumes": [
                    {"name": "available-configs", "configMap": {"name": config_map_name}},
                    {"name": "config", "emptyDir": {}},
                ],
            },
        },
    }
    return obj("apps/v1", "DaemonSet", "nvdp-nvidia-device-plugin", spec, namespace="nvidia-device-plugin")


def _bare_node(name: str, gpus: int, **labels: str) -> dict[str, Any]:
    """An EKS node as the standalone chart leaves it without GFD: capacity only, GPUs x replicas."""
    return node(name, {POOL: "ts", **labels}, {"nvidia.com/gpu": str(gpus)})


def test_time_slicing_without_gfd_labels_counts_each_gpu_once_after_migration() -> None:
    st = make(
        _bare_node("g1", 32),
        chart_daemonset("nvdp-nvidia-device-plugin-configs"),
        config_map("nvdp-nvidia-device-plugin-configs", "nvidia-device-plugin", {"default": TIME_SLICED}),
        *gpu_pods("nvidia.com/gpu", 12, "g1"),
    )
    report = assess(st)
    (cap,) = report.capacity
    assert (cap.before, cap.after, cap.replicas, cap.fits) == (32, 8, 4, False)
    assert [f.severity.value for f in report.findings if f.id == "shared-gpu-capacity-loss"] == ["blocker"]


def test_the_charts_default_config_decides_what_an_unlabelled_node_runs() -> None:
    # config.default names the key: the config-manager takes it before its fallbacks (cmd/config-manager
    # main.go updateConfigName), so a node without the label runs `ts` although `plain` is there too.
    cm = config_map("nvdp-nvidia-device-plugin-configs", "nvidia-device-plugin", {"plain": PLAIN, "ts": TIME_SLICED})
    st = make(
        _bare_node("g1", 32),
        _bare_node("g2", 8, **{"nvidia.com/device-plugin.config": "plain"}),
        chart_daemonset("nvdp-nvidia-device-plugin-configs", default_config="ts"),
        cm,
    )
    inv = build_inventory(st)
    used = {c["key"]: (c["nodes"], c["default"]) for c in inv.operator["sharingConfigs"]}
    assert used == {"plain": (["g2"], False), "ts": (["g1"], True)}
    (cap,) = assess(st).capacity
    assert (cap.before, cap.after, cap.replicas) == (40, 16, 4)


def test_rename_in_a_sharing_config_is_ignored_as_the_device_plugin_ignores_it() -> None:
    # api/config/v1 config.go DisableResourceNamingInConfig -> replicas.go disableResoureRenaming: `rename` is
    # cleared, or forced to <name>.shared under renameByDefault; the plugin calls it on every config it loads
    # (cmd/nvidia-device-plugin/main.go startPlugins).
    renamed = TIME_SLICED.replace("replicas: 4", "replicas: 4\n      rename: gpu-ts")
    by_default = renamed.replace("timeSlicing:", "timeSlicing:\n    renameByDefault: true")
    cm = config_map("nvdp-nvidia-device-plugin-configs", "nvidia-device-plugin", {"a": renamed, "b": by_default})
    st = make(_bare_node("g1", 32), chart_daemonset("nvdp-nvidia-device-plugin-configs", "a"), cm)
    inv = build_inventory(st)
    advertised = {c["key"]: [r["advertisedAs"] for r in c["resources"]] for c in inv.operator["sharingConfigs"]}
    assert advertised == {"a": ["nvidia.com/gpu"], "b": ["nvidia.com/gpu.shared"]}
    assert "nvidia.com/gpu-ts" not in inv.gpu_names


# ---------------------------------------------------------------------------------------------------------------
# GPUs given to virtual machines: the GPU Operator's sandbox workloads (KubeVirt passthrough, vGPU)


def _sandbox_policy(default: str | None = None) -> dict[str, Any]:
    sandbox: dict[str, Any] = {"enabled": True}
    if default:
        sandbox["defaultWorkload"] = default
    cp = obj("nvidia.com/v1", "ClusterPolicy", "cluster-policy", {"sandboxWorkloads": sandbox}, namespace=None)
    cp["status"] = {"namespace": "gpu-operator", "state": "ready"}
    return cp


def _vm_node(name: str, workload: str | None) -> dict[str, Any]:
    # The operator deploys the sandbox device plugin, not the device plugin, on a vm-passthrough node (controllers/
    # state_manager.go gpuStateLabels) and GFD does not run there; the sandbox plugin advertises the GPU by its
    # PCI device name (NVIDIA/kubevirt-gpu-device-plugin).
    labels = {POOL: "vms", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.sandbox-device-plugin": "true"}
    if workload:
        labels["nvidia.com/gpu.workload.config"] = workload
    return node(name, labels, {"nvidia.com/GA100_A100_PCIE_40GB": "2"})


def test_nodes_whose_gpus_belong_to_virtual_machines_are_not_migrated() -> None:
    container_node = node(
        "c1",
        {POOL: "ctr", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
         "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.workload.config": "container"},
        {"nvidia.com/gpu": "8"},
    )  # fmt: skip
    vm_pod = pod("virt-launcher-a", pod_spec(container(requests={"nvidia.com/GA100_A100_PCIE_40GB": "1"})), node="vm1")
    # The second: no label, so the ClusterPolicy's defaultWorkload decides.
    for policy, workload in ((_sandbox_policy(), "vm-passthrough"), (_sandbox_policy("vm-vgpu"), None)):
        st = make(policy, _vm_node("vm1", workload), container_node, vm_pod)
        inv = build_inventory(st)
        assert [n.name for n in inv.nodes] == ["c1"]
        assert [p.name for p in inv.pools] == ["ctr"]
        assert "nvidia.com/GA100_A100_PCIE_40GB" not in inv.gpu_names
        assert inv.consumers == []
        assert "unmapped-gpu-resource" not in {f.id for f in assess(st).findings}


def test_a_vm_workload_label_without_sandbox_workloads_enabled_is_a_container_node() -> None:
    # getWorkloadConfig: with sandboxWorkloads disabled every node is `container`, whatever its label says.
    cp = _sandbox_policy()
    cp["spec"]["sandboxWorkloads"]["enabled"] = False
    gpu = node(
        "g1",
        {POOL: "p", "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8",
         "nvidia.com/gpu.workload.config": "vm-passthrough"},
        {"nvidia.com/gpu": "8"},
    )  # fmt: skip
    assert [n.name for n in build_inventory(make(cp, gpu)).nodes] == ["g1"]
