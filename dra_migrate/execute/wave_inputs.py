"""What a wave's nodes were planned on, read again before the wave: the GPU labels the plan's predictions rest on.

The plan records, per node, the devices the DRA driver must publish (`expectedDevices`, which wait-dra-ready waits
for), the resource its canary asks for and the label switches' originals, all predicted from the node's labels as
GFD, the MIG Manager, the device plugin's config manager and the GPU Operator wrote them (dra/devices.py,
dra/layout.py, inventory/migparted.py): `nvidia.com/gpu.count`, `gpu.product`, `gpu.replicas`, `mig.strategy`,
`mig-<profile>.count`, `mig.config` / `mig.config.state`, `device-plugin.config`, `gpu.deploy.*`,
`gpu-driver-upgrade-state`. The run's start refuses a plan the cluster drifted from (execute/session.py
`refuse_if_stale`), but an apply runs for hours: the MIG Manager reconfiguring a node of a later wave
(NVIDIA/mig-parted `pkg/mig/reconfigure/reconfigure.go`, on a new `nvidia.com/mig.config`), a device-plugin config
switched by its label (k8s-device-plugin v0.18.0 `cmd/config-manager/main.go` reads
`nvidia.com/device-plugin.config`), a driver upgrade that began, leave the plan's count for that node stale:
its wave was drained, switched, waited `wait-dra-ready`'s whole timeout for a count that never comes, and was
rolled back.

So before each wave the runner compares, for each of the wave's nodes it has not touched, those labels (every
`nvidia.com/` label but the ones below) with what they were when the run began (then checked against the plan by
the staleness check), from the executor's watched copy: one read of each planned node at the first wave, one of
each wave node before its wave, no request to the API server. Any difference stops the run there, nothing of the
wave touched, naming the node and the labels: the waves before it are done, and a new plan (which leaves the
migrated nodes out) predicts the node as it is now. A resumed run would refuse the old plan as stale anyway.

Not compared: `nvidia.com/gfd.timestamp` (GFD stamps it when it starts: k8s-device-plugin v0.18.0
`internal/lm/timestamp.go`; a GFD restart changes no prediction) and the `nvidia.com/cuda.` driver and runtime
versions (a finished driver upgrade moves them; none is an input of a prediction, and an upgrade under way is
seen in its state label). `nvidia.com/gpu-driver-upgrade-state` unset and `upgrade-done` are the same idle state
(inventory/operator_activity.py `UPGRADE_IDLE`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from dra_migrate.errors import MigrateError
from dra_migrate.execute.contract import Ops
from dra_migrate.execute.units import Unit
from dra_migrate.inventory.operator_activity import UPGRADE_IDLE, UPGRADE_STATE_LABEL, operator_busy
from dra_migrate.plan.model import Action, Plan

PREFIX = "nvidia.com/"
NOT_INPUTS = frozenset({"nvidia.com/gfd.timestamp"})
NOT_INPUT_PREFIXES = ("nvidia.com/cuda.",)
_SHOWN = 4  # labels named in the message


def gpu_inputs(labels: Mapping[str, object]) -> dict[str, str]:
    """The node's labels the plan's predictions for it rest on (above)."""
    out = {}
    for key, value in labels.items():
        if not key.startswith(PREFIX) or key in NOT_INPUTS or key.startswith(NOT_INPUT_PREFIXES):
            continue
        text = str(value)
        if key == UPGRADE_STATE_LABEL and text in UPGRADE_IDLE:
            continue  # idle, as unset
        out[key] = text
    return out


class WaveInputs:
    """The planned nodes' GPU labels as the run found them at its first wave, and the check before each wave."""

    def __init__(self, plan: Plan) -> None:
        self.nodes = tuple(dict.fromkeys(e.node for _, _, e in plan.nodes()))
        self.at_start: dict[str, dict[str, str]] | None = None  # read at the first check

    def _read(self, ops: Ops, node: str) -> dict[str, str] | None:
        try:
            state = ops.node_state(node, watched=True)  # the watched copy: no GET per node
        except MigrateError:
            return None  # unreadable now: the node's own steps meet it and say why
        labels = state.get("labels")
        return gpu_inputs(labels) if state.get("exists") and isinstance(labels, Mapping) else None

    def changed(
        self, ops: Ops, unit: Unit, done: Collection[str], ours: Collection[str], reviewed: Collection[str] | None
    ) -> str | None:
        """The failure when a node of the wave, untouched by the migration (`ours`: the nodes the journal shows it
        touched, and the ones this run started a step on), no longer has the GPU labels it had when the run
        began, or holds pods its drain would refuse (`unreviewed`), else None."""
        return self._labels(ops, unit, done, ours) or unreviewed(ops, unit, done, ours, reviewed)

    def _labels(self, ops: Ops, unit: Unit, done: Collection[str], ours: Collection[str]) -> str | None:
        if self.at_start is None:
            self.at_start = {n: read for n in self.nodes if n not in ours and (read := self._read(ops, n)) is not None}
        if unit.wave is None:
            return None
        pending = {ps.node for ps in unit.steps if ps.node is not None and ps.id not in done}
        for entry in unit.wave.nodes:
            node = entry.node
            before = self.at_start.get(node)
            if node not in pending or node in ours or before is None:
                continue
            now = self._read(ops, node)
            if now is None or now == before:
                continue
            return _failure(node, before, now)
        return None


def unreviewed(
    ops: Ops, unit: Unit, done: Collection[str], ours: Collection[str], reviewed: Collection[str] | None
) -> str | None:
    """The failure when a node of the wave holds pods no controller owns that the plan did not record (started
    since: a notebook, a debug pod), which its drain step refuses to evict (execute/ops_drain.py `_unreviewed`:
    evicting one deletes it for good). Found there, the wave's other nodes were already cordoned and drained, and
    were rolled back; found here, nothing of the wave is touched. `reviewed` None: apply --delete-unowned-pods."""
    if reviewed is None:
        return None
    for ps in unit.steps:
        if ps.step.action != Action.DRAIN or ps.id in done or ps.node is None or ps.node in ours:
            continue
        try:
            pods = ops.unreviewed_pods(ps.node, str(ps.step.params.get("scope") or "gpu"), reviewed)
        except MigrateError:
            continue  # the node's own drain meets it
        if pods:
            names = ", ".join(pods[:_SHOWN]) + (f" and {len(pods) - _SHOWN} more" if len(pods) > _SHOWN else "")
            namespace, _, name = pods[0].partition("/")
            return (
                f"node {ps.node}: {len(pods)} pod(s) no controller owns started there since the plan ({names}): its "
                "drain would delete them for good, and refuses (nothing of the wave was touched; ask their owners to "
                f"save and delete them, kubectl delete pod -n {namespace} {name}, then run apply again to resume, "
                "or resume with --delete-unowned-pods)"
            )
    return None


def _failure(node: str, before: Mapping[str, str], now: Mapping[str, str]) -> str:
    keys = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    moved = ", ".join(f"{k} {_shown(before.get(k))} -> {_shown(now.get(k))}" for k in keys[:_SHOWN])
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    busy = operator_busy(now)
    why = f"; {busy}" if busy else ""
    return (
        f"node {node}: its GPU labels changed since the run began ({moved}{more}{why}), so the plan's device count "
        "and canary for it are stale and its wait-dra-ready would time out (nothing of the wave was touched; "
        "the waves before it are done: once the node is settled, make a new plan, which leaves the migrated "
        "nodes out, and apply it)"
    )


def _shown(value: str | None) -> str:
    return "absent" if value is None else repr(value)
