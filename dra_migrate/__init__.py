"""dra-migrate: move Kubernetes GPU fleets from the NVIDIA device plugin to Dynamic Resource Allocation."""

__version__ = "0.1.0"
