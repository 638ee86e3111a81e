"""The step action registry: the one list of what a plan's steps can do (docs/architecture.md, "Where to
add a step action").

Each action is declared once here, with what the plan layer needs to know of it: its meaning (for the
generated docs/actions.md), the API requests one run of it issues (the estimate, `plan/estimate.py`),
the plan parameter its timeout is (`plan/consistency.py`), and whether it is one of a provision stage's
steps (`plan/strategies.py`, in this order). Its run, the inverse a plan must give it and its dry-run
behaviour are registered with its executor function (`execute/actions.py`). Everything else — the
model's reading, `validate`, the JSON schema's enum, the estimate, rendering, the docs — refers to an
action through `Action` and `ACTIONS`, never by its name: tests/unit/test_action_registry.py fails on a
hard-coded action name anywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Action(StrEnum):
    """What a step does. The executor registers one implementation per action (`execute/actions.py`)."""

    CREATE_DEVICECLASS = "create-deviceclass"
    CONFIRM_DRA_DRIVER = "confirm-dra-driver"
    CORDON = "cordon"
    DRAIN = "drain"
    SET_LABEL = "set-label"
    WAIT_DRA_READY = "wait-dra-ready"
    CANARY = "canary"
    UNCORDON = "uncordon"
    SET_QUOTA = "set-quota"  # add a namespace's DRA limits before any node moves (plan/dependents.py)
    # Replace-pool (plan/strategies.py): protect the old nodes from their autoscaler, wait for the new
    # pool the platform command makes, prove it with a canary, check it holds the old pool's demand.
    SET_ANNOTATION = "set-annotation"
    AWAIT_POOL = "await-pool"
    CANARY_POOL = "canary-pool"
    CHECK_POOL_CAPACITY = "check-pool-capacity"


class InverseAction(StrEnum):
    """How a step is undone. `none` and `delete-pod` leave nothing to undo (evicted pods are recreated by
    their controllers; the canary deletes its own pod)."""

    SET_UNSCHEDULABLE = "set-unschedulable"
    RESTORE_LABEL = "restore-label"
    RESTORE_ANNOTATION = "restore-annotation"
    DELETE_DEVICECLASS = "delete-deviceclass"
    RESTORE_QUOTA = "restore-quota"
    NONE = "none"
    DELETE_POD = "delete-pod"


@dataclass(frozen=True)
class ActionInfo:
    """What the plan layer knows of an action (its run is the executor's)."""

    action: Action
    summary: str  # what it does, one line (docs/actions.md)
    # API requests one run issues as `execute.ops` does (reads before writes; per poll for a wait): the
    # estimate's request count (plan/estimate.py). 0: not in the per-node estimate.
    requests: int = 0
    timeout_parameter: str | None = None  # the plan parameter its timeout is, when one is (consistency)
    provision: bool = False  # one of a provision stage's steps, in registry order (plan/strategies.py)


_INFO = (
    ActionInfo(Action.CREATE_DEVICECLASS, "create a DeviceClass the generator proposed (prepare stage)"),
    ActionInfo(Action.CONFIRM_DRA_DRIVER, "confirm the DRA driver's kubelet plugin DaemonSet exists"),
    ActionInfo(Action.CORDON, "mark the node unschedulable (after checking its uid)", requests=3),
    ActionInfo(
        Action.DRAIN, "evict the node's pods (policy/v1 Eviction)", requests=2, timeout_parameter="drainTimeout"
    ),
    ActionInfo(Action.SET_LABEL, "set a node label that switches a plugin's DaemonSet", requests=2),
    ActionInfo(
        Action.WAIT_DRA_READY,
        "wait until the node serves its GPUs through DRA only (allocatable 0, its ResourceSlices published)",
        requests=2,
        timeout_parameter="readyTimeout",
    ),
    ActionInfo(
        Action.CANARY,
        "run a pod that claims one of the node's devices through DRA, and check it ran",
        requests=6,
        timeout_parameter="canaryTimeout",
    ),
    ActionInfo(Action.UNCORDON, "restore the node's schedulability", requests=2),
    ActionInfo(Action.SET_QUOTA, "add a namespace's DRA quota limits before any node moves"),
    ActionInfo(Action.SET_ANNOTATION, "set a node annotation (protect an old node from its autoscaler)"),
    ActionInfo(Action.AWAIT_POOL, "wait for the replacement pool's nodes to serve through DRA", provision=True),
    ActionInfo(Action.CANARY_POOL, "run a canary on the replacement pool", provision=True),
    ActionInfo(Action.CHECK_POOL_CAPACITY, "check the replacement pool holds the old pool's demand", provision=True),
)
ACTIONS: dict[Action, ActionInfo] = {i.action: i for i in _INFO}
if set(ACTIONS) != set(Action) or len(_INFO) != len(Action):  # one entry per action, at import
    raise RuntimeError(f"the action registry and Action disagree: {sorted(set(Action) ^ set(ACTIONS))}")

PROVISION_ACTIONS = tuple(a for a, i in ACTIONS.items() if i.provision)
# Node step -> the plan parameter its timeout is (the node steps of an in-place stage).
TIMEOUT_PARAMETERS = {a: i.timeout_parameter for a, i in ACTIONS.items() if i.timeout_parameter}


def api_requests(action: Action) -> int:
    """API requests one run of `action` issues (the estimate's count)."""
    return ACTIONS[action].requests
