"""Pausing the cyclic garbage collector around large acyclic builds.

A module of its own, below every layer: the snapshot reader, the inventory, the plan builder and the plan
codec all pause it, and `show` (which reads a plan through the codec) must not import the cluster model to
do so (its peak memory is held to 5x the plan file's size, issue 29).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc(*, freeze: bool = True) -> Iterator[None]:
    """Pause the cyclic garbage collector while building large acyclic structures (also a decorator).

    Loading a fleet allocates millions of dicts that all survive; each GC pass re-scans them, which
    made loading 2-3x slower than parsing. API objects are plain JSON: there are no cycles to collect.
    Building a plan and writing it did the same at fleet size: their full passes rescanned everything
    built so far, more of them the larger the fleet (GC time 13x for 5x the nodes; issue 29).
    On the way out the survivors are frozen (moved out of the collector's generations), or the first
    collection after re-enabling would scan them all at once; `freeze=False` for a temporary structure
    (a document being written), whose garbage the next collection frees. Nested pauses are one pause.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()
