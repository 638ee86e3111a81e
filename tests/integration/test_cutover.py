"""Staged cutover on the real control plane with the simulated fleet: apply, crash and resume, rollback,
a drain blocked by a PodDisruptionBudget, and two applies at once.

Three pools: full H100s, time-sliced GPUs (replicas 4), and A100s split into MIG devices. The NVIDIA
DRA kubelet plugin's DaemonSet is installed (its pods are what a real install would show); the
simulator publishes each node's ResourceSlice once the plan's label turns the plugin on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from deepdiff import DeepDiff
from nodes import TwinNodes, dra_fleet

from dra_migrate.execute.journal import journal_path, read_journal
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
POOL_LABEL = "cloud.google.com/gke-nodepool"
POOLS = {f"h100-{RUN}": "h100", f"ts-{RUN}": "ts", f"mig-{RUN}": "mig"}
DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
ROOT = Path(__file__).resolve().parents[2]
DRIVER = "580.95.05"  # the DRA driver needs 580+ (check: driver-version-too-old)


def specs() -> list[GpuNodeSpec]:
    out = []
    for pool, kind in POOLS.items():
        for i in range(3 if kind == "h100" else 2):  # the H100 pool: one wave of three nodes at once
            name = f"{pool}-{i}"
            if kind == "h100":
                out.append(GpuNodeSpec.small(name, gpus=2, pool=pool, driver_version=DRIVER))
            elif kind == "ts":
                out.append(
                    GpuNodeSpec.small(
                        name, gpus=2, pool=pool, product="Tesla-T4", memory_mib=15360, replicas=4, driver_version=DRIVER
                    )
                )
            else:
                out.append(
                    GpuNodeSpec.small(
                        name,
                        gpus=1,
                        pool=pool,
                        product="NVIDIA-A100-SXM4-80GB",
                        memory_mib=81920,
                        mig={"3g.40gb": 2},
                        driver_version=DRIVER,
                    )
                )
    return out


def cli(
    cp: controlplane.ControlPlane, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process (so a SIGKILL kills only it)."""
    return subprocess.run(
        [sys.executable, "-m", "dra_migrate", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        check=False,
    )


def node_states(kube: Kube, names: list[str]) -> dict[str, Any]:
    out = {}
    for n in names:
        node = kube.get(path_of("v1", "nodes", n))
        labels = node["metadata"].get("labels") or {}
        out[n] = {
            "unschedulable": bool(node["spec"].get("unschedulable")),
            "dp": labels.get(DP),
            "dra": labels.get(DRA),
        }
    return out


def slices(kube: Kube, names: list[str]) -> dict[str, int]:
    items, _ = kube.list_all("/apis/resource.k8s.io/v1/resourceslices")
    out = dict.fromkeys(names, 0)
    for s in items:
        if s["spec"].get("nodeName") in out:
            out[s["spec"]["nodeName"]] += len(s["spec"].get("devices") or [])
    return out


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet, kube: Kube) -> Iterator[TwinNodes]:
    with dra_fleet(kwok, kube, specs()) as f:
        yield f


@pytest.fixture
def workloads(kube: Kube, namespace: str, fleet: TwinNodes) -> Iterator[str]:
    """One GPU Deployment per pool, pinned to it."""
    for pool, kind in POOLS.items():
        resource = "nvidia.com/mig-3g.40gb" if kind == "mig" else "nvidia.com/gpu"
        kube.create(
            path_of("apps/v1", "deployments", namespace=namespace),
            {
                "metadata": {"name": f"w-{kind}"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": kind}},
                    "template": {
                        "metadata": {"labels": {"app": kind}},
                        "spec": {
                            "nodeSelector": {POOL_LABEL: pool},
                            "terminationGracePeriodSeconds": 0,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"limits": {resource: "1"}},
                                }
                            ],
                        },
                    },
                },
            },
        )
    wait_for("workload pods running", lambda: len(running(kube, namespace)) == 3, timeout=60)
    yield namespace
    # Gone before the next test drains these nodes (a terminating namespace's pods refuse eviction).
    for kind in POOLS.values():
        kube.delete(path_of("apps/v1", "deployments", f"w-{kind}", namespace))
    pods = path_of("v1", "pods", namespace=namespace)
    for p in kube.list_all(pods)[0]:
        kube.delete(f"{pods}/{p['metadata']['name']}", {"gracePeriodSeconds": 0})
    wait_for("workload pods gone", lambda: not kube.list_all(pods)[0], timeout=60)


def dra_pod(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    """The pod once scheduled with a scheduler-made DRA claim for its extended resource."""
    pod = kube.get(path_of("v1", "pods", name, ns))
    return pod if pod["spec"].get("nodeName") and pod["status"].get("extendedResourceClaimStatus") else None


MIGRATED = {"unschedulable": False, "dp": "false", "dra": "true"}


def assert_migrated(kube: Kube, nodes: list[str]) -> None:
    """Every node: device plugin off, DRA plugin on, uncordoned, and its ResourceSlice published."""
    states = node_states(kube, nodes)
    assert all(s == MIGRATED for s in states.values()), states
    assert all(v > 0 for v in slices(kube, nodes).values())


def running(kube: Kube, ns: str) -> list[str]:
    items, _ = kube.list_all(path_of("v1", "pods", namespace=ns))
    return [p["metadata"]["name"] for p in items if p.get("status", {}).get("phase") == "Running"]


def make_plan(cp: controlplane.ControlPlane, tmp: Path, *extra: str) -> Path:
    path = tmp / "plan.yaml"
    pools = ",".join(POOLS)
    r = cli(
        cp,
        "plan",
        "--kubeconfig",
        str(cp.kubeconfig),
        "--out",
        str(path),
        "--soak",
        "0s",
        "--max-unavailable",
        "100%",
        "--order",
        pools,
        *extra,
    )
    assert r.returncode == 0, r.stderr
    plan = plan_io.load(path)
    assert plan["applicable"], [f for f in plan["findings"] if f["severity"] == "blocker"]
    return path


def apply(
    cp: controlplane.ControlPlane, plan: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli(cp, "apply", str(plan), "--kubeconfig", str(cp.kubeconfig), "--yes", *extra, env=env)


def apply_crashing_at(cp: controlplane.ControlPlane, plan: Path, boundary: str) -> subprocess.CompletedProcess[str]:
    """apply, SIGKILLed right after the journal record `<stepId>:<start|end>` (tests/integration/crashing.py)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tests" / "integration" / "crashing.py"), boundary,
         "apply", str(plan), "--kubeconfig", str(cp.kubeconfig), "--yes"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )  # fmt: skip


def open_steps_at_each_crash(records: list[dict[str, Any]]) -> list[int]:
    """For each run that never closed (a crash), how many apply steps were open when it died."""
    out = []
    run: list[dict[str, Any]] | None = None
    for r in [*records, {"event": "run-start"}]:
        if r.get("event") == "run-start":
            if run is not None and not any(x.get("event") == "run-end" for x in run):
                started = {x["stepId"] for x in run if x.get("event") == "start" and x.get("phase") == "apply"}
                ended = {x["stepId"] for x in run if x.get("event") == "end" and x.get("phase") == "apply"}
                out.append(len(started - ended))
            run = []
        elif run is not None:
            run.append(r)
    return out


def apply_until_the_first_drain(plan: Path, kubeconfig: Path) -> subprocess.Popen[str]:
    """apply in its own process, returned once its journal records the first drain's start (or it ended)."""
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "dra_migrate", "apply", str(plan), "--kubeconfig", str(kubeconfig), "--yes"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        records = read_journal(journal_path(plan)) if journal_path(plan).exists() else []
        if any(r.get("event") == "start" and r.get("action") == "drain" for r in records):
            break
        time.sleep(0.05)
    return proc


def rollback_all(cp: controlplane.ControlPlane, plan: Path) -> None:
    r = cli(cp, "rollback", str(plan), "--kubeconfig", str(cp.kubeconfig), "--yes")
    assert r.returncode == 0, r.stderr


def test_a_full_migration_then_gpu_pods_run_through_dra(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    r = apply(control_plane, plan)
    assert r.returncode == 0, r.stderr
    assert_migrated(kube, nodes)
    # Unchanged requests now get DRA devices on every migrated node.
    for n in nodes:
        kind = POOLS[n.rsplit("-", 1)[0]]
        resource = "nvidia.com/mig-3g.40gb" if kind == "mig" else "nvidia.com/gpu"
        kube.create(
            path_of("v1", "pods", namespace=workloads),
            {
                "metadata": {"name": f"after-{n}"},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": n},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {resource: "1"}}}
                    ],
                },
            },
        )
    for n in nodes:
        pod = wait_for(f"pod on {n} allocated through DRA", lambda n=n: dra_pod(kube, workloads, f"after-{n}"), 60)
        assert pod["spec"]["nodeName"] == n
    status = cli(control_plane, "status", str(plan), "-o", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["remaining"] == 0
    # These pods hold their nodes' GPUs through DRA: switching the plugins back under them would let the
    # device plugin give the same GPUs out again. Rollback drains each node first, and pods no controller
    # owns that the plan never recorded stop it there, named, with nothing switched back.
    # A dry run first: it says the same, then, allowed to evict them, what the rollback would send, and
    # changes nothing (the API server's dryRun=All for every write and eviction; no journal record).
    journal = journal_path(plan).read_bytes()
    kc = str(control_plane.kubeconfig)
    r = cli(control_plane, "rollback", str(plan), "--kubeconfig", kc, "--dry-run")
    assert r.returncode == 1 and "after-" in r.stderr and "--delete-unowned-pods" in r.stderr, r.stderr
    r = cli(control_plane, "rollback", str(plan), "--kubeconfig", kc, "--dry-run", "--delete-unowned-pods")
    assert r.returncode == 0, r.stderr
    changes = json.loads(r.stdout)["changes"]
    assert {c["target"] for c in changes if c["after"].get("labels", {}).get(DP) == "true"} == {
        f"Node {n}" for n in nodes
    }
    would_evict = {p.rsplit("/", 1)[1] for c in changes for p in c["before"].get("pods", [])}
    assert {f"after-{n}" for n in nodes} <= would_evict, would_evict  # and the workloads' own GPU pods
    assert all(s == {"unschedulable": False, "dp": "false", "dra": "true"} for s in node_states(kube, nodes).values())
    assert all(dra_pod(kube, workloads, f"after-{n}") for n in nodes), "a dry run evicts nothing"
    assert journal_path(plan).read_bytes() == journal, "a dry run writes no journal"
    r = cli(control_plane, "rollback", str(plan), "--kubeconfig", kc, "--yes")
    assert r.returncode != 0 and "after-" in r.stderr and "--delete-unowned-pods" in r.stderr, r.stderr
    assert all(s["dp"] == "false" and s["dra"] == "true" for s in node_states(kube, nodes).values())
    assert all(dra_pod(kube, workloads, f"after-{n}") for n in nodes), "nothing evicted"
    r = cli(control_plane, "rollback", str(plan), "--kubeconfig", str(control_plane.kubeconfig), "--yes",
            "--delete-unowned-pods")  # fmt: skip
    assert r.returncode == 0, r.stderr
    left = {p["metadata"]["name"] for p in kube.list_all(path_of("v1", "pods", namespace=workloads))[0]}
    assert not {f"after-{n}" for n in nodes} & left, "drained before the plugins were switched back"
    assert DeepDiff(before, node_states(kube, nodes)) == {}


def test_b_crash_at_every_step_boundary_of_a_concurrent_wave_then_resume(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    """The first pool's wave holds three nodes progressing at once. apply is SIGKILLed at every step
    boundary (start and end) of its first node, while the other two are wherever they are; each run
    resumes from the journal; the last one runs to the end."""
    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    body = plan_io.load(plan)
    first_pool = body["stages"][1]
    wave_nodes = [n["node"] for n in first_pool["waves"][0]["nodes"]]
    assert len(wave_nodes) >= 3, wave_nodes
    step_ids = [f"{first_pool['name']}/{wave_nodes[0]}/{s['id']}" for s in first_pool["nodeSteps"]]
    for step_id in step_ids:
        for event in ("start", "end"):
            r = apply_crashing_at(control_plane, plan, f"{step_id}:{event}")
            assert r.returncode == -9, (step_id, event, r.stderr)  # SIGKILL: no cleanup ran
    r = apply(control_plane, plan)  # resume to the end
    assert r.returncode == 0, r.stderr
    records = read_journal(journal_path(plan))
    assert sum(1 for x in records if x.get("event") == "run-start") == len(step_ids) * 2 + 1
    # Killed while other lanes were mid-step too: some crashes left several steps open at once.
    open_counts = open_steps_at_each_crash(records)
    assert len(open_counts) == len(step_ids) * 2 and max(open_counts) >= 2, open_counts
    assert_migrated(kube, nodes)  # the same end state as an uninterrupted run (test a)
    rollback_all(control_plane, plan)
    assert DeepDiff(before, node_states(kube, nodes)) == {}


def test_c_rollback_after_a_full_stage_and_a_half_done_one(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    body = plan_io.load(plan)
    first, second = body["stages"][1], body["stages"][2]
    r = apply(control_plane, plan, "--until", first["name"])
    assert r.returncode == 0, r.stderr
    # Half of the next stage: stop it after its nodes' device plugin is off.
    half = f"{second['name']}/{second['waves'][0]['nodes'][-1]['node']}/disable-device-plugin"
    r = apply_crashing_at(control_plane, plan, f"{half}:end")
    assert r.returncode == -9
    assert node_states(kube, nodes) != before
    rollback_all(control_plane, plan)
    assert DeepDiff(before, node_states(kube, nodes)) == {}


def test_d_a_budget_that_forbids_eviction_stops_and_rolls_back_the_wave(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    nodes = fleet.node_names
    before = node_states(kube, nodes)
    kube.create(
        path_of("policy/v1", "poddisruptionbudgets", namespace=workloads),
        {
            "metadata": {"name": "hold-h100"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "h100"}}},
        },
    )
    plan = make_plan(control_plane, tmp_path)
    r = apply(control_plane, plan, "--drain-timeout", "5s")
    assert r.returncode == 1
    assert "hold-h100" in r.stderr and "rolled back" in r.stderr
    assert DeepDiff(before, node_states(kube, nodes)) == {}, "nothing stays cordoned or relabelled"
    # The wave was undone; the stage `prepare` before it (DeviceClasses) stays until a full rollback.
    rollback_all(control_plane, plan)


def test_f_two_applies_at_once_exactly_one_holds_the_lock(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dra_migrate",
                "apply",
                str(plan),
                "--kubeconfig",
                str(control_plane.kubeconfig),
                "--yes",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=600), p.stderr.read() if p.stderr else "") for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    refused = next(err for code, err in results if code == 1)
    assert "lock" in refused and "held" in refused
    rollback_all(control_plane, plan)
    assert DeepDiff(before, node_states(kube, nodes)) == {}


def test_dry_run_changes_nothing_and_says_what_would(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    r = apply(control_plane, plan, "--dry-run")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["dryRun"] is True
    targets = {c["target"] for c in report["changes"]}
    assert {f"Node {n}" for n in nodes} <= targets
    assert any(c["after"].get("labels", {}).get(DP) == "false" for c in report["changes"])
    assert DeepDiff(before, node_states(kube, nodes)) == {}
    assert not journal_path(plan).exists(), "a dry run writes no journal"


def test_e_api_faults_the_migration_still_converges(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    from faultproxy import FaultProxy

    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    with FaultProxy(control_plane, rate=0.1, seed=7, faults=("500", "429", "drop")) as proxy:
        kc = proxy.kubeconfig(tmp_path / "faulty.kubeconfig")
        attempts = []
        for _ in range(5):  # a fault that outlasts the retries stops the run; apply resumes from the journal
            r = cli(control_plane, "apply", str(plan), "--kubeconfig", str(kc), "--yes", "--no-auto-rollback")
            attempts.append(r.returncode)
            if r.returncode == 0:
                break
        injected = dict(proxy.counts)
    assert attempts[-1] == 0, (attempts, r.stderr)
    assert sum(v for k, v in injected.items() if k != "forwarded") > 0, injected
    assert_migrated(kube, nodes)
    # The journal is consistent: every step started has ended (or was started again and ended).
    records = read_journal(journal_path(plan))
    from dra_migrate.execute.progress import progress_of

    progress = progress_of(Plan.from_dict(plan_io.load(plan)), records)
    assert progress.to_dict()["remaining"] == 0 and progress.progress.current is None
    rollback_all(control_plane, plan)
    assert DeepDiff(before, node_states(kube, nodes)) == {}


def test_g_the_api_server_failing_mid_wave_stops_apply_without_rollback_then_resume_finishes(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    """Every request fails (500 or a dropped connection) once the first drain has started: apply stops,
    journals why, rolls nothing back (it could not), and says to re-run; the re-run finishes."""

    from faultproxy import FaultProxy

    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    with FaultProxy(control_plane, rate=0, seed=3, faults=("500", "drop")) as proxy:
        kc = proxy.kubeconfig(tmp_path / "faulty.kubeconfig")
        proc = apply_until_the_first_drain(plan, kc)
        proxy.rate = 1.0  # the API server is gone, as far as apply can tell
        _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "re-run apply to resume" in err, err
    records = read_journal(journal_path(plan))
    assert not [r for r in records if r.get("phase") == "rollback"], "nothing rolled back"
    end = records[-1]
    assert end["event"] == "run-end" and end["result"] == "stopped", end
    assert node_states(kube, nodes) != before, "the run stopped half-way, as it was"
    r = apply(control_plane, plan)  # the cluster answers again: resume
    assert r.returncode == 0, r.stderr
    assert_migrated(kube, nodes)
    rollback_all(control_plane, plan)
    assert DeepDiff(before, node_states(kube, nodes)) == {}


def test_h_sigterm_mid_wave_stops_apply_closes_the_run_and_releases_the_lock_then_resume_finishes(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, workloads: str, tmp_path: Path
) -> None:
    """Kubernetes deletes or evicts an in-cluster apply's pod with SIGTERM (SIGKILL only at the grace's end);
    `timeout` and CI runners stop a job so. apply, mid-wave, stops as on Ctrl-C: every open step is
    journalled as interrupted, the run is closed, and the Lease is deleted at once (a replacement on
    another host would otherwise wait it out), exit 143. Before, SIGTERM killed it like SIGKILL (test b)."""
    import signal

    nodes = fleet.node_names
    before = node_states(kube, nodes)
    plan = make_plan(control_plane, tmp_path)
    proc = apply_until_the_first_drain(plan, control_plane.kubeconfig)
    assert proc.poll() is None, "apply ended before the first drain"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == ["error: terminated"], err
    assert "Traceback" not in err
    records = read_journal(journal_path(plan))
    assert records[-1]["event"] == "run-end", records[-1]
    started = {r["stepId"] for r in records if r.get("event") == "start"}
    ended = {r["stepId"] for r in records if r.get("event") == "end"}
    assert started and started <= ended, started - ended  # nothing left open: closed, not crashed
    assert not [r for r in records if r.get("phase") == "rollback"], "stopped, not rolled back"
    lease = path_of("coordination.k8s.io/v1", "leases", "kube-system", "dra-migrate")
    assert kube.get_or_none(lease) is None, "the Lease is released, not left to expire"
    assert node_states(kube, nodes) != before, "the run stopped half-way, as it was"
    r = apply(control_plane, plan)  # resume
    assert r.returncode == 0, r.stderr
    assert_migrated(kube, nodes)
    rollback_all(control_plane, plan)
    assert DeepDiff(before, node_states(kube, nodes)) == {}
