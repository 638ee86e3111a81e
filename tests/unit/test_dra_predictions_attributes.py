"""Predicted attributes carry what the NVIDIA DRA driver v0.4.1 publishes, whatever GFD version labelled the node.

The driver reads them from NVML (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go getGpuInfo,
deviceinfo.go Attributes): a selector on one of them is judged the same on a predicted device as on a published
one, or the prediction leaves the attribute out rather than publish a value the driver never would.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.cel import compile_selector
from dra_migrate.dra.devices import predict_devices


def node(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.count": "1", **labels}}, "status": {}}


def attrs(labels: dict[str, str]) -> dict[str, Any]:
    (device,) = predict_devices(node(labels))
    return {k: next(iter(v.values())) for k, v in device["attributes"].items()}


# gpu-feature-discovery before it moved into k8s-device-plugin v0.15.0 (GPU Operator < v24.3) writes only these
# (k8s-device-plugin v0.18.0 internal/lm/nvml.go newVersionLabeler still writes them, as "Deprecated labels").
OLD_GFD = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/cuda.driver.major": "580",
    "nvidia.com/cuda.driver.minor": "65",
    "nvidia.com/cuda.driver.rev": "06",
    "nvidia.com/cuda.runtime.major": "13",
    "nvidia.com/cuda.runtime.minor": "0",
}


def test_driver_versions_come_from_the_deprecated_gfd_labels_too() -> None:
    a = attrs(OLD_GFD)
    # Masterminds semver (the driver's semver.MustParse(...).String()) drops the leading zero: 580.65.6.
    assert (a["driverVersion"], a["cudaDriverVersion"]) == ("580.65.6", "13.0.0")
    selector = compile_selector("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('580.0.0'))")
    (device,) = predict_devices(node(OLD_GFD))
    assert selector.matches(device, "gpu.nvidia.com") is True


def test_a_two_part_driver_version_is_semver() -> None:
    a = attrs({**OLD_GFD, "nvidia.com/cuda.driver.rev": ""})
    assert a["driverVersion"] == "580.65.0"


def test_the_new_labels_win_over_the_deprecated_ones() -> None:
    a = attrs(
        {**OLD_GFD, "nvidia.com/cuda.driver-version.full": "580.95.05", "nvidia.com/cuda.runtime-version.full": "13.1"}
    )
    assert (a["driverVersion"], a["cudaDriverVersion"]) == ("580.95.5", "13.1.0")


def test_a_tesla_branded_board_reports_the_nvidia_brand() -> None:
    # NVML reports BRAND_NVIDIA for data-centre boards named Tesla (nvidia-smi -q on a Tesla T4, drivers 530 and
    # 535: "Product Brand : NVIDIA"), which go-nvlib v0.11.0 pkg/nvlib/device/device.go GetBrandAsString writes
    # "Nvidia"; the DRA driver needs driver >= 580 (driver-version-too-old).
    assert attrs({"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.family": "turing"})["brand"] == "Nvidia"


def test_a_brand_the_product_name_cannot_tell_is_left_out() -> None:
    # GeForce, RTX, Quadro and Titan boards have brands of their own (GeForceRTX, NvidiaRTX, QuadroRTX, ...).
    for product in ("NVIDIA-GeForce-RTX-4090", "NVIDIA-RTX-A6000", "Quadro-RTX-8000", "NVIDIA-TITAN-V"):
        assert "brand" not in attrs({"nvidia.com/gpu.product": product}), product


def test_an_undefined_gfd_family_is_no_architecture() -> None:
    # GFD writes `undefined` for a compute capability it does not map (k8s-device-plugin v0.18.0 internal/lm/
    # resource.go getArchFamily); NVML's architecture then is not "Undefined".
    a = attrs({"nvidia.com/gpu.product": "NVIDIA-Thor", "nvidia.com/gpu.family": "undefined"})
    assert "architecture" not in a
