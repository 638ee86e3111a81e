"""What the executor's waits read: one list+watch per kind (nodes, bound pods, ResourceSlices,
ResourceClaims), not a GET per node per poll.

A wave's lanes wait on their nodes concurrently (DRA readiness, evicted pods gone, the canary bound and
allocated). Polling, each lane asked the API server every poll for its node, its slices and its pods: a
500-node wave was ~250 requests a second. Here four `kube.Informer`s (resumed from the last
resourceVersion, re-listed on 410 Gone) keep a local copy, indexed by node, and the waits read it: the API
server sees four watches however many lanes wait. The copy may lag the server by a watch event; every wait
reads it until its condition holds, so a lag only delays a wait, never passes one early (what they wait
for — allocatable 0, a published pool, pods gone, a bound canary — is what the cache shows last).
A write's old value (for the inverse) must be current: it is taken from the copy only by a write that
tests it still holds (`LiveOps._write_if_unchanged`), else read with a GET.

A wait does not poll its copy on a timer either: it subscribes to the keys it reads (a node's name covers
the node, its bound pods and its slices; "namespace/name" a pod or a claim) and sleeps until an event
touches one of them (`changes`), re-reading at most every poll cap as a safety net. A growing poll saw a
change up to one poll (0.8 s on the 2,000-node twin) late, in every wait of every lane of a wave.

The pods watch has no field selector: the canary is read from it from its creation, unbound (it is
Pending until the scheduler places it), so the canary's wait makes no GET per poll either.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator

from dra_migrate.kube import Event, Informer, Kube, NamespaceIndex, NodeIndex, Obj

log = logging.getLogger("dra_migrate.execute")

NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
SYNC_TIMEOUT_S = 120.0


class Watched:
    """Informers on the four kinds the waits read; `start` lists them (once), `close` ends the watches."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.informers = {
            "nodes": Informer(kube, NODES),
            "pods": Informer(kube, PODS),  # unbound ones too: the canary is read from its creation
            "slices": Informer(kube, SLICES),
            "claims": Informer(kube, CLAIMS),
        }
        self._by_node = {"pods": NodeIndex(), "slices": NodeIndex()}
        self._pods_by_namespace = NamespaceIndex()  # the canary's namespace, read twice per canary
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._subscribers: dict[str, set[threading.Event]] = {}  # key -> the waits to wake on its change

    def start(self, timeout_s: float = SYNC_TIMEOUT_S) -> None:
        for kind, informer in self.informers.items():
            self._threads.append(informer.run(self._indexer(kind), name=f"watch {kind}"))
        for kind, informer in self.informers.items():
            if not informer.synced.wait(timeout_s):
                raise TimeoutError(f"the {kind} watch did not list within {timeout_s:g}s")

    def close(self) -> None:
        for informer in self.informers.values():
            informer.close()

    @property
    def alive(self) -> bool:
        """Every informer still runs. One that ended (a permanent refusal, logged) leaves its copies as
        they were: the waits then read the API server directly (`OpsBase.cache`)."""
        return bool(self._threads) and all(t.is_alive() for t in self._threads)

    def _indexer(self, kind: str) -> Callable[[Event], None]:
        return lambda event: self._index(kind, event)

    def _index(self, kind: str, event: Event) -> None:
        key = event.key
        with self._lock:
            index = self._by_node.get(kind)
            node, before = index.apply(event) if index is not None else ("", None)
            if kind == "pods":
                self._pods_by_namespace.apply(event)
            # The change is in the copies now: wake the waits that read it (the object's own key; for a
            # pod or a slice its node's, before and after a move).
            for touched in {key, node, before}:
                for waiter in self._subscribers.get(touched or "", ()):
                    waiter.set()

    @contextlib.contextmanager
    def changes(self, *keys: str) -> Iterator[threading.Event]:
        """An event set whenever a watched object of `keys` changes (a node's name: the node, its bound
        pods, its slices; "namespace/name": a pod or a claim). Clear it before each read: a change after
        the clear sets it again, so none is missed between a read and the wait."""
        waiter = threading.Event()
        with self._lock:
            for key in keys:
                self._subscribers.setdefault(key, set()).add(waiter)
        try:
            yield waiter
        finally:
            with self._lock:
                for key in keys:
                    waiting = self._subscribers.get(key)
                    if waiting is not None:
                        waiting.discard(waiter)
                        if not waiting:
                            del self._subscribers[key]

    # -- reads -----------------------------------------------------------------------------------

    def node(self, name: str) -> Obj | None:
        return self.informers["nodes"].get(name)

    def nodes(self) -> list[Obj]:
        return self.informers["nodes"].objects()

    def pods_on(self, node: str) -> list[Obj]:
        with self._lock:
            return self._by_node["pods"].on(node)

    def slices_of(self, node: str) -> list[Obj]:
        with self._lock:
            return self._by_node["slices"].on(node)

    def pods_in(self, namespace: str) -> list[Obj]:
        with self._lock:
            return self._pods_by_namespace.on(namespace)

    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.informers["pods"].get(f"{namespace}/{name}")

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self.informers["claims"].get(f"{namespace}/{name}")

    @property
    def requests(self) -> dict[str, int]:
        """Lists and watch requests made so far, per kind (what the API server saw of the waits)."""
        return {k: i.lists + i.watches for k, i in self.informers.items()}
