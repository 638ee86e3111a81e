"""`dra-migrate rehearse` end to end: a private twin from a snapshot, the real scheduler, the real executor.

Each rehearsal starts its own control plane (the binaries the session's fixture built), so nothing here
touches the shared one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import TEST_LEASE_S, wait_for
from ruamel.yaml import YAML

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.params import parse_duration
from dra_migrate.rehearse.model import end_state
from dra_migrate.rehearse.run import read_cluster, recreate
from dra_migrate.sim.kube import new_api_client
from dra_migrate.sim.kueue import KUEUE_MODULE, KUEUE_VERSION, kueue_crd_dir
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import specs_from_state

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "clusters" / "half-migrated.yaml"
SCALE = "0.01"  # stalls and Pending pods: what happens, not how long
TIMED_SCALE = "0.05"  # the rehearsal whose duration is compared with the estimate (about a minute)
TOLERANCE = 0.25  # README "Rehearsal": the rehearsed duration is within ±25% of the plan's estimate


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dra_migrate", *args],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def _plan(snapshot: Path, tmp: Path) -> Path:
    out = tmp / "plan.yaml"
    res = cli("plan", "--snapshot", str(snapshot), "--out", str(out))
    assert res.returncode == 0, res.stderr
    return out


def _rehearse(plan: Path, snapshot: Path, tmp: Path, scale: str = SCALE) -> tuple[int, dict[str, Any]]:
    out = tmp / "rehearsal.json"
    res = cli(
        "rehearse", str(plan), "--snapshot", str(snapshot), "--time-scale", scale, "-o", "json", "--out", str(out)
    )
    assert res.returncode in (0, 2), res.stderr
    return res.returncode, json.loads(out.read_text())


def test_a_plan_that_is_fine_rehearses_every_wave(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    plan = _plan(FIXTURE, tmp_path)
    code, r = _rehearse(plan, FIXTURE, tmp_path, TIMED_SCALE)
    assert (code, r["result"], r["failure"]) == (0, "ok", None)
    assert r["formatVersion"] == 1
    assert r["plan"]["digest"] == plan_io.load(plan)["digest"]
    pool_waves = [w for w in r["waves"] if w["wave"]]
    assert pool_waves and all(w["result"] == "ok" and w["gate"] == "ok" for w in pool_waves)
    assert all(w["stalledDrains"] == [] and w["pendingPods"] == [] for w in r["waves"])
    assert all(c["result"] == "ok" for w in pool_waves for c in w["canaries"])
    assert r["endState"]["nodesMigrated"] == r["endState"]["nodes"]
    assert all(c["fits"] for c in r["endState"]["capacity"])
    # The realistic timing profile, scaled: the rehearsed duration (unscaled back) is the plan's estimate.
    estimate = parse_duration(r["estimatedDuration"])
    assert abs(r["rehearsedSeconds"] / estimate - 1) <= TOLERANCE, (r["rehearsedSeconds"], estimate)
    assert r["unreproduced"]
    # The audit report carries it.
    rehearsal = tmp_path / "rehearsal.json"
    report = cli("report", str(plan), "--rehearsal", str(rehearsal))
    assert report.returncode == 0, report.stderr
    assert "## Rehearsal on a twin" in report.stdout and "result OK" in report.stdout


def test_b_a_budget_that_blocks_a_drain_is_named_and_the_wave_rolled_back(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    yaml = YAML(typ="safe")
    snap = yaml.load(FIXTURE.read_text())
    snap["items"].append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "llama-no-disruption", "namespace": "inference", "uid": "pdb-1"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app.kubernetes.io/name": "llama-70b-dp"}}},
        }
    )
    snapshot = tmp_path / "blocked.yaml"
    with snapshot.open("w") as fh:
        yaml.dump(snap, fh)
    plan = _plan(snapshot, tmp_path)
    code, r = _rehearse(plan, snapshot, tmp_path)
    assert (code, r["result"]) == (2, "failed")
    stalled = [s for w in r["waves"] for s in w["stalledDrains"]]
    assert stalled and all(s["budgets"] == ["inference/llama-no-disruption"] for s in stalled)
    assert all(s["pod"].startswith("inference/llama-70b-dp-") for s in stalled)
    [failed] = [w for w in r["waves"] if w["stalledDrains"]]
    assert failed["result"] in ("failed", "rolled-back")
    # Nothing after the failed wave ran, and the failed wave's nodes were restored.
    names = [(w["stage"], w["wave"]) for w in r["waves"]]
    assert names[-1] == (failed["stage"], failed["wave"])


def test_c_pods_that_cannot_follow_the_migration_are_listed_with_the_schedulers_reason(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    # A Deployment pinned to device-plugin nodes: `check` counts its GPUs as fitting, but once a wave turns
    # the device plugin off, its evicted pods have nowhere to go.
    yaml = YAML(typ="safe")
    snap = yaml.load(FIXTURE.read_text())
    [llama] = [o for o in snap["items"] if o["kind"] == "Deployment" and o["metadata"]["name"] == "llama-70b-dp"]
    llama["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.deploy.device-plugin": "true"}
    snapshot = tmp_path / "pinned.yaml"
    with snapshot.open("w") as fh:
        yaml.dump(snap, fh)
    plan = _plan(snapshot, tmp_path)
    code, r = _rehearse(plan, snapshot, tmp_path)
    assert (code, r["result"]) == (2, "failed")
    [gated] = [w for w in r["waves"] if w["gate"] == "failed"]
    assert gated["pendingPods"], gated
    assert all(p["pod"].startswith("inference/llama-70b-dp-") for p in gated["pendingPods"])
    reasons = " ".join(p["reason"] for p in gated["pendingPods"])
    assert "node affinity/selector" in reasons or "Insufficient nvidia.com/gpu" in reasons, reasons


def test_d_the_rehearsed_end_state_is_what_the_same_plan_does_to_the_cluster(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """A cluster of KWOK nodes stands for the operator's: it is rehearsed live (`--kubeconfig`, read once),
    then the same plan is applied to it. Both must end in the same state, node by node."""
    cp = controlplane.start(tmp_path / "k8s")
    try:
        state = load_snapshot(FIXTURE)
        api = new_api_client(cp.kubeconfig, "dra-migrate-tests")
        specs = specs_from_state(state)
        # Its own kwok and fleet annotation, apart from the twin's that `rehearse` starts beside it.
        with KwokFleet(
            cp.kubeconfig, specs, workdir=tmp_path / "kwok", lease_s=TEST_LEASE_S, fleet="operators"
        ) as fleet:
            fleet.wait_ready(timeout_s=60)
            recreate(api, state)  # what it skips, the rehearsal skips too (and lists as unreproduced)
            wait_for("the fixture's pods to be placed", lambda: _all_scheduled(cp.kubeconfig), timeout=120)
            plan = tmp_path / "plan.yaml"
            made = cli("plan", "--kubeconfig", str(cp.kubeconfig), "--out", str(plan), "--soak", "0s")
            assert made.returncode == 0, made.stderr
            out = tmp_path / "rehearsal.json"
            res = cli("rehearse", str(plan), "--kubeconfig", str(cp.kubeconfig), "--time-scale", SCALE, "-o", "json",
                      "--out", str(out))  # fmt: skip
            assert res.returncode == 0, res.stderr
            rehearsed = json.loads(out.read_text())
            assert rehearsed["result"] == "ok"
            applied = cli("apply", str(plan), "--kubeconfig", str(cp.kubeconfig), "--yes")
            assert applied.returncode == 0, applied.stderr
            after = end_state(read_cluster(cp.kubeconfig))
            names = set(fleet.node_names)
        api.close()
    finally:
        controlplane.stop(cp)
    assert {n["name"] for n in after["nodeStates"]} == names
    assert after["nodesMigrated"] == after["nodes"] > 0
    assert rehearsed["endState"] == after


def _all_scheduled(kubeconfig: Path) -> bool:
    pods = read_cluster(kubeconfig).of("Pod")
    return bool(pods) and all((p.get("spec") or {}).get("nodeName") for p in pods)


PLATFORM_FIXTURE = ROOT / "fixtures" / "clusters" / "platforms" / "gke-managed.yaml"


def test_e_a_replace_pool_plan_rehearses_end_to_end(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    """GKE's managed plugin (issue 26): the twin plays the new pool's nodes as the emitted gcloud command makes
    them once await-pool waits for them; the canary, the capacity check and the drains then run for real."""
    out = tmp_path / "plan.yaml"
    res = cli("plan", "--snapshot", str(PLATFORM_FIXTURE), "--exclude-pools", "l4-ts", "--out", str(out))
    assert res.returncode == 0, res.stderr
    code, r = _rehearse(out, PLATFORM_FIXTURE, tmp_path)
    assert (code, r["result"], r["failure"]) == (0, "ok", None)
    stages = [(w["stage"], w["result"]) for w in r["waves"]]
    assert stages[:2] == [("prepare", "ok"), ("provision-a3-h100", "ok")] and all(x == "ok" for _, x in stages)
    nodes = {n["name"]: n for n in r["endState"]["nodeStates"]}
    new = [n for n in nodes.values() if n["pool"] == "a3-h100-dra"]
    assert len(new) == 2 and all(n["draDevices"] == {"gpu.nvidia.com": 8} and not n["unschedulable"] for n in new)
    assert all(n["unschedulable"] for n in nodes.values() if n["pool"] == "a3-h100")  # drained across, kept
    moved = next(c for c in r["endState"]["capacity"] if c["pool"] == "a3-h100-dra")
    assert moved["demand"] == 12 and moved["fits"]  # the whole workload followed to the new pool


def _kueue_crds() -> None:
    """Kueue's released CRDs in the Go module cache, where the twin looks for them (sim/kueue.py): fetched
    from the module proxy as the control plane's sources are."""
    res = subprocess.run(
        ["go", "mod", "download", "-json", f"{KUEUE_MODULE}@v{KUEUE_VERSION}"],
        capture_output=True, text=True, timeout=300, check=False, cwd="/tmp", env={**os.environ, "GOFLAGS": ""},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr or res.stdout
    assert kueue_crd_dir() is not None


def test_f_quotas_and_kueue_keep_their_gpu_limits_through_every_wave(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    """Issue 27: a namespace with a GPU quota and a Kueue ClusterQueue budgeting GPUs, rehearsed; every state
    of the twin's quotas, classes, slices and queues is judged while the plan runs, and the plan's own order
    (the device limit added in prepare, the old limit kept) leaves no window of unlimited or blocked GPU use."""
    _kueue_crds()
    yaml = YAML(typ="safe")
    snap = yaml.load(FIXTURE.read_text())
    snap["items"] += [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "gpu", "namespace": "inference", "uid": "rq-1"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "64", "requests.cpu": "500"}},
        },
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "h100", "uid": "rf-1"},
         "spec": {"nodeLabels": {"pool": "h100"}}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "research", "uid": "cq-1"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16}]}],
                    }
                ],
            },
        },
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "spec": {"clusterQueue": "research"},
         "metadata": {"name": "default", "namespace": "inference", "uid": "lq-1"}},
    ]  # fmt: skip
    snapshot = tmp_path / "quotas.yaml"
    with snapshot.open("w") as fh:
        yaml.dump(snap, fh)
    plan = _plan(snapshot, tmp_path)
    steps = [s for st in plan_io.body_of(plan_io.load(plan))["stages"] for s in st.get("steps") or []]
    assert [s["params"]["set"] for s in steps if s["action"] == "set-quota"] == [
        {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "64"}
    ]
    code, r = _rehearse(plan, snapshot, tmp_path)
    assert (code, r["result"], r["failure"]) == (0, "ok", None), r["failure"]
    qc = r["quotaContinuity"]
    assert qc["namespaces"] == ["inference nvidia.com/gpu"]
    assert qc["queues"] == ["research h100 nvidia.com/gpu"]
    assert qc["violations"] == []
    assert qc["events"] >= 2  # the baseline, and at least the set-quota step's MODIFIED
    assert not [u for u in r["unreproduced"] if "Kueue" in u or "ResourceQuota" in u], r["unreproduced"]
    report = cli("report", str(plan), "--rehearsal", str(tmp_path / "rehearsal.json"))
    assert report.returncode == 0, report.stderr
    assert "quota continuity ok" in report.stdout
