"""Simulated GPU nodes on a real control plane: kubelet, the NVIDIA device plugin and the NVIDIA DRA
kubelet plugin, per node, for tests and rehearsals where there is no GPU hardware.

`spec` describes nodes (pure); `fleet` runs them against an API server; `stack` installs what an
NVIDIA stack would show; `load` recreates a snapshot's workloads on a live cluster.

Nothing is imported here: the plan's estimate reads `sim.timing`'s measured delays, and a command that
only shows a plan must not pay for the node specs and the device tables with it (issue 29).
"""
