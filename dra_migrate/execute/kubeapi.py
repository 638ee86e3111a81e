"""A thin JSON REST layer over the `kubernetes` client's connection and auth handling.

The tool works with the plain dicts the API returns and with kinds the generated client may not model
(resource.k8s.io/v1, CRDs), so it asks for paths rather than typed models. The client still owns TLS,
client certificates, tokens and proxies. The simulator (`dra_migrate.sim.kube`) builds on this class, so
there is one implementation of requests and errors.

Retries: with `retries > 0`, a request that fails in a way that says "try again" is retried with
exponential backoff: 5xx, 429 (the server's priority-and-fairness or a webhook's "too many requests",
honouring Retry-After), and a connection refused or reset before a whole response arrived. client-go's
`rest.Request` retries the same way (k8s.io/client-go/rest/with_retry.go, `IsRetryableResponse`).
A POST retried after a lost response may find its object created: callers treat 409 on create as
"re-read and compare". Everything else (403, 404, 409, 422, ...) is raised at once as `ApiError`, a
`ClusterError` quoting the server's Status message.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import orjson

from dra_migrate.errors import ClusterError

Obj = dict[str, Any]
Query = Sequence[tuple[str, str | int | bool]]

# What client-go retries (with_retry.go): 429 and 5xx other than 501 (Not Implemented never changes).
TRANSIENT_STATUS: frozenset[int] = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF_S = 5.0
MAX_RETRY_AFTER_S = 60.0  # a server's Retry-After is honoured as given, up to this
# Client-side rate limit defaults. kubectl's requests use client-go's defaults, QPS 5 and burst 10
# (k8s.io/client-go v0.37.2 rest/config.go DefaultQPS, DefaultBurst), and its discovery client 50 and
# 300 (k8s.io/kubectl v0.37.2 pkg/cmd/cmd.go, WithDiscoveryQPS(50.0), WithDiscoveryBurst(300)). A wave
# of 200 nodes makes thousands of small requests, most of them polls: at QPS 5 that alone would take
# longer than the wave's slowest node, so the defaults are kubectl's discovery figures; --qps/--burst
# change them (a negative QPS turns the limit off, as in client-go).
DEFAULT_QPS = 50.0
DEFAULT_BURST = 300


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


class ApiError(ClusterError):
    """The API server answered with an error; keeps its HTTP status, Status reason, message and details."""

    def __init__(self, method: str, path: str, status: int, body: bytes, retry_after: float | None = None) -> None:
        try:
            doc = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        self.status = status
        self.reason = str(doc.get("reason", ""))
        self.api_message = str(doc.get("message", ""))
        details = doc.get("details")
        self.details: dict[str, Any] = details if isinstance(details, dict) else {}
        self.retry_after = retry_after
        super().__init__(f"{method} {path}: {status} {self.reason} {self.api_message or body[:200]!r}".strip())


class Unreachable(ClusterError):
    """No response from the API server (connection refused or reset, timeout), after any retries."""


class Kube:
    """JSON requests on one ApiClient (urllib3's pool makes it safe to share between threads).

    `retries`: how many times a transient failure is retried (0: never, as the simulator wants, which
    has its own loops).
    """

    def __init__(
        self, api_client: Any, *, retries: int = 0, backoff_s: float = 0.2, rate_limit: RateLimit | None = None
    ) -> None:
        self.api_client = api_client
        self.retries = retries
        self.backoff_s = backoff_s
        self.rate_limit = rate_limit

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] = 30,
        retry_status: Collection[int] = TRANSIENT_STATUS,
    ) -> Obj:
        """One request; `retry_status` are the HTTP statuses retried (eviction leaves out 429, which
        there means a PodDisruptionBudget said no, and retries it on its own schedule)."""
        attempt = 0
        while True:
            if self.rate_limit is not None:
                self.rate_limit.acquire()
            try:
                resp = self._send(method, path, query, body, content_type, timeout)
                data = resp.read()
            except Exception as e:
                if not _is_connection_error(e):
                    raise
                if attempt < self.retries:
                    attempt += 1
                    time.sleep(self._delay(attempt, None))
                    continue
                host = getattr(getattr(self.api_client, "configuration", None), "host", "the API server")
                raise Unreachable(
                    f"{method} {path}: no response from {host}: {_reason(e)}",
                    "check that the cluster is reachable, then run the command again (it resumes)",
                ) from e
            if 200 <= resp.status <= 299:
                out = orjson.loads(data) if data else {}
                return out if isinstance(out, dict) else {"items": out}
            err = ApiError(method, path, resp.status, data, _retry_after(resp))
            if err.status in retry_status and attempt < self.retries:
                attempt += 1
                time.sleep(self._delay(attempt, err.retry_after))
                continue
            raise err

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """The server's Retry-After (up to MAX_RETRY_AFTER_S), or exponential backoff with jitter capped at
        MAX_BACKOFF_S. client-go waits what Retry-After says too (rest/with_retry.go, checkWait)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
        base: float = self.backoff_s * 2 ** (attempt - 1)
        return min(base * random.uniform(0.8, 1.2), MAX_BACKOFF_S)

    def _send(
        self,
        method: str,
        path: str,
        query: Query,
        body: Any,
        content_type: str | None,
        timeout: float | tuple[float, float],
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        _method, url, headers, body, _post = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        return self.api_client.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)

    def get(self, path: str, query: Query = ()) -> Obj:
        return self.request("GET", path, query=query)

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

    def list_all(self, path: str, query: Query = ()) -> tuple[list[Obj], str]:
        """All items of a collection (paged) and the list's resourceVersion, to watch from."""
        items: list[Obj] = []
        cont = ""
        while True:
            q = [*query, ("limit", 500)] + ([("continue", cont)] if cont else [])
            page = self.get(path, q)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = str(meta.get("continue") or "")
            if not cont:
                return items, str(meta.get("resourceVersion", ""))


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
