"""A fault-injecting HTTPS proxy between the tool and the test control plane's API server.

It serves TLS with the API server's own certificate (so the control plane's CA verifies it), forwards
each request upstream authenticated as the admin (client certificate), and on a seeded fraction of
requests answers with a fault instead: 500, 429 with `Retry-After: 1`, or a dropped connection (closed
without a response); opt-in, `lost-response` forwards the request and then drops the connection.
Clients need no credentials: the proxy does not ask for a client certificate.

`expire_continues=N` answers the first N list requests that carry a continue token as the API server does
once that token's resourceVersion has been compacted away: 410 Expired, with a token to go on at the latest
resourceVersion (k8s.io/apiserver v0.37.2 pkg/storage/etcd3/errors.go `handleCompactedErrorForPaging`: the
same key, resourceVersion -1), which the real API server then serves.

Watches (`watch=true`) are refused with 400: the tool does not watch, and streaming them through
would need chunk-by-chunk relaying.

    with FaultProxy(control_plane, rate=0.3, seed=7) as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "proxy.kubeconfig")
        ...
        proxy.counts  # {"forwarded": n, "500": n, "429": n, "drop": n, "watch-refused": n, "upstream-error": n}
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import random
import socket
import ssl
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import controlplane

FAULTS = ("500", "429", "drop")
# Opt-in: forward the request, then drop the connection instead of answering. The write happened but the
# client cannot know: what a retrying client must cope with (a create that "failed" yet exists).
LOST_RESPONSE = "lost-response"
_Response = tuple[int, str, list[tuple[str, str]], bytes]  # status, reason, headers, body
# Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection and are not forwarded; Content-Length is
# recomputed; Authorization is the client's, while upstream the proxy is the admin.
_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
        "Authorization",
    )
)


class FaultProxy:
    def __init__(
        self,
        control_plane: controlplane.ControlPlane,
        *,
        rate: float = 0.1,
        seed: int = 0,
        faults: tuple[str, ...] = FAULTS,
        expire_continues: int = 0,
    ) -> None:
        if not 0 <= rate <= 1:
            raise ValueError("rate must be within [0, 1]")
        unknown = set(faults) - {*FAULTS, LOST_RESPONSE}
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {(*FAULTS, LOST_RESPONSE)}")
        self.cp = control_plane
        self.rate = rate
        self.faults = faults
        self.expire_continues = expire_continues
        self._rng = random.Random(seed)
        self._mutex = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._upstream = urlsplit(control_plane.server)
        self._upstream_ctx = ssl.create_default_context(cafile=str(control_plane.dir / "ca.crt"))
        self._upstream_ctx.load_cert_chain(control_plane.dir / "admin.crt", control_plane.dir / "admin.key")
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- decisions and counts

    def _decide(self) -> str | None:
        """The fault for the next request, or None to forward it. Seeded: the same sequence of requests
        gets the same faults (the tool's reads are sequential)."""
        with self._mutex:
            fault = self._rng.choice(self.faults) if self._rng.random() < self.rate else None
            self._counts[fault or "forwarded"] += 1
            return fault

    def count(self, what: str) -> None:
        with self._mutex:
            self._counts[what] += 1

    def _expires(self, query: dict[str, list[str]]) -> str | None:
        """The token to go on with, when this continued list request is to be answered 410 Expired."""
        token = (query.get("continue") or [""])[0]
        with self._mutex:
            if not token or self._counts["expired"] >= self.expire_continues:
                return None
            self._counts["expired"] += 1
        return _at_latest(token)

    @property
    def counts(self) -> dict[str, int]:
        with self._mutex:
            return dict(self._counts)

    @property
    def injected(self) -> int:
        c = self.counts
        return sum(c.get(f, 0) for f in (*FAULTS, LOST_RESPONSE))

    # -- lifecycle

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        if self._server is not None:
            return self
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(self.cp.dir / "apiserver.crt", self.cp.dir / "apiserver.key")
        ctx.verify_mode = ssl.CERT_NONE  # any client (certificate or not) is welcome
        server = _Server(("127.0.0.1", 0), _handler(self))
        # The handshake happens in each connection's own thread (on first read), not in the accept loop,
        # so one slow client cannot stall the others.
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for the proxy: the control plane's CA, and no credentials (none are needed)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "fault-proxy",
                    "cluster": {"server": self.url, "certificate-authority": str(self.cp.dir / "ca.crt")},
                }
            ],
            "users": [{"name": "anyone", "user": {}}],
            "contexts": [{"name": "fault-proxy", "context": {"cluster": "fault-proxy", "user": "anyone"}}],
            "current-context": "fault-proxy",
        }
        path.write_text(json.dumps(config, indent=2) + "\n")
        return path

    def _connect_upstream(self) -> http.client.HTTPSConnection:
        host, port = self._upstream.hostname or "127.0.0.1", self._upstream.port or 443
        return http.client.HTTPSConnection(host, port, context=self._upstream_ctx, timeout=60)


# The API server's message with that 410 (k8s.io/apiserver v0.37.2 pkg/storage/etcd3/errors.go).
_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)


def _at_latest(token: str) -> str:
    """A continue token's key at resourceVersion -1, as `storage.EncodeContinue(key, prefix, -1)` writes it
    (k8s.io/apiserver pkg/storage/continue.go: base64url of {"v": "meta.k8s.io/v1", "rv": ..., "start": ...})."""
    padded = token + "=" * (-len(token) % 4)
    doc = json.loads(base64.urlsafe_b64decode(padded))
    doc["rv"] = -1
    return base64.urlsafe_b64encode(json.dumps(doc, separators=(",", ":")).encode()).decode().rstrip("=")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-handshake or mid-request (the dropped-connection fault provokes
        # exactly that) are expected here; the default prints a traceback for each.
        pass


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the API server offers
        timeout = 30  # an idle client connection is closed after this
        upstream: http.client.HTTPSConnection | None = None

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: pytest output is for failures

        def _body(self) -> bytes | None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else None

        def _reply(
            self, status: int, reason: str, message: str, extra: dict[str, str] | None = None, cont: str = ""
        ) -> None:
            doc: dict[str, Any] = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {"continue": cont} if cont else {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": status,
            }
            body = json.dumps(doc).encode()
            self.send_response(status)
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            body = self._body()
            query = parse_qs(urlsplit(self.path).query)
            if any(v.lower() in ("true", "1") for v in query.get("watch", [])):
                proxy.count("watch-refused")
                self._reply(400, "BadRequest", "the fault proxy does not relay watches")
                return
            later = proxy._expires(query)
            if later is not None:
                self._reply(410, "Expired", _INCONSISTENT_CONTINUE, cont=later)
                return
            fault = proxy._decide()
            if fault == "500":
                self._reply(500, "InternalError", "injected by the fault proxy")
                return
            if fault == "429":
                self._reply(429, "TooManyRequests", "injected by the fault proxy", {"Retry-After": "1"})
                return
            if fault == "drop":
                self._drop()
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            try:
                status, reason, resp_headers, data = self._forward(body, headers)
            except (OSError, http.client.HTTPException) as e:
                proxy.count("upstream-error")
                self._reply(502, "BadGateway", f"fault proxy: upstream failed: {e}")
                return
            if fault == LOST_RESPONSE:
                self._drop()
                return
            self.send_response(status, reason)
            for k, v in resp_headers:
                if k.lower() not in _HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _drop(self) -> None:
            """Close the connection without a response."""
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _forward(
            self, body: bytes | None, headers: dict[str, str]
        ) -> tuple[int, str, list[tuple[str, str]], bytes]:
            # One upstream connection per client connection, reused while it is kept alive; a stale one
            # (closed by the server while idle) is replaced once.
            while True:
                reused = self.upstream is not None
                if self.upstream is None:
                    self.upstream = proxy._connect_upstream()
                try:
                    self.upstream.request(self.command, self.path, body=body, headers=headers)
                    resp = self.upstream.getresponse()
                    data = resp.read()  # de-chunks; Content-Encoding (if any) passes through untouched
                    return resp.status, resp.reason, resp.getheaders(), data
                except (OSError, http.client.HTTPException):
                    self.upstream.close()
                    self.upstream = None
                    if not reused:
                        raise

        def finish(self) -> None:
            if self.upstream is not None:
                self.upstream.close()
                self.upstream = None
            with contextlib.suppress(OSError):  # a dropped or vanished client: nothing left to flush to
                super().finish()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    return Handler
