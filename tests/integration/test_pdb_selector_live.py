"""One meaning of a PodDisruptionBudget selector, checked against the real API server.

`check` (pdb-blocks-drain) and the drain (LiveOps) both ask `dra_migrate.inventory.placement.pdb_selects`
whether a budget covers a pod. Here the real eviction API judges the same budgets on a Running pod of
a KWOK node: a null selector must cover nothing (the eviction goes through), `{}` every pod of the
namespace, matchLabels/matchExpressions what they say. A dry-run eviction asks without evicting.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import wait_for
from nodes import TwinNodes, on_kwok

from dra_migrate.inventory.placement import pdb_selects
from dra_migrate.kube import ApiError
from dra_migrate.sim.kube import Kube, path_of
from dra_migrate.sim.kwok import KwokFleet
from dra_migrate.sim.spec import GpuNodeSpec

pytestmark = pytest.mark.cluster

RUN = uuid.uuid4().hex[:6]
NODE = f"pdb-{RUN}"
PAUSE = "registry.k8s.io/pause:3.10"

SELECTORS: dict[str, dict[str, Any] | None] = {
    "null": None,
    "empty": {},
    "match": {"matchLabels": {"app": "llm"}},
    "miss": {"matchLabels": {"app": "web"}},
    "notin": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
    "doesnotexist": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]},
}


@pytest.fixture(scope="module")
def fleet(kwok: KwokFleet) -> Iterator[TwinNodes]:
    with on_kwok(kwok, [GpuNodeSpec.small(NODE, gpus=1, pool=f"pdb-{RUN}")]) as f:
        yield f


def _evictable(kube: Kube, ns: str, name: str) -> bool:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns},
            "deleteOptions": {"dryRun": ["All"]}}  # fmt: skip
    try:
        kube.request("POST", path_of("v1", "pods", name, ns, sub="eviction"), body=body, query=[("dryRun", "All")],
                     retry_status=set())  # fmt: skip
    except ApiError as e:
        if e.status == 429:
            return False
        raise
    return True


@pytest.mark.parametrize("case", sorted(SELECTORS))
def test_the_eviction_api_and_pdb_selects_agree(fleet: TwinNodes, kube: Kube, namespace: str, case: str) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "llm"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": PAUSE}], "terminationGracePeriodSeconds": 0,
                 "tolerations": [{"operator": "Exists"}]},
    }  # fmt: skip
    kube.create(path_of("v1", "pods", namespace=namespace), pod)
    wait_for("pod running", lambda: (kube.get(path_of("v1", "pods", "p", namespace)).get("status") or {}).get("phase")
             == "Running", timeout=30)  # fmt: skip
    spec: dict[str, Any] = {"maxUnavailable": 0}
    if SELECTORS[case] is not None:
        spec["selector"] = SELECTORS[case]
    kube.create(path_of("policy/v1", "poddisruptionbudgets", namespace=namespace),
                {"metadata": {"name": "b"}, "spec": spec})  # fmt: skip
    budget_path = path_of("policy/v1", "poddisruptionbudgets", "b", namespace)
    # The disruption controller must have judged the budget before the eviction API trusts it.
    wait_for("budget observed", lambda: (kube.get(budget_path).get("status") or {}).get("observedGeneration"),
             timeout=30)  # fmt: skip
    live_pod = kube.get(path_of("v1", "pods", "p", namespace))
    covered = pdb_selects(kube.get(budget_path), live_pod)
    assert covered == (case in ("empty", "match", "notin")), case
    assert _evictable(kube, namespace, "p") is (not covered), case
