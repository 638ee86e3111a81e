"""Converting the items of a list document: a `v1 List`, as `kubectl get ... -o yaml` writes a backup and
`kubectl apply -f` takes it back, or a typed list (`DeploymentList`) as the API server returns one.

Each item is converted as a document of its own would be (rewrite.convert_document): an item with a
problem is left as it was and reported, the others are converted; each new ResourceClaimTemplate goes into
the list right before the item that uses it, as it goes right before its workload in a stream. A typed
list's items carry no apiVersion or kind; they are converted as the list's kind less `List`, which is how
apimachinery reads them (k8s.io/apimachinery v0.37.2 pkg/apis/meta/v1/unstructured/helpers.go,
`decodeToList`), and are written back without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.rewrite import ClaimNames, ConvertOptions, DocResult, convert_document


def list_of(doc: Any) -> tuple[list[Any], str, str] | None:
    """A list document's items, and the apiVersion and kind its untyped items are read as ("" for a
    `v1 List`, whose items each say their own); None for any other document."""
    if not isinstance(doc, dict):
        return None
    kind, items = doc.get("kind"), doc.get("items")
    if not (isinstance(kind, str) and kind.endswith("List") and isinstance(items, list)):
        return None
    api_version = doc.get("apiVersion")
    return items, str(api_version) if isinstance(api_version, str) else "", kind.removesuffix("List")


def objects_of(doc: Any) -> Iterator[Any]:
    """The objects a document holds: a list's items, or the document itself."""
    found = list_of(doc)
    yield from found[0] if found is not None else [doc]


def convert_list(doc: Any, table: TemplateTable, opts: ConvertOptions, names: ClaimNames) -> DocResult | None:
    """Convert a list document's items in place; None if `doc` is not a list document."""
    found = list_of(doc)
    if found is None:
        return None
    items, api_version, item_kind = found
    total, inserts = DocResult(), []
    for i, item in enumerate(items):
        r = _convert_item(item, api_version, item_kind, table, opts, names)
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
    item: Any, api_version: str, item_kind: str, table: TemplateTable, opts: ConvertOptions, names: ClaimNames
) -> DocResult:
    untyped = isinstance(item, dict) and "kind" not in item and "apiVersion" not in item and item_kind != ""
    if not untyped:
        return convert_document(item, table, opts, names)
    item.insert(0, "apiVersion", api_version)
    item.insert(1, "kind", item_kind)
    try:
        return convert_document(item, table, opts, names)
    finally:
        del item["apiVersion"], item["kind"]
