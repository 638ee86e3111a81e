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

The chart's `gpu.nvidia.com` DeviceClass declares `extendedResourceName: nvidia.com/gpu` from v25.12.0 on
(`templates/deviceclass-gpu.yaml`), not in v25.3.x or v25.8.x; the class is read from the cluster, not assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.inventory.images import image_tag, tag_version, template_images
from dra_migrate.inventory.operator import dra_plugin_daemonset_objects

# The image names the NVIDIA GPU DRA driver ships as: NVIDIA's (nvcr.io/nvidia/k8s-dra-driver-gpu) and
# kubernetes-sigs' (registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu).
_IMAGES = ("k8s-dra-driver-gpu", "dra-driver-nvidia-gpu")

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


def release_of_image(image: str) -> DriverRelease | None:
    """`nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1` -> v25.8.1; None for another image, no tag, or a non-semver tag
    (`latest`, a digest only)."""
    repository = image.split("@", 1)[0].removesuffix(":" + (image_tag(image) or ""))
    version = tag_version(image)
    if version is None or not repository.endswith(_IMAGES):
        return None
    return DriverRelease(version, image)


def daemonset_release(ds: Obj) -> DriverRelease | None:
    """The release a DRA kubelet-plugin DaemonSet runs: its containers' driver image tag (every container of the
    chart's DaemonSet runs the same image)."""
    return next((r for image in template_images(ds) if (r := release_of_image(image)) is not None), None)


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
