"""Fixtures for tests/integration (every test here is marked ``cluster``).

``control_plane``: one real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler; see tools/k8s/up) per test session. Building the binaries on first use takes minutes
(~6 min cold); a failed build or start-up is an error for every test that uses the fixture (in CI and
locally alike) — never a skip. Deselect with ``-m "not cluster"`` to run without it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import NoReturn

import controlplane
import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _fail(what: str, err: Exception) -> NoReturn:
    hint = (
        ""
        if IN_CI
        else "\nRun tools/k8s/build (or tools/k8s/up DIR) by hand to see the full output, "
        'or deselect these tests with -m "not cluster".'
    )
    pytest.fail(f"{what}: {err}{hint}", pytrace=False)


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
