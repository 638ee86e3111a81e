"""`--state in-cluster` on the real control plane with a simulated fleet (issue 23): the journal in
ConfigMaps beside the lock's Lease. Two appliers contend for the Lease; one is SIGKILLed mid-wave; the
other, on "another machine" (a copy of the plan in another directory, no file journal anywhere), resumes
from the in-cluster journal; status, report and rollback read it from a third. And what the design rests
on, asked of the real API server: a conditional merge patch is refused once another writer appended, and
a ConfigMap over 1 MiB is refused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from nodes import TwinNodes, dra_fleet

from dra_migrate.execute.cluster_journal import ClusterJournal, JournalConflict, read_cluster_journal
from dra_migrate.execute.lock import micro_time
from dra_migrate.kube import ApiError
from dra_migrate.plan import io as plan_io
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
POOL = f"cs-{RUN}"
DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
ROOT = Path(__file__).resolve().parents[2]
DIGEST = "sha256:" + "d" * 64


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet, kube: Kube) -> Iterator[TwinNodes]:
    specs = [GpuNodeSpec.small(f"{POOL}-{i}", gpus=2, pool=POOL, driver_version="580.95.05") for i in range(3)]
    with dra_fleet(kwok, kube, specs) as f:
        yield f


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dra_migrate", *map(str, args)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**os.environ, **(env or {})}, check=False)  # fmt: skip


def node_states(kube: Kube, names: list[str]) -> dict[str, Any]:
    out = {}
    for n in names:
        node = kube.get(path_of("v1", "nodes", n))
        labels = node["metadata"].get("labels") or {}
        out[n] = (bool(node["spec"].get("unschedulable")), labels.get(DP), labels.get(DRA))
    return out


def test_two_appliers_contend_one_is_killed_mid_wave_the_other_resumes_from_the_cluster(
    control_plane: controlplane.ControlPlane, kube: Kube, fleet: TwinNodes, namespace: str, tmp_path: Path
) -> None:
    kc = str(control_plane.kubeconfig)
    before = node_states(kube, fleet.node_names)
    machines = {m: tmp_path / m for m in ("a", "b", "c")}
    for d in machines.values():
        d.mkdir()
    made = cli("plan", "--kubeconfig", kc, "--out", machines["a"] / "plan.yaml", "--soak", "0s",
               "--max-unavailable", "100%", "--order", POOL)  # fmt: skip
    assert made.returncode == 0, made.stderr
    for m in ("b", "c"):
        shutil.copy(machines["a"] / "plan.yaml", machines[m] / "plan.yaml")
    plan = plan_io.load(machines["a"] / "plan.yaml")
    stage = next(s for s in plan["stages"] if s.get("pool") == POOL or s["name"].endswith(POOL))
    wave = [n["node"] for n in stage["waves"][0]["nodes"]]
    assert len(wave) == 3, wave
    state = ["--state", "in-cluster", "--lock-namespace", namespace, "--kubeconfig", kc]

    # A: applies, and stops its first node's lane right after journaling that node's drain start (the
    # process alive, renewing the Lease; the other lanes go on as far as the wave lets them).
    mark = tmp_path / "paused"
    a = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/integration/crashing.py"), f"{stage['name']}/{wave[0]}/drain:start",
         "apply", str(machines["a"] / "plan.yaml"), "--yes", *state],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "DRA_MIGRATE_PAUSE_MARK": str(mark),
             "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )  # fmt: skip
    try:

        def paused() -> bool:
            assert a.poll() is None, f"the first applier exited {a.returncode}: {a.communicate()[1][-3000:]}"
            return mark.exists()

        wait_for("the first applier mid-wave", paused, timeout=120)

        # B, on another machine, while A holds the Lease: refused, naming A; nothing written.
        refused = cli("apply", machines["b"] / "plan.yaml", "--yes", *state)
        assert refused.returncode == 1, refused.stderr
        assert "holds the cluster lock" in refused.stderr and f"/{a.pid}/" in refused.stderr, refused.stderr
        actors = {r.get("actor") for r in read_cluster_journal(kube.api_client, namespace, str(plan["digest"]))}
        assert len(actors) == 1 and str(actors.pop()).endswith(f"/{a.pid}"), "only A has written"

        # status from a third machine: the wave half done, the paused drain current.
        mid = cli("status", machines["c"] / "plan.yaml", "-o", "json", *state)
        assert mid.returncode == 0, mid.stderr
        progress = json.loads(mid.stdout)
        assert progress["remaining"] > 0, progress
        assert f"{stage['name']}/{wave[0]}/drain" in mid.stdout
    finally:
        if a.poll() is None:
            os.kill(a.pid, signal.SIGKILL)  # mid-wave: no cleanup, the Lease left held
        a.wait(timeout=30)
    assert a.returncode == -signal.SIGKILL

    # A crashed long ago: its Lease looks expired. Still this host's dead run of this plan: taken over at once,
    # not watched for its duration as a Lease of another machine is (execute/lock.py).
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/dra-migrate"
    held = kube.get(lease_path)
    long_ago = micro_time(datetime.now(UTC) - timedelta(minutes=10))
    kube.replace(lease_path, {**held, "spec": {**held["spec"], "renewTime": long_ago}})

    # B again: A's process is gone (this host), so its Lease is taken over at once (execute/session.py).
    resumed = cli("apply", machines["b"] / "plan.yaml", "--yes", *state)
    assert resumed.returncode == 0, resumed.stderr
    assert "took over the lock of a crashed run" in resumed.stderr
    assert "making sure it is abandoned" not in resumed.stderr
    assert all(s == (False, "false", "true") for s in node_states(kube, fleet.node_names).values())

    records = read_cluster_journal(kube.api_client, namespace, str(plan["digest"]))
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert sum(r["event"] == "run-start" for r in records) == 2
    assert sum(r["event"] == "run-end" for r in records) == 1, "the killed run never closed"
    assert not any(p.name.endswith(".journal.jsonl") for d in machines.values() for p in d.iterdir())

    done = cli("status", machines["c"] / "plan.yaml", "-o", "json", *state)
    assert done.returncode == 0 and json.loads(done.stdout)["remaining"] == 0, done.stdout + done.stderr
    rep = cli("report", machines["c"] / "plan.yaml", "-o", "json", *state)
    assert rep.returncode == 0, rep.stderr
    timeline = json.loads(rep.stdout)["timeline"]
    assert len(timeline["runs"]) == 2 and timeline["journal"].startswith(f"in-cluster journal {namespace}/")

    back = cli("rollback", machines["c"] / "plan.yaml", "--yes", *state)
    assert back.returncode == 0, back.stderr
    assert node_states(kube, fleet.node_names) == before


def test_a_writer_that_lost_the_race_cannot_append_on_the_real_api_server(kube: Kube, namespace: str) -> None:
    """The merge patch's resourceVersion is a precondition on the real API server too (the fake assumes it)."""
    stale = ClusterJournal.open(kube.api_client, namespace, plan_digest=DIGEST)
    stale.record("run-start", phase="apply")
    current = ClusterJournal.open(kube.api_client, namespace, plan_digest=DIGEST, chunk_bytes=400)
    current.record("start", stepId="s/n/cordon", phase="apply")
    with pytest.raises(JournalConflict):
        stale.record("start", stepId="s/m/cordon", phase="apply")
    for _ in range(4):  # across chunks
        current.record("end", stepId="s/n/cordon", phase="apply", result="ok")
    records = read_cluster_journal(kube.api_client, namespace, DIGEST)
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert "s/m/cordon" not in json.dumps(records)
    cms, _ = kube.list_all(path_of("v1", "configmaps", namespace=namespace))
    assert len([c for c in cms if c["metadata"]["name"].startswith("dra-migrate-journal-")]) >= 2


def test_the_api_server_refuses_a_configmap_over_1_mib(kube: Kube, namespace: str) -> None:
    """The cap the journal's chunks stay far below (cluster_journal.CHUNK_BYTES)."""
    body = {"metadata": {"name": f"big-{RUN}"}, "data": {"a": "x" * (1024 * 1024 + 1)}}
    with pytest.raises(ApiError) as e:
        kube.create(path_of("v1", "configmaps", namespace=namespace), body)
    assert e.value.status == 422
