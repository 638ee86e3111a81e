"""LimitRanges that name a GPU, on the real API server (docs/dependents.md "LimitRanges"): what
`limitrange-gpu` and convert's warning predict for a pod whose containers name no GPU (as a pod converted to
a ResourceClaim) is what kube-apiserver v1.37.2's LimitRanger and validation do to it.

Each LimitRange is created, read back as the API server stores it (its defaults filled in: what `check`
reads), and judged both ways, as stored and as written (what `convert` reads): the two must agree. A pod
naming no GPU is then created with dryRun=All: where a GPU is predicted to be added, the stored pod's
container has it as limit and request; where a refusal is predicted, the server refuses the pod; else it
is admitted untouched."""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.inventory.limitranges import gpu_limit_effects
from dra_migrate.inventory.resources import GpuNames
from dra_migrate.sim.kube import ApiError, Kube, path_of

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"
SHAPES: list[tuple[str, list[dict[str, Any]]]] = [
    ("a Container max, stored as the default", [{"type": "Container", "max": {GPU: "4"}}]),
    ("a Container default under a max", [{"type": "Container", "default": {GPU: "1"}, "max": {GPU: "8"}}]),
    ("a Container min alone", [{"type": "Container", "min": {GPU: "1"}}]),
    ("a Pod max", [{"type": "Pod", "max": {GPU: "8"}}]),
    ("a Pod min", [{"type": "Pod", "min": {GPU: "1"}}]),
    (
        "a Pod max with a Container default",
        [{"type": "Pod", "max": {GPU: "8"}}, {"type": "Container", "default": {GPU: "1"}}],
    ),
    ("a Container ratio alone", [{"type": "Container", "maxLimitRequestRatio": {GPU: "1"}}]),
    ("a Pod ratio alone", [{"type": "Pod", "maxLimitRequestRatio": {GPU: "1"}}]),
    ("a default beside a ratio", [{"type": "Container", "default": {GPU: "1"}, "maxLimitRequestRatio": {GPU: "1"}}]),
    ("no GPU", [{"type": "Container", "max": {"cpu": "4"}}]),
]


def _judged(lr: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    return [(e.resource, e.adds, e.refusal) for e in gpu_limit_effects(lr, GpuNames())]


@pytest.mark.parametrize(("case", "limits"), SHAPES, ids=[s[0] for s in SHAPES])
def test_what_the_reader_predicts_is_what_the_api_server_does(
    kube: Kube, namespace: str, case: str, limits: list[dict[str, Any]]
) -> None:
    written = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bounds"}, "spec": {"limits": limits}}
    stored = kube.create(path_of("v1", "limitranges", namespace=namespace), written)
    predicted = _judged(stored)
    assert predicted == _judged(written), case  # convert reads manifests as check reads the cluster
    converted = {
        "metadata": {"name": "converted"},
        "spec": {"containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    try:
        pod = kube.create(path_of("v1", "pods", namespace=namespace), converted, query=[("dryRun", "All")])
    except ApiError as e:
        assert len(predicted) == 1 and predicted[0][2] is not None, f"{case}: refused unpredicted: {e}"
        assert e.status in (403, 422), e
        return
    resources = pod["spec"]["containers"][0].get("resources") or {}
    got = {part: (resources.get(part) or {}).get(GPU) for part in ("limits", "requests")}
    if predicted:
        ((_, adds, refusal),) = predicted
        assert refusal is None, f"{case}: predicted a refusal ({refusal}), admitted with {resources}"
        assert got == {"limits": adds, "requests": adds}, case
    else:
        assert got == {"limits": None, "requests": None}, case
