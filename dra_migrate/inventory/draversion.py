"""Which release of the NVIDIA DRA driver a cluster runs, and how that release's devices differ from v0.4.1's.

dra-migrate predicts devices as sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 publishes them. Fleets also run NVIDIA's
own releases (github.com/NVIDIA/k8s-dra-driver-gpu, chart `nvidia-dra-driver-gpu`, image
`nvcr.io/nvidia/k8s-dra-driver-gpu:v<chart appVersion>`: the chart's `_helpers.tpl` `fullimage`), whose kubelet
plugin publishes other attributes and names (docs/nvidia-tier.md "Driver releases"):

  * v25.3.x (`cmd/gpu-kubelet-plugin/deviceinfo.go` at v25.3.2): a full GPU also has `index` and `minor`, a MIG
    device `index` and `parentIndex`; both have `pcieBusID` (no domain prefix) where later releases publish
    `resource.kubernetes.io/pciBusID`; MIG devices are named `gpu-<minor>-mig-<giProfileId>-<start>-<size>`.
    No feature gates exist: a claim's TimeSlicing or MPS sharing config is applied without one (the package
    `pkg/featuregates` first appears in v25.8.0).
  * v25.8.x (`deviceinfo.go` at v25.8.1): `index`, `minor`, `parentIndex` gone; `pcieBusID` and the old MIG names
    stay. TimeSlicingSettings and MPSSupport are feature gates, off by default (`pkg/featuregates/featuregates.go`).
  * v25.12.x (`deviceinfo.go`, `partitions.go`, `mig.go` `ToCanonicalName` at v25.12.0) and dra-driver-nvidia-gpu
    v0.4.x: `resource.kubernetes.io/pciBusID`, MIG names `gpu-<minor>-mig-<profile>-<giProfileId>-<start>`,
    what dra-migrate predicts.

An image pinned by digest only, or by a tag that is no version (`latest`), names no release: the release is then
read from the labels both charts put on the DaemonSet (not on its pod template), `app.kubernetes.io/version:
"<appVersion>"` and `helm.sh/chart: <name>-<chart version>` (`_helpers.tpl` `labels`/`chart`, used by
`templates/kubeletplugin.yaml`), the same at v25.3.2, v25.8.1, v25.12.0 and in dra-driver-nvidia-gpu v0.4.1's
`deployments/helm/dra-driver-nvidia-gpu/`; each chart's version equals its appVersion there (`Chart.yaml`), and the
image's default tag is `v<appVersion>`. Pods' `status.containerStatuses[].image` is not read: the kubelet may report
another tag of the same digest (kubernetes/kubernetes#51017, #88835). Without either, NVIDIA's image says nothing of
its release, and the checks say so (rule `dra-driver-release-unknown`).

The chart's `gpu.nvidia.com` DeviceClass declares `extendedResourceName: nvidia.com/gpu` from v25.12.0 on
(`templates/deviceclass-gpu.yaml`), not in v25.3.x or v25.8.x; the class is read from the cluster, not assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.inventory.images import image_tag, semver, tag_version, template_images
from dra_migrate.inventory.operator import dra_plugin_daemonset_objects

# The image names the NVIDIA GPU DRA driver ships as: NVIDIA's (nvcr.io/nvidia/k8s-dra-driver-gpu) and
# kubernetes-sigs' (registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu).
_IMAGES = ("k8s-dra-driver-gpu", "dra-driver-nvidia-gpu")
NVIDIA_IMAGE = "k8s-dra-driver-gpu"

# The charts' labels on the kubelet-plugin DaemonSet (NVIDIA/k8s-dra-driver-gpu
# deployments/helm/nvidia-dra-driver-gpu/templates/_helpers.tpl `nvidia-dra-driver-gpu.labels` at v25.3.2, v25.8.1,
# v25.12.0; sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1 deployments/helm/dra-driver-nvidia-gpu/templates/_helpers.tpl):
# `helm.sh/chart` is `<nameOverride or chart name>-<chart version>` ("+" as "_"), and the DaemonSet is named
# `<nameOverride or chart name>-kubelet-plugin` (templates/kubeletplugin.yaml).
CHART_LABEL = "helm.sh/chart"
VERSION_LABEL = "app.kubernetes.io/version"
_CHARTS = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")
_CHART_VALUE = re.compile(r"^(?P<name>.+?)-(?P<version>v?\d+\.\d+\.\d+\S*)$")

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
LEGACY_PCI_BUS_ID = "pcieBusID"


@dataclass(frozen=True)
class DriverRelease:
    """One release of the GPU DRA driver, as its kubelet plugin's image tag names it."""

    version: tuple[int, int, int]
    image: str

    @property
    def text(self) -> str:
        return "v" + ".".join(map(str, self.version))

    @property
    def nvidia_calendar(self) -> bool:
        """NVIDIA's calendar-versioned releases (v25.3.0 ...), not the kubernetes-sigs v0.x ones."""
        return self.version[0] >= 25

    @property
    def before_25_12(self) -> bool:
        return self.nvidia_calendar and self.version[:2] < (25, 12)

    @property
    def index_attributes(self) -> bool:
        """`index`/`minor` on GPUs, `index`/`parentIndex` on MIG devices: v25.3.x only."""
        return self.nvidia_calendar and self.version[:2] < (25, 8)

    @property
    def pci_bus_id_attribute(self) -> str:
        return LEGACY_PCI_BUS_ID if self.before_25_12 else PCI_BUS_ID

    @property
    def legacy_mig_names(self) -> bool:
        """MIG devices named `gpu-<minor>-mig-<giProfileId>-<start>-<size>` (before v25.12.0)."""
        return self.before_25_12

    @property
    def feature_gates(self) -> bool:
        """Whether the release has feature gates (TimeSlicingSettings, MPSSupport...): v25.8.0 on, and v0.x."""
        return not (self.nvidia_calendar and self.version[:2] < (25, 8))


def _repository(image: str) -> str:
    return image.split("@", 1)[0].removesuffix(":" + (image_tag(image) or ""))


def release_of_image(image: str) -> DriverRelease | None:
    """`nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1` -> v25.8.1; None for another image, no tag, or a non-semver tag
    (`latest`, a digest only)."""
    version = tag_version(image)
    if version is None or not _repository(image).endswith(_IMAGES):
        return None
    return DriverRelease(version, image)


def _driver_images(ds: Obj) -> list[str]:
    return [i for i in template_images(ds) if _repository(i).endswith(_IMAGES)]


def release_of_labels(ds: Obj) -> DriverRelease | None:
    """The release the chart that installed `ds` names in its labels: `app.kubernetes.io/version` (the appVersion,
    whose `v<appVersion>` is the image's default tag), else the version in `helm.sh/chart`. Only for a DaemonSet
    running the driver's image whose `helm.sh/chart` names the driver's chart (or, under a nameOverride, the
    DaemonSet's own name prefix), and only a version of that image's line: NVIDIA's calendar releases for
    `k8s-dra-driver-gpu`, v0.x for `dra-driver-nvidia-gpu`. None otherwise."""
    images = _driver_images(ds)
    labels = (ds.get("metadata") or {}).get("labels") or {}
    chart = _CHART_VALUE.match(str(labels.get(CHART_LABEL) or "")) if images and isinstance(labels, dict) else None
    if chart is None:
        return None
    name = str((ds.get("metadata") or {}).get("name") or "")
    if chart["name"] not in _CHARTS and name != f"{chart['name']}-kubelet-plugin":
        return None
    version = semver(str(labels.get(VERSION_LABEL) or "")) or semver(chart["version"])
    if version is None:
        return None
    release = DriverRelease(version, images[0])
    nvidia = _repository(images[0]).endswith(NVIDIA_IMAGE)
    return release if release.nvidia_calendar == nvidia else None


def daemonset_release(ds: Obj) -> DriverRelease | None:
    """The release a DRA kubelet-plugin DaemonSet runs: its containers' driver image tag (every container of the
    chart's DaemonSet runs the same image); for a digest-only or non-version tag, its chart's labels."""
    tagged = next((r for image in template_images(ds) if (r := release_of_image(image)) is not None), None)
    return tagged if tagged is not None else release_of_labels(ds)


def unknown_nvidia_releases(state: ClusterState) -> dict[str, str]:
    """namespace/name -> image of each DRA kubelet-plugin DaemonSet running NVIDIA's image whose release neither its
    tag nor its chart's labels name: a calendar release (v25.3.x and v25.8.x publish other attributes and MIG
    names than v25.12.x) predicted with v0.4.1's shape. The kubernetes-sigs image (v0.x) is left out: its shape is
    the one assumed."""
    out: dict[str, str] = {}
    for ds in dra_plugin_daemonset_objects(state):
        nvidia = [i for i in _driver_images(ds) if _repository(i).endswith(NVIDIA_IMAGE)]
        if nvidia and daemonset_release(ds) is None:
            meta = ds.get("metadata") or {}
            out[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = nvidia[0]
    return out


def installed_releases(state: ClusterState) -> dict[str, DriverRelease]:
    """namespace/name of each DRA kubelet-plugin DaemonSet -> the release it runs (those with a readable tag)."""
    out: dict[str, DriverRelease] = {}
    for ds in dra_plugin_daemonset_objects(state):
        r = daemonset_release(ds)
        if r is not None:
            meta = ds.get("metadata") or {}
            out[f"{meta.get('namespace', '')}/{meta.get('name', '')}"] = r
    return out


def installed_release(state: ClusterState) -> DriverRelease | None:
    """The one release every DRA kubelet-plugin DaemonSet with a readable tag runs; None when none is readable or
    they differ by how they publish devices (then predictions keep v0.4.1's shape)."""

    def shape(r: DriverRelease) -> tuple[bool, bool, bool]:
        return (r.index_attributes, r.before_25_12, r.feature_gates)

    releases = sorted(installed_releases(state).values(), key=lambda r: r.version)
    if not releases or len({shape(r) for r in releases}) > 1:
        return None
    return releases[0]
