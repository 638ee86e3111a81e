"""Simulated GPU nodes on a real control plane: kubelet, the NVIDIA device plugin and the NVIDIA DRA
kubelet plugin, per node, for tests and rehearsals where there is no GPU hardware.

`spec` describes nodes (pure); `fleet` runs them against an API server; `stack` installs what an
NVIDIA stack would show; `load` recreates a snapshot's workloads on a live cluster.
"""

from __future__ import annotations

from dra_migrate.sim.spec import DeviceSpec, GpuNodeSpec, specs_from_state

__all__ = ["DeviceSpec", "GpuNodeSpec", "specs_from_state"]
