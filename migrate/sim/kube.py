"""A thin JSON REST layer over the `kubernetes` client's connection and auth handling.

The simulator works with the plain dicts the API returns (like the rest of the tool) and with kinds
the generated client may not model (ResourceSlices of a newer API, CRDs), so it asks for paths rather
than typed models. The client still owns TLS, client certificates, tokens and proxies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from kubernetes import config as k8s_config

import migrate
from migrate.errors import ClusterError

USER_AGENT = f"dra-migrate-sim/{migrate.__version__}"

Obj = dict[str, Any]
Query = Sequence[tuple[str, str | int | bool]]


class ApiError(ClusterError):
    """The API server answered with an error; keeps its HTTP status and Status reason."""

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        try:
            doc = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            doc = {}
        self.status = status
        self.reason = str(doc.get("reason", "")) if isinstance(doc, dict) else ""
        message = str(doc.get("message", "")) if isinstance(doc, dict) else ""
        super().__init__(f"{method} {path}: {status} {self.reason or ''} {message or body[:200]!r}".strip())


def new_api_client(kubeconfig: Path | str, user_agent: str = USER_AGENT) -> Any:
    """An ApiClient for a kubeconfig, with our user agent so audit logs can tell the simulator apart."""
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    api.user_agent = user_agent
    return api


class Kube:
    """JSON requests on one ApiClient (urllib3's pool makes it safe to share between threads)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query = (),
        body: Any = None,
        content_type: str | None = None,
        timeout: float = 30,
    ) -> Obj:
        resp = self._send(method, path, query, body, content_type, timeout)
        data = resp.read()
        if not 200 <= resp.status <= 299:
            raise ApiError(method, path, resp.status, data)
        out = orjson.loads(data) if data else {}
        return out if isinstance(out, dict) else {"items": out}

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

    def create(self, path: str, body: Mapping[str, Any]) -> Obj:
        return self.request("POST", path, body=body)

    def replace(self, path: str, body: Mapping[str, Any]) -> Obj:
        return self.request("PUT", path, body=body)

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> Obj:
        return self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def strategic_patch(self, path: str, body: Mapping[str, Any]) -> Obj:
        return self.request("PATCH", path, body=body, content_type="application/strategic-merge-patch+json")

    def delete(self, path: str, body: Mapping[str, Any] | None = None, *, missing_ok: bool = True) -> None:
        try:
            self.request("DELETE", path, body=body)
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

    def watch(self, path: str, resource_version: str, query: Query = (), *, timeout_seconds: int = 300) -> WatchStream:
        query = [
            *query,
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        if resource_version:
            query = [*query, ("resourceVersion", resource_version)]
        # The read timeout only guards a dead connection: the server ends the watch after
        # timeoutSeconds and sends bookmarks in between.
        resp = self._send("GET", path, query, None, None, (10, timeout_seconds + 30))
        if not 200 <= resp.status <= 299:
            raise ApiError("WATCH", path, resp.status, resp.read())
        return WatchStream(resp.response)


class WatchStream:
    """Events of one watch request. `close()` from another thread ends a blocked read at once."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[Obj]:
        buf = b""
        try:
            for chunk in self._response.stream(65536, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        event = orjson.loads(line)
                        if isinstance(event, dict):
                            yield event
        except Exception:
            if not self._closed.is_set():
                raise
        finally:
            self.close()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        try:
            # shutdown() (urllib3 >= 2.3) unblocks a read waiting in another thread; close() alone does not.
            shutdown = getattr(self._response, "shutdown", None)
            if shutdown is not None:
                shutdown()
            self._response.release_conn()
        except Exception:  # closing a dead connection may fail; there is nothing left to do
            pass


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


def now_rfc3339(micro: bool = False) -> str:
    """Timestamps as the API writes them (MicroTime for Leases, Time elsewhere)."""
    t = time.time()
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return f"{base}.{int((t % 1) * 1e6):06d}Z" if micro else f"{base}Z"


# Metadata the server fills in: an object sent back with these is rejected or misread. Finalizers go
# too, since no controller runs here to remove them.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
)


def strip_server_fields(obj: Mapping[str, Any]) -> Obj:
    """A copy of `obj` fit to create: no server-populated metadata, no status, no ownerReferences."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    meta.pop("ownerReferences", None)
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}
