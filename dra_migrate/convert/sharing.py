"""`convert --sharing`: the NVIDIA DRA driver's opaque sharing config written into each converted claim.

Under the device plugin a time-sliced or MPS-shared GPU was advertised N times (k8s-device-plugin v0.18.0
`api/config/v1` `Sharing`); under DRA pods share a device only by referencing one claim (`--shared-claim`,
`--share-across-pod`), and how their processes share it is the claim's opaque config for driver
`gpu.nvidia.com` (dra-driver-nvidia-gpu v0.4.1 `api/nvidia.com/resource/v1beta1`, apiVersion
`resource.nvidia.com/v1beta1`):

  * kind `GpuConfig` for full GPUs, `MigDeviceConfig` for MIG devices (gpuconfig.go, migconfig.go). A config
    with no `requests` applies to the claim's devices of its own type and skips the others
    (cmd/gpu-kubelet-plugin/device_state.go `prepareDevices`: "cannot apply GpuConfig to device ... of type"
    only when a config names a request), so a claim whose `firstAvailable` alternatives are GPUs or MIG
    devices carries one of each.
  * `sharing.strategy` TimeSlicing or MPS (sharing.go). `timeSlicingConfig.interval` Default, Short, Medium or
    Long exists for GPUs only: `MigDeviceSharing` has no such field, and the driver decodes configs strictly
    (api.go `StrictDecoder`): an unknown field fails the claim's preparation.
  * `mpsConfig.defaultActiveThreadPercentage` 0..100 (validate.go `MpsConfig.Validate`) and
    `defaultPinnedDeviceMemoryLimit`, a Kubernetes quantity (`resource.Quantity`) of at least 1Mi.
  * Either strategy is refused when the claim is prepared unless the kubelet plugin runs with the
    TimeSlicingSettings or MPSSupport feature gate; both default to false (pkg/featuregates/featuregates.go).

The values are checked here as the driver's decoder and `Validate` check them, so that nothing is written
that the node would refuse only when a pod starts (tests/integration/test_driver_config.py holds them to the
driver's own code).
"""

from __future__ import annotations

from dataclasses import dataclass

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from dra_migrate.cluster.quantity import parse_quantity
from dra_migrate.dra.deviceclasses import DRIVER
from dra_migrate.errors import InputError

API_VERSION = "resource.nvidia.com/v1beta1"
GPU_CONFIG, MIG_CONFIG = "GpuConfig", "MigDeviceConfig"
STRATEGIES = {"time-slicing": "TimeSlicing", "mps": "MPS"}
INTERVALS = ("Default", "Short", "Medium", "Long")
GATES = {"TimeSlicing": "TimeSlicingSettings", "MPS": "MPSSupport"}
MIN_MEMORY_LIMIT = 2**20


@dataclass(frozen=True)
class Sharing:
    """How the processes of the pods that share a claim share its devices."""

    strategy: str  # the driver's: TimeSlicing | MPS
    interval: str | None = None  # TimeSlicing, GPUs only
    thread_percentage: int | None = None  # MPS
    memory_limit: str | None = None  # MPS, a quantity as given

    @property
    def gate(self) -> str:
        return GATES[self.strategy]


def sharing_of(
    strategy: str | None, interval: str | None, thread_percentage: int | None, memory_limit: str | None
) -> Sharing | None:
    """The `--sharing` options as one value, refused as the driver would refuse them (or as meaningless)."""
    if strategy is None:
        given = [f for f, v in (("--time-slice-interval", interval), ("--mps-thread-percentage", thread_percentage),
                                ("--mps-memory-limit", memory_limit)) if v is not None]  # fmt: skip
        if given:
            raise InputError(f"{given[0]} needs --sharing", "add --sharing time-slicing or --sharing mps")
        return None
    driver_strategy = STRATEGIES[strategy]
    if driver_strategy == "TimeSlicing" and (thread_percentage is not None or memory_limit is not None):
        raise InputError("--mps-* options need --sharing mps", "drop them, or use --sharing mps")
    if driver_strategy == "MPS" and interval is not None:
        raise InputError("--time-slice-interval needs --sharing time-slicing", "drop it, or use --sharing time-slicing")
    if thread_percentage is not None and not 0 <= thread_percentage <= 100:
        raise InputError(f"--mps-thread-percentage {thread_percentage} is not 0..100", "give a percentage")
    if memory_limit is not None:
        # The plugin sets the limit in whole megabytes and refuses one under 1Mi ("value set too low":
        # sharing.go `limit.Megabyte`, the quantity's bytes / 1024 / 1024).
        value = parse_quantity(memory_limit) if memory_limit == memory_limit.strip() else None
        if value is None or value < MIN_MEMORY_LIMIT:
            raise InputError(
                f"--mps-memory-limit {memory_limit!r} is not a Kubernetes quantity of at least 1Mi", "give e.g. 10Gi"
            )
    return Sharing(driver_strategy, interval, thread_percentage, memory_limit)


def config_kinds(classes: list[str], gpu_class: str, mig_class: str) -> list[str]:
    """The config kinds a claim whose alternatives use `classes` needs: the driver's own classes say which
    devices they select; another class may select either, so it gets both (each applies to its own type)."""
    kinds = set()
    for cls in classes:
        kinds |= {GPU_CONFIG} if cls == gpu_class else {MIG_CONFIG} if cls == mig_class else {GPU_CONFIG, MIG_CONFIG}
    return [k for k in (GPU_CONFIG, MIG_CONFIG) if k in kinds]


def opaque_configs(sharing: Sharing, kinds: list[str]) -> CommentedSeq:
    """`spec.devices.config` of a claim: one opaque config per kind, naming no request."""
    out = CommentedSeq()
    for kind in kinds:
        params = CommentedMap()
        params["apiVersion"] = API_VERSION
        params["kind"] = kind
        spec = CommentedMap()
        spec["strategy"] = sharing.strategy
        if sharing.strategy == "TimeSlicing" and sharing.interval and kind == GPU_CONFIG:
            spec["timeSlicingConfig"] = CommentedMap({"interval": sharing.interval})
        if sharing.strategy == "MPS" and (sharing.thread_percentage is not None or sharing.memory_limit):
            mps = CommentedMap()
            if sharing.thread_percentage is not None:
                mps["defaultActiveThreadPercentage"] = sharing.thread_percentage
            if sharing.memory_limit:
                mps["defaultPinnedDeviceMemoryLimit"] = sharing.memory_limit
            spec["mpsConfig"] = mps
        params["sharing"] = spec
        opaque = CommentedMap()
        opaque["driver"] = DRIVER
        opaque["parameters"] = params
        entry = CommentedMap()
        entry["opaque"] = opaque
        out.append(entry)
    return out


def sharing_note(sharing: Sharing, kinds: list[str]) -> str:
    """The claim's comment: what the config needs on the node, and what it does not carry."""
    note = f"\nsharing {sharing.strategy}: refused unless the DRA kubelet plugin runs with {sharing.gate}=true"
    if sharing.strategy == "TimeSlicing" and sharing.interval and MIG_CONFIG in kinds:
        note += "\nMIG devices take no time-slice interval (MigDeviceConfig has none)"
    return note
