"""LimitRanges that name a GPU (`limitrange-gpu`, convert's warning): what the LimitRanger does to a pod whose
containers name none, which is what a pod converted to a ResourceClaim is.

Found reading convert's warning ("a DRA claim is not counted by a LimitRange, so this cap no longer applies
to converted pods") against the admission plugin: it is the other way round. The API server stores a
Container item's max as its default limit, and the LimitRanger gives that default to every container that
names none, so the converted pod asks for the device-plugin GPU again beside its claim; a bound with no
default refuses the pod instead.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.inventory.limitranges import gpu_limit_effects
from dra_migrate.inventory.resources import GpuNames

GPU = "nvidia.com/gpu"


def _effects(*items: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    lr = {"metadata": {"namespace": "ml", "name": "bounds"}, "spec": {"limits": list(items)}}
    return [(e.resource, e.adds, e.refusal) for e in gpu_limit_effects(lr, GpuNames())]


@pytest.mark.parametrize(
    ("case", "items", "adds"),
    [
        ("a default limit", [{"type": "Container", "default": {GPU: "1"}}], "1"),
        ("a max alone is stored as the default limit", [{"type": "Container", "max": {GPU: 4}}], "4"),
        ("a default wins over the max", [{"type": "Container", "default": {GPU: "1"}, "max": {GPU: "8"}}], "1"),
        (
            "a later Container item overrides an earlier one",
            [{"type": "Container", "default": {GPU: "1"}}, {"type": "Container", "default": {GPU: "2"}}],
            "2",
        ),
        ("a MIG name", [{"type": "Container", "max": {"nvidia.com/mig-1g.10gb": "2"}}], "2"),
    ],
)
def test_a_default_limit_is_added_to_every_container_that_names_none(
    case: str, items: list[dict[str, Any]], adds: str
) -> None:
    ((resource, added, refusal),) = _effects(*items)
    assert (added, refusal) == (adds, None), case
    assert resource.startswith("nvidia.com/")


@pytest.mark.parametrize(
    ("case", "items", "why"),
    [
        (
            "a min alone: a default request without a limit",
            [{"type": "Container", "min": {GPU: "1"}}],
            "without a limit",
        ),
        (
            "a limit-to-request ratio: no request to divide by",
            [{"type": "Container", "maxLimitRequestRatio": {GPU: "1"}}],
            "Container maxLimitRequestRatio 1: it wants a request",
        ),
        ("a Pod max: no limit in the pod", [{"type": "Pod", "max": {GPU: "8"}}], "Pod max 8: it wants a limit"),
        ("a Pod min: no request in the pod", [{"type": "Pod", "min": {GPU: "1"}}], "Pod min 1: it wants a request"),
    ],
)
def test_a_bound_with_no_default_limit_refuses_the_pod(case: str, items: list[dict[str, Any]], why: str) -> None:
    ((_, added, refusal),) = _effects(*items)
    assert added is None and refusal is not None and why in refusal, case


def test_a_container_default_satisfies_a_pod_bound() -> None:
    """Once every container names the GPU, a Pod max finds a limit: the pod gets it, it is not refused."""
    assert _effects({"type": "Pod", "max": {GPU: "8"}}, {"type": "Container", "default": {GPU: "1"}}) == [
        (GPU, "1", None)
    ]


def test_a_default_request_beside_the_default_limit_adds_the_limit() -> None:
    assert _effects({"type": "Container", "default": {GPU: "1"}, "defaultRequest": {GPU: 1}}) == [(GPU, "1", None)]


@pytest.mark.parametrize(
    ("case", "items"),
    [
        ("no GPU named", [{"type": "Container", "max": {"cpu": "4"}, "default": {"cpu": "1"}}]),
        ("a PersistentVolumeClaim item", [{"type": "PersistentVolumeClaim", "max": {"storage": "1Ti"}}]),
        ("a GPU bound on a PersistentVolumeClaim item", [{"type": "PersistentVolumeClaim", "max": {GPU: "1"}}]),
        ("malformed", [None, {"type": "Container", "max": [GPU]}, "x"]),
    ],
)
def test_what_does_nothing_to_a_converted_pod_is_not_reported(case: str, items: list[Any]) -> None:
    assert _effects(*items) == [], case
