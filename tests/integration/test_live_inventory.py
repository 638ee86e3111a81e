"""Live inventory on the real control plane: equal to the snapshot's, paginated, read-only.

The demo fixture is recreated live: its GPU nodes by the simulator, its workloads through the API
(controllers make the ReplicaSets and pods, the scheduler places them by their nodeSelectors).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from nodes import on_kwok

from dra_migrate.cluster.kinds import ALL_KINDS
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.inventory.model import build_inventory
from dra_migrate.kube import PAGE_SIZE, USER_AGENT
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.load import load_workloads
from dra_migrate.sim.spec import specs_from_state
from dra_migrate.sim.stack import crd_for, wait_established
from tests.unit.cli import run

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "clusters" / "demo.yaml"


def live_inventory(cp: controlplane.ControlPlane) -> dict[str, Any]:
    r = run("inventory", "--kubeconfig", str(cp.kubeconfig), "-o", "json")
    assert r.code == 0, r.stderr
    return dict(json.loads(r.stdout))


def comparable(inv: dict[str, Any], node_names: set[str]) -> dict[str, Any]:
    """The parts of an inventory that must agree between the snapshot and its live copy.

    Within a pool, which node the scheduler picks for a pod is its own choice: per-node `requested`
    is left out; per-pool `requested` stays. Nodes of other tests' fleets are left out.
    """
    nodes = [{k: v for k, v in n.items() if k != "requested"} for n in inv["nodes"] if n["name"] in node_names]
    pools = [p for p in inv["pools"] if set(p["nodes"]) <= node_names]
    return {
        "consumers": inv["consumers"],
        "nodes": nodes,
        "pools": pools,
        "operator": inv["operator"],
        "dra": inv["dra"],
    }


@pytest.fixture(scope="module")
def demo(kwok: KwokFleet, kube: Kube) -> Iterator[dict[str, Any]]:
    state = load_snapshot(DEMO)
    specs = specs_from_state(state)
    with on_kwok(kwok, specs):
        report = load_workloads(kube.api_client, state)
        assert report.skipped == []
        yield build_inventory(state).to_dict()
        namespaces = {str(o["metadata"]["namespace"]) for _, o in state.all_objects() if o["metadata"].get("namespace")}
        for ns in namespaces:
            kube.delete(path_of("v1", "namespaces", ns))
        for cp in state.of("nvidia.com/ClusterPolicy"):
            kube.delete(f"/apis/nvidia.com/v1/clusterpolicies/{cp['metadata']['name']}")


def test_live_inventory_equals_the_snapshot_inventory(
    control_plane: controlplane.ControlPlane, demo: dict[str, Any]
) -> None:
    names = {n["name"] for n in demo["nodes"]}
    expected = comparable(demo, names)

    def agrees() -> dict[str, Any] | None:
        live = live_inventory(control_plane)
        return live if comparable(live, names) == expected else None

    try:
        live = wait_for("the live inventory to settle on the snapshot's", agrees, timeout=120)
    except AssertionError:
        # Show the difference, not just the time-out.
        assert comparable(live_inventory(control_plane), names) == expected
        raise
    assert live["cluster"]["source"] == "live"
    assert live["cluster"]["kubernetesVersion"] == "v1.37.2"
    assert "resource.k8s.io/v1" in live["cluster"]["servedAPIs"]


def tool_requests(cp: controlplane.ControlPlane) -> list[dict[str, Any]]:
    return controlplane.audit_events(cp, USER_AGENT)


def requests_of_one_inventory(cp: controlplane.ControlPlane) -> list[dict[str, Any]]:
    """The audit events of one `dra-migrate inventory` run (the log lags responses a little)."""
    before = len(tool_requests(cp))
    live_inventory(cp)
    time.sleep(1.0)
    events = tool_requests(cp)[before:]
    wait_for("audit log to settle", lambda: len(tool_requests(cp)) - before == len(events), timeout=5)
    return events


def create_pods(kube: Kube, ns: str, n: int) -> None:
    """n pending pods that no scheduler will touch (an unknown schedulerName): the cheapest real pods."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "schedulerName": "nobody",
            "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }
    path = path_of("v1", "pods", namespace=ns)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda i: kube.create(path, {**body, "metadata": {"name": f"p-{i}"}}), range(n)))


def pods_in_cluster(kube: Kube) -> int:
    items, _ = kube.list_all("/api/v1/pods")
    return len(items)


def test_requests_do_not_grow_with_pods(control_plane: controlplane.ControlPlane, kube: Kube, namespace: str) -> None:
    small = requests_of_one_inventory(control_plane)
    pods_small = pods_in_cluster(kube)
    create_pods(kube, namespace, 2000)
    pods_large = pods_in_cluster(kube)
    assert pods_large >= 2000
    large = requests_of_one_inventory(control_plane)

    # Read-only, and lists only: no per-object GETs, no writes.
    for e in large:
        assert e["verb"] in ("list", "get"), e
        if e["verb"] == "get":
            path = e["requestURI"].split("?")[0]
            assert path in ("/version", "/api", "/apis", "/api/v1/namespaces/kube-system"), e["requestURI"]
    pod_lists = [e for e in large if e.get("objectRef", {}).get("resource") == "pods"]
    assert len(pod_lists) == math.ceil(pods_large / PAGE_SIZE)
    # The only growth is the extra pages of the pod list.
    extra_pages = math.ceil(pods_large / PAGE_SIZE) - math.ceil(max(pods_small, 1) / PAGE_SIZE)
    assert len(large) - len(small) == extra_pages, (len(small), len(large), pods_small, pods_large)


def test_snapshot_of_the_live_cluster_gives_the_same_inventory(
    control_plane: controlplane.ControlPlane, demo: dict[str, Any], tmp_path: Path
) -> None:
    names = {n["name"] for n in demo["nodes"]}
    wait_for("demo settled", lambda: comparable(live_inventory(control_plane), names) == comparable(demo, names), 120)
    snap = tmp_path / "live.jsonl"
    r = run("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "--out", str(snap))
    assert r.code == 0, r.stderr
    assert r.stdout == ""  # data goes to the file; the summary line is a log on stderr
    live = live_inventory(control_plane)
    r = run("inventory", "--snapshot", str(snap), "-o", "json")
    assert r.code == 0, r.stderr
    offline = json.loads(r.stdout)
    assert {k: v for k, v in offline.items() if k != "cluster"} == {k: v for k, v in live.items() if k != "cluster"}
    header = json.loads(snap.read_bytes().split(b"\n", 1)[0])
    assert header["kind"] == "ClusterSnapshot"
    assert header["metadata"]["kubernetesVersion"] == "v1.37.2"
    assert header["metadata"]["server"] == control_plane.server
    # Closed by the line that vouches for it (dra_migrate/cluster/sealed.py): the inventory above was read
    # by the fast reader, and matched the live one.
    lines = snap.read_bytes().splitlines()
    end = json.loads(lines[-1])
    assert header["metadata"]["closedBy"] == end["kind"] == "ClusterSnapshotEnd" and end["objects"] == len(lines) - 2
    text = snap.read_text()
    assert "managedFields" not in text
    assert '"kind":"Secret"' not in text
    # The demo's training jobs set NCCL_DEBUG=WARN: env values are redacted unless --keep-env.
    assert '{"name":"NCCL_DEBUG","value":"<redacted>"}' in text
    assert '"value":"WARN"' not in text
    # Compressed as it is written (fileio.gzip_writer), and read as the file it holds: the same inventory.
    packed = tmp_path / "live.jsonl.gz"
    r = run("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "--out", str(packed))
    assert r.code == 0, r.stderr
    assert packed.read_bytes()[:2] == b"\x1f\x8b" and gzip.decompress(packed.read_bytes()).startswith(b'{"apiVersion"')
    r = run("inventory", "--snapshot", str(packed), "-o", "json")
    assert r.code == 0, r.stderr
    assert {k: v for k, v in json.loads(r.stdout).items() if k != "cluster"} == {
        k: v for k, v in offline.items() if k != "cluster"
    }


def test_live_check_equals_the_snapshot_check(control_plane: controlplane.ControlPlane, demo: dict[str, Any]) -> None:
    names = {n["name"] for n in demo["nodes"]}
    wait_for("demo settled", lambda: comparable(live_inventory(control_plane), names) == comparable(demo, names), 120)
    offline = run("check", "--snapshot", str(DEMO), "-o", "json")
    live = run("check", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
    assert offline.code == live.code == 2  # the demo has blockers (no DRA driver yet, shared A100s)
    off, on = json.loads(offline.stdout), json.loads(live.stdout)
    assert on["findings"] == off["findings"]
    assert [c for c in on["capacity"] if c["pool"] in {p["name"] for p in demo["pools"]}] == off["capacity"]


def test_plan_from_the_live_cluster_and_its_drift(
    control_plane: controlplane.ControlPlane, kube: Kube, demo: dict[str, Any], tmp_path: Path
) -> None:
    names = {n["name"] for n in demo["nodes"]}
    wait_for("demo settled", lambda: comparable(live_inventory(control_plane), names) == comparable(demo, names), 120)
    kc = str(control_plane.kubeconfig)
    plan = tmp_path / "live-plan.yaml"
    r = run("plan", "--kubeconfig", kc, "--out", str(plan))
    assert r.code == 0, r.stderr
    r = run("diff", str(plan), "--kubeconfig", kc)
    assert r.code == 0, r.stdout  # node heartbeats move resourceVersions: not drift
    node = sorted(names)[0]
    kube.merge_patch(path_of("v1", "nodes", node), {"metadata": {"labels": {"team": "moved"}}})
    r = run("diff", str(plan), "--kubeconfig", kc, "-o", "json")
    assert r.code == 2, r.stdout
    assert node in r.stdout


def test_a_dashboard_grafana_loads_is_read_live_and_kept_in_a_snapshot(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str, demo: dict[str, Any], tmp_path: Path
) -> None:
    # The live reader lists ConfigMaps last and keeps those something loads: here the Grafana chart
    # sidecar's default label (cluster/dashboards.py). A look-alike with another label is dropped. The demo's
    # GPU nodes are up (with none, `check` has nothing to migrate and judges nothing).
    panel = {
        "type": "stat",
        "title": "GPUs",
        "targets": [{"expr": 'sum(kube_node_status_allocatable{resource="nvidia_com_gpu"})'}],
    }
    model = json.dumps({"title": "GPU fleet", "panels": [panel]})
    made = []
    for name, labels in (("gpu-fleet", {"grafana_dashboard": "1"}), ("look-alike", {"team": "ml"})):
        body = {"metadata": {"name": name, "labels": labels}, "data": {"gpu.json": model}}
        kube.create(path_of("v1", "configmaps", namespace=namespace), body)
        made.append(path_of("v1", "configmaps", name, namespace))
    try:
        r = run("check", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
        assert r.code in (0, 2), r.stderr
        found = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "grafana-dashboard-gpu"]
        assert [o["name"] for f in found for o in f["objects"]] == ["gpu-fleet"]
        snap = tmp_path / "live.jsonl"
        r = run("snapshot", "--kubeconfig", str(control_plane.kubeconfig), "--out", str(snap))
        assert r.code == 0, r.stderr
        kept = {
            json.loads(line)["metadata"]["name"]
            for line in snap.read_text().splitlines()
            if '"kind":"ConfigMap"' in line
        }
        assert "gpu-fleet" in kept and "look-alike" not in kept
    finally:  # other tests compare this cluster's live findings with a snapshot's: leave nothing behind
        for path in made:
            kube.delete(path)


def test_an_admission_policy_that_selects_gpu_pods_is_read_live(
    control_plane: controlplane.ControlPlane, kube: Kube, demo: dict[str, Any]
) -> None:
    # A ValidatingAdmissionPolicy the real API server accepts (its CEL compiled), listed by `check` with the rest
    # (inventory/policies.py): a claim steps around its GPU allow-list.
    name = f"gpu-namespaces-{uuid.uuid4().hex[:6]}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "validations": [
                {
                    "expression": "!object.spec.containers.exists(c, has(c.resources.limits) && "
                    "'nvidia.com/gpu' in c.resources.limits) || namespaceObject.metadata.name == 'ml'"
                }
            ],
        },
    }
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    kube.create(path, policy)
    try:
        r = run("check", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
        assert r.code in (0, 2), r.stderr
        found = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "admission-policy-gpu"]
        assert [o["name"] for f in found for o in f["objects"]] == [name]
        assert "spec.validations[0].expression" in found[0]["message"]
    finally:  # other tests compare this cluster's live findings with a snapshot's: leave nothing behind
        kube.delete(f"{path}/{name}")


def test_a_kind_the_cluster_serves_only_at_another_version_is_read_there(
    control_plane: controlplane.ControlPlane,
    kube: Kube,
    namespace: str,
    demo: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The tool lists VMRules at operator.victoriametrics.com/v1beta1. A cluster whose CRD serves them at v1 alone
    # (as Kueue's queues will be at v1beta2 alone once v1beta1 goes) had none of them read, and no finding said
    # so. A real API server serves this CRD; `check` reads the rule at v1, judges it, and says at what version.
    kind = next(k for k in ALL_KINDS if k.key == "operator.victoriametrics.com/VMRule")
    crd = crd_for(dataclasses.replace(kind, version="v1"))
    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    kube.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    try:
        wait_established(kube, crd["metadata"]["name"], 30)
        rule = {
            "apiVersion": "operator.victoriametrics.com/v1",
            "kind": "VMRule",
            "metadata": {"name": "gpu-alerts"},
            "spec": {"groups": [{"name": "gpu", "rules": [
                {"alert": "GpuIdle", "expr": 'sum(kube_pod_container_resource_requests{resource="nvidia_com_gpu"}) > 0'}
            ]}]},
        }  # fmt: skip
        kube.create(f"/apis/operator.victoriametrics.com/v1/namespaces/{namespace}/vmrules", rule)
        r = run("check", "--kubeconfig", str(control_plane.kubeconfig), "-o", "json")
        assert r.code in (0, 2), r.stderr
        found = [f for f in json.loads(r.stdout)["findings"] if f["id"] == "prometheus-rule-gpu"]
        assert [o["name"] for f in found for o in f["objects"]] == ["gpu-alerts"], found
        said = caplog.text  # the CLI's warning on stderr (the in-process run's log records)
        assert "VMRule is not served at v1beta1" in said and "read at v1 " in said, said
    finally:  # other tests compare this cluster's live findings with a snapshot's: leave nothing behind
        kube.delete(crd_path)
