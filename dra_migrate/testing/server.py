"""An in-memory API server behind `FakeApiClient`, for unit tests of what reads watches: objects by
collection, GET, LIST (equality field and label selectors), POST (generateName), PATCH (merge), DELETE, and watches that
block until a change and resume from a resourceVersion. The test plays the cluster's controllers by
calling `put`/`remove` (each an event on every open watch of the collection); every request is recorded in
`client.calls`, so a test counts what the code under test asked. Integration tests use the real control
plane instead (tests/integration)."""

from __future__ import annotations

import copy
import itertools
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from dra_migrate.testing.kube import Call, FakeApiClient, FakeResponse, status

Obj = dict[str, Any]


@dataclass(frozen=True)
class Where:
    """A request's path, parsed: the collection ("/api/v1/pods"), the namespace, the object's name."""

    collection: str
    namespace: str = ""
    name: str = ""

    @classmethod
    def of(cls, path: str) -> Where:
        parts = path.strip("/").split("/")
        head, rest = (parts[:2], parts[2:]) if parts[0] == "api" else (parts[:3], parts[3:])
        ns = ""
        if rest and rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        return cls("/" + "/".join([*head, rest[0]]), ns, rest[1] if len(rest) > 1 else "")


def _field(obj: Obj, dotted: str) -> str:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _selects(obj: Obj, query: dict[str, str], namespace: str) -> bool:
    meta = obj.get("metadata") or {}
    if namespace and meta.get("namespace") != namespace:
        return False
    for term in filter(None, query.get("fieldSelector", "").split(",")):
        key, negate, want = (term.partition("!=")[0], True, term.partition("!=")[2]) if "!=" in term else (
            term.partition("=")[0], False, term.partition("=")[2])  # fmt: skip
        if (_field(obj, key) == want) == negate:
            return False
    labels = meta.get("labels") or {}
    for term in filter(None, query.get("labelSelector", "").split(",")):
        key, eq, want = term.partition("=")
        if (key not in labels) if not eq else labels.get(key) != want:
            return False
    return True


class _WatchResponse(FakeResponse):
    """A watch's body: the events queued for it, one JSON line each, until the client closes it."""

    def __init__(self, events: queue.Queue[Obj | None]) -> None:
        super().__init__(200)
        self._events = events

    def stream(self, amt: int = 65536, decode_content: bool = True) -> Iterator[bytes]:
        while True:
            event = self._events.get()
            if event is None:
                return
            yield orjson.dumps(event) + b"\n"

    def release_conn(self) -> None:
        self.released = True
        self._events.put(None)


class FakeServer:
    """See the module docstring. `client` is the ApiClient to give the code under test."""

    def __init__(self) -> None:
        self.client = FakeApiClient(self.handle)
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._log: list[tuple[int, str, str, Obj]] = []  # (rv, collection, type, object): what watches replay
        self._watches: list[tuple[str, str, dict[str, str], queue.Queue[Obj | None]]] = []
        self._rv = itertools.count(100)
        self._last_rv = 99
        self._lock = threading.Lock()
        self.latency_s = 0.0  # each answer (but a watch's events) takes this long: a loaded API server

    # -- what the test plays ---------------------------------------------------------------------

    def put(self, path: str, obj: Obj) -> Obj:
        """Store `obj` in the collection of `path` (created or replaced): ADDED or MODIFIED on its watches."""
        where = Where.of(path)
        meta = obj.setdefault("metadata", {})
        if where.namespace:
            meta["namespace"] = where.namespace
        with self._lock:
            key = (str(meta.get("namespace") or ""), str(meta["name"]))
            existed = key in self._objects.get(where.collection, {})
            meta.setdefault("uid", f"uid-{meta['name']}")
            return self._store(where.collection, key, obj, "MODIFIED" if existed else "ADDED")

    def get(self, path: str) -> Obj | None:
        where = Where.of(path)
        with self._lock:
            found = self._objects.get(where.collection, {}).get((where.namespace, where.name))
            return copy.deepcopy(found) if found is not None else None

    def remove(self, path: str) -> None:
        where = Where.of(path)
        with self._lock:
            obj = self._objects.get(where.collection, {}).pop((where.namespace, where.name), None)
            if obj is not None:
                self._emit(where.collection, "DELETED", obj, next(self._rv))

    def objects(self, collection: str) -> list[Obj]:
        with self._lock:
            return [copy.deepcopy(o) for o in self._objects.get(collection, {}).values()]

    def calls(self, method: str, path: str, since: int = 0) -> int:
        """Requests with this method and exact path from the `since`-th on (a watch, a GET with watch=true, is
        not counted)."""
        asked = self.client.calls[since:]
        return sum(1 for c in asked if c.method == method and c.path == path and "watch" not in c.query)

    # -- the server ------------------------------------------------------------------------------

    def _store(self, collection: str, key: tuple[str, str], obj: Obj, kind: str) -> Obj:
        rv = next(self._rv)
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(rv)
        self._objects.setdefault(collection, {})[key] = stored
        self._emit(collection, kind, stored, rv)
        return copy.deepcopy(stored)

    def _emit(self, collection: str, kind: str, obj: Obj, rv: int) -> None:
        self._last_rv = rv
        self._log.append((rv, collection, kind, obj))
        for coll, ns, query, events in self._watches:
            if coll == collection and _selects(obj, query, ns):
                events.put({"type": kind, "object": copy.deepcopy(obj)})

    def handle(self, call: Call) -> FakeResponse | BaseException:
        where = Where.of(call.path)
        if self.latency_s and call.query.get("watch") != "true":
            time.sleep(self.latency_s)  # not under the lock: requests wait side by side, as on a server
        with self._lock:
            if call.method == "GET" and call.query.get("watch") == "true":
                return self._watch(where, call.query)
            if call.method == "GET" and not where.name:
                items = [copy.deepcopy(o) for o in self._objects.get(where.collection, {}).values()
                         if _selects(o, call.query, where.namespace)]  # fmt: skip
                return FakeResponse(200, {"metadata": {"resourceVersion": str(self._last_rv)}, "items": items})
            key = (where.namespace, where.name)
            found = self._objects.get(where.collection, {}).get(key)
            if call.method == "GET":
                return FakeResponse(200, copy.deepcopy(found)) if found else _not_found(where)
            if call.method == "DELETE":
                if found is None:
                    return _not_found(where)
                del self._objects[where.collection][key]
                self._emit(where.collection, "DELETED", found, next(self._rv))
                return FakeResponse(200, copy.deepcopy(found))
            if call.method == "PATCH":  # a merge patch (strategic ones as merge: lists are replaced)
                if found is None:
                    return _not_found(where)
                return FakeResponse(200, self._store(where.collection, key, _merged(found, call.body), "MODIFIED"))
            if call.method == "POST":
                body = copy.deepcopy(call.body)
                meta = body.setdefault("metadata", {})
                if not meta.get("name"):
                    meta["name"] = f"{meta.get('generateName', '')}{len(self.client.calls)}"
                if where.namespace:
                    meta["namespace"] = where.namespace
                meta.setdefault("uid", f"uid-{meta['name']}")
                return FakeResponse(201, self._store(where.collection, (where.namespace, meta["name"]), body, "ADDED"))
        return FakeResponse(405, status(405, "MethodNotAllowed", call.method))

    def _watch(self, where: Where, query: dict[str, str]) -> FakeResponse:
        events: queue.Queue[Obj | None] = queue.Queue()
        since = int(query.get("resourceVersion") or 0)
        for rv, coll, kind, obj in self._log:
            if rv > since and coll == where.collection and _selects(obj, query, where.namespace):
                events.put({"type": kind, "object": copy.deepcopy(obj)})
        self._watches.append((where.collection, where.namespace, query, events))
        return _WatchResponse(events)


def _merged(obj: Any, patch: Any) -> Any:
    """RFC 7386: `patch`'s maps merged into `obj`'s, a null removing a key, anything else replacing."""
    if not isinstance(patch, dict) or not isinstance(obj, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(obj)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merged(out.get(k), v)
    return out


def _not_found(where: Where) -> FakeResponse:
    return FakeResponse(404, status(404, "NotFound", f"{where.collection.rsplit('/', 1)[-1]} {where.name!r} not found"))
