"""What a wave's lanes read from the watches costs what it returns (kube/watch.py `Index`), and a watch's
text is split into events however the server's chunks cut it (kube/stream.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from dra_migrate.execute.watched import Watched
from dra_migrate.kube import ADDED, DELETED, MODIFIED, Event, NamespaceIndex
from dra_migrate.kube.stream import WatchStream


def _pod(name: str, ns: str, rv: str = "1", node: str = "") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": rv}, "spec": {"nodeName": node}}


def _names(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def test_pods_in_a_namespace_follow_adds_changes_and_deletes() -> None:
    w = Watched(kube=None)  # type: ignore[arg-type]  # no informer runs: events are fed by hand
    w._index("pods", Event(ADDED, _pod("canary-1", "dra-migrate")))
    w._index("pods", Event(ADDED, _pod("canary-1", "other")))  # the same name elsewhere is another pod
    w._index("pods", Event(ADDED, _pod("canary-2", "dra-migrate")))
    assert _names(w.pods_in("dra-migrate")) == ["canary-1", "canary-2"]
    w._index("pods", Event(MODIFIED, _pod("canary-1", "dra-migrate", rv="2", node="n1")))
    assert [
        p["metadata"]["resourceVersion"] for p in w.pods_in("dra-migrate") if p["metadata"]["name"] == "canary-1"
    ] == ["2"]
    assert _names(w.pods_on("n1")) == ["canary-1"]
    w._index("pods", Event(DELETED, _pod("canary-1", "dra-migrate", rv="3", node="n1")))
    assert _names(w.pods_in("dra-migrate")) == ["canary-2"] and _names(w.pods_in("other")) == ["canary-1"]
    assert w.pods_in("nowhere") == [] and w.pods_on("n1") == []


def test_reading_a_namespace_does_not_scan_the_whole_watched_collection() -> None:
    """The canary's namespace was found by looking at every pod of the cluster, twice per canary: a third of
    a 2,000-node rehearsal's CPU (py-spy --gil, issue 25). The read must not go through the full copy."""
    w = Watched(kube=None)  # type: ignore[arg-type]
    for i in range(2000):
        w._index("pods", Event(ADDED, _pod(f"p{i}", f"team-{i % 7}", node=f"n{i % 50}")))
    w._index("pods", Event(ADDED, _pod("canary", "dra-migrate")))

    def scanned() -> list[dict[str, Any]]:
        raise AssertionError("pods_in read every watched pod")

    w.informers["pods"].objects = scanned  # type: ignore[method-assign]
    assert _names(w.pods_in("dra-migrate")) == ["canary"]
    assert len(w.pods_in("team-3")) == len([i for i in range(2000) if i % 7 == 3])


def test_an_emptied_value_leaves_no_entry_behind() -> None:
    """A namespace (or node) whose last object left holds nothing: an index of a churning fleet does not grow
    with every canary ever made."""
    index = NamespaceIndex()
    for i in range(100):
        index.apply(Event(ADDED, _pod(f"c{i}", f"ns-{i}")))
        index.apply(Event(DELETED, _pod(f"c{i}", f"ns-{i}")))
    assert index._by_value == {} and index._where == {}


class _Chunks:
    """A response whose body arrives in the given pieces."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def stream(self, _amt: int, decode_content: bool = True) -> Iterator[bytes]:
        assert decode_content
        yield from self.pieces

    def release_conn(self) -> None:
        pass


def _cut(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": "a" * 300, "labels": {"x": "é\\n"}}}},
    {"type": "MODIFIED", "object": {"metadata": {"name": "b"}, "data": "line one\nline two"}},
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}},
    {"type": "DELETED", "object": {"metadata": {"name": "c"}, "big": "z" * 5000}},
]
BODY = (
    b"\n".join(orjson.dumps(e) for e in EVENTS[:2])
    + b"\n\n  \n"
    + b"\n".join(orjson.dumps(e) for e in EVENTS[2:])
    + b"\n"
)


@pytest.mark.parametrize("size", [1, 2, 7, 64, 333, 4096, len(BODY)])
def test_events_are_read_whole_and_in_order_however_the_chunks_cut_them(size: int) -> None:
    assert list(WatchStream(_Chunks(_cut(BODY, size)))) == EVENTS


def test_many_events_in_one_chunk_and_one_event_over_many() -> None:
    many = b"".join(
        orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}}}) + b"\n" for i in range(500)
    )
    huge = orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": "big"}, "blob": "y" * 300_000}}) + b"\n"
    got = list(WatchStream(_Chunks([many[:-1], many[-1:] + huge[:10], *_cut(huge[10:], 65536)])))
    assert [e["object"]["metadata"]["name"] for e in got] == [f"p{i}" for i in range(500)] + ["big"]


def test_an_unended_last_line_is_not_an_event() -> None:
    """The server ends every event with a newline; text after the last one is a cut connection's half event,
    which the informer's re-watch from the last resourceVersion brings again."""
    body = orjson.dumps(EVENTS[0]) + b"\n" + orjson.dumps(EVENTS[1])[:-3]
    assert list(WatchStream(_Chunks(_cut(body, 50)))) == [EVENTS[0]]
