"""The cluster fixtures (fixtures/clusters/*.yaml) and a tiny bench snapshot load and hang together.

Other tests and the demo trust these files, so a broken reference (an owner uid that matches nothing, a pod on
a node that is not there, a claim allocating a device no slice publishes) should fail here, by name, rather
than as a confusing count somewhere downstream.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.kinds import kind_key
from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.state import ClusterState

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "clusters"
FIXTURE_FILES = sorted(FIXTURES.glob("*.yaml"))
CLUSTER_SCOPED = {"Node", "resource.k8s.io/DeviceClass", "resource.k8s.io/ResourceSlice", "nvidia.com/ClusterPolicy"}

Obj = dict[str, Any]


def _index(state: ClusterState) -> dict[tuple[str, str, str], Obj]:
    """(kind, namespace, name) -> object, for every object of the state."""
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for _, o in state.all_objects()}


def integrity_problems(state: ClusterState) -> list[str]:
    """Everything that would make the snapshot impossible on a real API server, as readable lines."""
    problems: list[str] = []
    objs = [o for _, o in state.all_objects()]
    uids = Counter(o["metadata"].get("uid") for o in objs)
    problems += [f"uid {u} used {n} times" for u, n in uids.items() if n > 1 or not u]
    by_name = _index(state)
    nodes = {o["metadata"]["name"] for o in state.of("Node")}
    for key, o in state.all_objects():
        md = o["metadata"]
        where = f"{o['kind']} {md.get('namespace', '')}/{md['name']}"
        if (key in CLUSTER_SCOPED) == ("namespace" in md):
            problems.append(f"{where}: namespace does not match the kind's scope")
        refs = md.get("ownerReferences") or []
        if sum(1 for r in refs if r.get("controller")) > 1:
            problems.append(f"{where}: more than one controller ownerReference")
        for r in refs:
            owner_ns = "" if kind_key(r["apiVersion"], r["kind"]) in CLUSTER_SCOPED else md.get("namespace", "")
            owner = by_name.get((r["kind"], owner_ns, r["name"]))
            if owner is None:
                problems.append(f"{where}: owner {r['kind']} {r['name']} does not exist")
            elif owner["metadata"]["uid"] != r["uid"] or owner["apiVersion"] != r["apiVersion"]:
                problems.append(f"{where}: ownerReference to {r['kind']} {r['name']} has the wrong uid/apiVersion")
    for pod in state.of("Pod"):
        where = f"Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}"
        node = pod["spec"].get("nodeName")
        if node is not None and node not in nodes:
            problems.append(f"{where}: nodeName {node} is not a node of the snapshot")
        erc = (pod.get("status") or {}).get("extendedResourceClaimStatus")
        if erc and ("ResourceClaim", pod["metadata"]["namespace"], erc["resourceClaimName"]) not in by_name:
            problems.append(f"{where}: extended-resource claim {erc['resourceClaimName']} does not exist")
    devices = {
        (s["spec"]["pool"]["name"], d["name"])
        for s in state.of("resource.k8s.io/ResourceSlice")
        for d in s["spec"]["devices"]
    }
    for s in state.of("resource.k8s.io/ResourceSlice"):
        if s["spec"].get("nodeName") and s["spec"]["nodeName"] not in nodes:
            problems.append(f"ResourceSlice {s['metadata']['name']}: node {s['spec']['nodeName']} does not exist")
    allocated: Counter[tuple[str, str]] = Counter()
    for c in state.of("resource.k8s.io/ResourceClaim"):
        for res in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            allocated[(res["pool"], res["device"])] += 1
            if (res["pool"], res["device"]) not in devices:
                problems.append(f"ResourceClaim {c['metadata']['name']}: device {res['device']} is in no slice")
    problems += [f"device {d} of pool {p} allocated {n} times" for (p, d), n in allocated.items() if n > 1]
    return problems


def overcommitted(state: ClusterState) -> list[str]:
    """Nodes whose running pods request more of a device-plugin resource than the node allocates."""
    alloc = {n["metadata"]["name"]: n["status"].get("allocatable") or {} for n in state.of("Node")}
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in state.of("Pod"):
        if pod["status"].get("phase") != "Running" or pod["status"].get("extendedResourceClaimStatus"):
            continue  # finished pods hold nothing; DRA-backed requests are checked through claims above
        for c in pod["spec"].get("containers", []) + [
            i for i in pod["spec"].get("initContainers", []) if i.get("restartPolicy") == "Always"
        ]:
            for r, q in ((c.get("resources") or {}).get("requests") or {}).items():
                if r.startswith("nvidia.com/"):
                    used[pod["spec"]["nodeName"]][r] += int(q)
    return [
        f"node {node}: {r} requested {q}, allocatable {alloc[node].get(r, '0')}"
        for node, counts in used.items()
        for r, q in counts.items()
        if q > int(alloc[node].get(r, "0"))
    ]


def test_fixture_set_is_complete() -> None:
    names = {f.name for f in FIXTURE_FILES}
    assert {"demo.yaml", "h100-homogeneous.yaml", "mig-timeslice.yaml", "half-migrated.yaml"} <= names


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixture_loads_and_is_consistent(path: Path) -> None:
    state = load_snapshot(path)
    assert state.source.kubernetes_version, "the header states the server version"
    assert state.source.served_apis and "resource.k8s.io/v1" in state.source.served_apis
    assert state.of("Node"), "a fleet without nodes"
    # Every object in a fixture is a kind the tool reads (a real `dra-migrate snapshot` keeps nothing else).
    assert not state.skipped, f"kinds the tool does not read: {dict(state.skipped)}"
    assert integrity_problems(state) == []
    assert overcommitted(state) == []


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_gpu_pods_stay_in_their_pool(path: Path) -> None:
    """Each pod pinned by nodeSelector runs on a node carrying those labels (the fixtures promise this so
    they can be replayed onto a real control plane)."""
    state = load_snapshot(path)
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in state.of("Node")}
    wrong = [
        f"{p['metadata']['namespace']}/{p['metadata']['name']} on {p['spec']['nodeName']}"
        for p in state.of("Pod")
        if any(labels[p["spec"]["nodeName"]].get(k) != v for k, v in (p["spec"].get("nodeSelector") or {}).items())
    ]
    assert wrong == []


def test_generator_is_up_to_date(tmp_path: Path) -> None:
    """The committed YAML is exactly what make_fixtures.py writes (edit the script, not the files)."""
    module = _load_module(FIXTURES / "make_fixtures.py", "make_fixtures")
    assert module.main(["-o", str(tmp_path)]) == 0
    for f in FIXTURE_FILES:
        assert (tmp_path / f.name).read_text() == f.read_text(), f"{f.name} is stale: rerun make_fixtures.py"


def test_tiny_bench_snapshot_loads(tmp_path: Path) -> None:
    gen = _load_module(ROOT / "bench" / "gen_fleet.py", "gen_fleet")
    out = tmp_path / "fleet.jsonl"
    assert gen.main(["--nodes", "12", "--pods", "300", "--workloads", "40", "--seed", "7", "-o", str(out)]) == 0
    state = load_snapshot(out)
    assert state.source.kubernetes_version
    assert len(state.of("Node")) == 12 + 6  # GPU nodes, and half as many CPU nodes
    # Pods that use no devices are counted per node, not kept (ClusterState.other_pods).
    assert len(state.of("Pod")) + sum(state.other_pods.values()) == 300
    assert not state.skipped
    assert integrity_problems(state) == []
    assert overcommitted(state) == []
    again = tmp_path / "again.jsonl"
    gen.main(["--nodes", "12", "--pods", "300", "--workloads", "40", "--seed", "7", "-o", str(again)])
    assert again.read_bytes() == out.read_bytes(), "same seed, same bytes"


def _load_module(path: Path, name: str) -> Any:
    """Import a script that is not part of an installed package."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_every_controller_selects_its_own_template(path: Path) -> None:
    """The API server refuses a workload whose selector does not select its pod template
    (apps/v1 validation: "`selector` does not match template `labels`"), so a fixture that has one could
    not exist, and a twin made from it would skip the object."""
    from ruamel.yaml import YAML

    problems = []
    for obj in YAML(typ="safe").load(path.read_text())["items"]:
        spec = obj.get("spec") or {}
        if obj.get("apiVersion") != "apps/v1" or "template" not in spec:
            continue
        wanted = (spec.get("selector") or {}).get("matchLabels") or {}
        have = ((spec["template"].get("metadata") or {}).get("labels")) or {}
        if any(have.get(k) != v for k, v in wanted.items()):
            problems.append(f"{obj['kind']} {obj['metadata'].get('namespace')}/{obj['metadata']['name']}")
    assert problems == []
