"""Which existing DeviceClass serves an extended resource two of them declare: the newest, not the name sorted first.

The scheduler keeps, per extendedResourceName, the class created later, a tie going to the name sorted first
(k8s.io/dynamic-resource-allocation v0.37.2 deviceclass/extendedresourcecache/extendedresourcecache.go; k8s.io/api
resource/v1 types.go `ExtendedResourceName`). The capacity check already chose so (dra/capacity.py `class_for`);
the generation's "already mapped by" class and the dependents' class for a quota or a Kueue mapping took the
name sorted first, so they named a class the scheduler does not use.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.dra.deviceclasses import existing_mappings, generate
from dra_migrate.inventory.dependents import class_by_resource
from dra_migrate.inventory.dra import extended_resource_classes
from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import node
from tests.unit.test_device_plugin_configs import make


def _class(name: str, created: str | None, ern: str = "nvidia.com/gpu") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if created is not None:
        meta["creationTimestamp"] = created
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": meta,
            "spec": {"selectors": [{"cel": {"expression": "true"}}], "extendedResourceName": ern}}  # fmt: skip


def _state(*classes: dict[str, Any]) -> Any:
    return make(node("g1", {"nvidia.com/gpu.present": "true"}, {"nvidia.com/gpu": "8"}), *classes)


def test_the_newest_class_is_the_one_named_as_serving_the_name() -> None:
    st = _state(_class("a-old", "2026-01-01T00:00:00Z"), _class("z-new", "2026-06-01T00:00:00Z"))
    assert existing_mappings(st)["nvidia.com/gpu"] == ["z-new", "a-old"]
    assert class_by_resource(st, [])["nvidia.com/gpu"] == "z-new"
    [skipped] = [
        g for g in generate(st, build_inventory(st)).not_generated if g.extended_resource_name == "nvidia.com/gpu"
    ]
    assert skipped.existing_class == "z-new"


def test_a_tie_goes_to_the_name_sorted_first_and_an_undated_class_is_the_oldest() -> None:
    same = "2026-03-01T00:00:00Z"
    assert extended_resource_classes(_state(_class("b", same), _class("a", same)))["nvidia.com/gpu"] == ["a", "b"]
    st = _state(_class("a-undated", None), _class("m-dated", same))
    assert extended_resource_classes(st)["nvidia.com/gpu"] == ["m-dated", "a-undated"]
