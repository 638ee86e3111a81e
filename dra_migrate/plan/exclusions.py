"""Which nodes a plan leaves out, and why: the node-scoped blockers (split out of plan/build.py, issue 29).

A node whose kubelet cannot serve DRA-backed extended resources, or whose plugins no label can switch, is
left out with its reason (`summary.excludedNodes`); the blockers that say so concern only those nodes and
do not make the rest of the plan inapplicable (`plan/derived.py` decides applicability the same way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_migrate.dra.layout import unpredictable_layout
from dra_migrate.inventory.fleet import kubelet_skew
from dra_migrate.inventory.migparted import mig_parted_configs
from dra_migrate.inventory.operator_activity import operator_busy
from dra_migrate.inventory.platform import REPLACE_POOL
from dra_migrate.inventory.runtime import UNSUPPORTED, cdi_support

if TYPE_CHECKING:  # the checks pull in the CEL engine, which show/status/apply (via plan.derived) must not load
    from dra_migrate.checks.run import Readiness


def excluded_nodes(readiness: Readiness, gates: dict[str, bool], driver: str) -> dict[str, str]:
    """Node -> why the plan leaves it out (the reasons of the node-scoped blockers)."""
    from dra_migrate.dra.capacity import dra_served, unmatched_by_dra  # the CEL engine's importer: see TYPE_CHECKING

    out: dict[str, str] = {}
    replaced = {p.name for p in readiness.inventory.pools if p.platform and p.platform.strategy == REPLACE_POOL}
    mig_configs = mig_parted_configs(readiness.inventory.state)
    for n in readiness.inventory.nodes:
        if n.dra_plugin_enabled and not n.device_plugin_enabled:
            continue  # already migrated
        gone = _going(n.ready, n.deleting)
        if gone is not None:
            out[n.name] = gone
            continue
        if n.pool in replaced:
            continue  # drained across, not switched: its own plugins and kubelet do not matter
        skew = kubelet_skew(n.kubelet_version, gates)
        busy = operator_busy(n.labels)
        cdi = cdi_support(n.runtime_version)
        if skew is not None:
            out[n.name] = f"kubelet-version-unsupported: {skew}"
        elif cdi is not None and cdi.verdict == UNSUPPORTED:
            out[n.name] = f"container-runtime-cdi: {cdi.why} ({n.runtime_version})"
        elif busy is not None:
            out[n.name] = f"gpu-operator-node-busy: {busy}"
        elif n.dp_placement is not None and n.dp_placement.mode == "unknown":
            out[n.name] = f"device-plugin-placement-unknown: {n.dp_placement.why}"
        elif n.dra_placement is not None and n.dra_placement.mode == "unknown":
            out[n.name] = f"dra-plugin-placement-unknown: {n.dra_placement.why}"
        elif n.dynamic_mig and not n.dra_devices.get(driver):
            out[n.name] = "dynamic-mig-unpredicted: DynamicMIG is on and the node has no slices to count yet"
        elif (why := unpredictable_layout(n.labels, mig_configs)) is not None and not n.dra_devices.get(driver):
            out[n.name] = f"mig-layout-unpredicted: {why}"
        elif unmatched_by_dra(served := dra_served(readiness.inventory.state, n, readiness.classes, driver)):
            out[n.name] = f"gpu-devices-unmatched: {unmatched_why(served)}"
    return out


def unmatched_why(served: dict[str, bool]) -> str:
    """The reason of `gpu-devices-unmatched` for a node `dra_served` says it of."""
    return (
        f"the DeviceClasses of {', '.join(sorted(served))} match none of the devices the DRA driver publishes "
        "(or will publish) on the node, so its canary and its pods could never be scheduled there once the device "
        "plugin is off"
    )


def _going(ready: bool | None, deleting: bool) -> str | None:
    """Why a node no drain can empty now is left out (in place or replaced alike), or None.

    A node whose kubelet is not Ready confirms no pod's deletion: an evicted pod stays Terminating until the
    kubelet returns or the pod is force-deleted (the pod garbage collector deletes such pods only on a node
    with the `node.kubernetes.io/out-of-service` taint: k8s.io/kubernetes@v1.37.2 pkg/controller/podgc/
    gc_controller.go `gcTerminating`), so the drain would wait its whole timeout and fail the wave (kubectl drain
    has --skip-wait-for-delete-timeout for this), and no DRA kubelet plugin starts there. A node being deleted
    (deletionTimestamp) is going away with its pods. A node with no Ready condition read is planned."""
    if deleting:
        return "node-deleting: the Node has a deletionTimestamp: it is going away; plan its replacement once it is up"
    if ready is False:
        return (
            "node-not-ready: its kubelet is not Ready, so a drain would wait its whole timeout on pods that never "
            "finish terminating and no DRA plugin can start there; plan it again once it is Ready"
        )
    return None


def excluded_list(readiness: Readiness, excluded: dict[str, str]) -> list[dict[str, str]]:
    pool_of = {n.name: n.pool for n in readiness.inventory.nodes}
    return [{"node": n, "pool": pool_of.get(n, ""), "reason": excluded[n]} for n in sorted(excluded)]
