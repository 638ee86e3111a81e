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
        # The text not yet ended by a newline, in pieces: each chunk is split once, so reading is linear in
        # what the server sends. Splitting one line off the buffer at a time copied the rest of it per line (a
        # 64 KiB chunk holds a dozen node events), and a 2,000-node rehearsal's watches carry ~1 GB.
        pending: list[bytes] = []
        try:
            for chunk in self._response.stream(65536, decode_content=True):
                if b"\n" not in chunk:
                    pending.append(chunk)
                    continue
                if pending:
                    pending.append(chunk)
                    chunk = b"".join(pending)
                lines = chunk.split(b"\n")
                rest = lines.pop()
                pending = [rest] if rest else []
                for line in lines:
                    if line and not line.isspace():
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
