"""The steps a plan's stages run: the cluster-wide `prepare` steps and the step list every node of an
in-place pool stage runs (split out of plan/build.py, issue 29). `validate` checks a plan's steps
against these (a stage's `nodeSteps` are the protocol's, in its order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dra_migrate.plan.actions import Action, InverseAction
from dra_migrate.plan.dependents import quota_steps
from dra_migrate.plan.model import Inverse, PrepareStage, Stage, Step
from dra_migrate.plan.params import PlanParams

if TYPE_CHECKING:  # the checks pull in the CEL engine, which show/status/apply (via node_steps) must not load
    from dra_migrate.checks.run import Readiness


def prepare_stage(readiness: Readiness, params: PlanParams) -> Stage:
    steps = [
        Step(
            id=f"prepare/create-deviceclass/{p.name}",
            action=Action.CREATE_DEVICECLASS,
            target=f"DeviceClass {p.name}",
            params={"manifest": p.manifest()},
            precondition=f"no other DeviceClass maps {p.extended_resource_name}",
            timeout="30s",
            inverse=Inverse(InverseAction.DELETE_DEVICECLASS, {"name": p.name}),
        )
        for p in sorted(readiness.generation.proposals, key=lambda p: p.name)
    ]
    steps += quota_steps(readiness)  # the DRA quota limits, once the classes exist (plan/dependents.py)
    steps.append(
        Step(
            id="prepare/confirm-dra-driver",
            action=Action.CONFIRM_DRA_DRIVER,
            target=f"Driver {params.dra_driver}",
            params={"driver": params.dra_driver},
            precondition="the NVIDIA DRA kubelet plugin DaemonSet exists",
            timeout="1m",
            inverse=None,
        )
    )
    return PrepareStage("prepare", tuple(steps))


_DEFAULT = object()
# The two steps that switch a node's plugins (their ids; undone newest first, the DRA plugin's first).
DISABLE_DEVICE_PLUGIN, ENABLE_DRA_PLUGIN = "disable-device-plugin", "enable-dra-plugin"
PLUGIN_SWITCHES = frozenset({DISABLE_DEVICE_PLUGIN, ENABLE_DRA_PLUGIN})


def cordon_step(precondition: str) -> Step:
    """Cordon a node; rollback restores its original schedulability (in place and replace-pool alike)."""
    return Step("cordon", Action.CORDON, "Node", {"unschedulable": True}, precondition, "30s",
                Inverse(InverseAction.SET_UNSCHEDULABLE, {"unschedulable": "{original.unschedulable}"}))  # fmt: skip


def drain_step(params: PlanParams) -> Step:
    """Evict a cordoned node's pods as kubectl drain does (policy/v1 Eviction, DaemonSet and mirror pods skipped)."""
    return Step("drain", Action.DRAIN, "Node",
                {"scope": params.drain, "via": "policy/v1 Eviction", "skip": ["DaemonSet pods", "mirror pods"]},
                "the node is cordoned", params.drain_timeout,
                Inverse(InverseAction.NONE, {"why": "evicted pods are recreated by their controllers"}))  # fmt: skip


def _label_step(step_id: str, switch: tuple[str, str], precondition: str) -> Step:
    """Set one label that switches a plugin on the node (its DaemonSet selects on it); rollback restores the
    label's recorded original value (`{original.labels.<key>}`, null: removed), so validate can check the
    inverse names the same key the step sets."""
    key, value = switch
    return Step(step_id, Action.SET_LABEL, "Node", {"key": key, "value": value}, precondition, "30s",
                Inverse(InverseAction.RESTORE_LABEL, {"key": key, "value": f"{{original.labels.{key}}}"}))  # fmt: skip


def protect_step(key: str, precondition: str) -> Step:
    """Keep the node's autoscaler off it (its annotation set to "true"); rollback restores the recorded
    original value (`{original.annotations.<key>}`, null: removed)."""
    restore = Inverse(InverseAction.RESTORE_ANNOTATION, {"key": key, "value": f"{{original.annotations.{key}}}"})
    return Step("protect", Action.SET_ANNOTATION, "Node", {"key": key, "value": "true"}, precondition, "30s", restore)


def node_steps(
    params: PlanParams, dp_switch: Any = _DEFAULT, dra_switch: Any = _DEFAULT, protect: str | None = None
) -> tuple[Step, ...]:
    """What every node of a pool stage goes through, in order; `{...}` are the node's own values.

    `dp_switch`/`dra_switch` are the (label, value) that turn the device plugin off and the DRA plugin
    on, or None when there is nothing to switch: no `enable-dra-plugin` step where the DRA plugin already
    runs, so the order is then device plugin off, wait, canary. By default the plan's label parameters.

    `protect`: the annotation that keeps the pool's autoscaler from removing the node while it is drained
    and empty (Karpenter's `karpenter.sh/do-not-disrupt`, the cluster autoscaler's `scale-down-disabled`: neither
    spares a cordoned node, `PoolPlatform.protect_annotation`), set before the cordon and given back its original
    value after the uncordon.
    """
    dp = (params.device_plugin_label, params.device_plugin_off) if dp_switch is _DEFAULT else dp_switch
    dra = (params.dra_label, params.dra_on) if dra_switch is _DEFAULT else dra_switch
    steps = [protect_step(protect, "the node exists and its uid matches the plan")] if protect else []
    steps += [cordon_step("the node exists and its uid matches the plan"), drain_step(params)]
    if dp is not None:
        steps.append(_label_step(DISABLE_DEVICE_PLUGIN, dp, "no pod on the node requests a device-plugin GPU"))
    if dra is not None:
        steps.append(_label_step(ENABLE_DRA_PLUGIN, dra, "the DRA kubelet plugin DaemonSet selects this label"))
    steps += [
        Step("wait-dra-ready", Action.WAIT_DRA_READY, "Node",
             {"allocatableZero": "{node.resources}", "driver": params.dra_driver, "devices": "{node.expectedDevices}"},
             "the device plugin is off and the DRA kubelet plugin runs on the node", params.ready_timeout, None),
        Step("canary", Action.CANARY, "Node",
             {"resource": "{node.canaryResource}", "count": 1, "image": params.canary_image,
              "driver": params.dra_driver, "command": ["sh", "-c", params.canary_command],
              **params.canary_placement(), "placement": "nodeAffinity on kubernetes.io/hostname",
              "expect": "Succeeded, exit 0, a termination message naming the allocated devices"},
             "the node serves its GPUs through DRA only", params.canary_timeout,
             Inverse(InverseAction.DELETE_POD, {"why": "the canary pod is deleted after its check"})),
        Step("uncordon", Action.UNCORDON, "Node", {"unschedulable": "{original.unschedulable}"},
             "the canary passed", "30s", Inverse(InverseAction.SET_UNSCHEDULABLE, {"unschedulable": True})),
    ]  # fmt: skip
    if protect:
        steps.append(
            Step("unprotect", Action.SET_ANNOTATION, "Node",
                 {"key": protect, "value": f"{{original.annotations.{protect}}}"}, "the node is uncordoned", "30s",
                 Inverse(InverseAction.RESTORE_ANNOTATION, {"key": protect, "value": "true"}))
        )  # fmt: skip
    return tuple(steps)
