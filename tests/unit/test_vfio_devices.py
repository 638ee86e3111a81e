"""A node whose DRA driver also publishes VFIO passthrough devices is ready when its GPUs are.

With the driver's PassthroughSupport gate on, dra-driver-nvidia-gpu v0.4.1 publishes a `gpu-vfio-<i>` device
(attribute `type: vfio`, cmd/gpu-kubelet-plugin/deviceinfo.go `VfioDeviceInfo.GetDevice`) beside each full GPU
that has no MIG devices (nvlib.go `enumerateGpuVfioDevices`). Those are for VMs (KubeVirt), never a container's
GPU, and the plan predicts none: wait-dra-ready counted every device of the driver, found 2 where it expected 1,
and waited out its timeout on every such node.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.execute.ops import LiveOps
from dra_migrate.testing.server import FakeServer
from tests.unit.helpers import resource_slice

NODE, GPU = "gpu-1", "nvidia.com/gpu"
NODES, SLICES = "/api/v1/nodes", "/apis/resource.k8s.io/v1/resourceslices"


def _device(name: str, kind: str) -> dict[str, Any]:
    return {"name": name, "attributes": {"type": {"string": kind}, "uuid": {"string": f"GPU-{name}"}}}


def test_vfio_devices_are_not_counted_as_the_nodes_gpus() -> None:
    server = FakeServer()
    server.put(f"{NODES}/{NODE}", {"metadata": {"name": NODE}, "status": {"allocatable": {GPU: "0"}}})
    slice_ = resource_slice(NODE, 1, [_device("gpu-0", "gpu"), _device("gpu-vfio-0", "vfio")])
    server.put(f"{SLICES}/{slice_['metadata']['name']}", slice_)
    live = LiveOps(server.client, poll_s=0.01, poll_cap_s=0.05)
    change = live.wait_dra_ready(NODE, [GPU], 1, 2)
    assert change.after["devices"] == 1
