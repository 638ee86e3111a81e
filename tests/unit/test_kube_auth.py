"""Credentials that change under a long run: a rotated token file, an exec plugin's token revoked before the
expiry it announced, the in-cluster ServiceAccount token the kubelet rotates.

client-go answers a 401 by dropping the credentials the request was sent with: the token file is read again
(k8s.io/client-go@v0.37.2 transport/token_source.go, `tokenSourceTransport.RoundTrip`, `ResetTokenOlderThan`),
the exec plugin is run again (plugin/pkg/client/auth/exec/exec.go, `roundTripper.RoundTrip`,
`maybeRefreshCreds`). The Python client reads a kubeconfig's `tokenFile` once and runs an exec plugin again only
once the expiry it printed has passed, so an apply that outlived its token failed with 401 at whatever it was
doing, hours in."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from dra_migrate.errors import ClusterError
from dra_migrate.kube import ApiError, Kube, RetryPolicy, new_api_client
from dra_migrate.testing.kube import FakeResponse, status


def _kubeconfig(path: Path, token_file: Path) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        f"users:\n- name: u\n  user: {{tokenFile: '{token_file}'}}\n"
        "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
    )
    return path


class _Server:
    """Answers 200 to the valid token and 401 to any other, recording the Authorization header of each request."""

    def __init__(self, api: Any, valid: list[str]) -> None:
        self.valid = valid
        self.seen: list[str] = []
        api.call_api = self.call_api

    def call_api(self, method: str, url: str, header_params: dict[str, str] | None = None, **_kw: Any) -> Any:
        auth = {k.lower(): v for k, v in (header_params or {}).items()}.get("authorization", "")
        self.seen.append(auth)
        if auth == f"Bearer {self.valid[0]}":
            return FakeResponse(200, {"kind": "Namespace", "metadata": {"name": "kube-system"}})
        return FakeResponse(401, status(401, "Unauthorized", "Unauthorized"))


def test_a_rotated_token_file_is_read_again_when_the_server_rejects_the_old_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    api = new_api_client(_kubeconfig(tmp_path / "kubeconfig", token))
    server = _Server(api, ["old"])
    kube = Kube(api, retry=RetryPolicy(retries=0))
    assert kube.get("/api/v1/namespaces/kube-system")["metadata"]["name"] == "kube-system"
    token.write_text("new")  # the kubelet (or a CI runner) rotated it; the old one has now expired
    server.valid[0] = "new"
    assert kube.get("/api/v1/namespaces/kube-system")["metadata"]["name"] == "kube-system"
    assert server.seen == ["Bearer old", "Bearer old", "Bearer new"]


def test_credentials_the_server_still_rejects_fail_with_401_after_one_new_try(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("revoked")
    api = new_api_client(_kubeconfig(tmp_path / "kubeconfig", token))
    server = _Server(api, ["never"])
    with pytest.raises(ApiError) as e:
        Kube(api, retry=RetryPolicy(retries=3)).get("/api/v1/nodes")
    assert e.value.status == 401 and "refresh your kubeconfig credentials" in e.value.hint
    assert "GET /api/v1/nodes" in str(e.value)
    assert len(server.seen) == 2  # the request, then once more with the credentials read again


def test_threads_that_meet_one_expiry_read_the_credentials_again_once(tmp_path: Path) -> None:
    """Forty threads that all get a 401 for the same old token run the exec plugin (or read the file) once,
    not forty times."""
    token = tmp_path / "token"
    token.write_text("old")
    api = new_api_client(_kubeconfig(tmp_path / "kubeconfig", token))
    _Server(api, ["new"])
    token.write_text("new")
    reads: list[int] = []
    reload = api.dra_migrate_reauthenticate
    original = reload.reload
    barrier = threading.Barrier(40)

    def counting() -> None:
        reads.append(1)
        original()

    reload.reload = counting
    kube = Kube(api, retry=RetryPolicy(retries=0))
    errors: list[BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            kube.get("/api/v1/nodes")
        except BaseException as e:  # pragma: no cover - the assertion below names it
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors and len(reads) <= 2, (errors, len(reads))


def test_a_401_body_is_not_logged_with_the_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-token-value")
    api = new_api_client(_kubeconfig(tmp_path / "kubeconfig", token))
    _Server(api, ["never"])
    with pytest.raises(ApiError) as e:
        Kube(api).get("/api/v1/nodes")
    assert "s3cr3t" not in str(e.value) + e.value.hint + orjson.dumps(e.value.details).decode()


def test_a_watch_rejected_for_an_expired_token_is_made_again_with_the_new_one(tmp_path: Path) -> None:
    """An Informer ends on a permanent error, and a 401 is one: the executor's watches then read a cache that
    no longer changes."""
    token = tmp_path / "token"
    token.write_text("old")
    api = new_api_client(_kubeconfig(tmp_path / "kubeconfig", token))
    server = _Server(api, ["new"])
    token.write_text("new")
    stream = Kube(api).watch("/api/v1/pods", "1")
    stream.close()
    assert server.seen == ["Bearer old", "Bearer new"]


def test_a_slow_credential_plugin_is_not_run_again_while_it_runs() -> None:
    """The loader's hook runs the exec plugin when the token is near its expiry; gke-gcloud-auth-plugin or
    `aws eks get-token` take seconds (kubelogin waits for a browser). Every thread that passed the once-a-second
    gate meanwhile started another run of it."""
    from dra_migrate.kube.config import throttled

    now = [0.0]
    started = threading.Event()
    release = threading.Event()
    runs: list[int] = []

    def plugin(_cfg: Any) -> None:
        runs.append(1)
        started.set()
        release.wait(5)

    cfg = SimpleNamespace()
    cfg.refresh_api_key_hook = throttled(plugin, every_s=1.0, clock=lambda: now[0])
    first = threading.Thread(target=lambda: cfg.refresh_api_key_hook(cfg))
    first.start()
    assert started.wait(5)
    for t in (1.5, 2.5, 3.5):  # seconds pass while the plugin runs; other threads make requests
        now[0] = t
        cfg.refresh_api_key_hook(cfg)
    release.set()
    first.join(5)
    assert len(runs) == 1


def test_a_hook_that_ends_after_a_reload_does_not_put_the_old_credentials_back(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    api = new_api_client(_kubeconfig(tmp_path / "kubeconfig", token))
    cfg = api.configuration
    stale_hook = cfg.refresh_api_key_hook  # a thread took it before the reload and calls it after
    token.write_text("new")
    api.dra_migrate_reauthenticate(0)
    time.sleep(1.1)  # past the once-a-second gate
    stale_hook(cfg)
    time.sleep(1.1)
    assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer new"


def _exec_kubeconfig(path: Path, command: str, args: list[str]) -> Path:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": command,
            "args": args,
            "installHint": "Install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin",
            "interactiveMode": "Never",
        }
    }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_bytes(orjson.dumps(doc))
    return path


def test_a_credential_plugin_that_is_not_installed_is_named_with_its_install_hint(tmp_path: Path) -> None:
    """The Python client logs the plugin's failure and sends the requests with no credentials: the server then
    answers as to system:anonymous (403 "grant verb list...", or 401), pointing at RBAC instead of the missing
    gke-gcloud-auth-plugin. kubectl fails naming the executable and its installHint
    (k8s.io/client-go@v0.37.2 plugin/pkg/client/auth/exec/exec.go, `exec: executable %s not found`)."""
    kc = _exec_kubeconfig(tmp_path / "kubeconfig", str(tmp_path / "gke-gcloud-auth-plugin"), [])
    with pytest.raises(ClusterError) as e:
        new_api_client(kc)
    text = f"{e.value} {e.value.hint}"
    assert "gke-gcloud-auth-plugin" in text and "gcloud components install" in text


def test_a_credential_plugin_that_fails_says_why_instead_of_going_on_anonymous(tmp_path: Path) -> None:
    plugin = tmp_path / "aws"
    plugin.write_text("#!/bin/sh\necho 'Error: the SSO session has expired; run aws sso login' >&2\nexit 255\n")
    plugin.chmod(0o755)
    kc = _exec_kubeconfig(tmp_path / "kubeconfig", str(plugin), ["eks", "get-token"])
    with pytest.raises(ClusterError) as e:
        new_api_client(kc)
    assert "aws sso login" in str(e.value) and "255" in str(e.value)
