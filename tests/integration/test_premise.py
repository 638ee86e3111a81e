"""The premise of the whole migration, proven on the real kube-scheduler (v1.37.2).

Once a DeviceClass carries `extendedResourceName: nvidia.com/gpu`, unchanged `nvidia.com/gpu` requests
are served from DRA devices on nodes whose device plugin is gone, while nodes that still advertise
the resource keep serving it through the device plugin (KEP-5004, kubernetes/enhancements
keps/sig-scheduling/5004-dra-extended-resource; the per-node rule is `filterExtendedResources` in
kubernetes pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go).

The tests run in file order: (a) needs no DeviceClass mapping nvidia.com/gpu; the rest create one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import wait_for
from nodes import TwinNodes, on_kwok

from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
POOL = f"premise-{RUN}"
DP_NODE = f"{POOL}-dp"  # keeps its device plugin throughout
DRA_NODE = f"{POOL}-dra"  # switched to the DRA driver
CLASS = f"gpu-extended-{RUN}"
GPU = "nvidia.com/gpu"
POOL_LABEL = "cloud.google.com/gke-nodepool"


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet, kube: Kube) -> Iterator[TwinNodes]:
    specs = [GpuNodeSpec.small(DP_NODE, gpus=4, pool=POOL), GpuNodeSpec.small(DRA_NODE, gpus=4, pool=POOL)]
    with on_kwok(kwok, specs) as f:
        wait_for("nodes schedulable", lambda: all(_schedulable(kube, n) for n in f.node_names), timeout=30)
        yield f


def _schedulable(kube: Kube, name: str) -> bool:
    node = kube.get(path_of("v1", "nodes", name))
    allocatable = int(node["status"].get("allocatable", {}).get(GPU, "0"))
    return allocatable > 0 and not node["spec"].get("taints")


def gpu_pod(name: str, node: str, count: int, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "cuda", "image": "registry.k8s.io/pause:3.10"}
    if count:
        container["resources"] = {"limits": {GPU: str(count)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        # Node affinity through the scheduler, never nodeName: the scheduler must make the decision.
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node, POOL_LABEL: POOL},
            "containers": [container],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


def create_pod(kube: Kube, ns: str, pod: dict[str, Any]) -> None:
    kube.create(path_of("v1", "pods", namespace=ns), pod)


def pod(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return kube.get(path_of("v1", "pods", name, ns))


def scheduled(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    p = pod(kube, ns, name)
    return p if p["spec"].get("nodeName") else None


def unschedulable_reason(kube: Kube, ns: str, name: str) -> str | None:
    for cond in pod(kube, ns, name).get("status", {}).get("conditions", []):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message", cond.get("reason", "")))
    return None


def classes_mapping_gpu(kube: Kube) -> list[str]:
    items, _ = kube.list_all("/apis/resource.k8s.io/v1/deviceclasses")
    return [c["metadata"]["name"] for c in items if c["spec"].get("extendedResourceName") == GPU]


def test_a_without_a_device_class_gpu_pods_use_the_device_plugin(fleet: TwinNodes, kube: Kube, namespace: str) -> None:
    assert classes_mapping_gpu(kube) == [], "another test left a DeviceClass mapping nvidia.com/gpu"
    create_pod(kube, namespace, gpu_pod("dp", DP_NODE, 1))
    p = wait_for("pod scheduled", lambda: scheduled(kube, namespace, "dp"), timeout=30)
    assert p["spec"]["nodeName"] == DP_NODE
    assert p.get("status", {}).get("extendedResourceClaimStatus") is None


@pytest.fixture(scope="module")
def dra_node(fleet: TwinNodes, kube: Kube) -> Iterator[str]:
    """The DRA node switched over, and a DeviceClass mapping nvidia.com/gpu to full GPUs."""
    kube.create(
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && "
                            "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                        }
                    }
                ],
                "extendedResourceName": GPU,
            },
        },
    )
    fleet.set_device_plugin(DRA_NODE, enabled=False)
    fleet.set_dra_plugin(DRA_NODE, enabled=True)

    def switched() -> bool:
        node = kube.get(path_of("v1", "nodes", DRA_NODE))
        slices, _ = kube.list_all(
            "/apis/resource.k8s.io/v1/resourceslices", [("fieldSelector", f"spec.nodeName={DRA_NODE}")]
        )
        devices = sum(len(s["spec"].get("devices", [])) for s in slices)
        return node["status"]["allocatable"].get(GPU) == "0" and devices == 4

    wait_for("node switched to DRA", switched, timeout=30)
    yield DRA_NODE
    kube.delete(f"/apis/resource.k8s.io/v1/deviceclasses/{CLASS}")


def test_b_gpu_requests_on_a_dra_node_get_a_scheduler_made_claim(kube: Kube, dra_node: str, namespace: str) -> None:
    create_pod(kube, namespace, gpu_pod("dra", dra_node, 2))
    p = wait_for("pod scheduled", lambda: scheduled(kube, namespace, "dra"), timeout=30)
    assert p["spec"]["nodeName"] == dra_node
    status = wait_for(
        "extendedResourceClaimStatus", lambda: pod(kube, namespace, "dra")["status"].get("extendedResourceClaimStatus")
    )
    assert status["requestMappings"] == [
        {"containerName": "cuda", "resourceName": GPU, "requestName": status["requestMappings"][0]["requestName"]}
    ]
    claim = kube.get(path_of("resource.k8s.io/v1", "resourceclaims", status["resourceClaimName"], namespace))
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2
    assert {r["driver"] for r in results} == {"gpu.nvidia.com"}
    assert {r["pool"] for r in results} == {dra_node}
    assert len({r["device"] for r in results}) == 2
    assert all(r["device"].startswith("gpu-") for r in results)


def claim(name: str, selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {"deviceClassName": CLASS, "selectors": [{"cel": {"expression": selector}}]},
                    }
                ]
            }
        },
    }


def claim_pod(name: str, claim_name: str) -> dict[str, Any]:
    p = gpu_pod(name, DRA_NODE, 0, resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}])
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return p


def test_c_claim_selectors_decide_allocation(kube: Kube, dra_node: str, namespace: str) -> None:
    claims = path_of("resource.k8s.io/v1", "resourceclaims", namespace=namespace)
    # The simulated H100s carry memory 81559Mi, as GFD's nvidia.com/gpu.memory says.
    kube.create(claims, claim("fits", "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) > 0"))
    kube.create(claims, claim("never", "device.capacity['gpu.nvidia.com'].memory == quantity('64Gi')"))
    create_pod(kube, namespace, claim_pod("fits", "fits"))
    create_pod(kube, namespace, claim_pod("never", "never"))

    wait_for("matching claim allocated", lambda: scheduled(kube, namespace, "fits"), timeout=30)
    allocated = kube.get(f"{claims}/fits")["status"]["allocation"]["devices"]["results"]
    assert [r["pool"] for r in allocated] == [dra_node]

    reason = wait_for(
        "pod with unmatched claim reported unschedulable", lambda: unschedulable_reason(kube, namespace, "never")
    )
    assert "cannot allocate all claims" in reason or "resourceclaim" in reason.lower(), reason
    assert pod(kube, namespace, "never")["spec"].get("nodeName") is None
    assert not kube.get(f"{claims}/never").get("status", {}).get("allocation")


def test_d_device_plugin_node_keeps_serving_with_the_class_present(kube: Kube, dra_node: str, namespace: str) -> None:
    assert CLASS in classes_mapping_gpu(kube)
    create_pod(kube, namespace, gpu_pod("dp-still", DP_NODE, 1))
    p = wait_for("pod scheduled", lambda: scheduled(kube, namespace, "dp-still"), timeout=30)
    assert p["spec"]["nodeName"] == DP_NODE
    # Served by the device plugin: the scheduler made no claim for it.
    assert p.get("status", {}).get("extendedResourceClaimStatus") is None
    items, _ = kube.list_all(path_of("resource.k8s.io/v1", "resourceclaims", namespace=namespace))
    assert not any(c["metadata"]["name"].startswith("dp-still-") for c in items)
