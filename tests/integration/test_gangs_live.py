"""Gangs on the real kube-scheduler v1.37.2 with `GenericWorkload` on (README "Gangs").

A PodGroup with `schedulingPolicy.gang.minCount` N makes the scheduler's gang plugin hold its pods at Permit
until N of them can be placed (k8s.io/kubernetes@v1.37.2 pkg/scheduler/framework/plugins/gangscheduling):
on capacity for half the gang, none is bound; once there is room for all, all are. The same holds on
migrated nodes, where the pods' unchanged `nvidia.com/gpu` requests are served through DRA (KEP-5004).

The gate and the API version are off by default in 1.37, so this module starts its own control plane with
`--feature-gates=GenericWorkload=true` and `--runtime-config=scheduling.k8s.io/v1beta1=true`.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import controlplane
import pytest
from conftest import TEST_LEASE_S, wait_for
from nodes import TwinNodes, on_kwok

from dra_migrate.sim.kube import Kube, new_api_client, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
GPU = "nvidia.com/gpu"
POOL_LABEL = "cloud.google.com/gke-nodepool"
SCHED = "scheduling.k8s.io/v1beta1"


@pytest.fixture(scope="module")
def gang_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    env = {
        "DRA_MIGRATE_FEATURE_GATES": "GenericWorkload=true",
        "DRA_MIGRATE_RUNTIME_CONFIG": f"{SCHED}=true",
    }
    cp = controlplane.start(tmp_path_factory.mktemp("k8s-gangs"), env=env)
    yield cp
    controlplane.stop(cp)


@pytest.fixture(scope="module")
def gkube(gang_plane: controlplane.ControlPlane) -> Iterator[Kube]:
    api = new_api_client(gang_plane.kubeconfig, "dra-migrate-tests")
    yield Kube(api)
    api.close()


@pytest.fixture
def ns(gkube: Kube) -> Iterator[str]:
    name = f"g-{uuid.uuid4().hex[:8]}"
    gkube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    wait_for("default service account", lambda: gkube.get_or_none(path_of("v1", "serviceaccounts", "default", name)))
    yield name
    gkube.delete(path_of("v1", "namespaces", name))


@pytest.fixture(scope="module")
def gang_kwok(gang_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KwokFleet]:
    """KWOK on this module's own control plane; each test adds its nodes (`_fleet`)."""
    work = tmp_path_factory.mktemp("kwok-gangs")
    with KwokFleet(gang_plane.kubeconfig, [], workdir=work, lease_s=TEST_LEASE_S, fleet=f"gangs-{RUN}") as f:
        yield f


def _fleet(kwok: KwokFleet, pool: str, names: list[str]) -> contextlib.AbstractContextManager[TwinNodes]:
    return on_kwok(kwok, [GpuNodeSpec.small(n, gpus=1, pool=pool) for n in names])


def _ready(kube: Kube, names: list[str]) -> bool:
    for n in names:
        node = kube.get(path_of("v1", "nodes", n))
        if int(node["status"].get("allocatable", {}).get(GPU, "0")) < 1 or node["spec"].get("taints"):
            return False
    return True


def _podgroup(kube: Kube, ns: str, name: str, min_count: int) -> None:
    kube.create(
        path_of(SCHED, "podgroups", namespace=ns),
        {
            "apiVersion": SCHED,
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        },
    )


def _member(name: str, group: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulingGroup": {"podGroupName": group},
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [{"name": "w", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {GPU: "1"}}}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def _pods(kube: Kube, ns: str) -> list[dict[str, Any]]:
    items, _ = kube.list_all(path_of("v1", "pods", namespace=ns))
    return items


def _bound(kube: Kube, ns: str) -> int:
    return sum(1 for p in _pods(kube, ns) if p["spec"].get("nodeName"))


def _unschedulable(kube: Kube, ns: str) -> int:
    return sum(
        1
        for p in _pods(kube, ns)
        if any(
            c.get("type") == "PodScheduled" and c.get("status") == "False"
            for c in p.get("status", {}).get("conditions", [])
        )
    )


def test_a_gang_on_half_the_capacity_places_none_then_all_when_room_appears(
    gang_kwok: KwokFleet, gkube: Kube, ns: str
) -> None:
    pool = f"gang-{RUN}"
    first = [f"{pool}-{i}" for i in range(4)]
    more = [f"{pool}-{i}" for i in range(4, 8)]
    with _fleet(gang_kwok, pool, first):
        wait_for("first four nodes schedulable", lambda: _ready(gkube, first), timeout=30)
        _podgroup(gkube, ns, "train", 8)
        for i in range(8):
            gkube.create(path_of("v1", "pods", namespace=ns), _member(f"w-{i}", "train", pool))
        # The four that find no GPU are reported unschedulable; the four that do wait at Permit, unbound.
        wait_for("half the gang found unschedulable", lambda: _unschedulable(gkube, ns) >= 4, timeout=60)
        time.sleep(3)  # room for a (wrong) partial bind to show
        assert _bound(gkube, ns) == 0, "a gang with room for half of it must place none"
        with _fleet(gang_kwok, pool, more):
            wait_for("all eight placed once there is room", lambda: _bound(gkube, ns) == 8, timeout=90)
            nodes = {p["spec"]["nodeName"] for p in _pods(gkube, ns)}
            assert nodes == set(first + more)  # one GPU each: every node holds one worker
        for p in _pods(gkube, ns):
            gkube.delete(path_of("v1", "pods", p["metadata"]["name"], ns))


def test_b_the_gang_is_placed_through_dra_backed_extended_resources_on_migrated_nodes(
    gang_kwok: KwokFleet, gkube: Kube, ns: str
) -> None:
    pool = f"gang-dra-{RUN}"
    names = [f"{pool}-{i}" for i in range(4)]
    klass = f"gpu-{RUN}"
    gkube.create(
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": klass},
            "spec": {
                "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
                "extendedResourceName": GPU,
            },
        },
    )
    try:
        with _fleet(gang_kwok, pool, names) as fleet:
            wait_for("nodes schedulable", lambda: _ready(gkube, names), timeout=30)
            for n in names:
                fleet.set_device_plugin(n, enabled=False)
                fleet.set_dra_plugin(n, enabled=True)

            def migrated() -> bool:
                slices, _ = gkube.list_all("/apis/resource.k8s.io/v1/resourceslices")
                on = {s["spec"].get("nodeName") for s in slices if s["spec"].get("devices")}
                return all(
                    gkube.get(path_of("v1", "nodes", n))["status"]["allocatable"].get(GPU) == "0" and n in on
                    for n in names
                )

            wait_for("nodes migrated to DRA", migrated, timeout=60)
            _podgroup(gkube, ns, "train", 4)
            for i in range(4):
                gkube.create(path_of("v1", "pods", namespace=ns), _member(f"w-{i}", "train", pool))
            wait_for("the whole gang placed", lambda: _bound(gkube, ns) == 4, timeout=90)
            statuses = [
                wait_for(
                    "extendedResourceClaimStatus",
                    lambda name=p["metadata"]["name"]: gkube.get(path_of("v1", "pods", name, ns))["status"].get(
                        "extendedResourceClaimStatus"
                    ),
                )
                for p in _pods(gkube, ns)
            ]
            assert len(statuses) == 4 and all(s["resourceClaimName"] for s in statuses)
            for p in _pods(gkube, ns):
                gkube.delete(path_of("v1", "pods", p["metadata"]["name"], ns))
    finally:
        gkube.delete(f"/apis/resource.k8s.io/v1/deviceclasses/{klass}")


JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: %s}
spec:
  completionMode: Indexed
  parallelism: %d
  completions: %d
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      nodeSelector: {cloud.google.com/gke-nodepool: %s}
      containers:
      - name: w
        image: registry.k8s.io/pause:3.10
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def _apply_converted(kube: Kube, ns: str, text: str) -> None:
    from ruamel.yaml import YAML

    from dra_migrate.cluster.kinds import KINDS_BY_KEY, kind_key
    from dra_migrate.cluster.templates import TemplateTable
    from dra_migrate.convert.files import convert_text
    from dra_migrate.convert.rewrite import ConvertOptions

    out, result = convert_text(text, "job.yaml", TemplateTable.builtin(), ConvertOptions(gang=True))
    assert result.problems == []
    plurals = {"PodGroup": "podgroups", "ResourceClaimTemplate": "resourceclaimtemplates"}
    for doc in YAML(typ="safe").load_all(out):
        kind = KINDS_BY_KEY.get(kind_key(doc["apiVersion"], doc["kind"]))
        plural = kind.plural if kind else plurals[doc["kind"]]
        kube.create(path_of(doc["apiVersion"], plural, namespace=ns), doc)


def test_c_convert_gang_output_gang_schedules(gang_kwok: KwokFleet, gkube: Kube, ns: str) -> None:
    pool = f"gang-conv-{RUN}"
    names = [f"{pool}-{i}" for i in range(4)]
    gkube.create(
        "/apis/resource.k8s.io/v1/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
        },
    )
    try:
        with _fleet(gang_kwok, pool, names) as fleet:
            wait_for("nodes schedulable", lambda: _ready(gkube, names), timeout=30)
            for n in names:
                fleet.set_device_plugin(n, enabled=False)
                fleet.set_dra_plugin(n, enabled=True)
            wait_for(
                "slices published",
                lambda: (
                    len(
                        {
                            s["spec"].get("nodeName")
                            for s in gkube.list_all("/apis/resource.k8s.io/v1/resourceslices")[0]
                        }
                        & set(names)
                    )
                    == 4
                ),
                timeout=60,
            )
            # Five workers on four devices: the gang waits whole, nothing is bound.
            _apply_converted(gkube, ns, JOB % ("too-big", 5, 5, pool))
            wait_for("five pods created", lambda: len(_pods(gkube, ns)) == 5, timeout=30)
            wait_for("one found unschedulable", lambda: _unschedulable(gkube, ns) >= 1, timeout=60)
            time.sleep(3)
            assert _bound(gkube, ns) == 0
            pods = _pods(gkube, ns)
            assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {"too-big-gang"}
            gkube.delete(path_of("batch/v1", "jobs", "too-big", ns), {"propagationPolicy": "Background"})
            wait_for("gang deleted", lambda: not _pods(gkube, ns), timeout=60)
            # Four on four: placed whole, each with a claim from its template.
            _apply_converted(gkube, ns, JOB % ("fits", 4, 4, pool))
            wait_for("the whole gang placed", lambda: _bound(gkube, ns) == 4, timeout=90)
            assert {p["spec"]["nodeName"] for p in _pods(gkube, ns)} == set(names)
            gkube.delete(path_of("batch/v1", "jobs", "fits", ns), {"propagationPolicy": "Background"})
            wait_for("pods gone", lambda: not _pods(gkube, ns), timeout=60)
    finally:
        gkube.delete("/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")
