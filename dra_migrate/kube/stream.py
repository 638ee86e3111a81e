"""The events of one watch request, read line by line from the response as the server sends them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import orjson

from dra_migrate.kube.errors import Unreachable


class WatchStream:
    """Events of one watch request. `close()` from another thread ends a blocked read at once."""

    def __init__(self, response: Any, path: str = "") -> None:
        self._response = response
        self._path = path
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
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
        except Exception as e:
            if self._closed.is_set():
                return
            # A connection cut mid-stream (reset, truncated chunk, half a JSON line) is urllib3's or orjson's
            # error, not the server's answer: transient, so a watcher re-watches from its last
            # resourceVersion instead of ending (an Informer ends only on a permanent error).
            raise Unreachable(
                f"watch {self._path or 'stream'} broke: {type(e).__name__}: {e}",
                "watching again from the last resourceVersion",
                method="WATCH",
                path=self._path,
            ) from e
        finally:
            self.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

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
