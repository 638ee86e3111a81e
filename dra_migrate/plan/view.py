"""A plan as the JSON and YAML outputs show it (`show`, `plan`, `diff`, `status`, `report`).

The plan file keeps its own wire format (`io.py`, `model.py`: `cluster` is the cluster's name, findings
name their objects as text, all covered by the digests); what is printed uses the vocabulary every other
command's JSON uses: `cluster` is the cluster object (`cluster.state.cluster_object`) and finding objects
are `{kind, namespace, name}` (`checks.model.ObjectRef`). Nothing here is written back to a plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dra_migrate.checks.model import findings_json
from dra_migrate.cluster.identity import cluster_object
from dra_migrate.plan.outline import recorded_cluster

if TYPE_CHECKING:
    from dra_migrate.plan.model import Plan  # not imported to print a streamed plan: a module is `show`'s memory

PLAN_SOURCE = "plan"  # `cluster.source` of an output made from the plan alone


def plan_cluster(plan: Mapping[str, Any] | Plan) -> dict[str, Any]:
    """The cluster object of what a plan recorded: its name and server version; where the state was read
    from is not recorded in a plan, so `location`, `context` and `takenAt` are null."""
    if isinstance(plan, Mapping):
        name, version = recorded_cluster(plan)
    else:
        name, version = plan.cluster, plan.fingerprint.get("kubernetesVersion")
    return cluster_object(str(name), None if version is None else str(version), PLAN_SOURCE)


def excluded_pools_json(excluded: Any) -> list[dict[str, Any]]:
    """`review.excludedPools` with their findings as JSON output carries them."""
    out: list[dict[str, Any]] = []
    for x in excluded if isinstance(excluded, list) else []:
        if isinstance(x, Mapping):
            y = dict(x)
            if isinstance(y.get("findings"), list):
                y["findings"] = findings_json(f for f in y["findings"] if isinstance(f, Mapping))
            out.append(y)
    return out


def plan_json(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan (as `io.load` returns it) as `show -o json|yaml` prints it: every section of the file, in
    its order, with the cluster object and structured finding objects."""
    out = dict(plan)
    out["cluster"] = plan_cluster(plan)
    if isinstance(plan.get("findings"), list):
        out["findings"] = findings_json(f for f in plan["findings"] if isinstance(f, Mapping))
    review = plan.get("review")
    if isinstance(review, Mapping) and "excludedPools" in review:
        out["review"] = {**review, "excludedPools": excluded_pools_json(review["excludedPools"])}
    return out
