"""The fault proxy itself, and `dra-migrate inventory` through it: the same answer, or a clean failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for
from faultproxy import FaultProxy
from kubernetes import client, config

from dra_migrate.sim.kube import ApiError, Kube, path_of
from tests.unit.cli import Result, run

pytestmark = pytest.mark.cluster


def proxied_kube(proxy: FaultProxy, tmp_path: Path) -> Kube:
    """A client of the proxy that sees each fault as it is: no urllib3 retries (which must be configured
    before the ApiClient is made: its connection pool reads them once)."""
    conf = client.Configuration()
    kc = str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
    config.load_kube_config(config_file=kc, client_configuration=conf)  # type: ignore[no-untyped-call]
    conf.retries = False
    return Kube(client.ApiClient(conf))


def test_rate_zero_forwards_everything(control_plane: controlplane.ControlPlane, kube: Kube, tmp_path: Path) -> None:
    with FaultProxy(control_plane, rate=0) as proxy:
        through = proxied_kube(proxy, tmp_path)
        assert through.get("/version") == kube.get("/version")
        # Writes, and the identity upstream is the admin's whoever the client is.
        name = "faultproxy-probe"
        path = path_of("v1", "configmaps", name, "default")
        through.create(path_of("v1", "configmaps", namespace="default"), {"metadata": {"name": name}})
        through.merge_patch(path, {"data": {"k": "v"}})
        assert kube.get(path)["data"] == {"k": "v"}
        through.delete(path)
        assert kube.get_or_none(path) is None
        # Pages of a list come through whole.
        items, _ = through.list_all("/api/v1/namespaces")
        assert {"default", "kube-system"} <= {i["metadata"]["name"] for i in items}
        with pytest.raises(ApiError) as e:
            through.get("/api/v1/pods", [("watch", "true")])
        assert e.value.status == 400
        counts = proxy.counts
    assert counts.get("watch-refused") == 1
    assert proxy.injected == 0 and counts["forwarded"] == 5


def test_a_list_whose_continue_token_expired_goes_on_through_the_real_server(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """The API server's answer once a continue token's resourceVersion is compacted away (410 Expired, with
    a token at the latest resourceVersion), then the real server's continuation: every object once."""
    for i in range(7):
        kube.create(path_of("v1", "configmaps", namespace=namespace), {"metadata": {"name": f"cm-{i}"}})
    collection = path_of("v1", "configmaps", namespace=namespace)
    with FaultProxy(control_plane, rate=0, expire_continues=2) as proxy:
        pages = list(proxied_kube(proxy, tmp_path).pages(collection, limit=2))
        counts = proxy.counts
    names = [i["metadata"]["name"] for p in pages for i in p["items"]]
    assert len(names) == len(set(names)), names  # the pages already read are not read again
    assert {f"cm-{i}" for i in range(7)} <= set(names)
    assert counts["expired"] == 2  # two of the continued requests were answered 410, and went on


@pytest.mark.parametrize(("fault", "status"), [("500", 500), ("429", 429)])
def test_status_faults(control_plane: controlplane.ControlPlane, tmp_path: Path, fault: str, status: int) -> None:
    with FaultProxy(control_plane, rate=1, faults=(fault,)) as proxy:
        through = proxied_kube(proxy, tmp_path)
        _m, url, headers, _b, _p = through.api_client.param_serialize("GET", "/version", auth_settings=[])
        resp = through.api_client.call_api("GET", url, header_params=headers)
        assert resp.status == status
        assert json.loads(resp.read())["code"] == status
        if fault == "429":
            assert resp.headers.get("Retry-After") == "1"
    assert proxy.counts == {fault: 1}


def test_dropped_connection(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    with FaultProxy(control_plane, rate=1, faults=("drop",)) as proxy:
        through = proxied_kube(proxy, tmp_path)
        with pytest.raises(Exception) as e:
            through.get("/version")
        assert not isinstance(e.value, ApiError)  # no response at all, not an HTTP error
    assert proxy.counts == {"drop": 1}


def test_faults_follow_the_seed(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    def pattern(seed: int) -> list[str]:
        out = []
        with FaultProxy(control_plane, rate=0.5, seed=seed, faults=("500",)) as proxy:
            through = proxied_kube(proxy, tmp_path)
            for _ in range(20):
                try:
                    through.get("/version")
                    out.append("ok")
                except ApiError as e:
                    out.append(str(e.status))
        return out

    first = pattern(3)
    assert first == pattern(3)
    assert first.count("500") > 0 and first.count("ok") > 0


# ----------------------------------------------------------------------------------------------------
# The tool through the proxy.


@pytest.fixture
def gpu_workloads(kube: Kube, namespace: str) -> Iterator[str]:
    """Something for the inventory to find: GPU pods and a Deployment that no scheduler will place
    (so nothing moves while we compare)."""
    pod_spec = {
        "schedulerName": "nobody",
        "containers": [
            {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
        ],
    }
    for i in range(3):
        kube.create(path_of("v1", "pods", namespace=namespace), {"metadata": {"name": f"bare-{i}"}, "spec": pod_spec})
    kube.create(
        path_of("apps/v1", "deployments", namespace=namespace),
        {
            "metadata": {"name": "trainer"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "trainer"}},
                "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": pod_spec},
            },
        },
    )
    pods = path_of("v1", "pods", namespace=namespace)
    wait_for("the Deployment's pods", lambda: len(kube.list_all(pods)[0]) == 5, timeout=30)
    yield namespace


def inventory(kubeconfig: Path) -> Result:
    return run("inventory", "--kubeconfig", str(kubeconfig), "-o", "json")


def comparable(stdout: str) -> dict[str, Any]:
    """All but `cluster` (where it was read from and when)."""
    return {k: v for k, v in json.loads(stdout).items() if k != "cluster"}


def direct(cp: controlplane.ControlPlane) -> dict[str, Any]:
    r = inventory(cp.kubeconfig)
    assert r.code == 0, r.stderr
    return comparable(r.stdout)


def mine(inv: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
    return [c for c in inv["consumers"] if c["namespace"] == namespace]


def assert_same_as_direct(proxied: dict[str, Any], before: dict[str, Any], after: dict[str, Any], ns: str) -> None:
    """Equal to the direct inventory read just before or just after. Other tests' leftovers (nodes the
    node controller taints, namespaces being deleted) can change the cluster meanwhile; then at least
    this test's own workloads, which nothing touches, must agree."""
    if before == after:
        assert proxied == before
    elif proxied not in (before, after):
        assert mine(proxied, ns) == mine(before, ns) == mine(after, ns)


def test_inventory_through_a_faultless_proxy_equals_the_direct_one(
    control_plane: controlplane.ControlPlane, gpu_workloads: str, tmp_path: Path
) -> None:
    before = direct(control_plane)
    assert len(mine(before, gpu_workloads)) == 4  # three bare pods and the Deployment
    with FaultProxy(control_plane, rate=0) as proxy:
        r = inventory(proxy.kubeconfig(tmp_path / "proxy.kubeconfig"))
    assert r.code == 0, r.stderr
    assert_same_as_direct(comparable(r.stdout), before, direct(control_plane), gpu_workloads)
    assert json.loads(r.stdout)["cluster"]["source"] == "live"
    assert proxy.injected == 0 and proxy.counts["forwarded"] > 10


def test_inventory_through_faults_is_right_or_fails_cleanly(
    control_plane: controlplane.ControlPlane, gpu_workloads: str, tmp_path: Path
) -> None:
    outcomes: list[str] = []
    injected: dict[str, int] = {}
    for seed in range(8):
        before = direct(control_plane)
        with FaultProxy(control_plane, rate=0.3, seed=seed) as proxy:
            r = inventory(proxy.kubeconfig(tmp_path / f"proxy-{seed}.kubeconfig"))
        for k, v in proxy.counts.items():
            injected[k] = injected.get(k, 0) + v
        if r.code == 0:
            assert_same_as_direct(comparable(r.stdout), before, direct(control_plane), gpu_workloads)
            outcomes.append("same")
        else:
            assert r.code == 1, (r.code, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1, r.stderr
            assert lines[0].startswith("error: ") and "internal error" not in lines[0], lines[0]
            assert r.stdout == ""
            outcomes.append(lines[0])
    assert sum(injected.get(f, 0) for f in ("500", "429", "drop")) > 0, injected
    # What the tool did with them, for whoever improves its retries.
    print(f"\nfault proxy at 30%: counts {injected}; outcomes:\n  " + "\n  ".join(outcomes))
