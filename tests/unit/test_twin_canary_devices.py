"""The twin's canary (sim/kwok.py CanaryDevices): what its `nvidia-smi -L` prints comes from watched copies
of the claims and the slices, not a GET of the claim and a LIST of the node's slices per canary, which
waited on the API server on every wave's critical path (issue 25) — and falls back to those reads when a
copy lags the pod (separate streams), so a canary never prints less than the cluster shows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from dra_migrate.kube import Kube
from dra_migrate.sim.kwok import CLAIMS, SLICES, CanaryDevices
from dra_migrate.testing.server import FakeServer

NODE, NS = "gpu-1", "default"
LINE = "GPU 0: NVIDIA H100 (UUID: GPU-aaaa)"


def claim(name: str) -> dict[str, Any]:
    results = [{"driver": "gpu.nvidia.com", "pool": NODE, "device": "gpu-0", "request": "r"}]
    return {"metadata": {"name": name}, "status": {"allocation": {"devices": {"results": results}}}}


def slice_() -> dict[str, Any]:
    attrs = {"uuid": {"string": "GPU-aaaa"}, "productName": {"string": "NVIDIA H100"}}
    return {
        "metadata": {"name": f"{NODE}-gpu"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": NODE, "pool": {"name": NODE, "generation": 1},
                 "devices": [{"name": "gpu-0", "attributes": attrs}]},
    }  # fmt: skip


def pod(claim_name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "dra-migrate-canary-1", "namespace": NS},
        "spec": {"nodeName": NODE},
        "status": {"extendedResourceClaimStatus": {"resourceClaimName": claim_name}},
    }


@pytest.fixture
def server() -> FakeServer:
    s = FakeServer()
    s.put(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/c1", claim("c1"))
    s.put(f"{SLICES}/{NODE}-gpu", slice_())
    return s


@pytest.fixture
def devices(server: FakeServer) -> Iterator[CanaryDevices]:
    d = CanaryDevices(Kube(server.client))
    d.start()
    deadline = time.monotonic() + 5
    while not d.lines_ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield d
    d.close()


def reads(server: FakeServer, since: int) -> list[str]:
    return [c.path for c in server.client.calls[since:] if c.method == "GET" and "watch" not in c.query]


def test_a_canarys_devices_come_from_the_watched_copies(server: FakeServer, devices: CanaryDevices) -> None:
    before = len(server.client.calls)
    assert devices.lines(NODE, pod("c1")) == [LINE]
    assert reads(server, before) == [], "no GET of the claim, no LIST of the slices"


def test_a_claim_the_copy_has_not_seen_yet_is_read_from_the_server(server: FakeServer, devices: CanaryDevices) -> None:
    devices.close()  # the claims watch stops delivering: its copy lags
    server.put(f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/c2", claim("c2"))
    before = len(server.client.calls)
    assert devices.lines(NODE, pod("c2")) == [LINE]
    assert reads(server, before) == [f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/c2"]


def test_unstarted_it_reads_the_server_as_before(server: FakeServer) -> None:
    d = CanaryDevices(Kube(server.client))
    before = len(server.client.calls)
    assert d.lines(NODE, pod("c1")) == [LINE]
    assert reads(server, before) == [f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/c1", SLICES]
    assert CLAIMS.endswith("/resourceclaims")
