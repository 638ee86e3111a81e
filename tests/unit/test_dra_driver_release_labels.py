"""The DRA driver's release when its image tag names none (a digest-only pin, `latest`): read from the labels its
chart puts on the kubelet-plugin DaemonSet, else said to be unknown (dra_migrate/inventory/draversion.py).

The labels, as NVIDIA/k8s-dra-driver-gpu renders them at v25.3.2, v25.8.1 and v25.12.0
(deployments/helm/nvidia-dra-driver-gpu/templates/_helpers.tpl `nvidia-dra-driver-gpu.labels`, on the DaemonSet's
metadata in templates/kubeletplugin.yaml, not on its pod template) and sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1:
`helm.sh/chart: <nameOverride or chart name>-<chart version>`, `app.kubernetes.io/version: "<appVersion>"`,
`app.kubernetes.io/managed-by`, `app.kubernetes.io/name`, `app.kubernetes.io/instance`; chart version = appVersion.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.dra.devices import node_devices
from dra_migrate.inventory.draversion import installed_release
from tests.unit.test_checks import findings
from tests.unit.test_dra_driver_releases import NV, gpu_node, mig_node, nvidia_chart_plugin
from tests.unit.test_plan_placement import make

DIGEST = "@sha256:" + "5" * 64
SIGS = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu"


def chart_labels(version: str, name: str = "nvidia-dra-driver-gpu") -> dict[str, str]:
    return {
        "helm.sh/chart": f"{name}-{version}",
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": "nvidia-dra-driver-gpu",
    }


def plugin(image: str, labels: dict[str, str] | None = None, name: str | None = None) -> dict[str, Any]:
    """NVIDIA's chart's kubelet-plugin DaemonSet (test_dra_driver_releases.nvidia_chart_plugin) running `image`,
    with `labels` on its metadata."""
    ds = nvidia_chart_plugin("v0.0.0")
    for c in ds["spec"]["template"]["spec"]["containers"]:
        c["image"] = image
    if labels is not None:
        ds["metadata"]["labels"] = labels
    if name is not None:
        ds["metadata"]["name"] = name
    return ds


def _devices(ds: dict[str, Any]) -> dict[str, dict[str, Any]]:
    nd = node_devices(make(gpu_node(), mig_node(), ds))
    return {d["name"]: d for n in ("h100", "a100") for d in nd[n].devices}


def test_a_digest_pinned_v25_8_plugin_with_chart_labels_predicts_v25_8s_devices() -> None:
    ds = plugin(NV + DIGEST, chart_labels("25.8.1"))
    assert installed_release(make(ds)).text == "v25.8.1"  # type: ignore[union-attr]
    devs = _devices(ds)
    mig = sorted(n for n in devs if "-mig-" in n)
    # v25.8.1's MIG names gpu-<minor>-mig-<giProfileId>-<start>-<size> (3g.20gb: GI profile 9, 4 slices), pcieBusID.
    assert mig == ["gpu-0-mig-9-4-4", "gpu-1-mig-9-4-4"], mig
    for d in devs.values():
        assert "pcieBusID" in d["attributes"] and "resource.kubernetes.io/pciBusID" not in d["attributes"]
        assert "index" not in d["attributes"]
    assert not findings(make(gpu_node(), ds), "dra-driver-release-unknown")


def test_a_latest_image_with_chart_labels_reads_the_chart_version() -> None:
    # `image.tag: latest` over chart v25.3.2: the labels still name the chart's appVersion.
    devs = _devices(plugin(f"{NV}:latest", chart_labels("25.3.2")))
    assert devs["gpu-1"]["attributes"]["index"] == {"int": 1}


def test_the_chart_label_alone_and_under_a_name_override() -> None:
    only_chart = {"helm.sh/chart": "nvidia-dra-driver-gpu-25.8.1"}
    assert installed_release(make(plugin(NV + DIGEST, only_chart))).text == "v25.8.1"  # type: ignore[union-attr]
    # nameOverride `gpu-dra`: the chart label and the DaemonSet's name both use it (`nvidia-dra-driver-gpu.name`).
    renamed = plugin(NV + DIGEST, chart_labels("25.3.2", "gpu-dra"), name="gpu-dra-kubelet-plugin")
    assert installed_release(make(renamed)).text == "v25.3.2"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "labels",
    [
        None,
        # Another chart's labels (a GPU Operator, an umbrella chart) name its own version, not the driver's.
        {"helm.sh/chart": "gpu-operator-v25.3.0", "app.kubernetes.io/version": "v25.3.0"},
        # The kubernetes-sigs line's version on NVIDIA's image: not this image's release.
        chart_labels("0.4.1"),
    ],
)
def test_nvidia_image_without_a_readable_release_is_named(labels: dict[str, str] | None) -> None:
    ds = plugin(f"{NV}:latest", labels)
    assert installed_release(make(ds)) is None
    (f,) = findings(make(gpu_node(), ds), "dra-driver-release-unknown")
    assert [str(o) for o in f.objects] == ["DaemonSet nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin"]
    assert f"{NV}:latest" in f.message and "v25.12.0" in f.message, f.message
    assert "version tag" in f.remediation


def test_readable_tags_and_the_sigs_image_raise_no_warning() -> None:
    for ds in (
        nvidia_chart_plugin("v25.8.1"),
        plugin(f"{NV}:v25.3.2{DIGEST}"),
        plugin(SIGS + DIGEST),  # v0.x: the shape assumed
        plugin(SIGS + DIGEST, chart_labels("0.4.1", "dra-driver-nvidia-gpu")),
    ):
        assert not findings(make(gpu_node(), ds), "dra-driver-release-unknown"), ds


def test_a_sigs_image_with_chart_labels_reads_v0_and_ignores_a_calendar_version() -> None:
    ok = plugin(SIGS + DIGEST, chart_labels("0.4.1", "dra-driver-nvidia-gpu"))
    assert installed_release(make(ok)).text == "v0.4.1"  # type: ignore[union-attr]
    odd = plugin(SIGS + DIGEST, chart_labels("25.8.1"))
    assert installed_release(make(odd)) is None


def test_a_digest_pinned_v25_3_plugin_applies_sharing_without_a_gate() -> None:
    from tests.unit.test_sharing_to_dra import _pool, _shared

    st = _pool("mps", True)
    old = make(*(o for _, o in st.all_objects()), plugin(NV + DIGEST, chart_labels("25.3.2")))
    (f,) = _shared(old)
    assert "v25.3.2 applies it without a feature gate" in f.remediation, f.remediation
