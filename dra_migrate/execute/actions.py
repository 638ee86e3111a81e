"""The step actions: each registered once with its run, the inverse a plan must give it, its dry-run
behaviour and whether it counts for the final verification (as `checks/registry.py` does for rules).

The runner, `status`, `rollback` and `report` ask this registry; nothing else branches on action names.
A plan whose step names an action without a registration is refused at load (`plan.model.Action`), and
a test asserts every `Action` and `InverseAction` has one here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.execute.contract import NEVER, Cancel, Change, Ops, StepFailed, StepRefused
from dra_migrate.inventory.operator_activity import operator_busy
from dra_migrate.plan.model import Action, InverseAction, Step
from dra_migrate.plan.params import PlanParams, parse_duration
from dra_migrate.plan.steps import DISABLE_DEVICE_PLUGIN, ENABLE_DRA_PLUGIN, PLUGIN_SWITCHES

DEFAULT_DRAIN_S = float(parse_duration(PlanParams().drain_timeout))  # a stage with no drain step of its own


class DryRun(StrEnum):
    SEND = "send"  # run it with dry_run=True: writes go as server-side dry runs (dryRun=All)
    SKIP = "skip"  # nothing to do without the real change before it (a wait for it, a canary on it)


@dataclass(frozen=True)
class StepContext:
    """What one step runs with: its ops, its node (None for cluster-wide steps), the concrete step (its
    placeholders filled), and the run's settings for it."""

    ops: Ops
    step: Step
    node: str | None
    timeout_s: float
    dry_run: bool = False
    cancel: Cancel = NEVER
    node_uid: str | None = None  # as the plan's fingerprint recorded it
    # `Plan.reviewed_pods`: what a drain may delete for good; None: any pod (apply --delete-unowned-pods)
    reviewed_pods: frozenset[str] | None = frozenset()
    # How long the node's drain may take (its stage's drain step, or --drain-timeout): also what an undone
    # plugin switch gives the node's GPU pods to go (`_undo_label`).
    drain_timeout_s: float = DEFAULT_DRAIN_S
    # (driver, timeout) of the node's DRA readiness wait: an undone DRA switch waits that long for the slices to go.
    dra_gone: tuple[str, float] | None = None
    # `Plan.marked_pods_named`: the pods marked not to be interrupted that a drain may evict, the review named them
    marked_named: frozenset[str] = frozenset()

    @property
    def node_name(self) -> str:
        if self.node is None:
            raise InputError(f"step {self.step.id} acts on a node but is not in a pool stage", "regenerate the plan")
        return self.node

    def param(self, key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        """A step parameter of the given type, or an InputError naming the step and the parameter."""
        params = self.step.params
        if key not in params:
            if default is not ...:
                return default
            raise InputError(f"step {self.step.id}: parameter `{key}` is missing", "regenerate the plan")
        value = params[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise InputError(
                f"step {self.step.id}: parameter `{key}` has the wrong type ({type(value).__name__})",
                "regenerate the plan",
            )
        return value


Run = Callable[[StepContext], Change | None]


@dataclass(frozen=True)
class ActionSpec:
    action: Action
    run: Run
    inverse: InverseAction | None  # the inverse the plan's step must carry (None: no inverse)
    dry_run: DryRun
    verifies: bool  # its success on a node is part of "verified" (report's final verification)


@dataclass(frozen=True)
class InverseSpec:
    action: InverseAction
    undo: Callable[[StepContext, Mapping[str, Any]], Change | None] | None  # None: nothing persists to undo


ACTIONS: dict[Action, ActionSpec] = {}
INVERSES: dict[InverseAction, InverseSpec] = {}


def action(
    name: Action, *, inverse: InverseAction | None, dry_run: DryRun, verifies: bool = False
) -> Callable[[Run], Run]:
    def register(fn: Run) -> Run:
        if name in ACTIONS:
            raise RuntimeError(f"action {name} registered twice")
        ACTIONS[name] = ActionSpec(name, fn, inverse, dry_run, verifies)
        return fn

    return register


def inverse(name: InverseAction) -> Callable[[Callable[[StepContext, Mapping[str, Any]], Change | None]], Any]:
    def register(fn: Callable[[StepContext, Mapping[str, Any]], Change | None]) -> Any:
        if name in INVERSES:
            raise RuntimeError(f"inverse {name} registered twice")
        INVERSES[name] = InverseSpec(name, fn)
        return fn

    return register


def spec_of(step: Step) -> ActionSpec:
    try:
        return ACTIONS[Action(step.action)]
    except (KeyError, ValueError):
        raise InputError(f"unknown step action {step.action!r} in {step.id}", "regenerate the plan") from None


def verifying_actions() -> tuple[str, ...]:
    """The actions whose success on a node makes it "verified", in the order a node runs them."""
    return tuple(str(a) for a, s in ACTIONS.items() if s.verifies)


def run_step(ctx: StepContext) -> Change | None:
    spec = spec_of(ctx.step)
    if ctx.dry_run and spec.dry_run is DryRun.SKIP:
        return None
    return spec.run(ctx)


def undo_step(ctx: StepContext) -> Change | None:
    """Run the step's inverse with the original values the plan recorded; None when nothing persists."""
    inv = ctx.step.inverse
    if inv is None:
        return None
    try:
        spec = INVERSES[InverseAction(inv.action)]
    except (KeyError, ValueError):
        raise InputError(f"unknown inverse {inv.action!r} in {ctx.step.id}", "regenerate the plan") from None
    return spec.undo(ctx, inv.restore) if spec.undo is not None else None


# -- the actions ------------------------------------------------------------------------------------


@action(Action.CREATE_DEVICECLASS, inverse=InverseAction.DELETE_DEVICECLASS, dry_run=DryRun.SEND)
def _create_deviceclass(ctx: StepContext) -> Change | None:
    return ctx.ops.create_device_class(dict(ctx.param("manifest", dict)), dry_run=ctx.dry_run)


@action(Action.CONFIRM_DRA_DRIVER, inverse=None, dry_run=DryRun.SEND)
def _confirm_dra_driver(ctx: StepContext) -> Change | None:
    if not ctx.ops.dra_driver_installed(ctx.param("driver", str, "gpu.nvidia.com")):
        raise StepFailed(
            "the NVIDIA DRA kubelet plugin is not installed",
            "install the dra-driver-nvidia-gpu chart (kubeletPlugin.nodeSelector nvidia.com/dra-kubelet-plugin=true)",
        )
    return None


@action(Action.CORDON, inverse=InverseAction.SET_UNSCHEDULABLE, dry_run=DryRun.SEND)
def _cordon(ctx: StepContext) -> Change | None:
    state = _check_node(ctx)  # the precondition of a node's first step
    _check_operator_idle(ctx, state)
    # Its read is the cordon's read too: the value recorded for the inverse comes from it, as it would
    # from a second GET of the same node a moment later (one round trip fewer per node on a wave's path).
    return ctx.ops.set_unschedulable(ctx.node_name, True, dry_run=ctx.dry_run, current=bool(state.get("unschedulable")))


@action(Action.DRAIN, inverse=InverseAction.NONE, dry_run=DryRun.SEND)
def _drain(ctx: StepContext) -> Change | None:
    scope = ctx.param("scope", str)
    if scope not in ("gpu", "all"):
        raise InputError(f"step {ctx.step.id}: drain scope must be gpu or all, not {scope!r}", "regenerate the plan")
    return ctx.ops.drain(
        ctx.node_name, scope, ctx.timeout_s, dry_run=ctx.dry_run, cancel=ctx.cancel, reviewed=ctx.reviewed_pods,
        marked_named=ctx.marked_named,
    )  # fmt: skip


@action(Action.SET_LABEL, inverse=InverseAction.RESTORE_LABEL, dry_run=DryRun.SEND)
def _set_label(ctx: StepContext) -> Change | None:
    value = ctx.param("value", (str, type(None)))
    if ctx.step.id.rsplit("/", 1)[-1] == DISABLE_DEVICE_PLUGIN:
        # A driver reload or MIG change that began during the drain writes back the "true" it read before.
        _check_operator_idle(ctx, ctx.ops.node_state(ctx.node_name))
    return ctx.ops.set_label(ctx.node_name, ctx.param("key", str), value, dry_run=ctx.dry_run)


@action(Action.WAIT_DRA_READY, inverse=None, dry_run=DryRun.SKIP, verifies=True)
def _wait_dra_ready(ctx: StepContext) -> Change | None:
    resources = ctx.param("allocatableZero", list)
    if not all(isinstance(r, str) for r in resources):
        raise InputError(f"step {ctx.step.id}: `allocatableZero` must list resource names", "regenerate the plan")
    return ctx.ops.wait_dra_ready(
        ctx.node_name,
        list(resources),
        ctx.param("devices", int),
        ctx.timeout_s,
        driver=ctx.param("driver", str, "gpu.nvidia.com"),
        cancel=ctx.cancel,
    )


def _canary_extra(ctx: StepContext) -> dict[str, Any]:
    """A canary step's command, namespace and image pull secrets, as `Ops.canary` takes them (each only when
    the step names it: plans made before --canary-namespace and --canary-pull-secret keep `default`, none)."""
    command = ctx.param("command", (list, type(None)), None)
    extra: dict[str, Any] = {"command": [str(c) for c in command]} if command else {}
    if "namespace" in ctx.step.params:
        extra["namespace"] = ctx.param("namespace", str)
    secrets = ctx.param("imagePullSecrets", list, [])
    if secrets:
        extra["pull_secrets"] = [str(s) for s in secrets]
    return extra


@action(Action.CANARY, inverse=InverseAction.DELETE_POD, dry_run=DryRun.SKIP, verifies=True)
def _canary(ctx: StepContext) -> Change | None:
    return ctx.ops.canary(
        ctx.node_name, ctx.param("resource", str), ctx.param("image", str), ctx.timeout_s, cancel=ctx.cancel,
        **_canary_extra(ctx),
    )  # fmt: skip


def admit_canary(ctx: StepContext) -> Change | None:
    """The canary step's pod sent as a server-side dry run (`dryRun=All`): admission and validation run,
    nothing is stored or scheduled (k8s.io/apiserver v0.37.2 pkg/endpoints/handlers/create.go). What refuses
    it (Pod Security, a ResourceQuota, a LimitRange, a policy webhook in the canary's namespace) refuses every
    node's canary: the runner asks before a wave touches a node, not after it drained and switched them all."""
    return ctx.ops.canary(
        ctx.node_name, ctx.param("resource", str), ctx.param("image", str), ctx.timeout_s,
        dry_run=True, cancel=ctx.cancel, **_canary_extra(ctx),
    )  # fmt: skip


@action(Action.UNCORDON, inverse=InverseAction.SET_UNSCHEDULABLE, dry_run=DryRun.SEND)
def _uncordon(ctx: StepContext) -> Change | None:
    return ctx.ops.set_unschedulable(ctx.node_name, ctx.param("unschedulable", bool), dry_run=ctx.dry_run)


# -- replace-pool (plan/strategies.py) -----------------------------------------------------------------


@action(Action.SET_ANNOTATION, inverse=InverseAction.RESTORE_ANNOTATION, dry_run=DryRun.SEND)
def _set_annotation(ctx: StepContext) -> Change | None:
    _check_node(ctx)  # the precondition of a replaced pool's node's first step
    value = ctx.param("value", (str, type(None)))
    return ctx.ops.set_annotation(ctx.node_name, ctx.param("key", str), value, dry_run=ctx.dry_run)


def _selector(ctx: StepContext) -> dict[str, str]:
    sel = ctx.param("selector", dict)
    if not sel or not all(isinstance(k, str) and isinstance(v, str) for k, v in sel.items()):
        raise InputError(f"step {ctx.step.id}: `selector` must map label keys to values", "regenerate the plan")
    return dict(sel)


@action(Action.AWAIT_POOL, inverse=InverseAction.NONE, dry_run=DryRun.SKIP)
def _await_pool(ctx: StepContext) -> Change | None:
    ctx.param("command", str)  # what the operator runs: the step shows it, the tool does not run it
    return ctx.ops.wait_pool(
        _selector(ctx),
        ctx.param("nodes", int),
        ctx.param("devicesPerNode", int),
        ctx.timeout_s,
        driver=ctx.param("driver", str, "gpu.nvidia.com"),
        cancel=ctx.cancel,
    )


@action(Action.CANARY_POOL, inverse=InverseAction.DELETE_POD, dry_run=DryRun.SKIP)
def _canary_pool(ctx: StepContext) -> Change | None:
    selector, driver = _selector(ctx), ctx.param("driver", str, "gpu.nvidia.com")
    serving = [n for n in ctx.ops.pool_nodes(selector, driver=driver) if n.get("ready") and n.get("devices")]
    if not serving:
        raise StepFailed(f"no node of the new pool ({selector}) serves {driver} devices", "wait for it, then resume")
    return ctx.ops.canary(
        str(serving[0]["name"]), ctx.param("resource", str), ctx.param("image", str), ctx.timeout_s,
        cancel=ctx.cancel, **_canary_extra(ctx),
    )  # fmt: skip


@action(Action.CHECK_POOL_CAPACITY, inverse=InverseAction.NONE, dry_run=DryRun.SKIP)
def _check_pool_capacity(ctx: StepContext) -> Change | None:
    """Before the first drain: the new pool's published devices hold the old pool's whole demand."""
    selector, driver = _selector(ctx), ctx.param("driver", str, "gpu.nvidia.com")
    need = ctx.param("devices", int)
    nodes = [n for n in ctx.ops.pool_nodes(selector, driver=driver) if n.get("ready") and not n.get("unschedulable")]
    have = sum(int(n.get("devices") or 0) for n in nodes)
    if have < need:
        raise StepFailed(
            f"the new pool ({selector}) publishes {have} {driver} device(s) on {len(nodes)} node(s); "
            f"{ctx.param('from', str, 'the old pool')} needs {need}",
            "scale the new pool up (or wait for it), then resume: nothing of the old pool was touched",
            {"devices": have, "needed": need},
        )
    return Change(ctx.step.target, {}, {"devices": have, "needed": need})


@action(Action.SET_QUOTA, inverse=InverseAction.RESTORE_QUOTA, dry_run=DryRun.SEND)
def _set_quota(ctx: StepContext) -> Change | None:
    expect = {k: v for k, v in _hard(ctx, ctx.param("continues", dict)).items() if v is not None}
    return ctx.ops.set_quota_hard(
        ctx.param("namespace", str),
        ctx.param("name", str),
        _hard(ctx, ctx.param("set", dict)),
        expect=expect,
        dry_run=ctx.dry_run,
    )


def _hard(ctx: StepContext, values: Mapping[str, Any]) -> dict[str, str | None]:
    if not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in values.items()):
        raise InputError(f"step {ctx.step.id}: quota limits must map names to quantities", "regenerate the plan")
    return dict(values)


def _check_node(ctx: StepContext) -> dict[str, Any]:
    """The node exists and is the node the plan was made for (same uid); its state as read for that."""
    state = ctx.ops.node_state(ctx.node_name)
    if not state.get("exists"):
        raise StepRefused(f"node {ctx.node_name} no longer exists", "make a new plan: dra-migrate plan")
    if ctx.node_uid and state.get("uid") != ctx.node_uid:
        raise StepRefused(f"node {ctx.node_name} was replaced since the plan (uid changed)", "make a new plan")
    # Before anything is changed on it: a node being deleted goes with its pods, and a kubelet that is not
    # Ready confirms no pod's deletion, so its drain would hold the wave for the whole drain timeout and no
    # DRA plugin would start there (plan/exclusions.py `_going`: a plan made now leaves such a node out).
    if state.get("deleting"):
        raise StepRefused(
            f"node {ctx.node_name} is being deleted (deletionTimestamp set): nothing was changed on it",
            "make a new plan once its replacement is up (dra-migrate plan)",
        )
    if state.get("notReady"):
        raise StepRefused(
            f"node {ctx.node_name} is not Ready (Ready={state['notReady']}): nothing was changed on it",
            "resume once its kubelet is Ready, or make a new plan, which leaves it out until then",
        )
    return state


def _check_operator_idle(ctx: StepContext, state: Mapping[str, Any]) -> None:
    """The GPU Operator is not upgrading, reloading the driver or changing MIG on the node: each writes back the
    device plugin's label as it read it before and the upgrade uncordons the node (inventory/operator_activity.py;
    `plan` leaves such nodes out, this catches one that became busy since)."""
    busy = operator_busy(state.get("labels") or {})
    if busy is not None:
        raise StepRefused(
            f"node {ctx.node_name}: {busy}",
            "wait until the GPU Operator is done with the node (its labels say so), then resume",
        )


# -- the inverses -----------------------------------------------------------------------------------


def _restored(ctx: StepContext, restore: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in restore or not isinstance(restore[key], kind):
        raise InputError(f"step {ctx.step.id}: its inverse has no usable `{key}`", "regenerate the plan")
    return restore[key]


def _not_the_planned_node(ctx: StepContext) -> Change | None:
    """A no-op Change when the node is not the one the plan's steps acted on: deleted since (an autoscaler
    or a spot reclaim removed it mid-wave) or replaced by a new Node object of the same name (another uid).
    What the tool wrote went with the old object, so there is nothing to undo: a write would fail for ever
    on the missing node (404: every rollback would stop at it), or put the plan's recorded values on a Node
    the tool never touched (uncordon one its provisioner or an admin holds cordoned). The API server gives a
    recreated object a new uid (k8s.io/apimachinery ObjectMeta.UID: "unique in time and space"). None: it is
    the planned node, undo as recorded."""
    state = ctx.ops.node_state(ctx.node_name)
    if not state.get("exists"):
        why = "deleted since its steps ran"
    elif ctx.node_uid and state.get("uid") != ctx.node_uid:
        why = "replaced since the plan (uid changed)"
    else:
        return None
    gone = {"node": why}
    return Change(f"Node {ctx.node_name}", gone, dict(gone), ctx.dry_run)


@inverse(InverseAction.SET_UNSCHEDULABLE)
def _undo_unschedulable(ctx: StepContext, restore: Mapping[str, Any]) -> Change | None:
    value = _restored(ctx, restore, "unschedulable", bool)
    return _not_the_planned_node(ctx) or ctx.ops.set_unschedulable(ctx.node_name, value, dry_run=ctx.dry_run)


@inverse(InverseAction.RESTORE_LABEL)
def _undo_label(ctx: StepContext, restore: Mapping[str, Any]) -> Change | None:
    key = _restored(ctx, restore, "key", str)
    value = restore.get("value")
    if value is not None and not isinstance(value, str):
        raise InputError(f"step {ctx.step.id}: its inverse restores a non-string label value", "regenerate the plan")
    gone = _not_the_planned_node(ctx)
    if gone is not None:
        return gone
    switch = ctx.step.id.rpartition("/")[2] in PLUGIN_SWITCHES  # a node's step id: <stage>/<node>/<id>
    evicted = _evict_before_switching_back(ctx) if switch else []
    change = ctx.ops.set_label(ctx.node_name, key, value, dry_run=ctx.dry_run)
    if ctx.step.id.rpartition("/")[2] == ENABLE_DRA_PLUGIN and ctx.dra_gone and not ctx.dry_run:
        _wait_dra_gone(ctx, *ctx.dra_gone)
    if not evicted:
        return change
    return Change(change.target, {**change.before, "pods": evicted}, {**change.after, "pods": []}, change.dry_run)


def dra_gone_of(wait: Step | None, overrides: Mapping[str, float]) -> tuple[str, float] | None:
    """`StepContext.dra_gone` from a stage's DRA readiness wait step (None: the stage has none), its timeout
    overridden as the step's own would be (`ApplyOptions.timeouts`, by action)."""
    if wait is None:
        return None
    return str(wait.params.get("driver")), overrides.get(str(Action.WAIT_DRA_READY), wait.timeout_s)


def _wait_dra_gone(ctx: StepContext, driver: str, timeout_s: float) -> None:
    """After the DRA switch is undone, until the node publishes no `driver` devices: the plugin's pod stops and its
    ResourceSlices go (the kubelet wipes an unregistered plugin's slices after a grace period, k8s.io/kubernetes
    v1.37.2 pkg/kubelet/cm/dra/plugin/registration.go). Meanwhile the scheduler would still allocate claims from
    them, for pods the node can never start (their claims cannot be prepared with the plugin gone), and such
    claims hold the DeviceClass the rollback deletes last: the node is uncordoned only once they are gone."""
    try:
        ctx.ops.wait_dra_ready(ctx.node_name, [], 0, timeout_s, driver=driver, cancel=ctx.cancel)
    except StepFailed as e:
        raise StepFailed(
            f"node {ctx.node_name} still publishes {driver} devices {timeout_s:g}s after its DRA plugin was switched "
            f"off ({e})",
            "check that the DRA kubelet plugin's pod left the node (its DaemonSet selects the label), then run "
            "rollback again",
        ) from e


# A migrated node's GPU pods hold its devices through DRA. Switching its plugins back under them would
# hand those devices out twice: the device plugin advertises every GPU again and allocates from what its
# kubelet checkpoint knows, which is none of the DRA allocations; and once the DRA kubelet plugin is gone a
# pod with a prepared claim cannot even be torn down (the kubelet unprepares claims through it). So before
# the first switch is undone (the DRA plugin's, undone before the device plugin's) the node's GPU pods go
# as the drain sends them: evicted, budgets honoured, DaemonSet and mirror pods skipped, a pod no controller
# owns only if the plan recorded it. The node is cordoned by then: undoing `uncordon` came first, and a
# wave that failed before its uncordon never left it.
def _evict_before_switching_back(ctx: StepContext) -> list[str]:
    drained: Change | None = ctx.ops.drain(
        ctx.node_name, "gpu", ctx.drain_timeout_s, dry_run=ctx.dry_run, cancel=ctx.cancel, reviewed=ctx.reviewed_pods,
        marked_named=ctx.marked_named,
    )  # fmt: skip
    pods = drained.before.get("pods") if drained is not None else None  # None: the preflight's `_Rehearsal`
    return [str(p) for p in pods] if isinstance(pods, list) else []


@inverse(InverseAction.RESTORE_ANNOTATION)
def _undo_annotation(ctx: StepContext, restore: Mapping[str, Any]) -> Change | None:
    key = _restored(ctx, restore, "key", str)
    value = restore.get("value")
    if value is not None and not isinstance(value, str):
        raise InputError(f"step {ctx.step.id}: its inverse restores a non-string annotation", "regenerate the plan")
    return _not_the_planned_node(ctx) or ctx.ops.set_annotation(ctx.node_name, key, value, dry_run=ctx.dry_run)


@inverse(InverseAction.DELETE_DEVICECLASS)
def _undo_deviceclass(ctx: StepContext, restore: Mapping[str, Any]) -> Change | None:
    """Delete the class the plan created, but not while a ResourceClaim names it. Nothing protects a DeviceClass
    in use (no finalizer): deleted, every claim naming it that is not allocated yet can never be (the allocator
    fails "could not retrieve device class", k8s.io/dynamic-resource-allocation v0.37.2
    structured/internal/stable/allocator_stable.go), and an allocated one's pod, once restarted or replaced
    with a new claim, with it. Claims made since the apply (on another plan's nodes, or a team's own
    ResourceClaimTemplates) are not this rollback's to break: it fails naming them, the class kept. Claims on their
    way out (of pods the rollback drained: `ops_base.going_claim`) do not hold it."""
    name = _restored(ctx, restore, "name", str)
    users = ctx.ops.claims_using_device_class(name) or []  # the preflight's rehearsal answers None
    if users and ctx.dry_run:
        # A dry run evicts nothing: the claims of the pods the rollback's drains would evict are still there,
        # and go with their pods before this undo runs for real. Say which claims name it now; do not fail.
        return Change(f"DeviceClass {name}", {"exists": True, "claimsNow": users}, {"exists": False}, True)
    if users:
        shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
        raise StepFailed(
            f"DeviceClass {name} is kept: {len(users)} ResourceClaim(s) name it ({shown})",
            "free them (delete the workloads that own them: kubectl get resourceclaims -A), then run rollback "
            "again; until then the class, and this step, stay",
            {"claims": users},
        )
    return ctx.ops.delete_device_class(name, dry_run=ctx.dry_run)


@inverse(InverseAction.RESTORE_QUOTA)
def _undo_quota(ctx: StepContext, restore: Mapping[str, Any]) -> Change | None:
    hard = _hard(ctx, _restored(ctx, restore, "hard", dict))
    namespace, name = _restored(ctx, restore, "namespace", str), _restored(ctx, restore, "name", str)
    return ctx.ops.set_quota_hard(namespace, name, hard, dry_run=ctx.dry_run)


INVERSES[InverseAction.NONE] = InverseSpec(InverseAction.NONE, None)  # evicted pods come back by themselves
INVERSES[InverseAction.DELETE_POD] = InverseSpec(InverseAction.DELETE_POD, None)  # the canary deletes its pod


# -- preflight --------------------------------------------------------------------------------------


class _Rehearsal:
    """Ops that do nothing: running every action and inverse on it checks each step's parameters the way
    the real run reads them, before anything is sent to the cluster."""

    def node_state(self, node: str, *, watched: bool = False) -> dict[str, Any]:
        return {"exists": True, "uid": ""}

    def dra_driver_installed(self, driver: str = "gpu.nvidia.com") -> bool:
        return True

    def pool_nodes(self, selector: dict[str, str], *, driver: str = "gpu.nvidia.com") -> list[dict[str, Any]]:
        return [{"name": "n", "ready": True, "unschedulable": False, "devices": 1 << 30}]

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def preflight(steps: Iterable[tuple[Step, str | None]]) -> None:
    """Refuse (InputError naming the step) a plan whose steps or inverses apply could not carry out:
    a parameter missing or of the wrong type, an unknown action, an inverse without its original value."""
    ops: Any = _Rehearsal()
    for step, node in steps:
        ctx = StepContext(ops, step, node, step.timeout_s)
        run_step(ctx)
        undo_step(ctx)
