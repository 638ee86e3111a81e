"""The one Kubernetes API client: JSON requests over the official client's connection and auth.

The tool works with the plain dicts the API returns and with kinds the generated client may not model
(resource.k8s.io/v1, CRDs), so it asks for paths rather than typed models; responses are parsed with
orjson straight from the wire (the client's models cost far more time and memory than the JSON). The
`kubernetes` package still owns TLS, client certificates, tokens, exec plugins and proxies.

One policy for everything that talks to a cluster (live reads, the executor, the lock, the twin):
- retries (`RetryPolicy`): a transient failure (errors.py) is retried with exponential backoff and
  jitter, honouring the server's Retry-After as client-go does (rest/with_retry.go, checkWait). A POST
  retried after a lost response may find its object created: callers treat 409 on create as "re-read".
- a client-side rate limit (`RateLimit`, QPS and burst, one bucket per process by default);
- a user agent naming the tool and its version, so audit logs show who did what;
- counters (`Stats`): requests, retries, 429s seen, time spent waiting for the rate limit.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson

from dra_migrate import __version__
from dra_migrate.kube.errors import TRANSIENT_STATUS, ApiError, Unreachable
from dra_migrate.kube.stream import WatchStream

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Query = Sequence[tuple[str, str | int | bool]]
Timeout = float | tuple[float, float]  # seconds; (connect, read)

USER_AGENT = f"dra-migrate/{__version__}"
# Client-side rate limit defaults. kubectl's requests use client-go's defaults, QPS 5 and burst 10
# (k8s.io/client-go v0.37.2 rest/config.go DefaultQPS, DefaultBurst), and its discovery client 50 and
# 300 (k8s.io/kubectl v0.37.2 pkg/cmd/cmd.go, WithDiscoveryQPS(50.0), WithDiscoveryBurst(300)). A wave
# of 200 nodes makes thousands of small requests, most of them polls: at QPS 5 that alone would take
# longer than the wave's slowest node, so the defaults are kubectl's discovery figures, which a
# production API server's priority-and-fairness (its own 429s, honoured below) is sized to absorb;
# --qps/--burst change them (a negative QPS turns the limit off, as in client-go).
DEFAULT_QPS = 50.0
DEFAULT_BURST = 300
PAGE_SIZE = 500  # kubectl's default --chunk-size
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
DEFAULT_TIMEOUT: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
JSON = "application/json"


# Resumptions of one list in a row: a server that expires the token it has just handed out is not making
# progress, and the list fails with its 410 rather than loop.
_MAX_RESUMES = 3


def _resume_token(e: ApiError) -> str:
    """The continue token a 410 Expired answer carries to go on with an expired list, or ""."""
    if e.status != 410 or e.reason != "Expired":
        return ""
    try:
        doc = orjson.loads(e.body)
    except orjson.JSONDecodeError:
        return ""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    token = meta.get("continue") if isinstance(meta, dict) else None
    return token if isinstance(token, str) else ""


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures are retried. `retries`: extra attempts (0: never, for callers with their
    own loop, like the lock's renewer and the twin's watches). `retry_refused`: whether a refused
    connection is retried (an API server restarting) or fails at once (nothing listens: a wrong
    kubeconfig should not cost the user seconds of backoff)."""

    retries: int = 5  # 0.2+0.4+0.8+1.6+3.2 s of backoff: rides out an API server restart or a proxy blip
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    max_retry_after_s: float = 60.0  # a server's Retry-After is honoured as given, up to this
    retry_refused: bool = True

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry number `attempt` (1-based): the server's Retry-After if it sent one, else
        exponential backoff with +-20 % jitter (so many clients do not retry in step), capped."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        base: float = self.backoff_s * 2 ** (attempt - 1)
        return min(base * random.uniform(0.8, 1.2), self.max_backoff_s)


NO_RETRIES = RetryPolicy(retries=0)
READ_RETRIES = RetryPolicy(retries=4, retry_refused=False)  # reads: fail fast when nothing listens
WRITE_RETRIES = RetryPolicy()  # the executor and the lock: ride out a restart


class RateLimit:
    """A token bucket shared by every thread of one client: `burst` requests at once, then `qps` a
    second (client-go's flowcontrol.NewTokenBucketRateLimiter). Callers reserve a token and sleep until
    it is theirs, so waiting threads are served in the order they asked."""

    def __init__(self, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST, *, clock: Any = time.monotonic,
                 sleep: Any = time.sleep) -> None:  # fmt: skip
        if qps > 0 and burst < 1:
            raise ValueError("burst must be at least 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._mutex = threading.Lock()
        self.waited_s = 0.0  # total time callers spent waiting (benchmarks)

    def acquire(self) -> None:
        if self.qps <= 0:
            return
        with self._mutex:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
            self.waited_s += wait
        if wait > 0:
            self._sleep(wait)


@dataclass
class Stats:
    """What a client did, for logs and benchmarks. Updated under a lock (clients are shared by threads)."""

    requests: int = 0  # attempts sent, retries included
    retries: int = 0
    throttled: int = 0  # 429 answers (the server's priority-and-fairness or a webhook said "slow down")
    unreachable: int = 0  # attempts with no whole response
    _mutex: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._mutex:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


_THREAD = threading.local()


def thread_request_seconds() -> float:
    """Seconds this thread has spent on API round trips (from sending a request to reading its answer), so
    far. A time-scaled twin counts them at their real length: the twin's clock scales the cluster's
    components, not the network and the API server (rehearse.model)."""
    return float(getattr(_THREAD, "seconds", 0.0))


def _add_request_seconds(seconds: float) -> None:
    _THREAD.seconds = thread_request_seconds() + seconds


# The attribute of an ApiClient that holds its `Reauthenticate` (set by `new_api_client`), so every `Kube` on one
# ApiClient -- `with_retry`'s, and the wrappers built on `LiveCluster.api` -- reads the credentials again.
REAUTH_ATTR = "dra_migrate_reauthenticate"


class Reauthenticate:
    """Reads a client's credentials again after the server rejected them (401), as client-go does: its token
    file is read again (k8s.io/client-go@v0.37.2 transport/token_source.go, `tokenSourceTransport.RoundTrip`,
    `ResetTokenOlderThan`) and its exec plugin run again (plugin/pkg/client/auth/exec/exec.go,
    `roundTripper.RoundTrip`, `maybeRefreshCreds`). The Python client reads a kubeconfig's `tokenFile` once and
    runs an exec plugin again only once the expiry it printed has passed: a rotated projected token, or a token
    revoked early, failed an hours-long apply with 401.

    `generation` counts the reloads: a request notes it before it is sent, and a 401 reloads only when no other
    thread has reloaded since (forty threads meeting one expiry run the plugin once)."""

    def __init__(self, reload: Callable[[], None]) -> None:
        self.reload = reload
        self.generation = 0
        self._mutex = threading.Lock()

    def __call__(self, seen: int) -> None:
        with self._mutex:
            if self.generation != seen:
                return
            self.reload()
            self.generation += 1


class Kube:
    """JSON requests on one ApiClient (urllib3's pool makes it safe to share between threads).

    Build one with `dra_migrate.kube.connect` (kubeconfig resolution, user agent, default rate limit),
    or wrap an ApiClient you have. `retries`/`backoff_s` are a shorthand for a `RetryPolicy`.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        retry: RetryPolicy | None = None,
        retries: int | None = None,
        backoff_s: float | None = None,
        rate_limit: RateLimit | None = None,
        sleep: Callable[[float], None] = time.sleep,
        stats: Stats | None = None,
    ) -> None:
        policy = retry or NO_RETRIES
        if retries is not None or backoff_s is not None:
            policy = RetryPolicy(
                retries=policy.retries if retries is None else retries,
                backoff_s=policy.backoff_s if backoff_s is None else backoff_s,
                retry_refused=policy.retry_refused,
            )
        self.api_client = api_client
        self.retry = policy
        self.rate_limit = rate_limit
        self.stats = stats if stats is not None else Stats()
        self._sleep = sleep

    @property
    def retries(self) -> int:
        return self.retry.retries

    @property
    def server(self) -> str:
        return str(getattr(getattr(self.api_client, "configuration", None), "host", "") or "the API server")

    def with_retry(self, retry: RetryPolicy) -> Kube:
        """The same connection, rate limit and counters under another retry policy."""
        return Kube(self.api_client, retry=retry, rate_limit=self.rate_limit, sleep=self._sleep, stats=self.stats)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        accept: str = JSON,
        timeout: float | tuple[float, float] = 30,
        retry_status: Collection[int] = TRANSIENT_STATUS,
    ) -> Obj:
        """One request, retried per the policy; `retry_status` are the HTTP statuses retried (eviction
        leaves out 429, which there means a PodDisruptionBudget said no, and retries it on its own schedule).
        Raises `ApiError` (the server said no) or `Unreachable` (no response)."""
        attempt = 0
        reauth: Reauthenticate | None = getattr(self.api_client, REAUTH_ATTR, None)
        reauthenticated = False
        while True:
            if self.rate_limit is not None:
                self.rate_limit.acquire()
            self.stats.add(requests=1)
            sent = time.monotonic()
            credentials = reauth.generation if reauth is not None else 0
            try:
                resp = self._send(method, path, query, body, content_type, timeout, accept)
                data = resp.read()
            except Exception as e:
                _add_request_seconds(time.monotonic() - sent)
                if not _is_connection_error(e):
                    raise
                self.stats.add(unreachable=1)
                if attempt < self.retry.retries and (self.retry.retry_refused or not _is_refused(e)):
                    attempt += 1
                    self._backoff(attempt, None)
                    continue
                raise Unreachable(
                    f"cannot reach the API server at {self.server}: {method} {path}: {_reason(e)}",
                    "check --kubeconfig/--context and that the cluster is reachable, then run the command again",
                    method=method,
                    path=path,
                ) from e
            _add_request_seconds(time.monotonic() - sent)
            if 200 <= resp.status <= 299:
                out = orjson.loads(data) if data else {}
                return out if isinstance(out, dict) else {"items": out}
            err = ApiError(method, path, resp.status, data, _retry_after(resp))
            if err.status == 401 and reauth is not None and not reauthenticated:
                # Not authenticated, so not done: sending it again is safe for any verb.
                reauthenticated = True
                self._reauthenticate(reauth, credentials, err)
                continue
            if err.status == 429:
                self.stats.add(throttled=1)
            if err.status in retry_status and attempt < self.retry.retries:
                attempt += 1
                self._backoff(attempt, err.retry_after)
                continue
            raise err

    def _reauthenticate(self, reauth: Reauthenticate, seen: int, err: ApiError) -> None:
        log.info("%s %s: 401 Unauthorized; reading the credentials again", err.method, err.path)
        try:
            reauth(seen)
        except Exception as e:  # the plugin failed, the file is gone: the 401 is the answer, with why
            log.warning("reading the credentials again failed: %s", e)
            raise err from e

    def _backoff(self, attempt: int, retry_after: float | None) -> None:
        self.stats.add(retries=1)
        self._sleep(self.retry.delay(attempt, retry_after))

    def _send(
        self,
        method: str,
        path: str,
        query: Query,
        body: Any,
        content_type: str | None,
        timeout: float | tuple[float, float],
        accept: str = JSON,
        stream: bool = False,
    ) -> Any:
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = JSON
        _method, url, headers, body, _post = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return self.api_client.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)

    # -- verbs ------------------------------------------------------------------------------------

    def get(self, path: str, query: Query = (), *, accept: str = JSON, timeout: Timeout = 30) -> Obj:
        return self.request("GET", path, query=query, accept=accept, timeout=timeout)

    def get_or_none(self, path: str) -> Obj | None:
        try:
            return self.get(path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def create(self, path: str, body: Mapping[str, Any], query: Query = ()) -> Obj:
        return self.request("POST", path, body=body, query=query)

    def replace(self, path: str, body: Mapping[str, Any]) -> Obj:
        return self.request("PUT", path, body=body)

    def merge_patch(self, path: str, body: Mapping[str, Any], query: Query = ()) -> Obj:
        return self.request("PATCH", path, body=body, query=query, content_type="application/merge-patch+json")

    def json_patch(self, path: str, ops: Sequence[Mapping[str, Any]], query: Query = ()) -> Obj:
        """A JSON patch (RFC 6902): its `test` operations make the write conditional on what they test."""
        return self.request("PATCH", path, body=list(ops), query=query, content_type="application/json-patch+json")

    def strategic_patch(self, path: str, body: Mapping[str, Any]) -> Obj:
        return self.request("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")

    def delete(
        self, path: str, body: Mapping[str, Any] | None = None, *, missing_ok: bool = True, query: Query = ()
    ) -> None:
        try:
            self.request("DELETE", path, body=body, query=query)
        except ApiError as e:
            if not (missing_ok and e.status == 404):
                raise

    def create_or_exists(self, path: str, body: Mapping[str, Any]) -> Obj | None:
        """Create; None when it already exists (409), so installers can be re-run."""
        try:
            return self.create(path, body)
        except ApiError as e:
            if e.status == 409:
                return None
            raise

    def pages(
        self,
        path: str,
        query: Query = (),
        *,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT,
        limit: int = PAGE_SIZE,
        resume: bool = True,
    ) -> Iterator[Obj]:
        """Each page of a collection (limit/continue, `limit` items), as the server sends it.

        A list that outlives the server's history goes on where it stopped. When the resourceVersion of a
        continue token has been compacted away (a list of 500,000 pods can take longer than the API
        server's 5-minute compaction interval), the server answers 410 Expired and hands, in that Status,
        a token to go on at the latest resourceVersion (k8s.io/apiserver v0.37.2
        pkg/storage/etcd3/errors.go `handleCompactedErrorForPaging`): the rest of the list is then read as
        it is now, which is what reading kind after kind does anyway. client-go's pager lists again from
        the start instead (tools/pager/pager.go `FullListIfExpired`), which would hand the pages read so
        far a second time to a reader that streams them. `resume=False`: the 410 is raised instead, for a
        caller that needs one list at one resourceVersion (`list_all`)."""
        cont, resumed = "", 0
        while True:
            q = [*query, ("limit", limit)] + ([("continue", cont)] if cont else [])
            try:
                page = self.get(path, q, timeout=timeout)
            except ApiError as e:
                token = _resume_token(e) if resume and cont and resumed < _MAX_RESUMES else ""
                if not token:
                    raise
                resumed += 1
                log.warning(
                    "listing %s outlived the API server's history (410 Expired): the rest is read as it is now", path
                )
                cont = token
                continue
            resumed = 0
            yield page
            cont = str((page.get("metadata") or {}).get("continue") or "")
            if not cont:
                return

    def list_all(self, path: str, query: Query = (), *, limit: int = PAGE_SIZE) -> tuple[list[Obj], str]:
        """All items of a collection (paged) and the list's resourceVersion, to watch from: one list at one
        resourceVersion. Going on after a 410 Expired (as `pages` does) would stitch pages of two versions
        together -- an object created in between, in the part already read, is in neither, and a watch from the
        newer version never sends it. So a paged list that expires is read again whole, unpaged, as client-go's
        pager does (k8s.io/client-go@v0.37.2 tools/pager/pager.go `FullListIfExpired`, which the reflector
        uses, tools/cache/reflector.go)."""
        items: list[Obj] = []
        rv, pages = "", 0
        try:
            for page in self.pages(path, query, limit=limit, resume=False):
                pages += 1
                items.extend(page.get("items") or [])
                rv = str((page.get("metadata") or {}).get("resourceVersion", ""))
        except ApiError as e:
            if not (e.status == 410 and e.reason == "Expired" and pages):  # the first page's 410 is the answer
                raise
            log.warning("listing %s outlived the API server's history (410 Expired): listing it again whole", path)
            whole = self.get(path, query, timeout=DEFAULT_TIMEOUT)
            return list(whole.get("items") or []), str((whole.get("metadata") or {}).get("resourceVersion", ""))
        return items, rv

    def watch(self, path: str, resource_version: str, query: Query = (), *, timeout_seconds: int = 300) -> WatchStream:
        """One watch request from `resource_version` (bookmarks on). Not retried: `Informer` owns the
        loop that re-watches and re-lists. A non-2xx answer (410 Gone included) raises `ApiError`."""
        q = [*query, ("watch", "true"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", timeout_seconds)]
        if resource_version:
            q.append(("resourceVersion", resource_version))
        reauth: Reauthenticate | None = getattr(self.api_client, REAUTH_ATTR, None)
        for last in (False, True):
            if self.rate_limit is not None:
                self.rate_limit.acquire()
            self.stats.add(requests=1)
            credentials = reauth.generation if reauth is not None else 0
            try:
                # The read timeout only guards a dead connection: the server ends the watch after
                # timeoutSeconds and sends bookmarks in between.
                resp = self._send("GET", path, q, None, None, (10, timeout_seconds + 30))
            except Exception as e:
                if not _is_connection_error(e):
                    raise
                self.stats.add(unreachable=1)
                raise Unreachable(
                    f"cannot reach the API server at {self.server}: WATCH {path}: {_reason(e)}",
                    "check that the cluster is reachable",
                    method="WATCH",
                    path=path,
                ) from e
            if 200 <= resp.status <= 299:
                break
            err = ApiError("WATCH", path, resp.status, resp.read())
            if err.status != 401 or reauth is None or last:
                raise err
            self._reauthenticate(reauth, credentials, err)  # an Informer ends on a 401: read them again first
        return WatchStream(resp.response, path)


def path_of(api_version: str, plural: str, name: str = "", namespace: str = "", sub: str = "") -> str:
    """REST path of a collection or an object: ("v1", "pods", "p", "ns") -> /api/v1/namespaces/ns/pods/p."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{plural}"
    if name:
        base += f"/{quote(name, safe='')}"
    if sub:
        base += f"/{sub}"
    return base


def _is_connection_error(e: BaseException) -> bool:
    """No (whole) response: urllib3's errors, socket errors, and the client's ApiException(status=0),
    which is how it reports a TLS failure (a connection cut during the handshake)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(e, HTTPError | OSError):
        return True
    return isinstance(e, ApiException) and e.status == 0


def _is_refused(e: BaseException) -> bool:
    from urllib3.exceptions import NewConnectionError

    return isinstance(e, NewConnectionError | ConnectionRefusedError) or "refused" in str(e).lower()


def _retry_after(resp: Any) -> float | None:
    headers = getattr(resp, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the API server never sends one; fall back to our backoff


def _reason(e: BaseException) -> str:
    reason = getattr(e, "reason", None)
    text = str(reason or e)
    return text if len(text) <= 300 else text[:300] + "..."
