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
from ruamel.yaml import YAML

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "clusters" / "half-migrated.yaml"
SCALE = "0.01"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "migrate", *args],
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


def _rehearse(plan: Path, snapshot: Path, tmp: Path) -> tuple[int, dict[str, Any]]:
    out = tmp / "rehearsal.json"
    res = cli(
        "rehearse", str(plan), "--snapshot", str(snapshot), "--time-scale", SCALE, "-o", "json", "--out", str(out)
    )
    assert res.returncode in (0, 2), res.stderr
    return res.returncode, json.loads(out.read_text())


def test_a_plan_that_is_fine_rehearses_every_wave(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    plan = _plan(FIXTURE, tmp_path)
    code, r = _rehearse(plan, FIXTURE, tmp_path)
    assert (code, r["result"], r["failure"]) == (0, "ok", None)
    assert r["formatVersion"] == 1
    pool_waves = [w for w in r["waves"] if w["wave"]]
    assert pool_waves and all(w["result"] == "ok" and w["gate"] == "ok" for w in pool_waves)
    assert all(w["stalledDrains"] == [] and w["pendingPods"] == [] for w in r["waves"])
    assert r["endState"]["nodesMigrated"] == r["endState"]["nodes"]
    assert all(c["fits"] for c in r["endState"]["capacity"])
    # Unscaled: the plan's soaks alone (three of 5m) put the rehearsal well above a quarter of an hour.
    assert r["rehearsedSeconds"] >= 15 * 60
    assert r["estimatedDuration"] and r["unreproduced"]


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
