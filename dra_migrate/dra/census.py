"""A census of a node's gpu.nvidia.com devices: how many per DeviceClass and per value of each attribute and
capacity a prediction can know. Two censuses are equal when a prediction (`devices.predict_devices`, from a
node's labels and capacity) describes what the NVIDIA DRA driver published, device names, UUIDs, PCI
addresses and MIG placements aside (which a prediction cannot know; see `devices`' module docstring).

The nvidia tier (tests/integration/test_nvidia.py) compares the census of `match`'s prediction with that of the
real driver's ResourceSlices on every node setup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from dra_migrate.cluster.quantity import parse_quantity

# The DeviceClasses the NVIDIA DRA driver's chart installs select on the `type` attribute
# (dra-driver-nvidia-gpu v0.4.1 deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml).
CLASS_BY_TYPE = {"gpu": "gpu.nvidia.com", "mig": "mig.nvidia.com"}


def driver_class_for(resource: str) -> str:
    """The driver's class a device-plugin name's devices are claimed from by default: what `convert` writes
    without --device-class (a MIG profile from mig.nvidia.com, a whole GPU from gpu.nvidia.com)."""
    return CLASS_BY_TYPE["mig" if resource.startswith("nvidia.com/mig-") else "gpu"]


# What a prediction must get right, value by value (issue 24, item 4).
CENSUS_ATTRIBUTES = ("productName", "type", "profile", "driverVersion", "cudaComputeCapability")
CENSUS_CAPACITIES = ("memory", "multiprocessors")


def _attribute(device: Mapping[str, Any], name: str) -> str | None:
    value = (device.get("attributes") or {}).get(name)
    if not isinstance(value, Mapping) or not value:
        return None
    return str(next(iter(value.values())))


def _capacity(device: Mapping[str, Any], name: str) -> str | None:
    value = (device.get("capacity") or {}).get(name)
    if not isinstance(value, Mapping) or "value" not in value:
        return None
    parsed = parse_quantity(value["value"])
    # Quantities compare by amount: the driver writes 40960 MiB as `40Gi`, a prediction may write `40960Mi`.
    return str(value["value"]) if parsed is None else format(parsed.normalize(), "f")


def census(devices: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """`class=<DeviceClass>`, `<attribute>=<value>` and `capacity.<name>=<amount>` -> number of devices."""
    out: Counter[str] = Counter()
    for device in devices:
        kind = _attribute(device, "type") or ""
        out[f"class={CLASS_BY_TYPE.get(kind, kind or '?')}"] += 1
        for name in CENSUS_ATTRIBUTES:
            value = _attribute(device, name)
            if value is not None:
                out[f"{name}={value}"] += 1
        for name in CENSUS_CAPACITIES:
            value = _capacity(device, name)
            if value is not None:
                out[f"capacity.{name}={value}"] += 1
    return out


def census_differences(predicted: Iterable[Mapping[str, Any]], published: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each census entry whose count differs, as `<key>: predicted N, published M`; empty when they agree."""
    p, r = census(predicted), census(published)
    keys = sorted(set(p) | set(r))
    return [f"{k}: predicted {p.get(k, 0)}, published {r.get(k, 0)}" for k in keys if p.get(k, 0) != r.get(k, 0)]
