"""The NVIDIA DRA driver releases a fleet runs, and how each publishes devices (dra_migrate/inventory/draversion.py).

Upstream, at each tag (github.com/NVIDIA/k8s-dra-driver-gpu; sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1):
  * v25.3.2 `cmd/gpu-kubelet-plugin/deviceinfo.go` `GetDevice`: a GPU has `index`, `minor`, `pcieBusID`; a MIG
    device `index`, `parentIndex`, `pcieBusID`; MIG names `gpu-%d-mig-%d-%d-%d` (minor, GI profile ID, placement
    start, placement size). No `pkg/featuregates`: sharing configs need no gate.
  * v25.8.1 `deviceinfo.go`: `index`/`minor`/`parentIndex` gone, `pcieBusID` and the MIG names stay;
    `pkg/featuregates/featuregates.go`: TimeSlicingSettings, MPSSupport default false.
  * v25.12.0 `partitions.go` `PartDevAttributes`, `deviceinfo.go`, `mig.go` `ToCanonicalName`:
    `resource.kubernetes.io/pciBusID`, MIG names `gpu-%d-mig-<profile>-%d-%d`: v0.4.1's shape.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.dra.devices import node_devices
from dra_migrate.inventory.draversion import installed_release, release_of_image
from tests.unit.helpers import node, obj
from tests.unit.test_checks import findings
from tests.unit.test_plan_placement import POOL, make

NV = "nvcr.io/nvidia/k8s-dra-driver-gpu"


def nvidia_chart_plugin(tag: str, *env: dict[str, str]) -> dict[str, Any]:
    """NVIDIA's chart's DaemonSet (deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml at v25.x):
    `nvidia-dra-driver-gpu-kubelet-plugin`, containers `compute-domains` and `gpus`, image `<repository>:v<appVersion>`
    (`_helpers.tpl` `fullimage`); feature gates as the FEATURE_GATES environment variable (v25.8.0 on)."""
    containers = [
        {"name": n, "image": f"{NV}:{tag}", "command": ["bash", "-c"], "env": list(env)}
        for n in ("compute-domains", "gpus")
    ]
    spec = {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}, "containers": containers}
    return obj(
        "apps/v1",
        "DaemonSet",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        {"template": {"spec": spec}},
        "nvidia-dra-driver-gpu",
    )


def mig_node(name: str = "a100") -> dict[str, Any]:
    return node(name, _gfd("NVIDIA-A100-SXM4-40GB", "40960", {"nvidia.com/mig.strategy": "mixed",
                "nvidia.com/mig-3g.20gb.count": "2"}), {"nvidia.com/mig-3g.20gb": "2"})  # fmt: skip


def gpu_node(name: str = "h100") -> dict[str, Any]:
    return node(name, _gfd("NVIDIA-H100-80GB-HBM3", "81559", {POOL: "h100"}), {"nvidia.com/gpu": "2"})


def _gfd(product: str, memory: str, more: dict[str, str]) -> dict[str, str]:
    """GFD's labels of a node of two GPUs."""
    return {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "2", "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.memory": memory, **more}  # fmt: skip


def _devices(tag: str | None) -> dict[str, dict[str, Any]]:
    objs = [gpu_node(), mig_node()] + ([nvidia_chart_plugin(tag)] if tag else [])
    nd = node_devices(make(*objs))
    return {d["name"]: d for n in ("h100", "a100") for d in nd[n].devices}


def test_release_of_image() -> None:
    assert release_of_image(f"{NV}:v25.8.1").text == "v25.8.1"  # type: ignore[union-attr]
    assert release_of_image("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1@sha256:ab").text == "v0.4.1"  # type: ignore[union-attr]
    assert release_of_image(f"{NV}@sha256:abc") is None
    assert release_of_image(f"{NV}:latest") is None
    assert release_of_image("nvcr.io/nvidia/k8s-device-plugin:v0.18.0") is None


def test_v25_12_and_no_plugin_predict_v041s_shape() -> None:
    for tag in (None, "v25.12.0"):
        devs = _devices(tag)
        assert sorted(devs) == ["gpu-0", "gpu-0-mig-3g20gb-9-4", "gpu-1", "gpu-1-mig-3g20gb-9-4"], sorted(devs)
        assert all("resource.kubernetes.io/pciBusID" in d["attributes"] for d in devs.values())
        assert not any("pcieBusID" in d["attributes"] or "index" in d["attributes"] for d in devs.values())


def test_v25_8_predicts_pciebusid_and_the_old_mig_names() -> None:
    devs = _devices("v25.8.1")
    assert installed_release(make(nvidia_chart_plugin("v25.8.1"))).text == "v25.8.1"  # type: ignore[union-attr]
    mig = sorted(n for n in devs if "-mig-" in n)
    # gpu-<minor>-mig-<giProfileId>-<start>-<size>: 3g.20gb on an A100-40GB is GI profile 9, 4 memory slices.
    assert mig and all(n.split("-mig-")[1].split("-")[0] == "9" and n.endswith("-4") for n in mig), mig
    for d in devs.values():
        assert "pcieBusID" in d["attributes"] and "resource.kubernetes.io/pciBusID" not in d["attributes"]
        assert "index" not in d["attributes"] and "minor" not in d["attributes"]


def test_v25_3_predicts_index_minor_and_parent_index() -> None:
    devs = _devices("v25.3.2")
    assert devs["gpu-1"]["attributes"]["index"] == {"int": 1} and devs["gpu-1"]["attributes"]["minor"] == {"int": 1}
    mig = [d for n, d in sorted(devs.items()) if "-mig-" in n]
    assert [(d["attributes"]["parentIndex"]["int"], d["attributes"]["index"]["int"]) for d in mig] == [(0, 0), (1, 0)]
    assert all("pcieBusID" in d["attributes"] and "minor" not in d["attributes"] for d in mig)
    assert sorted(n for n in devs if "-mig-" in n) == ["gpu-0-mig-9-4-4", "gpu-1-mig-9-4-4"]


@pytest.mark.parametrize("tag", ["v25.3.2", "v25.8.1"])
def test_a_class_on_an_attribute_the_release_lacks_matches_no_gpu(tag: str) -> None:
    # A DeviceClass serving nvidia.com/gpu on resource.kubernetes.io/pciBusID: v0.4.1 and v25.12 publish it, the
    # release installed does not. Before, the prediction said it matched, and the pods stayed Pending after the switch.
    sel = "device.driver == 'gpu.nvidia.com' && device.attributes['resource.kubernetes.io'].pciBusID != ''"
    dc = obj(
        "resource.k8s.io/v1",
        "DeviceClass",
        "gpus-by-bus",
        {"selectors": [{"cel": {"expression": sel}}], "extendedResourceName": "nvidia.com/gpu"},
        None,
    )
    st = make(gpu_node(), nvidia_chart_plugin(tag), dc)
    assert findings(st, "existing-class-matches-no-gpu")
    ok = make(gpu_node(), nvidia_chart_plugin("v25.12.0"), dc)
    assert not findings(ok, "existing-class-matches-no-gpu")


def test_v25_3_applies_sharing_configs_without_a_gate() -> None:
    # NVIDIA/k8s-dra-driver-gpu v25.3.2 has no pkg/featuregates: a GpuConfig's TimeSlicing/MPS sharing is applied as
    # it is (api/nvidia.com/resource/v1beta1 sharing.go, cmd/gpu-kubelet-plugin/sharing.go); telling the operator to
    # set MPSSupport=true on it sends them to a flag that release has not got. v25.8.1 gates both, off by default.
    from tests.unit.test_sharing_to_dra import _pool, _shared

    st = _pool("mps", True)
    old = make(*(o for _, o in st.all_objects()), nvidia_chart_plugin("v25.3.2"))
    (f,) = _shared(old)
    assert "not set on DaemonSet" not in f.remediation and "v25.3.2 applies it without a feature gate" in f.remediation
    gated = make(*(o for _, o in st.all_objects()), nvidia_chart_plugin("v25.8.1"))
    (g,) = _shared(gated)
    assert (
        "MPSSupport=true, off by default in v25.8.1 and not set on DaemonSet(s) nvidia-dra-driver-gpu" in g.remediation
    )
    on = make(
        *(o for _, o in st.all_objects()),
        nvidia_chart_plugin("v25.8.1", {"name": "FEATURE_GATES", "value": "MPSSupport=true,"}),
    )
    assert "MPSSupport=true, set on the kubelet plugin" in _shared(on)[0].remediation


def _template(expr: str, match: str | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {
        "requests": [
            {
                "name": "g",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": expr}}]},
            }
        ]
    }
    if match:
        devices["constraints"] = [{"matchAttribute": match}]
    return obj("resource.k8s.io/v1", "ResourceClaimTemplate", "first-gpu", {"spec": {"devices": devices}})


@pytest.mark.parametrize(
    ("tag", "expr", "match", "flagged"),
    [
        # NVIDIA's demos select `index` (v25.3.x publishes it); v25.8.1 dropped it: the claim matches nothing.
        ("v25.8.1", "device.attributes['gpu.nvidia.com'].index == 0", None, "index"),
        ("v25.3.2", "device.attributes['gpu.nvidia.com'].index == 0", None, None),
        ("v25.12.0", "device.attributes['gpu.nvidia.com']['minor'] == 0", None, "minor"),
        ("v25.8.1", "true", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pciBusID"),
        ("v25.12.0", "device.attributes['gpu.nvidia.com'].pcieBusID != ''", None, "pcieBusID"),
        ("v25.12.0", "device.attributes['resource.kubernetes.io'].pciBusID != ''", None, None),
        ("v25.8.1", "device.attributes['gpu.nvidia.com'].productName == 'x'", "resource.kubernetes.io/pcieRoot", None),
    ],
)
def test_a_selector_on_an_attribute_the_release_does_not_publish_is_named(
    tag: str, expr: str, match: str | None, flagged: str | None
) -> None:
    st = make(gpu_node(), nvidia_chart_plugin(tag), _template(expr, match))
    got = findings(st, "dra-driver-release-attribute")
    if flagged is None:
        assert not got, got
        return
    (f,) = got
    assert f"attribute {flagged}," in f.message and tag in f.message, f.message
    assert [str(o) for o in f.objects] == ["ResourceClaimTemplate ml/first-gpu"]
