"""YAML aliases and merge keys that share a GPU request between places of one manifest.

`resources: *gpu` in a second container, or `<<: *defaults` bringing a `resources` block into each, makes
two containers hold one and the same request node. The rewrite changes a container's node in place, so
without this the second container silently took the first's claim (`request: a` in both): two containers
sharing one GPU while the second device of the template sat idle. Every place after the first that reaches
a node asking for GPUs through an alias or a merge key gets a copy of its own, written out in full (the
anchor stays where it was defined), before anything of the document is converted (a whole List: its items
may share one pod template); each is then converted on its own.

A map that merges (`<<: *x`) a map asking for GPUs is written out in full too, its merged keys made its own:
deleting a key from a map another merges (the rewrite takes `nvidia.com/gpu` out of `limits: &l`) raised
KeyError inside ruamel.yaml 0.19 (`CommentedMap.update_key_value` reads its `MergeValue` items as pairs) and
ended the run as an internal error; and left merged, the map would take the request back from its source.
"""

from __future__ import annotations

import copy
from typing import Any

from ruamel.yaml.comments import CommentedBase, CommentedMap, merge_attrib

from dra_migrate.convert.detect import gpu_keys_elsewhere
from dra_migrate.inventory.resources import GpuNames


def unshare_gpu_requests(doc: Any) -> list[str]:
    """Copy every second reference to a node that asks for GPUs into its place; the paths copied."""
    seen: set[int] = set()
    copied: list[str] = []
    names = GpuNames()

    def visit(parent: Any, key: Any, path: str) -> None:
        value = parent[key]
        if not isinstance(value, (dict, list)):
            return
        # A value met before is an alias; so is one a merge key brings in (ruamel hands the anchored map's
        # own value), and the anchor, written first, was met first: the walk follows the text's order.
        if id(value) in seen and any(gpu_keys_elsewhere(value, names, set())):
            value = parent[key] = _own_copy(value)
            copied.append(path)
        elif isinstance(value, CommentedMap) and _merges_gpu_request(value, names):
            _write_out_merge(value)
            copied.append(path)
        seen.add(id(value))
        walk(value, path)

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k in list(node.keys()):
                visit(node, k, f"{path}.{k}" if path else str(k))
        elif isinstance(node, list):
            for i in range(len(node)):
                visit(node, i, f"{path}[{i}]")

    seen.add(id(doc))
    walk(doc, "")
    return copied


def _merged(value: CommentedMap) -> list[Any]:
    """The maps `value` merges: ruamel.yaml 0.19 keeps them as they are, 0.18 as (position, map) pairs."""
    return [m[1] if isinstance(m, tuple) else m for m in getattr(value, merge_attrib, None) or ()]


def _merges_gpu_request(value: CommentedMap, names: GpuNames) -> bool:
    return any(any(gpu_keys_elsewhere(src, names, set())) for src in _merged(value))


def _write_out_merge(value: CommentedMap) -> None:
    """The map's merged keys become its own (each assignment marks a key as the map's) and the merge goes, with
    the back-references ruamel keeps in each source (`_ref`: a key deleted from a source is deleted from each
    map merging it, and a second deletion of a key already gone raised KeyError)."""
    sources = _merged(value)
    for k in list(value.keys()):
        value[k] = value[k]
    delattr(value, merge_attrib)
    for src in sources:
        refs = getattr(src, "_ref", None)
        if isinstance(refs, list):
            refs[:] = [r for r in refs if r is not value]


def _own_copy(value: Any) -> Any:
    """A deep copy with no anchor of its own (the original keeps it, and any alias still names the original)."""
    dup = copy.deepcopy(value)
    _drop_anchors(dup)
    return dup


def _drop_anchors(node: Any) -> None:
    if isinstance(node, CommentedBase) and node.anchor.value is not None:
        node.anchor.value = None
    if isinstance(node, dict):
        for v in node.values():
            _drop_anchors(v)
    elif isinstance(node, list):
        for v in node:
            _drop_anchors(v)
