"""GKE's node and node-pool labels, with their sources: read by the platform model (platform.py) and by the
device-plugin inventory (operator.py, GKE's GPU sharing), which platform.py reads too; here, below both, so that
neither imports the other for them. SOURCES["gke-dra"] is in platform.py."""

from __future__ import annotations

# GKE: "Disable the GPU device plugin: add the gke-no-default-nvidia-gpu-device-plugin=true node label to the
# node pool" (SOURCES["gke-dra"], "Create a GKE node pool with GPUs"); the GPU Operator on GKE needs the same.
GKE_NO_DEFAULT_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"
GKE_POOL = "cloud.google.com/gke-nodepool"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
# A GKE DRA pool's labels (SOURCES["gke-dra"], GoogleCloudPlatform/ai-on-gke DRA tutorials): the plugin off, what
# the DRA chart's kubelet plugin selects by default (its v0.4.1 values.yaml: NFD's or the GPU Operator's label, not
# on GKE) and how GKE's cluster autoscaler knows the pool publishes NVIDIA DRA devices (and scales it for claims).
GKE_DRA_POOL_LABELS = {GKE_NO_DEFAULT_PLUGIN: "true", "nvidia.com/gpu.present": "true",
                       "cloud.google.com/gke-nvidia-gpu-dra-driver": "true"}  # fmt: skip
# GKE's GPU sharing labels (time-sharing and MIG partitions), which DRA node pools cannot use:
# "You can't use the following GPU sharing features: Time-sharing GPUs, Multi-instance GPUs, MPS".
GKE_SHARING_LABELS = ("cloud.google.com/gke-gpu-sharing-strategy", "cloud.google.com/gke-gpu-partition-size",
                      "cloud.google.com/gke-max-shared-clients-per-gpu")  # fmt: skip
