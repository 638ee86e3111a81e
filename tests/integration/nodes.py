"""Helpers of the modules whose GPU nodes KWOK plays: a module's nodes on the session's fleet, and reads of
a node's GPUs, slices and pods (test_kwok, test_sim, and the modules that run the tool on KWOK nodes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from conftest import wait_for

from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.stack import DRA_PLUGIN_DAEMONSET, DRA_PLUGIN_NAMESPACE, install_nvidia_stack

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"
PAUSE = "registry.k8s.io/pause:3.10"
READY_TIMEOUT_S = 60  # kwok makes a node Ready within a second; slack for a loaded machine


class TwinNodes:
    """A module's nodes on the session's KWOK fleet: their names, specs and plugin switches (the labels)."""

    def __init__(self, fleet: KwokFleet, specs: Iterable[GpuNodeSpec]) -> None:
        self.fleet = fleet
        self.specs = {s.name: s for s in specs}

    @property
    def node_names(self) -> list[str]:
        return list(self.specs)

    def set_device_plugin(self, node: str, enabled: bool) -> None:
        self._check(node)
        self.fleet.set_device_plugin(node, enabled)

    def set_dra_plugin(self, node: str, enabled: bool) -> None:
        self._check(node)
        self.fleet.set_dra_plugin(node, enabled)

    def _check(self, node: str) -> None:
        if node not in self.specs:
            raise KeyError(f"{node} is not a node of this module")


@contextlib.contextmanager
def on_kwok(fleet: KwokFleet, specs: Iterable[GpuNodeSpec]) -> Iterator[TwinNodes]:
    """`specs` registered on `fleet` and played until the block ends, then deleted. The block starts once
    each is Ready with its plugins as its labels place them (a DRA node's slice published)."""
    nodes = TwinNodes(fleet, specs)
    try:
        fleet.add(nodes.specs.values())
        fleet.wait_ready(nodes.node_names, READY_TIMEOUT_S)
        yield nodes
    finally:
        fleet.remove(nodes.node_names)


@contextlib.contextmanager
def dra_fleet(fleet: KwokFleet, kube: Kube, specs: Iterable[GpuNodeSpec]) -> Iterator[TwinNodes]:
    """`specs` on KWOK with the NVIDIA stack installed (the DRA kubelet-plugin DaemonSet) and every node
    untainted; afterwards the DaemonSet and the DeviceClasses the tool made are gone: the modules after this
    one compare whole inventories."""
    with on_kwok(fleet, specs) as f:
        install_nvidia_stack(kube.api_client, dra_driver=True)
        wait_for(
            "nodes ready",
            lambda: all(not kube.get(path_of("v1", "nodes", n))["spec"].get("taints") for n in f.node_names),
            timeout=30,
        )
        yield f
    kube.delete(path_of("apps/v1", "daemonsets", DRA_PLUGIN_DAEMONSET, DRA_PLUGIN_NAMESPACE))
    classes, _ = kube.list_all(CLASSES, [("labelSelector", "app.kubernetes.io/managed-by=dra-migrate")])
    for c in classes:
        kube.delete(f"{CLASSES}/{c['metadata']['name']}")


def node(kube: Kube, name: str) -> dict[str, Any]:
    return kube.get(path_of("v1", "nodes", name))


def gpu_status(kube: Kube, name: str) -> tuple[str | None, str | None]:
    """The node's nvidia.com/gpu (capacity, allocatable)."""
    status = node(kube, name)["status"]
    return status.get("capacity", {}).get("nvidia.com/gpu"), status.get("allocatable", {}).get("nvidia.com/gpu")


def slices_of(kube: Kube, name: str) -> list[dict[str, Any]]:
    items, _ = kube.list_all(SLICES, [("fieldSelector", f"spec.nodeName={name}")])
    return items


def pod(name: str, **spec: Any) -> dict[str, Any]:
    """A pause pod named `name` with `spec`'s fields."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": PAUSE}], **spec},
    }


def finished(kube: Kube, path: str, timeout: float) -> dict[str, Any]:
    """The pod at `path` once it Succeeded or Failed."""

    def done() -> dict[str, Any] | None:
        p = kube.get(path)
        return p if p["status"].get("phase") in ("Succeeded", "Failed") else None

    result: dict[str, Any] = wait_for(f"{path} finished", done, timeout=timeout)
    return result


def gpu_device_class(kube: Kube, name: str) -> None:
    """A DeviceClass of the NVIDIA driver's devices that also serves nvidia.com/gpu (extended resource)."""
    spec = {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
        "extendedResourceName": "nvidia.com/gpu",
    }
    kube.create(
        CLASSES, {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}
    )


def nvidia_smi_line(device: dict[str, Any]) -> str:
    """`nvidia-smi -L`'s line for a published device, as the canary prints it for its one GPU."""
    return f"GPU 0: {device['attributes']['productName']['string']} (UUID: {device['attributes']['uuid']['string']})"
