"""List, then watch from the list's resourceVersion; list again on 410 Gone or a broken watch.

The twin's canary controller uses it (`dra_migrate.sim.kwok`). Until the one API client's list+watch
helper lands (ARCHITECTURE.md Round 3, `kube/`), this is the one place that loop lives for the twin.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from dra_migrate.sim.kube import Kube, Query

log = logging.getLogger("dra_migrate.sim")
Handler = Callable[[str, dict[str, Any]], None]


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def watch_forever(kube: Kube, path: str, query: Query, handle: Handler, stop: threading.Event) -> None:
    """Call `handle(type, object)` for every object listed ("ADDED") and every event after, until `stop`."""
    backoff = 0.2
    while not stop.is_set():
        try:
            items, rv = kube.list_all(path, query)
            for item in items:
                _call(handle, "ADDED", item)
            while not stop.is_set():
                rv = watch_once(kube, path, query, rv, handle, stop)
                backoff = 0.2
        except Expired:
            continue
        except Exception as e:
            if stop.is_set():
                return
            log.warning("watch %s failed, retrying: %s", path, e)
            stop.wait(backoff)
            backoff = min(backoff * 2, 5)


def watch_once(kube: Kube, path: str, query: Query, rv: str, handle: Handler, stop: threading.Event) -> str:
    """One watch request from `rv`; returns the last resourceVersion seen (bookmarks included)."""
    stream = kube.watch(path, rv, query, timeout_seconds=60)
    try:
        for event in stream:
            if stop.is_set():
                break
            kind = str(event.get("type"))
            obj = event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Expired
                raise RuntimeError(f"watch error: {obj.get('message')}")
            rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
            if kind != "BOOKMARK":
                _call(handle, kind, obj)
        return rv
    finally:
        stream.close()


def _call(handle: Handler, kind: str, obj: dict[str, Any]) -> None:
    try:
        handle(kind, obj)
    except Exception as e:
        log.warning("handling %s %s failed: %s", kind, (obj.get("metadata") or {}).get("name"), e)
