"""Rehearse a plan on a twin of the cluster: a private control plane made from the cluster's snapshot,
its GPU nodes played by the simulator, the real scheduler deciding (README "Rehearsal")."""
