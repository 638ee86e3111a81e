"""The API client (dra_migrate.kube) on a scripted fake: retries, errors, rate limit, list+watch.

Only what a fake can show: the real server's behaviour is in tests/integration/test_kube_live.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from urllib3.exceptions import NewConnectionError, ProtocolError

from dra_migrate.kube import (
    ADDED,
    DELETED,
    MODIFIED,
    USER_AGENT,
    ApiError,
    Informer,
    Kube,
    RateLimit,
    RetryPolicy,
    Unreachable,
    is_transient,
    new_api_client,
    rbac_target,
)
from dra_migrate.kube.config import throttled
from dra_migrate.testing.kube import Call, FakeApiClient, FakeResponse, status


def _kube(client: FakeApiClient, retries: int = 3, **kw: Any) -> tuple[Kube, list[float]]:
    slept: list[float] = []
    return Kube(client, retry=RetryPolicy(retries=retries, backoff_s=0.1, **kw), sleep=slept.append), slept


# -- retries -----------------------------------------------------------------------------------------


def test_transient_answers_are_retried_with_backoff_and_counted() -> None:
    client = FakeApiClient.scripted(
        FakeResponse(503, status(503, "ServiceUnavailable", "etcd leader changed")),
        ProtocolError("Connection aborted.", ConnectionResetError()),
        FakeResponse(429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "3"}),
        FakeResponse(200, {"ok": 1}),
    )
    kube, slept = _kube(client)
    assert kube.get("/api/v1/nodes") == {"ok": 1}
    assert len(client.calls) == 4
    assert 0.08 <= slept[0] <= 0.12 and 0.16 <= slept[1] <= 0.24  # exponential, +-20 % jitter
    assert slept[2] == 3.0  # the server's Retry-After, not our backoff
    s = kube.stats
    assert (s.requests, s.retries, s.throttled, s.unreachable) == (4, 3, 1, 1)


def test_retry_after_is_capped_and_retries_end() -> None:
    client = FakeApiClient.scripted(FakeResponse(429, status(429, "TooManyRequests", "no"), {"Retry-After": "900"}))
    kube, slept = _kube(client, retries=2)
    with pytest.raises(ApiError) as err:
        kube.get("/api/v1/pods")
    assert slept == [60.0, 60.0] and len(client.calls) == 3
    assert err.value.transient and err.value.status == 429


@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 422, 501])
def test_permanent_answers_are_raised_at_once(code: int) -> None:
    client = FakeApiClient.scripted(FakeResponse(code, status(code, "Nope", "refused")), FakeResponse(200, {}))
    kube, slept = _kube(client)
    with pytest.raises(ApiError) as err:
        kube.request("PATCH", "/api/v1/nodes/n1", body={"x": 1})
    assert len(client.calls) == 1 and slept == []
    assert not err.value.transient and not is_transient(err.value)


def test_a_refused_connection_fails_at_once_under_the_read_policy_and_is_retried_under_the_write_one() -> None:
    refused = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]
    reads = FakeApiClient.scripted(refused)
    kube, _ = _kube(reads, retry_refused=False)
    with pytest.raises(Unreachable) as err:
        kube.get("/version")
    assert len(reads.calls) == 1
    assert err.value.transient and "fake.invalid" in str(err.value) and "GET /version" in str(err.value)

    writes = FakeApiClient.scripted(refused, FakeResponse(200, {"ok": 1}))
    kube, slept = _kube(writes)
    assert kube.get("/version") == {"ok": 1} and len(slept) == 1


def test_eviction_can_opt_out_of_retrying_429() -> None:
    client = FakeApiClient.scripted(FakeResponse(429, status(429, "TooManyRequests", "PDB")), FakeResponse(201, {}))
    kube, _ = _kube(client)
    with pytest.raises(ApiError):
        kube.request("POST", "/api/v1/namespaces/a/pods/p/eviction", body={}, retry_status={500, 502, 503, 504})
    assert len(client.calls) == 1


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        'pods "c" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true',
        'pods "c" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=1, used: 0, limited: 0',
        'pods "c" is forbidden: failed quota: q: must specify limits.cpu for: canary',
        'pods "c" is forbidden: unable to create new content in namespace t because it is being terminated',
    ],
)
def test_a_403_from_admission_is_not_called_a_missing_permission(message: str) -> None:
    """403 Forbidden is both RBAC's answer (the authorizer's `User "x" cannot VERB resource ...`: k8s.io/apiserver
    v0.37.2 pkg/endpoints/handlers/responsewriters/errors.go ForbiddenStatusError) and admission's (Pod Security,
    ResourceQuota, NamespaceLifecycle: admission.NewForbidden). The canary refused by a namespace's Pod Security
    level was told to grant `create pods`, which it had."""
    kube, _ = _kube(FakeApiClient.scripted(FakeResponse(403, status(403, "Forbidden", message))))
    with pytest.raises(ApiError) as err:
        kube.create("/api/v1/namespaces/t/pods", {})
    assert "grant verb" not in str(err.value) and "admission" in err.value.hint, err.value.hint


def test_an_error_names_the_request_and_keeps_the_servers_status() -> None:
    body = status(403, "Forbidden", 'resourceslices.resource.k8s.io is forbidden: User "bob" cannot list')
    body["details"] = {"group": "resource.k8s.io", "kind": "resourceslices"}
    kube, _ = _kube(FakeApiClient.scripted(FakeResponse(403, body)))
    with pytest.raises(ApiError) as err:
        kube.get("/apis/resource.k8s.io/v1/resourceslices")
    e = err.value
    assert (e.method, e.path, e.status, e.reason) == (
        "GET",
        "/apis/resource.k8s.io/v1/resourceslices",
        403,
        "Forbidden",
    )
    assert e.details["group"] == "resource.k8s.io" and 'User "bob"' in e.api_message
    line = str(e)
    assert "GET /apis/resource.k8s.io/v1/resourceslices" in line and "forbidden" in line
    assert "grant verb 'list' on resource 'resourceslices' in API group 'resource.k8s.io'" in line


@pytest.mark.parametrize(
    ("path", "cluster_wide"),
    [
        ("/api/v1/pods", True),  # every namespace's pods: a RoleBinding in some namespaces is not enough
        ("/api/v1/nodes", True),
        ("/apis/resource.k8s.io/v1/resourceclaims", True),
        ("/api/v1/namespaces/team-a/pods", False),
        ("/api/v1/namespaces/kube-system", True),  # a Namespace object is cluster-scoped
    ],
)
def test_a_refusal_at_the_cluster_scope_says_a_cluster_role_binding_is_needed(path: str, cluster_wide: bool) -> None:
    """A user whose Roles let them list pods in their teams' namespaces is refused the cluster-wide list the
    inventory makes; granting `list pods` again in one more namespace does not help."""
    msg = 'pods is forbidden: User "bob" cannot list resource "pods" in API group "" at the cluster scope'
    kube, _ = _kube(FakeApiClient.scripted(FakeResponse(403, status(403, "Forbidden", msg))))
    with pytest.raises(ApiError) as err:
        kube.get(path)
    assert ("ClusterRoleBinding" in err.value.hint) is cluster_wide, err.value.hint


def test_a_body_that_is_not_a_status_is_quoted() -> None:
    kube, _ = _kube(FakeApiClient.scripted(FakeResponse(502, b"<html>bad gateway</html>")), retries=0)
    with pytest.raises(ApiError, match="bad gateway") as err:
        kube.get("/api/v1/pods")
    assert err.value.transient and err.value.reason == ""


@pytest.mark.parametrize(
    ("method", "path", "want"),
    [
        ("GET", "/api/v1/pods", ("list", "pods", "")),
        ("GET", "/api/v1/namespaces/a/pods/p", ("get", "pods", "")),
        ("POST", "/api/v1/namespaces/a/pods/p/eviction", ("create", "pods/eviction", "")),
        ("PATCH", "/api/v1/nodes/n1", ("patch", "nodes", "")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            ("update", "leases", "coordination.k8s.io"),
        ),
        ("DELETE", "/apis/resource.k8s.io/v1/deviceclasses/gpu", ("delete", "deviceclasses", "resource.k8s.io")),
        ("GET", "/apis/apps/v1/namespaces/a/daemonsets", ("list", "daemonsets", "apps")),
    ],
)
def test_rbac_target_names_the_permission_a_request_needs(method: str, path: str, want: tuple[str, str, str]) -> None:
    assert rbac_target(method, path) == want


# -- rate limit --------------------------------------------------------------------------------------


def test_rate_limit_allows_a_burst_then_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)

    limit = RateLimit(10, 3, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        limit.acquire()
    assert slept == pytest.approx([0.1, 0.2])  # three free, then one every 1/qps s, in the order asked
    assert RateLimit(-1, 0).qps < 0  # a negative QPS is no limit (client-go's convention)


def test_every_attempt_takes_a_token() -> None:
    taken: list[int] = []
    limit = RateLimit(1000, 1000)
    limit.acquire = lambda: taken.append(1)  # type: ignore[method-assign]
    client = FakeApiClient.scripted(FakeResponse(500, {}), FakeResponse(200, {}))
    Kube(client, retries=2, rate_limit=limit, sleep=lambda s: None).get("/x")
    assert len(taken) == 2


# -- the client from a kubeconfig ---------------------------------------------------------------------


def _kubeconfig(path: Path, server: str, current: str | None) -> Path:
    cur = f"current-context: {current}\n" if current else ""
    path.write_text(
        f"apiVersion: v1\nkind: Config\n{cur}clusters:\n- name: c\n  cluster: {{server: '{server}'}}\n"
        "users:\n- name: u\n  user: {token: t}\ncontexts:\n"
        f"- name: {path.stem}\n  context: {{cluster: c, user: u}}\n"
    )
    return path


def test_the_client_carries_our_user_agent_and_kubectls_context_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _kubeconfig(tmp_path / "a.yaml", "https://127.0.0.1:1111", "a")
    b = _kubeconfig(tmp_path / "b.yaml", "https://127.0.0.1:2222", "b")
    api = new_api_client(a)
    assert api.user_agent == USER_AGENT and USER_AGENT.startswith("dra-migrate/")
    assert api.configuration.host == "https://127.0.0.1:1111"
    # $KUBECONFIG=b:a -- the first file that sets current-context wins (kubectl), not the last.
    monkeypatch.setenv("KUBECONFIG", f"{b}:{a}")
    assert new_api_client().configuration.host == "https://127.0.0.1:2222"
    assert new_api_client(pool_size=77).configuration.connection_pool_maxsize == 77


def test_a_kubeconfig_is_applied_again_at_most_once_a_second_not_before_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client runs the loader's refresh hook before each request; unthrottled, the kubeconfig was applied
    again per request (13 % of a 2,000-node rehearsal's interpreter time)."""
    from kubernetes.config.kube_config import KubeConfigLoader

    applied: list[int] = []
    original = KubeConfigLoader._set_config

    def counting(self: Any, configuration: Any) -> None:
        applied.append(1)
        original(self, configuration)

    monkeypatch.setattr(KubeConfigLoader, "_set_config", counting)
    cfg = new_api_client(_kubeconfig(tmp_path / "a.yaml", "https://127.0.0.1:1111", "a")).configuration
    loaded = len(applied)
    for _ in range(200):
        assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer t"
    assert len(applied) - loaded <= 1


def test_the_throttled_hook_runs_first_then_once_per_period() -> None:
    now = [0.0]
    calls: list[float] = []
    hook = throttled(lambda _cfg: calls.append(now[0]), every_s=1.0, clock=lambda: now[0])
    cfg = SimpleNamespace(refresh_api_key_hook=hook)
    for t in (0.0, 0.5, 0.99, 1.0, 1.2, 5.0, 5.5):
        now[0] = t
        cfg.refresh_api_key_hook(cfg)
    assert calls == [0.0, 1.0, 5.0] and cfg.refresh_api_key_hook is hook


# -- list + watch ------------------------------------------------------------------------------------


def _pod(name: str, rv: str, ns: str = "a") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}}


def _list(rv: str, *items: dict[str, Any]) -> FakeResponse:
    return FakeResponse(200, {"kind": "PodList", "metadata": {"resourceVersion": rv}, "items": list(items)})


def _watch(*events: tuple[str, dict[str, Any]]) -> FakeResponse:
    return FakeResponse(200, events=[{"type": t, "object": o} for t, o in events])


class _Server:
    """Answers lists and watches from queues; records what each watch asked for."""

    def __init__(self, lists: list[FakeResponse | BaseException], watches: list[FakeResponse | BaseException]):
        self.lists, self.watches = lists, watches
        self.informer: Informer | None = None

    def __call__(self, call: Call) -> FakeResponse | BaseException:
        if call.query.get("watch") == "true":
            if not self.watches:
                assert self.informer is not None
                self.informer.close()
                return _watch()
            return self.watches.pop(0)
        return self.lists.pop(0)


def _run(server: _Server, **kw: Any) -> tuple[Informer, list[tuple[str, str]], FakeApiClient]:
    client = FakeApiClient(server)
    informer = Informer(Kube(client), "/api/v1/pods", label_selector="app=x", field_selector="spec.nodeName=n1", **kw)
    server.informer = informer
    seen = [(e.type, e.key) for e in informer.events()]
    return informer, seen, client


def test_the_informer_lists_then_watches_from_the_lists_resource_version_with_its_selectors() -> None:
    server = _Server(
        [_list("10", _pod("p1", "9"))],
        [
            _watch(
                (ADDED, _pod("p2", "11")),
                ("BOOKMARK", {"metadata": {"resourceVersion": "15"}}),
                (MODIFIED, _pod("p1", "16")),
                (DELETED, _pod("p2", "17")),
            )
        ],
    )
    informer, seen, client = _run(server)
    assert seen == [(ADDED, "a/p1"), (ADDED, "a/p2"), (MODIFIED, "a/p1"), (DELETED, "a/p2")]
    watches = [c.query for c in client.calls if c.query.get("watch")]
    assert watches[0]["resourceVersion"] == "10"
    assert watches[0]["allowWatchBookmarks"] == "true"
    for call in client.calls:
        assert call.query["labelSelector"] == "app=x" and call.query["fieldSelector"] == "spec.nodeName=n1"
    assert [o["metadata"]["name"] for o in informer.objects()] == ["p1"]
    assert informer.get("a/p1") == _pod("p1", "16") and informer.lists == 1


def test_a_dropped_watch_resumes_from_the_last_resource_version_without_listing_again() -> None:
    dropped = ProtocolError("Connection broken", ConnectionResetError())
    server = _Server(
        [_list("10")],
        [
            _watch((ADDED, _pod("p1", "12")), ("BOOKMARK", {"metadata": {"resourceVersion": "20"}})),  # timeout end
            dropped,
            FakeResponse(503, status(503, "ServiceUnavailable", "x")),
            _watch((ADDED, _pod("p2", "21"))),
        ],
    )
    informer, seen, client = _run(server, backoff=RetryPolicy(retries=0, backoff_s=0.001))
    assert seen == [(ADDED, "a/p1"), (ADDED, "a/p2")]
    rvs = [c.query.get("resourceVersion") for c in client.calls if c.query.get("watch")]
    assert rvs[:4] == ["10", "20", "20", "20"]
    assert informer.lists == 1 and informer.failures == 2


@pytest.mark.parametrize("how", ["event", "http"])
def test_410_gone_lists_again_and_reports_what_changed_meanwhile(how: str) -> None:
    gone = status(410, "Expired", "too old resource version: 10 (50)")
    expired = _watch(("ERROR", gone)) if how == "event" else FakeResponse(410, gone)
    server = _Server(
        [
            _list("10", _pod("keep", "5"), _pod("change", "6"), _pod("vanish", "7")),
            _list("60", _pod("keep", "5"), _pod("change", "55"), _pod("new", "58")),
        ],
        [expired, _watch((ADDED, _pod("later", "61")))],
    )
    informer, seen, client = _run(server)
    assert seen[:3] == [(ADDED, "a/keep"), (ADDED, "a/change"), (ADDED, "a/vanish")]
    assert seen[3:] == [(MODIFIED, "a/change"), (ADDED, "a/new"), (DELETED, "a/vanish"), (ADDED, "a/later")]
    rvs = [c.query.get("resourceVersion") for c in client.calls if c.query.get("watch")]
    assert rvs[:2] == ["10", "60"] and informer.lists == 2
    assert sorted(o["metadata"]["name"] for o in informer.objects()) == ["change", "keep", "later", "new"]


class _CutMidStream(FakeResponse):
    """A watch whose connection breaks after some events: a reset, or half a JSON line then the end."""

    def __init__(self, events: list[dict[str, Any]], cut: BaseException | bytes) -> None:
        super().__init__(200, events=events)
        self.cut = cut

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        yield from super().stream(amt, decode_content)
        if isinstance(self.cut, bytes):
            yield self.cut  # a truncated event, then the stream ends mid-line
            yield b"\n"
        else:
            raise self.cut


@pytest.mark.parametrize("cut", [ProtocolError("Connection broken", ConnectionResetError()), b'{"type":"ADD'])
def test_a_watch_cut_mid_stream_is_watched_again_not_the_end_of_the_informer(cut: BaseException | bytes) -> None:
    # Found by the fault-injection cutover test: the cut escaped as urllib3's (or orjson's) own error, the
    # informer thread ended, and the executor's waits read a cache that never changed again.
    server = _Server(
        [_list("10")],
        [_CutMidStream([{"type": ADDED, "object": _pod("p1", "12")}], cut), _watch((ADDED, _pod("p2", "21")))],
    )
    informer, seen, client = _run(server, backoff=RetryPolicy(retries=0, backoff_s=0.001))
    assert seen == [(ADDED, "a/p1"), (ADDED, "a/p2")]
    rvs = [c.query.get("resourceVersion") for c in client.calls if c.query.get("watch")]
    assert rvs[:2] == ["10", "12"] and informer.lists == 1 and informer.failures == 1


def test_a_library_error_that_is_not_the_servers_answer_does_not_end_the_informer() -> None:
    # Only the API server's permanent refusal ends an informer; an error a client library raised on its own
    # (here on the list) is ridden out, or the executor's waits would read a cache that never changes.
    server = _Server([RuntimeError("a library's own error"), _list("10", _pod("p1", "9"))], [])
    informer, seen, _ = _run(server, backoff=RetryPolicy(retries=0, backoff_s=0.001))
    assert seen == [(ADDED, "a/p1")] and informer.failures == 1 and informer.lists == 1


def test_a_permanent_refusal_ends_the_informer_with_the_error() -> None:
    server = _Server([_list("1")], [FakeResponse(403, status(403, "Forbidden", "cannot watch pods"))])
    with pytest.raises(ApiError, match="cannot watch pods") as err:
        _run(server)
    assert err.value.method == "WATCH" and not err.value.transient


def test_an_error_event_is_ridden_out_when_transient_and_raised_when_not() -> None:
    server = _Server(
        [_list("1")],
        [_watch(("ERROR", status(500, "InternalError", "boom"))), _watch(("ERROR", status(400, "BadRequest", "bad")))],
    )
    with pytest.raises(ApiError, match="bad") as err:
        _run(server, backoff=RetryPolicy(retries=0, backoff_s=0.001))
    assert err.value.status == 400 and server.informer is not None and server.informer.failures == 1


def test_close_from_another_thread_ends_a_blocked_watch() -> None:
    release = threading.Event()

    class Blocking(FakeResponse):
        def stream(self, amt: int = 65536, decode_content: bool = True) -> Any:
            release.wait(5)
            raise ProtocolError("connection shut down")

        def release_conn(self) -> None:
            release.set()

    client = FakeApiClient(lambda c: Blocking() if c.query.get("watch") else _list("1", _pod("p", "1")))
    informer = Informer(Kube(client), "/api/v1/pods")
    got: list[str] = []
    thread = informer.run(lambda e: got.append(e.key))
    assert informer.synced.wait(5)
    informer.close()
    thread.join(5)
    assert not thread.is_alive() and got == ["a/p"]


# --- a list that outlives the server's history (Kube.pages)

_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results."
)


def _page(names: list[str], cont: str = "") -> FakeResponse:
    return FakeResponse(200, {"kind": "PodList", "metadata": {"continue": cont}, "items": [{"name": n} for n in names]})


def _expired(token: str | None) -> FakeResponse:
    body = status(410, "Expired", _EXPIRED)
    if token is not None:
        body["metadata"] = {"continue": token}  # what apiserver's handleCompactedErrorForPaging adds
    return FakeResponse(410, body)


def test_a_list_whose_continue_token_expired_goes_on_with_the_token_the_server_gives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeApiClient.scripted(_page(["a", "b"], "t1"), _expired("t1-now"), _page(["c"]))
    kube, _ = _kube(client)
    names = [i["name"] for page in kube.pages("/api/v1/pods", limit=2) for i in page["items"]]
    assert names == ["a", "b", "c"]  # each once: the pages already handed out are not listed again
    assert [c.query.get("continue") for c in client.calls] == [None, "t1", "t1-now"]
    assert "410 Expired" in caplog.text and "/api/v1/pods" in caplog.text


@pytest.mark.parametrize(
    ("answers", "why"),
    [
        ([_expired("t0")], "the first request has no list to go on with"),
        ([_page(["a"], "t1"), _expired(None)], "no token to go on with"),
        ([_page(["a"], "t1"), FakeResponse(410, status(410, "Gone", "gone"))], "a 410 that is not Expired"),
        ([_page(["a"], "t1"), _expired("t2")], "a server that expires every token it hands out"),
    ],
)
def test_an_expired_list_that_cannot_go_on_fails_with_the_servers_answer(answers: list[FakeResponse], why: str) -> None:
    kube, _ = _kube(FakeApiClient.scripted(*answers), retries=0)
    with pytest.raises(ApiError) as e:
        list(kube.pages("/api/v1/pods"))
    assert e.value.status == 410, why


def _rv_page(rv: str, names: list[str], cont: str = "") -> FakeResponse:
    meta = {"resourceVersion": rv, "continue": cont}
    return FakeResponse(200, {"kind": "PodList", "metadata": meta, "items": [_pod(n, rv) for n in names]})


def test_list_all_never_stitches_two_resource_versions_into_one_list() -> None:
    """list_all's answer is one list at one resourceVersion (an Informer watches from it; the executor decides
    on it). Going on at the latest version after a 410 Expired mixes pages of two versions: an object created in
    between, in the part already read, is in neither, and a watch from the newer version never sends it. As
    client-go's pager (k8s.io/client-go@v0.37.2 tools/pager/pager.go, FullListIfExpired), the list is read
    again whole, unpaged."""
    client = FakeApiClient.scripted(
        _rv_page("5", ["a", "b"], "t1"), _expired("t1-now"), _rv_page("9", ["a", "a2", "b", "c"])
    )
    kube, _ = _kube(client)
    items, rv = kube.list_all("/api/v1/pods")
    assert [i["metadata"]["name"] for i in items] == ["a", "a2", "b", "c"] and rv == "9"
    assert [(c.query.get("continue"), c.query.get("limit")) for c in client.calls] == [
        (None, "500"),
        ("t1", "500"),
        (None, None),
    ]


def test_the_informer_relists_whole_when_its_paged_list_expires() -> None:
    def answer(call: Call) -> FakeResponse:
        if call.query.get("watch") == "true":
            informer.close()
            return _watch()
        cont = call.query.get("continue")
        if cont is None:
            # paged: the first page at version 5; unpaged: the whole list now ("a2" created at version 7)
            return _rv_page("5", ["a"], "t1") if call.query.get("limit") else _rv_page("9", ["a", "a2", "b"])
        # going on at the latest version gives what follows "a" only: "a2" sorts before the token's key
        return _expired("t1-now") if cont == "t1" else _rv_page("9", ["b"])

    client = FakeApiClient(answer)
    informer = Informer(Kube(client), "/api/v1/pods")
    seen = sorted(e.key for e in informer.events())
    assert seen == ["a/a", "a/a2", "a/b"]
    assert client.calls[-1].query.get("resourceVersion") == "9"
