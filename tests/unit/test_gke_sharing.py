"""GKE's own GPU sharing, read as the device plugin's, so a pool's capacity holds.

GKE's managed device plugin advertises each GPU of a time-sharing or MPS node
`cloud.google.com/gke-max-shared-clients-per-gpu` times, and each MIG partition of a
`cloud.google.com/gke-gpu-partition-size` node as one `nvidia.com/gpu`
(cloud.google.com/kubernetes-engine/docs/how-to/timesharing-gpus, how-to/nvidia-mps-gpus, how-to/gpus-multi):
no GFD labels and no device-plugin ConfigMap say so. Found auditing the GKE path: a time-shared node of 2 GPUs
advertising 8 was predicted as 8 DRA devices with no sharing (replicas 1), a 1-GPU node in 7 partitions as 7.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.devices import node_devices
from dra_migrate.inventory.operator import node_config_replicas
from tests.unit.helpers import node, state

GKE = "cloud.google.com/"


def _gke_node(name: str, gpus: int, advertised: int, **labels: str) -> dict[str, Any]:
    pool = {f"{GKE}gke-nodepool": "g2", f"{GKE}gke-accelerator": "nvidia-l4", f"{GKE}gke-accelerator-count": str(gpus)}
    n = node(name, {**pool, **labels}, {"nvidia.com/gpu": str(advertised)})
    n["spec"]["providerID"] = f"gce://acme/us-central1-a/{name}"
    return n


def test_gke_time_sharing_and_mps_are_the_plugins_replicas() -> None:
    shared = {f"{GKE}gke-gpu-sharing-strategy": "time-sharing", f"{GKE}gke-max-shared-clients-per-gpu": "4"}
    mps = {f"{GKE}gke-gpu-sharing-strategy": "mps", f"{GKE}gke-max-shared-clients-per-gpu": "3"}
    s = state(_gke_node("ts", 2, 8, **shared), _gke_node("mps", 1, 3, **mps), _gke_node("whole", 2, 2))
    assert node_config_replicas(s) == {"ts": {"nvidia.com/gpu": 4}, "mps": {"nvidia.com/gpu": 3}}
    devices = node_devices(s)
    assert (devices["ts"].count, devices["mps"].count, devices["whole"].count) == (2, 1, 2)


def test_gke_mig_partitions_are_not_whole_gpus() -> None:
    mig = {f"{GKE}gke-gpu-partition-size": "1g.5gb"}
    s = state(_gke_node("mig", 1, 7, **mig))
    assert node_devices(s)["mig"].count == 1
    assert node_config_replicas(s) == {"mig": {"nvidia.com/gpu": 7}}


def test_a_node_gkes_plugin_does_not_serve_keeps_its_own_count() -> None:
    # With gke-no-default-nvidia-gpu-device-plugin=true another plugin serves the node: GKE's labels say nothing
    off = {f"{GKE}gke-gpu-sharing-strategy": "time-sharing", f"{GKE}gke-max-shared-clients-per-gpu": "4",
           "gke-no-default-nvidia-gpu-device-plugin": "true"}  # fmt: skip
    s = state(_gke_node("op", 2, 2, **off))
    assert node_config_replicas(s) == {} and node_devices(s)["op"].count == 2
