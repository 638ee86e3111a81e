"""The ComputeDomain side of the NVIDIA DRA driver, which shares the GPU plugin's chart and image but serves no GPU.

dra-driver-nvidia-gpu v0.4.1 runs two kubelet plugins from one image: the kubelet-plugin DaemonSet's `gpus`
container runs `gpu-kubelet-plugin` (driver gpu.nvidia.com) and its `compute-domains` container
`compute-domain-kubelet-plugin` (driver compute-domain.nvidia.com, IMEX channels), each present when the chart's
resources.gpus.enabled / resources.computeDomains.enabled is (deployments/helm/dra-driver-nvidia-gpu/templates/
kubeletplugin.yaml). Its ComputeDomain controller makes one DaemonSet per ComputeDomain, `computedomain-daemon-<uid>`,
from the same image, running `compute-domain-daemon` on the nodes labelled `resource.nvidia.com/computeDomain=<uid>`
(cmd/compute-domain-controller/daemonset.go, computedomain.go; templates/compute-domain-daemon.tmpl.yaml).
"""

from __future__ import annotations

from typing import Any

from dra_migrate.cluster.state import Obj

COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"
GPU_PLUGIN_BINARY = "gpu-kubelet-plugin"
COMPUTE_DOMAIN_BINARIES = ("compute-domain-kubelet-plugin", "compute-domain-daemon")
COMPUTE_DOMAIN_LABEL = "resource.nvidia.com/computeDomain"


def _pod_spec(ds: Obj) -> dict[str, Any]:
    spec = ds.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    return pod if isinstance(pod, dict) else {}


def command_text(ds: Obj) -> str:
    """The command lines of a DaemonSet's containers, as one text."""
    containers = _pod_spec(ds).get("containers") or []
    return " ".join(
        str(a) for c in containers if isinstance(c, dict) for a in [*(c.get("command") or []), *(c.get("args") or [])]
    )


def compute_domain_only(ds: Obj) -> bool:
    """A DaemonSet of the driver's ComputeDomain side alone: a ComputeDomain's daemon (placed by the ComputeDomain
    label, or running `compute-domain-daemon`), or the kubelet-plugin DaemonSet of a chart with
    resources.gpus.enabled=false (its commands name a ComputeDomain binary and not the GPU plugin's)."""
    selector = _pod_spec(ds).get("nodeSelector")
    if isinstance(selector, dict) and COMPUTE_DOMAIN_LABEL in selector:
        return True
    runs = command_text(ds)
    return GPU_PLUGIN_BINARY not in runs and any(b in runs for b in COMPUTE_DOMAIN_BINARIES)
