"""Container images of the components whose release decides what the tool predicts or advises: one reading of an
image reference's tag, and of a semantic version in it, for every reader in inventory/ (the DRA driver's release,
Kueue's, Karpenter's, dcgm-exporter's).

An image reference is `[host[:port]/]path[:tag][@digest]` (distribution/reference `reference.go`, the grammar the
kubelet and containerd parse): the tag is what follows the last `:` of the last path component, before any
`@digest`; a registry's port is never a tag, and a digest-only reference has none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A release tag: `v25.8.1`, `1.8.1`, `v0.14.2-rc.1` (the prefix is the version; a suffix is ignored).
_SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def image_tag(image: str) -> str | None:
    """`nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1@sha256:ab` -> `v25.8.1`; None without a tag (`repo@sha256:ab`,
    `host:5000/repo`)."""
    last = image.split("@", 1)[0].rpartition("/")[2]
    name, colon, tag = last.partition(":")
    return tag if name and colon and tag else None


def tag_version(image: str) -> tuple[int, int, int] | None:
    """The semantic version an image's tag names (`...:v0.14.2` -> (0, 14, 2)); None for no tag or another kind of
    tag (`latest`, `main`)."""
    tag = image_tag(image)
    return semver(tag) if tag is not None else None


def semver(text: str) -> tuple[int, int, int] | None:
    """The semantic version `text` starts with (`v25.8.1`, `0.4.1-rc.1` -> its first three numbers); None for
    another text (`latest`, `main`)."""
    m = _SEMVER.match(text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def template_containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The containers of a workload's pod template (`spec.template.spec.containers`): a Deployment's, a
    DaemonSet's. A field of another type is read as absent (the snapshot check refuses those it reads,
    cluster/validate.py)."""
    spec = _map(_map(_map(obj.get("spec")).get("template")).get("spec"))
    containers = spec.get("containers")
    return [c for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []


def template_images(obj: Mapping[str, Any]) -> list[str]:
    """The images of a workload's pod template's containers, in order."""
    return [str(c.get("image") or "") for c in template_containers(obj)]


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}
