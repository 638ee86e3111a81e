"""Whether a node's container runtime resolves the CDI devices the kubelet names in the CRI, from
`status.nodeInfo.containerRuntimeVersion` (`<runtime>://<version>`).

The NVIDIA DRA driver hands its devices to containers only through CDI: the kubelet plugin writes a CDI spec per
claim and returns CDI device ids (dra-driver-nvidia-gpu v0.4.1 `cmd/gpu-kubelet-plugin/cdi.go`,
`device_state.go`; its `docs/prerequisites.md`: "CDI enabled in your container runtime"). The kubelet passes them
to the runtime only in the CRI `ContainerConfig.CDIDevices` field: "As of Kubernetes 1.31, CDI device IDs are not
passed via annotations anymore" (kubernetes v1.37.2 `pkg/kubelet/cm/dra/manager.go`). So a runtime must read that
field, and have CDI on:

* containerd before 1.7 has no CDI in its CRI plugin (v1.6.38 `pkg/cri`); 1.7.0 and 1.7.1 read CDI devices from
  annotations only (`pkg/cri/opts/spec_linux.go` `WithCDI(annotations)`), 1.7.2 adds the CRI field
  (`pkg/cri/server/container_create_linux.go` `WithCDI(config.Annotations, config.CDIDevices)`); in 1.7 it is
  behind `enable_cdi`, default false (`pkg/cri/config/config_unix.go`, `docs/cri/config.md`). 2.0 defaults it to
  true (v2.0.0 `internal/cri/config/config_unix.go`); 2.4 drops the key, CDI always on (v2.4.2
  `plugins/cri/runtime/plugin.go`, `RELEASES.md`).
* CRI-O reads the CRI field from 1.28.0 (cri-o v1.28.0 `internal/factory/container/device.go`
  `specInjectCDIDevices`; 1.27.x reads annotations only), with no switch to turn CDI off (`pkg/config/config.go`:
  only `cdi_spec_dirs`).
* Docker has CDI from Engine 25, opt-in (`"features": {"cdi": true}`, moby/moby#45134), and cri-dockerd passes the
  CRI field to it only since Mirantis/cri-dockerd#522 (merged 2025-11); the node shows Docker's version, not
  cri-dockerd's.

Any other runtime, or a version without major.minor.patch, is not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNSUPPORTED = "unsupported"  # this version cannot inject the devices the kubelet names in the CRI
CONFIG = "config"  # it can, if configured so: what the API does not show

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:[-+~].*)?$")

_CONTAINERD_KEY = (
    'enable_cdi = true under [plugins."io.containerd.grpc.v1.cri"] in /etc/containerd/config.toml (default false in '
    "1.7), with cdi_spec_dirs including the DRA driver's --cdi-root (default /etc/cdi; the default dirs include it)"
)
_DOCKER_KEY = (
    'dockerd\'s "features": {"cdi": true} (daemon.json; opt-in since Docker 25) and a cri-dockerd that passes the '
    "CRI's CDI devices to Docker (Mirantis/cri-dockerd#522)"
)


@dataclass(frozen=True)
class CdiSupport:
    verdict: str  # UNSUPPORTED or CONFIG
    why: str  # for its nodes, as the finding and the plan's excludedNodes say it
    fix: str  # the upgrade, or the config key to verify
    # The GPU Operator's toolkit, with the ClusterPolicy's CDI on, sets the key itself: its installer's
    # `--enable-cdi-in-runtime` defaults to `CDI_ENABLED` and writes `enable_cdi = true` into containerd's config
    # (nvidia-container-toolkit v1.19.1 `cmd/nvidia-ctk-installer/container/runtime/runtime.go`,
    # `pkg/config/engine/containerd/config.go` `EnableCDI`). Not for Docker: cri-dockerd is no part of it.
    toolkit_settles: bool = False


def runtime_version(text: str | None) -> tuple[str, tuple[int, int, int]] | None:
    """`containerd://1.7.27-1` -> ("containerd", (1, 7, 27)); None when either part is not there."""
    name, sep, version = (text or "").partition("://")
    m = _VERSION.match(version)
    if not sep or not name or m is None:
        return None
    return name, (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def cdi_support(text: str | None) -> CdiSupport | None:
    """How this runtime stands with the CDI devices the kubelet passes in the CRI; None: it resolves them by
    default, or it is not known here (not judged)."""
    parsed = runtime_version(text)
    if parsed is None:
        return None
    name, v = parsed
    if name == "containerd":
        if v < (1, 7, 0):
            return CdiSupport(UNSUPPORTED, "containerd before 1.7 has no CDI support", "upgrade containerd to 2.x")
        if v < (1, 7, 2):
            return CdiSupport(
                UNSUPPORTED,
                "containerd 1.7.0-1.7.1 reads CDI devices only from annotations, which kubelets since 1.31 no "
                "longer set",
                "upgrade containerd to 2.x (or 1.7.2+ with enable_cdi = true)",
            )
        if v < (2, 0, 0):
            why = "containerd 1.7 injects CDI devices only with enable_cdi = true"
            return CdiSupport(CONFIG, why, _CONTAINERD_KEY, toolkit_settles=True)
        return None
    if name == "cri-o":
        if v < (1, 28, 0):
            return CdiSupport(
                UNSUPPORTED,
                "CRI-O before 1.28 reads CDI devices only from annotations, which kubelets since 1.31 no longer set",
                "upgrade CRI-O to 1.28 or later (in step with the kubelet's minor version)",
            )
        return None
    if name == "docker":
        if v < (25, 0, 0):
            return CdiSupport(
                UNSUPPORTED, "Docker Engine before 25 has no CDI support", "move the node to containerd 2.x"
            )
        return CdiSupport(CONFIG, "Docker's CDI is opt-in and cri-dockerd's version is not shown", _DOCKER_KEY)
    return None
