"""The API client (dra_migrate.kube) against a real kube-apiserver: what only the server can show --
its user agent in the audit log, its Status on a refusal, and the list+watch helper's handling of the
server's own watch semantics (selectors, bookmarks, timeouts, 410 Gone on a compacted resourceVersion)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import controlplane
import pytest
from conftest import wait_for

from dra_migrate.kube import ADDED, DELETED, MODIFIED, USER_AGENT, ApiError, Event, Informer, Kube, connect, path_of

pytestmark = pytest.mark.cluster


def _cm(name: str, app: str, value: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": app}}, "data": {"v": value}}


def test_requests_carry_the_tools_user_agent_and_errors_keep_the_servers_status(
    control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    client = connect(control_plane.kubeconfig)
    client.get(path_of("v1", "configmaps", namespace=namespace))
    with pytest.raises(ApiError) as err:
        client.get(path_of("v1", "configmaps", "absent", namespace))
    e = err.value
    assert (e.status, e.reason, e.method, e.transient) == (404, "NotFound", "GET", False)
    assert 'configmaps "absent" not found' in e.api_message
    events = wait_for(
        "the audit log to show our requests",
        lambda: [ev for ev in controlplane.audit_events(control_plane, USER_AGENT) if namespace in ev["requestURI"]],
    )
    assert all(ev["userAgent"].startswith(f"{USER_AGENT} ") or ev["userAgent"] == USER_AGENT for ev in events)
    assert client.stats.requests == 2


def test_the_informer_follows_one_kind_by_selector_across_watch_timeouts(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str
) -> None:
    path = path_of("v1", "configmaps", namespace=namespace)
    kube.create(path, _cm("before", "x"))
    kube.create(path, _cm("other", "y"))  # not selected
    # timeoutSeconds=1: the server ends each watch after a second, so the informer re-watches several
    # times during the test, each time from the last resourceVersion it saw (bookmarks included).
    informer = Informer(connect(control_plane.kubeconfig), path, label_selector="app=x", timeout_seconds=1)
    seen: list[Event] = []
    lock = threading.Lock()

    def record(event: Event) -> None:
        with lock:
            seen.append(event)

    thread = informer.run(record)
    try:
        assert informer.synced.wait(10)
        kube.create(path, _cm("during", "x"))
        time.sleep(2.5)  # at least two watch timeouts
        kube.merge_patch(path_of("v1", "configmaps", "during", namespace), {"data": {"v": "2"}})
        kube.delete(path_of("v1", "configmaps", "before", namespace))

        def done() -> bool:
            with lock:
                return any(e.type == DELETED for e in seen)

        wait_for("the delete to be seen", done)
    finally:
        informer.close()
        thread.join(10)
    got = [(e.type, e.object["metadata"]["name"]) for e in seen]
    assert got == [(ADDED, "before"), (ADDED, "during"), (MODIFIED, "during"), (DELETED, "before")]
    assert informer.lists == 1 and informer.watches >= 3, (informer.lists, informer.watches)
    assert [o["metadata"]["name"] for o in informer.objects()] == ["during"]
    assert not thread.is_alive()


def test_a_compacted_resource_version_is_410_and_the_informer_lists_again(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str
) -> None:
    # Events: kube-apiserver keeps no watch cache for them (DefaultWatchCacheSizes, events: 0), so their
    # watches are served by etcd itself and a compacted resourceVersion is really gone. (A kind with a
    # watch cache that has not filled up answers an old resourceVersion with the current objects.)
    path = path_of("v1", "events", namespace=namespace)
    created = kube.create(path, _event("a", namespace))
    _compact(control_plane, int(created["metadata"]["resourceVersion"]))
    # The server's own answer to a resourceVersion older than its history (the shape the informer must
    # recognise): an ERROR event, or the watch request itself refused, with a Status of code 410.
    try:
        events = list(kube.watch(path, "1", timeout_seconds=2))
        assert events and events[0]["type"] == "ERROR" and events[0]["object"]["code"] == 410, events
    except ApiError as e:
        assert e.status == 410

    informer = Informer(connect(control_plane.kubeconfig), path, timeout_seconds=5)
    stream = informer.events()
    assert next(stream).type == ADDED
    informer.resource_version = "1"  # as if the informer had been away for longer than etcd's history
    kube.create(path, _event("b", namespace))
    names = []
    for event in stream:
        names.append((event.type, event.object["metadata"]["name"]))
        if event.object["metadata"]["name"] == "b":
            break
    informer.close()
    assert names == [(ADDED, "b")] and informer.lists == 2


def _event(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": namespace},
        "reason": "Test",
        "message": "test",
        "type": "Normal",
    }


def _compact(cp: controlplane.ControlPlane, revision: int) -> None:
    """Compact etcd's history up to `revision` (etcd's v3 JSON gateway, loopback, no auth in tools/k8s/up),
    as kube-apiserver does every 5 minutes (--etcd-compaction-interval): older resourceVersions are gone."""
    port = controlplane.read_env(cp.dir)["ETCD_PORT"]
    body = json.dumps({"revision": str(revision), "physical": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v3/kv/compaction", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def test_a_paged_list_that_outlives_etcds_history_is_read_again_whole_at_one_resource_version(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str
) -> None:
    """list_all (an Informer's list, the executor's decisions) is one list at one resourceVersion: when etcd
    compacts the first page's resourceVersion away, the server's 410 Expired offers to go on at the latest one,
    which would stitch two versions together; the list is read again whole instead (client-go's pager)."""
    path = path_of("v1", "events", namespace=namespace)  # no watch cache: pages come from etcd itself
    for name in ("a", "c", "d"):
        kube.create(path, _event(name, namespace))

    created: list[int] = []

    class CompactingAfterFirstPage(Kube):
        def get(self, path: str, query: Any = (), **kw: Any) -> dict[str, Any]:
            page = super().get(path, query, **kw)
            if dict(query).get("limit") and not dict(query).get("continue"):
                later = kube.create(path, _event("b", namespace))  # sorts before the token's key "c"
                created.append(int(later["metadata"]["resourceVersion"]))
                _compact(control_plane, created[0])
            return page

    lister = CompactingAfterFirstPage(kube.api_client)
    items, rv = lister.list_all(path, limit=2)
    assert sorted(i["metadata"]["name"] for i in items) == ["a", "b", "c", "d"]
    assert int(rv) >= created[0]  # the version of the list that holds "b", to watch from


def _bound_token(kube: Kube, namespace: str, account: str, secret: str) -> str:
    """A ServiceAccount token bound to a Secret: deleting the Secret revokes it (the API server checks the bound
    object on each request), as a rotated projected token stops working once it expires."""
    made = kube.create(path_of("v1", "secrets", namespace=namespace), {"metadata": {"name": secret}})
    review = kube.create(
        path_of("v1", "serviceaccounts", account, namespace, sub="token"),
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "name": secret,
                    "uid": made["metadata"]["uid"],
                },
            },
        },
    )
    return str(review["status"]["token"])


def test_a_rotated_token_file_is_read_again_when_the_server_refuses_the_old_token(
    control_plane: controlplane.ControlPlane, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    """A kubeconfig whose user reads `tokenFile` (a projected token a CI runner or a sidecar rotates): the Python
    client read it once, so once the old token stopped working every request was 401, hours into an apply."""
    kube.create(path_of("v1", "serviceaccounts", namespace=namespace), {"metadata": {"name": "runner"}})
    token = tmp_path / "token"
    token.write_text(_bound_token(kube, namespace, "runner", "first"))
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": control_plane.server, "certificate-authority": str(control_plane.dir / "ca.crt")},
            }
        ],
        "users": [{"name": "u", "user": {"tokenFile": str(token)}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": namespace}}],
    }
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps(config))
    runner = connect(kubeconfig)
    assert runner.get("/api")["kind"] == "APIVersions"
    new = _bound_token(kube, namespace, "runner", "second")
    token.write_text(new)  # rotated ...
    kube.delete(path_of("v1", "secrets", "first", namespace))  # ... and the old one no longer accepted
    deadline = time.monotonic() + 60
    # The server may accept the revoked token a few seconds more (its authentication cache); every request
    # succeeds meanwhile and after, the first refused one having read the file again.
    while runner.api_client.configuration.api_key.get("BearerToken") != f"Bearer {new}":
        assert time.monotonic() < deadline, "the old token was never refused"
        assert runner.get("/api")["kind"] == "APIVersions"
        time.sleep(1)
    assert runner.get("/api")["kind"] == "APIVersions"
