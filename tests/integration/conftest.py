"""Fixtures for tests/integration (every test here is marked ``cluster``).

``control_plane``: one real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler; see tools/k8s/up) per test session. Building the binaries on first use takes minutes
(~6 min cold); a failed build or start-up is an error for every test that uses the fixture (in CI and
locally alike) — never a skip. Deselect with ``-m "not cluster"`` to run without it.

``kwok``: one KWOK fleet (dra_migrate/sim/kwok.py) on that control plane per session; each module adds its
GPU nodes to it and removes them afterwards (``nodes.on_kwok``), so one kwok process plays them all.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import controlplane
import pytest

from dra_migrate.bundled import bundled
from dra_migrate.errors import InputError
from dra_migrate.sim.kube import Kube, new_api_client, path_of
from dra_migrate.sim.kwok import KwokFleet, kwok_binary
from dra_migrate.sim.timing import PROFILES, TimingProfile, profile

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _fail(what: str, err: Exception) -> NoReturn:
    hint = (
        ""
        if IN_CI
        else "\nRun tools/k8s/build (or tools/k8s/up DIR) by hand to see the full output, "
        'or deselect these tests with -m "not cluster".'
    )
    pytest.fail(f"{what}: {err}{hint}", pytrace=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dra-migrate simulator")
    group.addoption("--sim-timing", choices=sorted(PROFILES), default="instant",
                    help="timing of the session's KWOK fleet (kwok fixture; dra_migrate/sim/timing.py)")  # fmt: skip
    group.addoption("--sim-time-scale", type=float, default=1.0, help="multiplies every simulated delay")


@pytest.fixture(scope="session")
def sim_timing(request: pytest.FixtureRequest) -> TimingProfile:
    """The timing of the session's KWOK fleet (`--sim-timing`, `--sim-time-scale`): `realistic` runs the
    modules on it under the measured delays."""
    return profile(str(request.config.getoption("--sim-timing")), float(request.config.getoption("--sim-time-scale")))


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[controlplane.ControlPlane]:
    if not controlplane.binaries_present():
        # Show the (long) build on the terminal instead of letting pytest capture it silently.
        capman = request.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            print(
                f"\nKubernetes binaries missing in {controlplane.cache_dir()}; running tools/k8s/build "
                "(measured: ~6 min with empty Go caches on 2 cores)",
                flush=True,
            )
            try:
                controlplane.build()
            except controlplane.ControlPlaneError as e:
                _fail("building the Kubernetes binaries failed", e)
    try:
        cp = controlplane.start(tmp_path_factory.mktemp("k8s"))
    except controlplane.ControlPlaneError as e:
        _fail("starting the control plane failed", e)
    yield cp
    controlplane.stop(cp)


# kwok renews a node's Lease at a quarter of its duration: every 3 s here (tests see a renewal quickly), well
# inside the node lifecycle controller's grace.
TEST_LEASE_S = 12


@pytest.fixture(scope="session")
def kwok(
    request: pytest.FixtureRequest,
    control_plane: controlplane.ControlPlane,
    sim_timing: TimingProfile,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[KwokFleet]:
    """The session's KWOK fleet, started with no nodes: modules add theirs (`nodes.on_kwok`)."""
    try:
        kwok_binary()
    except InputError:
        capman = request.config.pluginmanager.getplugin("capturemanager")
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            print("\nkwok missing; running tools/kwok/build (about 3 minutes cold on 2 cores)", flush=True)
            build = subprocess.run([str(bundled("tools/kwok/build"))], stdin=subprocess.DEVNULL, check=False)
        if build.returncode != 0:
            _fail("building kwok failed", RuntimeError(f"tools/kwok/build exited {build.returncode}"))
    fleet = KwokFleet(
        control_plane.kubeconfig,
        [],
        workdir=tmp_path_factory.mktemp("kwok"),
        timing=sim_timing,
        lease_s=TEST_LEASE_S,
        fleet=f"tests-{uuid.uuid4().hex[:6]}",
    )
    try:
        fleet.start()
    except InputError as e:
        _fail("starting kwok failed", e)
    yield fleet
    fleet.stop()


@pytest.fixture(scope="module")
def real_node_turn() -> Iterator[None]:
    """This module's turn on the machine's one real node (controlplane.real_node_lock)."""
    with controlplane.real_node_lock():
        yield


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 10) -> Any:
    """Poll until `probe` returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def kube(control_plane: controlplane.ControlPlane) -> Iterator[Kube]:
    """An admin client for test set-up (user agent dra-migrate-tests, apart from the tool's)."""
    api = new_api_client(control_plane.kubeconfig, "dra-migrate-tests")
    yield Kube(api)
    api.close()


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    # ServiceAccount admission needs the `default` account, which the controller manager creates.
    wait_for("default service account", lambda: kube.get_or_none(path_of("v1", "serviceaccounts", "default", name)))
    yield name
    kube.delete(path_of("v1", "namespaces", name))
