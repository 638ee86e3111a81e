"""What a list document is, decided in one place for every reader of one (snapshots, `--dry-run=server`,
convert): a kind ending in `List` with `items` (a `v1 List`, as `kubectl get ... -o yaml` writes a backup,
or a typed list such as a `NodeList`, as the API server returns one).

A typed list's items come without apiVersion and kind (`kubectl get --raw /api/v1/nodes`, curl, a client
library's list call). An item with neither takes the list's apiVersion and its kind less `List`, as
apimachinery reads them (k8s.io/apimachinery v0.37.2 pkg/apis/meta/v1/unstructured/helpers.go,
`decodeToList`: `len(GetKind()) == 0 && len(GetAPIVersion()) == 0`). A `v1 List`'s items each say their own.

The rule was written three times (the snapshot reader, its line reader, convert) with small differences
between them; the readers differ only in what they do with a list's items (copy them, or edit them in
place), not in which documents are lists or which items take the list's kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ListShape:
    """A list document, as found: its `items` as written (a list, or null or anything else for its reader
    to judge), and what an item of no apiVersion and kind is read as (`item_kind` is "" for a `v1 List`)."""

    kind: str
    items: Any
    api_version: str
    item_kind: str

    def types_items(self) -> bool:
        """Whether untyped items take the list's kind (a typed list that names its apiVersion)."""
        return self.item_kind != "" and self.api_version != ""


def list_shape(doc: Any, *, wrapper: str | None = None) -> ListShape | None:
    """The list a document is, or None. `wrapper` names one more kind that holds `items` of its own (the
    ClusterSnapshot): it is a list whose items always say their kind."""
    if not isinstance(doc, dict):
        return None
    kind = doc.get("kind")
    if wrapper is not None and kind == wrapper:
        return ListShape(kind, doc.get("items"), "", "")
    if not (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
        return None
    api_version = doc.get("apiVersion")
    return ListShape(kind, doc["items"], api_version if isinstance(api_version, str) else "", kind.removesuffix("List"))


def untyped(item: Any) -> bool:
    """Whether a list's item says neither its apiVersion nor its kind (so takes the list's)."""
    return isinstance(item, dict) and not item.get("kind") and not item.get("apiVersion")
