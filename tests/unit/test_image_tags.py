"""Image references are read one way (inventory/images.py) by every reader whose advice rests on a component's
release: the DRA driver's, Kueue's, Karpenter's and dcgm-exporter's. Before, four readers parsed tags four ways,
and dcgm-exporter's took a digest's hex for its version."""

from __future__ import annotations

import pytest

from dra_migrate.inventory.dependents import dcgm_exporters, kueue_install
from dra_migrate.inventory.draversion import release_of_image
from dra_migrate.inventory.images import image_tag, tag_version
from dra_migrate.inventory.platform import controller_version
from tests.unit.helpers import container, obj, pod_spec, state


@pytest.mark.parametrize(
    ("image", "tag", "version"),
    [
        ("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04", "3.3.5-3.4.0-ubuntu22.04", (3, 3, 5)),
        ("nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04@sha256:0a1b", "4.1.1-4.0.4-ubuntu22.04", (4, 1, 1)),
        ("registry.local:5000/kueue/kueue:v0.14.2", "v0.14.2", (0, 14, 2)),
        ("registry.local:5000/kueue/kueue", None, None),  # a registry's port is not a tag
        ("registry.local:5000/kueue/kueue@sha256:0a1b", None, None),
        ("kueue@sha256:0a1b", None, None),
        ("karpenter/controller:latest", "latest", None),
        ("karpenter/controller:", None, None),
        ("", None, None),
    ],
)
def test_an_image_reference_s_tag_and_version(image: str, tag: str | None, version: tuple[int, ...] | None) -> None:
    assert image_tag(image) == tag
    assert tag_version(image) == version


def _workload(kind: str, name: str, image: str) -> dict[str, object]:
    template = {"spec": pod_spec(container(image=image))}
    return obj("apps/v1", kind, name, {"template": template}, namespace="system")


def test_a_digest_pinned_exporter_s_version_is_its_tag_never_its_digest() -> None:
    s = state(_workload("DaemonSet", "dcgm", "nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04@sha256:0a1b"))
    assert [e.version for e in dcgm_exporters(s)] == ["4.1.1-4.0.4-ubuntu22.04"]


def test_every_release_reader_reads_a_port_and_a_digest_alike() -> None:
    s = state(
        _workload("Deployment", "kueue", "registry.local:5000/kueue/kueue:v0.14.2@sha256:0a1b"),
        _workload("Deployment", "karpenter", "registry.local:5000/karpenter/controller@sha256:0a1b"),
    )
    install = kueue_install(s)
    assert install is not None and install.version == (0, 14, 2)
    assert controller_version(s, "karpenter/controller") is None
    assert release_of_image("registry.local:5000/nvidia/k8s-dra-driver-gpu:v25.8.1@sha256:0a1b").text == "v25.8.1"  # type: ignore[union-attr]
    assert release_of_image("registry.local:5000/nvidia/k8s-dra-driver-gpu@sha256:0a1b") is None
    assert release_of_image("registry.local:5000/nvidia/k8s-device-plugin:v0.18.0") is None
