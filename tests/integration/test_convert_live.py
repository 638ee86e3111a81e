"""Converted manifests on the real control plane: every object passes server-side dry-run, and a converted
Deployment's pod gets its devices from the real kube-scheduler through the NVIDIA chart's gpu.nvidia.com class."""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from nodes import on_kwok
from ruamel.yaml import YAML

from dra_migrate.cluster.kinds import KINDS_BY_KEY, WORKLOAD_CRD_KINDS, kind_key
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.sim.kube import Kube, new_api_client, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.stack import CRDS, install_crds, wait_established

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted(p for p in (ROOT / "fixtures" / "manifests").glob("*.yaml") if p.stem != "argo-workflow")
RUN = uuid.uuid4().hex[:6]
POOL = f"convert-{RUN}"
NODE = f"{POOL}-dra"
POOL_LABEL = "cloud.google.com/gke-nodepool"
# The NVIDIA chart's class (dra-driver-nvidia-gpu templates/deviceclass-gpu.yaml), without
# extendedResourceName so no other test's nvidia.com/gpu pods are served by DRA because of us.
_GPU_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": _GPU_SELECTOR}}]},
}


def converted(text: str, **opts: Any) -> list[dict[str, Any]]:
    out, result = convert_text(text, "t.yaml", TemplateTable.builtin(), ConvertOptions(**opts))
    assert not result.problems
    return [d for d in YAML(typ="safe").load_all(out) if d]


def _plural(obj: dict[str, Any]) -> str:
    return KINDS_BY_KEY[kind_key(obj["apiVersion"], obj["kind"])].plural


# Argo Rollouts' own CRD, as released (its schema holds the full PodTemplateSpec): with fieldValidation=Strict a
# converted Rollout whose `resourceClaims` or `claims` the schema did not know would be refused, not pruned. It
# was: v1.8.3's schema (k8s.io/api v0.29) has only the alpha `source.resourceClaimTemplateName`, which this test
# caught; from v1.9.0 (k8s.io/api v0.34) it is the field convert writes, and convert warns about older ones.
ROLLOUTS = ("github.com/argoproj/argo-rollouts@v1.9.0", "manifests/crds/rollout-crd.yaml")
# KEDA's ScaledJob CRD as released: its jobTargetRef schema is k8s.io/api v0.33.5's JobSpec, which has resourceClaims.
KEDA_SCALEDJOB = ("github.com/kedacore/keda/v2@v2.18.0", "config/crd/bases/keda.sh_scaledjobs.yaml")


def _released_crd(module: str, path: str) -> dict[str, Any]:
    got = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, check=False)
    assert got.returncode == 0, f"go mod download {module}: {got.stdout}{got.stderr}"
    return dict(YAML(typ="safe").load((Path(json.loads(got.stdout)["Dir"]) / path).read_text()))


@pytest.fixture(scope="module")
def crds(control_plane: controlplane.ControlPlane) -> None:
    wanted = {"PyTorchJob", "JobSet", "LeaderWorkerSet", "RayCluster"}  # permissive: their schemas are not at hand
    api = new_api_client(control_plane.kubeconfig, "dra-migrate-tests")
    try:
        install_crds(api, [k for k in WORKLOAD_CRD_KINDS if k.kind in wanted])
        kube = Kube(api)
        for crd in (_released_crd(*ROLLOUTS), _released_crd(*KEDA_SCALEDJOB)):
            kube.create_or_exists(CRDS, crd)
            wait_established(kube, crd["metadata"]["name"], 30)
    finally:
        api.close()


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[p.stem for p in MANIFESTS])
def test_every_converted_object_passes_server_side_dry_run(
    manifest: Path, crds: None, kube: Kube, namespace: str
) -> None:
    objs = converted(manifest.read_text())
    assert any(o["kind"] == "ResourceClaimTemplate" for o in objs)
    for obj in objs:
        obj = copy.deepcopy(obj)
        obj["metadata"]["namespace"] = namespace
        path = path_of(obj["apiVersion"], _plural(obj), namespace=namespace)
        # Strict: a field the schema does not know is refused, never silently dropped (a claim lost on the way).
        kube.create(path, obj, query=[("dryRun", "All"), ("fieldValidation", "Strict")])  # ApiError: server's reason


@contextmanager
def _dra_node(kwok: KwokFleet, kube: Kube, name: str, pool: str) -> Iterator[str]:
    """A KWOK node of two GPUs served by the DRA driver (its slices published), the device plugin off."""
    with on_kwok(kwok, [GpuNodeSpec.small(name, gpus=2, pool=pool)]) as fleet:
        fleet.set_device_plugin(name, enabled=False)
        fleet.set_dra_plugin(name, enabled=True)

        def ready() -> bool:
            node = kube.get(path_of("v1", "nodes", name))
            slices, _ = kube.list_all(
                "/apis/resource.k8s.io/v1/resourceslices", [("fieldSelector", f"spec.nodeName={name}")]
            )
            return not node["spec"].get("taints") and sum(len(s["spec"].get("devices", [])) for s in slices) == 2

        wait_for("DRA node ready", ready, timeout=30)
        yield name


@pytest.fixture(scope="module")
def dra_node(kwok: KwokFleet, kube: Kube) -> Iterator[str]:
    created_class = kube.create_or_exists("/apis/resource.k8s.io/v1/deviceclasses", GPU_CLASS) is not None
    with _dra_node(kwok, kube, NODE, POOL) as name:
        yield name
    if created_class:
        kube.delete("/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")


DEPLOYMENT = f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: converted   # a comment the conversion keeps
spec:
  replicas: 1
  selector:
    matchLabels: {{app: converted}}
  template:
    metadata:
      labels: {{app: converted}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: cuda
        image: registry.k8s.io/pause:3.10
        resources:
          limits:
            nvidia.com/gpu: 2
      nodeSelector:
        {POOL_LABEL}: {POOL}
"""


def test_a_converted_deployment_gets_its_devices_from_the_scheduler(dra_node: str, kube: Kube, namespace: str) -> None:
    for obj in converted(DEPLOYMENT):
        kube.create(path_of(obj["apiVersion"], _plural(obj), namespace=namespace), obj)

    def scheduled_pod() -> dict[str, Any] | None:
        pods, _ = kube.list_all(path_of("v1", "pods", namespace=namespace), [("labelSelector", "app=converted")])
        return next(
            (p for p in pods if p["spec"].get("nodeName") and p.get("status", {}).get("resourceClaimStatuses")), None
        )

    pod = wait_for("converted pod scheduled", scheduled_pod, timeout=40)
    assert pod["spec"]["nodeName"] == dra_node
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "converted-gpu"}]
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = kube.get(path_of("resource.k8s.io/v1", "resourceclaims", status["resourceClaimName"], namespace))
    results = claim["status"]["allocation"]["devices"]["results"]
    assert len(results) == 2
    assert {r["pool"] for r in results} == {dra_node}
    assert {r["driver"] for r in results} == {"gpu.nvidia.com"}
    assert len({r["device"] for r in results}) == 2
    assert pod["status"].get("extendedResourceClaimStatus") is None  # a claim of its own, not the scheduler's


def test_a_converted_pod_tolerates_the_taint_its_gpu_nodes_carry(
    dra_node: str, kwok: KwokFleet, kube: Kube, namespace: str
) -> None:
    # GKE taints GPU nodes nvidia.com/gpu:NoSchedule, and its API server's ExtendedResourceToleration plugin
    # adds the toleration to pods that request nvidia.com/gpu. A converted pod requests none: convert writes the
    # toleration (convert/tolerations.py). The real scheduler places the converted pod on such a node, and
    # leaves the same pod without it Pending for the taint: the toleration is what carries it.
    pool = f"{POOL}-tainted"
    text = DEPLOYMENT.replace(POOL, pool)
    with _dra_node(kwok, kube, f"{pool}-dra", pool) as node:
        kube.merge_patch(
            path_of("v1", "nodes", node),
            {"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}},
        )
        objs = converted(text)
        workload = objs[-1]
        assert workload["spec"]["template"]["spec"]["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        bare = copy.deepcopy(workload)
        bare["metadata"]["name"] = "untolerated"
        bare["spec"]["selector"]["matchLabels"] = bare["spec"]["template"]["metadata"]["labels"] = {"app": "bare"}
        del bare["spec"]["template"]["spec"]["tolerations"]
        for obj in [*objs, bare]:
            kube.create(path_of(obj["apiVersion"], _plural(obj), namespace=namespace), obj)

        def pod_of(app: str) -> dict[str, Any] | None:
            pods, _ = kube.list_all(path_of("v1", "pods", namespace=namespace), [("labelSelector", f"app={app}")])
            return pods[0] if pods else None

        def placed() -> dict[str, Any] | None:
            pod = pod_of("converted")
            return pod if pod and pod["spec"].get("nodeName") else None

        def refused_for_the_taint() -> bool:
            pod = pod_of("bare")
            conditions = (pod or {}).get("status", {}).get("conditions") or []
            return any(c["type"] == "PodScheduled" and "untolerated taint" in c.get("message", "") for c in conditions)

        assert wait_for("converted pod scheduled on the tainted node", placed, timeout=40)["spec"]["nodeName"] == node
        wait_for("the pod without the toleration refused for the taint", refused_for_the_taint, timeout=40)
        assert not (pod_of("bare") or {}).get("spec", {}).get("nodeName")


INIT_LARGER = """apiVersion: batch/v1
kind: Job
metadata: {name: warm-then-serve}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - {name: warm, image: "registry.k8s.io/pause:3.10", resources: {limits: {nvidia.com/gpu: 8}}}
      containers:
      - {name: main, image: "registry.k8s.io/pause:3.10", resources: {limits: {nvidia.com/gpu: "2000m"}}}
      - {name: cpu-only, image: "registry.k8s.io/pause:3.10", resources: {limits: {nvidia.com/gpu: 0}}}
"""


def test_an_app_container_of_its_own_request_and_a_zero_count_pass_server_side_dry_run(
    kube: Kube, namespace: str
) -> None:
    """The split claim of an app container beside a larger init container (requests `main` and `init`, the app
    container naming its request), a count written `"2000m"`, and a zero count left in place: all as the API
    server validates them, strictly."""
    objs = converted(INIT_LARGER)
    requests = objs[0]["spec"]["spec"]["devices"]["requests"]
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [("main", 2), ("init", 6)]
    for obj in objs:
        obj["metadata"]["namespace"] = namespace
        path = path_of(obj["apiVersion"], _plural(obj), namespace=namespace)
        kube.create(path, obj, query=[("dryRun", "All"), ("fieldValidation", "Strict")])
