"""A thin JSON REST layer over the `kubernetes` client's connection and auth handling.

The requests, errors and paths are the tool's own (`dra_migrate.execute.kubeapi`, one implementation);
this module adds what only the simulator needs: watches, its user agent, timestamps, object copies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

import dra_migrate
from dra_migrate.execute.kubeapi import ApiError, Obj, Query, path_of
from dra_migrate.execute.kubeapi import Kube as _Kube

USER_AGENT = f"dra-migrate-sim/{dra_migrate.__version__}"

__all__ = [
    "USER_AGENT",
    "ApiError",
    "Kube",
    "Obj",
    "Query",
    "WatchStream",
    "new_api_client",
    "now_rfc3339",
    "path_of",
    "strip_server_fields",
]


def new_api_client(kubeconfig: Path | str, user_agent: str = USER_AGENT, *, pool_size: int | None = None) -> Any:
    """An ApiClient for a kubeconfig, with our user agent so audit logs can tell the simulator apart.

    `pool_size`: connections kept open (the client's default is 5 per CPU). A thread that finds the pool
    empty opens a connection and drops it after one request: a TLS handshake per request."""
    cfg = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)  # type: ignore[no-untyped-call]
    if pool_size is not None:
        cfg.connection_pool_maxsize = pool_size
    api = k8s_client.ApiClient(cfg)
    api.user_agent = user_agent
    return api


class Kube(_Kube):
    """The tool's JSON REST helper (`dra_migrate.execute.kubeapi.Kube`, no retries: the simulator's loops
    retry on their own) plus watches, which only the simulator needs."""

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
