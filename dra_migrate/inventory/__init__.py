"""The exact inventory of GPU consumers, GPU nodes and pools, the NVIDIA stack and DRA state."""
