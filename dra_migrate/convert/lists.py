"""Converting the items of a list document: a `v1 List`, as `kubectl get ... -o yaml` writes a backup and
`kubectl apply -f` takes it back, or a typed list (`DeploymentList`) as the API server returns one.

Each item is converted as a document of its own would be (rewrite.convert_document): an item with a
problem is left as it was and reported, the others are converted; each new ResourceClaimTemplate goes into
the list right before the item that uses it, as it goes right before its workload in a stream. A typed
list's item that says neither apiVersion nor kind is converted as the list's kind less `List`, as
apimachinery reads it (cluster/lists.py decides which documents are lists and which items take the list's
kind, for every reader), and is written back as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dra_migrate.cluster.lists import ListShape, list_shape, untyped
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.rewrite import ClaimNames, ConvertOptions, DocResult, convert_document


def list_of(doc: Any) -> tuple[list[Any], ListShape] | None:
    """A list document's items (edited in place) and its shape (cluster/lists.py); None for any other
    document, or a list whose `items` is not a list (converted, or reported, as a document)."""
    shape = list_shape(doc)
    if shape is None or not isinstance(shape.items, list):
        return None
    return shape.items, shape


def objects_of(doc: Any) -> Iterator[Any]:
    """The objects a document holds: a list's items, or the document itself."""
    found = list_of(doc)
    yield from found[0] if found is not None else [doc]


def convert_list(doc: Any, table: TemplateTable, opts: ConvertOptions, names: ClaimNames) -> DocResult | None:
    """Convert a list document's items in place; None if `doc` is not a list document."""
    found = list_of(doc)
    if found is None:
        return None
    items, shape = found
    total, inserts = DocResult(), []
    for i, item in enumerate(items):
        r = _convert_item(item, shape, table, opts, names)
        total.problems.extend(f"items[{i}]: {p}" for p in r.problems)
        total.warnings.extend(f"items[{i}]: {w}" for w in r.warnings)
        total.summary.extend(f"items[{i}]: {s}" for s in r.summary)
        if r.changed:
            total.changed = True
            inserts.append((i, r.new_documents))
    for i, new in reversed(inserts):  # from the end, so each index still names its item
        items[i:i] = new
    return total


def _convert_item(
    item: Any, shape: ListShape, table: TemplateTable, opts: ConvertOptions, names: ClaimNames
) -> DocResult:
    if not (shape.types_items() and untyped(item)):
        return convert_document(item, table, opts, names)
    with _typed_as(item, shape):
        return convert_document(item, table, opts, names)


@contextmanager
def _typed_as(item: Any, shape: ListShape) -> Iterator[None]:
    """The item says the list's apiVersion and kind while it is converted, and is written back as it was
    (without them, or with the empty values it had)."""
    said = {k: item[k] for k in ("apiVersion", "kind") if k in item}
    for pos, (key, value) in enumerate((("apiVersion", shape.api_version), ("kind", shape.item_kind))):
        if key in item:
            item[key] = value
        else:
            item.insert(pos, key, value)
    try:
        yield
    finally:
        for key in ("apiVersion", "kind"):
            if key in said:
                item[key] = said[key]
            else:
                del item[key]
