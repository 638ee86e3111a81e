"""What the twin does so a big wave is played in time (issue 25): kwok's start checked by its readiness, one
write per device-plugin transition, plays in parallel for a whole wave, and a rehearsal-only timeout floor
that grows with the wave.

The kwok here is a stand-in script (the unit tier runs no binaries); the real one is test_kwok.py's.
"""

from __future__ import annotations

import copy
import os
import stat
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dra_migrate.errors import InputError
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan, PoolStage
from dra_migrate.rehearse.run import CANARY_WINDOW_S, MIN_TIMEOUT_S, canary_real_s, twin_floor_s, twin_plan, twin_timing
from dra_migrate.sim.kube import Kube
from dra_migrate.sim.kwok import CANARY_WORKERS, KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec
from dra_migrate.sim.stages import A_DP, NODE_PLAY_PARALLELISM, POD_PLAY_PARALLELISM, config_documents, stages
from dra_migrate.sim.timing import REALISTIC, profile
from dra_migrate.testing.server import FakeServer
from tests.unit.helpers import unreachable_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "plans" / "demo-example.yaml"

# -- kwok's start ------------------------------------------------------------------------------


def _fake_kwok(tmp_path: Path, body: str) -> Path:
    """An executable standing in for kwok: `body` runs with `port` (of --server-address) and `marker`."""
    script = tmp_path / "kwok"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            """\
            import http.server, sys, time
            port = int([a for a in sys.argv if a.startswith("--server-address=")][0].rsplit(":", 1)[1])
            marker = __file__ + ".serving"
            """
        )
        + textwrap.dedent(body)
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_a_kwok_that_dies_after_two_seconds_is_reported_not_taken_for_a_running_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old check waited a fixed 2 s and took any kwok still alive then for a started one."""
    fake = _fake_kwok(
        tmp_path,
        """\
        print("E1202 could not list nodes: the server is unreachable", flush=True)
        time.sleep(2.5)
        sys.exit(3)
        """,
    )
    monkeypatch.setenv("DRA_MIGRATE_KWOK", str(fake))
    fleet = KwokFleet(unreachable_kubeconfig(tmp_path), [], workdir=tmp_path / "w")
    with pytest.raises(InputError, match=r"kwok exited \(3\) at start: E1202 could not list nodes"):
        fleet.start()
    assert not fleet.alive()


def test_start_returns_once_kwok_answers_its_healthz_not_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kwok serves /healthz only once its controllers run; the stand-in starts serving after 2.5 s (the old
    fixed wait returned at 2 s, before it)."""
    fake = _fake_kwok(
        tmp_path,
        """\
        time.sleep(2.5)

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/healthz" else 404)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        srv = http.server.HTTPServer(("127.0.0.1", port), H)
        open(marker, "w").close()
        srv.serve_forever()
        """,
    )
    monkeypatch.setenv("DRA_MIGRATE_KWOK", str(fake))
    fleet = KwokFleet(unreachable_kubeconfig(tmp_path), [], workdir=tmp_path / "w")
    try:
        fleet.start()
        assert os.path.exists(str(fake) + ".serving"), "start returned before kwok served"
        assert fleet.alive()
    finally:
        fleet.stop(timeout=2)


def test_a_kwok_that_never_answers_is_an_error_naming_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_kwok(tmp_path, "time.sleep(60)\n")
    monkeypatch.setenv("DRA_MIGRATE_KWOK", str(fake))
    fleet = KwokFleet(unreachable_kubeconfig(tmp_path), [], workdir=tmp_path / "w")
    monkeypatch.setattr(KwokFleet, "wait_started", _short(KwokFleet.wait_started))
    started = time.monotonic()
    with pytest.raises(InputError, match=r"kwok did not start within 1s") as e:
        fleet.start()
    assert "kwok.log" in (e.value.hint or "")
    assert time.monotonic() - started < 30 and not fleet.alive()


def _short(wait: object) -> object:
    def waiting(self: KwokFleet, healthz: str, timeout_s: float = 1) -> None:
        return wait(self, healthz, 1)  # type: ignore[operator]

    return waiting


# -- one write per transition, a wave's plays at once -------------------------------------------


@pytest.mark.parametrize(
    ("stage", "state"),
    [("device-plugin-stop", "stopped"), ("device-plugin-start", "running"), ("device-plugin-gone", "gone")],
)
def test_a_device_plugin_transition_is_one_status_patch_carrying_its_annotation(stage: str, state: str) -> None:
    """Before, each transition was two PATCHes of the Node: the status, then the state annotation."""
    (spec,) = [s["spec"] for s in stages(profile("realistic", 0.01)) if s["metadata"]["name"] == stage]
    (step,) = spec["steps"]
    patch = step["patch"]
    assert patch["subresource"] == "status"
    assert f'"{A_DP}": {state}' in patch["template"] and "\nstatus:" in patch["template"]


def test_kwok_plays_a_whole_wave_of_the_2000_node_bench_at_once() -> None:
    """bench/rehearse.py's 2,000-node plan switches 80 nodes' plugins in one step; 16 units played them in
    five rounds of the API server's latency."""
    (options,) = [d for d in config_documents(profile("realistic", 0.01)) if d["kind"] == "KwokConfiguration"]
    assert options["options"]["nodePlayStageParallelism"] == NODE_PLAY_PARALLELISM >= 80
    assert options["options"]["podPlayStageParallelism"] == POD_PLAY_PARALLELISM >= 80


# -- the rehearsal's timeout floor ------------------------------------------------------------------


def test_the_floor_grows_with_the_wave() -> None:
    assert twin_floor_s(0) == MIN_TIMEOUT_S
    assert twin_floor_s(80) > twin_floor_s(10) > MIN_TIMEOUT_S
    assert twin_floor_s(80) >= MIN_TIMEOUT_S + 80


def _timeouts(plan: Plan) -> dict[str, list[float]]:
    return {s.name: [x.timeout_s for x in (s.node_steps if isinstance(s, PoolStage) else s.steps)] for s in plan.stages}


def test_the_twins_timeouts_are_floored_by_each_stages_largest_wave_and_the_plan_keeps_its_own() -> None:
    """A stage of 80-node waves gets a higher floor than one of 2-node waves; the reviewed plan (what apply
    runs on a cluster) is not changed."""
    from dra_migrate.cluster.snapshot import load_snapshot

    plan = plan_io.load(PLAN)
    body = copy.deepcopy(plan_io.body_of(plan))
    pools = [s for s in body["stages"] if s.get("waves")]
    big, small = pools[0], pools[-1]
    assert big is not small, "the fixture plan has one pool"
    node = big["waves"][0]["nodes"][0]
    nodes = [{**node, "node": f"{node['node']}-{i}"} for i in range(80)]
    big["waves"] = [{**big["waves"][0], "nodes": nodes}]
    small["waves"] = [{**w, "nodes": (w.get("nodes") or [])[:2]} for w in small["waves"]]
    sealed = plan_io.seal(body)
    before = copy.deepcopy(sealed)
    state = load_snapshot(ROOT / "fixtures" / "clusters" / "demo.yaml")
    derived = _timeouts(twin_plan(Plan.from_dict(sealed), state, 0.001))  # every scaled timeout below any floor
    assert set(derived[big["name"]]) - {0.0} == {float(twin_floor_s(80))}  # 0: a step without a timeout
    small_wave = max(len(w["nodes"]) for w in small["waves"])
    assert 0 < small_wave <= 2
    assert set(derived[small["name"]]) - {0.0} == {float(twin_floor_s(small_wave))} != {float(twin_floor_s(80))}
    assert sealed == before


# -- the canary's window -----------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.01, 0.05, 0.1, 0.5, 1.0])
def test_the_twins_canary_runs_scaled_but_never_under_its_window(scale: float) -> None:
    """The canary's start and run scale like every other delay (they were 1.5 s of real time on every
    wave's critical path at any scale); a floor keeps its claim readable before the pod ends."""
    t = twin_timing(scale)
    window = t.container_start_s + t.canary_run_s
    scaled = (REALISTIC.container_start_s + REALISTIC.canary_run_s) * scale
    assert window == pytest.approx(max(scaled, CANARY_WINDOW_S))
    assert t.container_start_s == pytest.approx(REALISTIC.container_start_s * scale)  # a workload pod's start
    # What ran unscaled is counted at its real length in the rehearsed duration: only the floor's share.
    assert canary_real_s(t, scale) == pytest.approx(max(0.0, CANARY_WINDOW_S - scaled))
    assert window - canary_real_s(t, scale) == pytest.approx(scaled)


# -- the twin's canaries -----------------------------------------------------------------------


def test_a_waves_canaries_finish_together_not_a_few_at_a_time(tmp_path: Path) -> None:
    """80 canaries bound at once (a 2,000-node wave) on a twin whose API server answers in 0.1 s: each
    finish reads its claim and its node's slices and patches the status. On 8 workers they finished in ten
    rounds (the last ~3 s after its window; 12 s on the loaded 2,000-node twin); together, in about one."""
    server = FakeServer()
    nodes = [GpuNodeSpec(name=f"gpu-{i}") for i in range(80)]
    fleet = KwokFleet(unreachable_kubeconfig(tmp_path), nodes, workdir=tmp_path / "w")
    fleet.kube = Kube(server.client)
    pods = []
    for i, n in enumerate(nodes):
        pod = {
            "metadata": {"name": f"canary-{i}", "namespace": "default", "uid": f"u{i}"},
            "spec": {"nodeName": n.name, "containers": [{"name": "canary", "image": "x"}]},
            "status": {"phase": "Pending"},
        }
        pods.append(server.put(f"/api/v1/namespaces/default/pods/canary-{i}", pod))
    server.latency_s = 0.1
    stop = threading.Event()
    runner = threading.Thread(target=fleet._timers.run, args=(stop,), kwargs={"workers": CANARY_WORKERS}, daemon=True)
    runner.start()
    try:
        start = time.monotonic()
        for pod in pods:
            fleet._on_canary("MODIFIED", pod)
        while time.monotonic() - start < 10:
            finished = [p for p in server.objects("/api/v1/pods") if p["status"]["phase"] in ("Succeeded", "Failed")]
            if len(finished) == len(pods):
                break
            time.sleep(0.05)
        took = time.monotonic() - start
    finally:
        stop.set()
        fleet._timers.wake()
        runner.join(5)
    assert len(finished) == len(pods)
    window = fleet.timing.container_start_s + fleet.timing.canary_run_s
    assert took < window + 1.5, f"80 canaries took {took:.1f}s after a {window:g}s window"


# -- the twin's Go processes' GOGC -------------------------------------------------------------------


def test_the_twins_control_plane_and_kwok_run_with_the_rehearsals_gogc_unless_the_user_set_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rehearsal's twin collects garbage at GOGC=200 (twin.TWIN_GOGC): its API server spent 17.5 s of a
    2,000-node rehearsal's CPU in the collector even so. tools/k8s/up passes its environment to the components;
    kwok gets it from the fleet. A GOGC the user exported is theirs."""
    import dra_migrate.rehearse.twin as twin_mod
    from dra_migrate.rehearse.twin import TWIN_GOGC, Twin, go_env

    monkeypatch.delenv("GOGC", raising=False)
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, body in (
        ("up", 'echo "GOGC=${GOGC:-unset}" > "$(dirname "$0")/seen"; mkdir -p "$1"; echo "$1/kubeconfig"\n'),
        ("down", "exit 0\n"),
    ):
        (tools / name).write_text("#!/usr/bin/env bash\n" + body)
        (tools / name).chmod(0o755)
    monkeypatch.setenv("DRA_MIGRATE_TOOLS", str(tools))
    monkeypatch.setattr(twin_mod, "binary_dir", lambda into: into)
    with Twin.start(go_gc=TWIN_GOGC):
        pass
    assert (tools / "seen").read_text().strip() == "GOGC=200"

    fake = _fake_kwok(
        tmp_path, 'import os\nprint("GOGC=" + os.environ.get("GOGC", "unset"), flush=True)\nsys.exit(3)\n'
    )
    monkeypatch.setenv("DRA_MIGRATE_KWOK", str(fake))
    fleet = KwokFleet(unreachable_kubeconfig(tmp_path), [], workdir=tmp_path / "w", env=go_env(TWIN_GOGC))
    with pytest.raises(InputError, match=r"at start: GOGC=200"):
        fleet.start()

    monkeypatch.setenv("GOGC", "50")
    assert go_env(TWIN_GOGC) == {}, "the user's GOGC is kept"
    with Twin.start(go_gc=TWIN_GOGC):
        pass
    assert (tools / "seen").read_text().strip() == "GOGC=50"
