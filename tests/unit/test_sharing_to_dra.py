"""Time-slicing and MPS sharing, from the NVIDIA device plugin (k8s-device-plugin v0.18.0 api/config/v1) to DRA
(dra-driver-nvidia-gpu v0.4.1 api/nvidia.com/resource/v1beta1): what carries over, what the tool must say does not.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.checks.model import Finding
from dra_migrate.checks.run import assess
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import node
from tests.unit.test_device_plugin_configs import (
    TIME_SLICED,
    _bare_node,
    chart_daemonset,
    config_map,
    gpu_pods,
    make,
)

CM = "nvdp-nvidia-device-plugin-configs"
MPS = TIME_SLICED.replace("timeSlicing:", "mps:")


def _configs(**data: str) -> dict[str, dict[str, Any]]:
    st = make(_bare_node("g1", 32), chart_daemonset(CM, next(iter(data))), config_map(CM, "nvidia-device-plugin", data))
    return {c["key"]: c for c in build_inventory(st).operator["sharingConfigs"]}


def _shared(st: Any) -> list[Finding]:
    return [f for f in assess(st).findings if f.id == "shared-gpu-capacity-loss"]


def test_mps_always_fails_requests_greater_than_one() -> None:
    # api/config/v1 config.go NewConfig: "We explicitly set sharing.mps.failRequestsGreaterThanOne = true";
    # internal/rm/rm.go ValidateRequest ignores the field for MPS and refuses any request > 1.
    c = _configs(mps=MPS, ts=TIME_SLICED)
    assert c["mps"]["strategy"] == "mps" and c["mps"]["failRequestsGreaterThanOne"] is True
    assert c["ts"]["failRequestsGreaterThanOne"] is False


def test_a_shared_resource_with_fewer_than_two_replicas_is_a_config_the_plugin_refuses() -> None:
    # api/config/v1 replicas.go ReplicatedResource.UnmarshalJSON: "no replicas specified",
    # "number of replicas must be >= 2": the plugin does not load the config, it does not run it unshared.
    c = _configs(
        one=TIME_SLICED.replace("replicas: 4", "replicas: 1"),
        none=TIME_SLICED.replace("      replicas: 4\n", ""),
    )
    assert "replicas" in (c["one"]["error"] or "") and c["one"]["strategy"] == "unknown"
    assert "replicas" in (c["none"]["error"] or "") and c["none"]["strategy"] == "unknown"


def test_mps_with_the_mixed_mig_strategy_is_a_config_the_plugin_refuses() -> None:
    # cmd/nvidia-device-plugin/main.go validateFlags: "using --mig-strategy=mixed is not supported with MPS".
    mixed = "version: v1\nflags:\n  migStrategy: mixed\n" + MPS.removeprefix("version: v1\n")
    c = _configs(mixed=mixed, ts=mixed.replace("mps:", "timeSlicing:"))
    assert "mixed" in (c["mixed"]["error"] or "")
    assert c["ts"]["error"] is None and c["ts"]["strategy"] == "timeSlicing"


def _pool(strategy: str, gfd: bool) -> Any:
    labels = {"nvidia.com/gpu.memory": "81920"}
    if gfd:
        labels |= {
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "mps" if strategy == "mps" else "time-slicing",
            "nvidia.com/gpu.present": "true",
        }
    text = MPS if strategy == "mps" else TIME_SLICED
    return make(
        node("g1", {"eks.amazonaws.com/nodegroup": "ts", **labels}, {"nvidia.com/gpu": "32"}),
        chart_daemonset(CM),
        config_map(CM, "nvidia-device-plugin", {"default": text}),
        *gpu_pods("nvidia.com/gpu", 12, "g1"),
    )


def test_an_mps_pool_is_told_the_per_replica_limits_dra_does_not_set_by_itself() -> None:
    # The plugin's MPS daemon gives each of N replicas 100/N % of the threads and 1/N of each GPU's memory
    # (cmd/mps-control-daemon/mps/daemon.go activeThreadPercentage, perDevicePinnedDeviceMemoryLimits); the DRA
    # driver sets neither unless the claim's MpsConfig does (cmd/gpu-kubelet-plugin/sharing.go), and only with the
    # MPSSupport feature gate, off by default (pkg/featuregates/featuregates.go).
    for gfd in (True, False):
        (f,) = _shared(_pool("mps", gfd))
        text = f.message + " " + f.remediation
        assert "MPS" in text and "MPSSupport" in text, text
        assert "defaultActiveThreadPercentage: 25" in text, text
        assert "defaultPinnedDeviceMemoryLimit: 20480Mi}}" in text, text
        # ... and the command that writes that config into the shared claim (convert/sharing.py)
        assert "convert --shared-claim --sharing mps --mps-thread-percentage 25 --mps-memory-limit 20480Mi`" in text


def test_a_time_sliced_pool_is_told_what_sharing_a_gpu_under_dra_takes() -> None:
    # GpuConfig sharing.strategy TimeSlicing is refused unless the TimeSlicingSettings gate is on (validate.go
    # validateSharingStrategy; default false): advice to use it must say so, and that pods share a GPU only by
    # referencing one ResourceClaim.
    for gfd in (True, False):
        (f,) = _shared(_pool("ts", gfd))
        assert "TimeSlicingSettings" in f.remediation and "one ResourceClaim" in f.remediation, f.remediation
        assert "MPSSupport" not in f.remediation


def test_the_advice_for_an_unmapped_shared_name_is_not_a_convert_that_refuses_it() -> None:
    # `dra-migrate convert` refuses `.shared` names (convert/rewrite.py _gpu_request_problem), even with
    # --shared-claim or --device-class: unmapped-gpu-resource must not send their owners there.
    from dra_migrate.convert.claims import ConvertOptions
    from dra_migrate.convert.rewrite import _gpu_request_problem
    from tests.unit.test_checks import fixture

    assert _gpu_request_problem("nvidia.com/gpu.shared", ConvertOptions(shared_claim=True, device_class="c"))

    (f,) = [f for f in assess(fixture("mig-timeslice")).findings if f.id == "unmapped-gpu-resource"]
    assert "nvidia.com/gpu.shared" in f.message
    assert "refuses" in f.remediation and "one node" in f.remediation, f.remediation


def test_shared_claim_advice_says_a_shared_claim_pins_its_pods_to_one_node() -> None:
    # A ResourceClaim is allocated once, on one node: every pod referencing it is scheduled there (KEP-4381), where
    # time-sliced replicas spread over every node of the pool.
    (f,) = _shared(_pool("ts", True))
    assert "one node" in f.remediation, f.remediation


def test_a_time_sliced_mig_profile_is_told_mig_device_config_without_an_interval() -> None:
    # MigDeviceConfig takes sharing.strategy but no timeSlicingConfig: the interval cannot be set on MIG devices
    # (api/nvidia.com/resource/v1beta1 sharing.go MigDeviceSharing, cmd/gpu-kubelet-plugin/device_state.go).
    from tests.unit.test_device_plugin_configs import MIXED_RENAMED, _mixed_renamed_node

    n = _mixed_renamed_node()
    n["status"]["allocatable"] = n["status"]["capacity"] = {"nvidia.com/mig-1g.10gb": "112"}
    text = MIXED_RENAMED.replace("    renameByDefault: true\n", "")
    st = make(
        n, config_map("dp", "nvidia-device-plugin", {"default": text}), *gpu_pods("nvidia.com/mig-1g.10gb", 60, "g1")
    )
    (f,) = _shared(st)
    assert "MigDeviceConfig" in f.remediation and "interval" not in f.remediation, f.remediation
    assert "TimeSlicingSettings" in f.remediation


def test_the_dra_plugins_feature_gates_are_read_where_its_daemonset_is() -> None:
    from tests.unit.helpers import obj

    def dra(args: list[str]) -> dict[str, Any]:
        c = {"name": "plugin", "image": "registry.k8s.io/dra-driver-nvidia-gpu:v0.4.1", "args": args}
        spec = {"template": {"spec": {"containers": [c]}}}
        return obj("apps/v1", "DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin", spec, namespace="dra")

    st = _pool("mps", True)
    on = make(*(o for _, o in st.all_objects()), dra(["--feature-gates=MPSSupport=true"]))
    off = make(*(o for _, o in st.all_objects()), dra(["--feature-gates=TimeSlicingSettings=true"]))
    assert "set on the kubelet plugin" in _shared(on)[0].remediation
    assert "not set on DaemonSet(s) dra-driver-nvidia-gpu-kubelet-plugin" in _shared(off)[0].remediation
