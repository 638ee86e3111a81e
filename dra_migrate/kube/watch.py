"""List+watch, informer style: one watch per resource kind, resumed from the last resourceVersion.

What client-go's reflector does (k8s.io/client-go tools/cache/reflector.go, ListAndWatch), in the part
this tool needs:
- list the collection once (paged; a consistent read), remember the list's resourceVersion;
- watch from it with bookmarks on (KEP-956), so the resourceVersion stays fresh on a quiet collection;
- when a watch ends (the server's timeoutSeconds, a dropped connection, a 5xx), watch again from the last
  resourceVersion seen -- no event is lost or repeated;
- when the server says that resourceVersion is too old (410 Gone, either as the watch's HTTP status or
  as an ERROR event carrying a Status with code 410: "Expired"), list again, and report the difference
  from what was known as events (DELETED for what vanished meanwhile), as DeltaFIFO.Replace does;
- a permanent refusal (403, 404, ...) ends the loop with the `ApiError`.

The informer keeps the objects it has seen (`get`, `objects`), keyed "namespace/name" ("name" for
cluster-scoped kinds), so a caller can ask for the current state without a request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from dra_migrate.kube.client import Kube, Obj, Query, RetryPolicy
from dra_migrate.kube.errors import ApiError, KubeError
from dra_migrate.kube.stream import WatchStream

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
WATCH_TIMEOUT_S = 240  # the server ends each watch after this (client-go picks 5-10 min at random)
# Re-watching after a failure backs off as requests do, up to 5 s, and forever: an informer outlives
# an API server restart. A caller that must give up uses its own deadline and `close()`.
_REWATCH = RetryPolicy(retries=0, backoff_s=0.2, max_backoff_s=5.0)


@dataclass(frozen=True)
class Event:
    """One change to one object: ADDED, MODIFIED or DELETED."""

    type: str
    object: Obj

    @cached_property
    def key(self) -> str:
        """The object's "namespace/name" (its name if cluster-scoped), made once per event: the informer's
        store, its indexes and the waits woken by the change each ask for it."""
        return object_key(self.object)


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return f"{ns}/{name}" if ns else name


def node_of(obj: Obj) -> str:
    """The node a pod or ResourceSlice sits on (`spec.nodeName`), "" if none."""
    return str((obj.get("spec") or {}).get("nodeName") or "")


def namespace_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


class Index:
    """Watched objects by one value of theirs (`value_of`: the node they sit on, their namespace), kept from an
    informer's events: client-go's cache.Indexer with one index function, for readers that ask "what is on
    this node" or "what is in this namespace" per wave lane. A read costs what it returns, not the size of the
    watched collection (a scan of 10,000 pods per canary was a third of a 2,000-node rehearsal's CPU: issue
    25). Not locked: its owner applies events and reads under its own lock (which also guards what it wakes)."""

    def __init__(self, value_of: Callable[[Obj], str]) -> None:
        self._value_of = value_of
        self._by_value: dict[str, dict[str, Obj]] = {}
        self._where: dict[str, str] = {}  # object key -> its value

    def apply(self, event: Event) -> tuple[str, str | None]:
        """Take in one change; (its value now, "" if none or gone; its value before, None if it had none)."""
        key = event.key
        value = self._value_of(event.object)
        before = self._where.pop(key, None)
        if before is not None:
            held = self._by_value.get(before)
            if held is not None:
                held.pop(key, None)
                if not held:
                    del self._by_value[before]
        if event.type != DELETED and value:
            self._by_value.setdefault(value, {})[key] = event.object
            self._where[key] = value
        return value, before

    def on(self, value: str) -> list[Obj]:
        return list(self._by_value.get(value, {}).values())


class NodeIndex(Index):
    """Pods or ResourceSlices by the node they sit on (`spec.nodeName`)."""

    def __init__(self) -> None:
        super().__init__(node_of)


class NamespaceIndex(Index):
    """Objects by their namespace."""

    def __init__(self) -> None:
        super().__init__(namespace_of)


def selector_query(label_selector: str = "", field_selector: str = "") -> list[tuple[str, str | int | bool]]:
    query: list[tuple[str, str | int | bool]] = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


class Informer:
    """List, then watch one collection (`path`, e.g. "/api/v1/pods") filtered by selectors.

    `events()` yields every change until `close()` (callable from any thread: a blocked read ends at
    once). Counters: `lists` (1 + re-lists after 410), `watches` (watch requests made), `failures`
    (transient failures ridden out).
    """

    def __init__(
        self,
        kube: Kube,
        path: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        timeout_seconds: int = WATCH_TIMEOUT_S,
        backoff: RetryPolicy = _REWATCH,
    ) -> None:
        self.kube = kube
        self.path = path
        self.query: Query = selector_query(label_selector, field_selector)
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff
        self.resource_version = ""
        self.lists = 0
        self.watches = 0
        self.failures = 0
        self._store: dict[str, Obj] = {}
        self._mutex = threading.Lock()
        self._closed = threading.Event()
        self._stream: WatchStream | None = None
        self.synced = threading.Event()  # set once the first list is in the store

    # -- the store ------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        with self._mutex:
            return self._store.get(key)

    def objects(self) -> list[Obj]:
        with self._mutex:
            return list(self._store.values())

    # -- the loop --------------------------------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """Every change, starting with an ADDED for each object of the first list."""
        need_list = True
        consecutive = 0
        while not self._closed.is_set():
            try:
                if need_list:
                    items, rv = self.kube.list_all(self.path, self.query)
                    self.lists += 1
                    self.resource_version = rv
                    yield from self._replace(items)
                    self.synced.set()
                    need_list = False
                need_list = yield from self._watch_once()
                consecutive = 0
            except ApiError as e:
                if e.status == 410:
                    need_list = True
                    continue
                if not e.transient:
                    raise
                consecutive = self._failed(e, consecutive)
            except KubeError as e:  # Unreachable
                consecutive = self._failed(e, consecutive)
            except Exception as e:  # a library's own error on a broken connection or body
                # Only the API server's permanent refusal ends an informer (above); anything else — a
                # transport error a client library did not wrap, a body cut mid-JSON — is ridden out like
                # Unreachable, so no watcher is left reading a cache that no longer changes.
                consecutive = self._failed(e, consecutive)

    def run(self, handle: Callable[[Event], None], *, name: str = "") -> threading.Thread:
        """`events()` on a daemon thread, each passed to `handle`; an error in `handle` is logged, not
        fatal. The thread ends at `close()` or on a permanent error (logged)."""

        def loop() -> None:
            try:
                for event in self.events():
                    try:
                        handle(event)
                    except Exception:
                        log.exception("handling %s %s failed", event.type, event.key)
            except Exception:
                if not self._closed.is_set():
                    log.exception("informer on %s stopped", self.path)

        thread = threading.Thread(target=loop, name=name or f"informer {self.path}", daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self._closed.set()
        stream = self._stream
        if stream is not None:
            stream.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _watch_once(self) -> Generator[Event, None, bool]:
        """One watch request; returns whether a re-list is needed (410 in the stream)."""
        stream = self.kube.watch(self.path, self.resource_version, self.query, timeout_seconds=self.timeout_seconds)
        self.watches += 1
        self._stream = stream
        if self._closed.is_set():  # closed while the request was being made
            stream.close()
        try:
            for raw in stream:
                kind = str(raw.get("type", ""))
                obj = raw.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        return True
                    raise ApiError("WATCH", self.path, int(obj.get("code") or 500), orjson.dumps(obj))
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                if rv:
                    self.resource_version = str(rv)
                if kind == "BOOKMARK":
                    continue
                yield self._apply(Event(kind, obj))
            return False
        finally:
            stream.close()
            self._stream = None

    def _apply(self, event: Event) -> Event:
        with self._mutex:
            if event.type == DELETED:
                self._store.pop(event.key, None)
            else:
                self._store[event.key] = event.object
        return event

    def _replace(self, items: list[Obj]) -> Iterator[Event]:
        """A (re-)list: events for what changed since the store was last right."""
        fresh = {object_key(o): o for o in items}
        with self._mutex:
            old = self._store
            self._store = fresh
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                yield Event(ADDED, obj)
            elif _rv(before) != _rv(obj):
                yield Event(MODIFIED, obj)
        for key, obj in old.items():
            if key not in fresh:
                yield Event(DELETED, obj)

    def _failed(self, e: BaseException, consecutive: int) -> int:
        consecutive += 1
        self.failures += 1
        if not self._closed.is_set():
            log.warning("watch %s failed, watching again: %s", self.path, e)
            self._closed.wait(self.backoff.delay(min(consecutive, 16), None))
        return consecutive


def _rv(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")
