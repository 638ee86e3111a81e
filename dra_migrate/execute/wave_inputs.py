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
from typing import Any

from dra_migrate.cluster.kinds import group_kind
from dra_migrate.errors import MigrateError
from dra_migrate.execute.contract import Ops
from dra_migrate.execute.units import Unit
from dra_migrate.inventory.operator_activity import UPGRADE_IDLE, UPGRADE_STATE_LABEL, operator_busy
from dra_migrate.plan.fingerprint import content_hash
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
        self.at_start: dict[str, tuple[str, dict[str, str]]] | None = None  # uid, GPU labels: at the first check
        self.stack = StackObjects(plan)

    def _read(self, ops: Ops, node: str) -> tuple[str, dict[str, str]] | None:
        try:
            state = ops.node_state(node, watched=True)  # the watched copy: no GET per node
        except MigrateError:
            return None  # unreadable now: the node's own steps meet it and say why
        labels = state.get("labels")
        if not state.get("exists") or not isinstance(labels, Mapping):
            return None
        return str(state.get("uid") or ""), gpu_inputs(labels)

    def changed(
        self, ops: Ops, unit: Unit, done: Collection[str], ours: Collection[str], reviewed: Collection[str] | None
    ) -> str | None:
        """The failure when a node of the wave, untouched by the migration (`ours`: the nodes the journal shows it
        touched, and the ones this run started a step on), no longer has the GPU labels it had when the run
        began (or is another Node object of the same name), or holds pods its drain would refuse (`unreviewed`),
        else None."""
        return (
            self.stack.changed(ops)
            or self._labels(ops, unit, done, ours)
            or unreviewed(ops, unit, done, ours, reviewed)
        )

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
            # A node replaced (another uid) is found before this, against the plan's uid (lifecycle.py
            # `gone_from_wave`); here only its labels.
            if now is None or now[1] == before[1]:
                continue
            return _failure(node, before[1], now[1])
        return None


Key = tuple[str, str, str]  # the kind (as cluster/kinds.py keys it: apps/DaemonSet), namespace, name
_FINGERPRINTED = {"ConfigMap", "nvidia.com/ClusterPolicy", "nvidia.com/NVIDIADriver"}  # cluster/kinds.py keys
_DAEMONSET = "apps/DaemonSet"
_WHY = {
    "DaemonSet": "a plugin DaemonSet: which nodes its pods select, which images they run, what the plan's label "
    "switches rest on",
    "ConfigMap": "a device-plugin or MIG Manager config: the sharing replicas, MIG strategy and layouts the plan's "
    "device counts rest on",
    "ClusterPolicy": "the GPU Operator's policy for the device plugin, the MIG Manager and the driver",
    "NVIDIADriver": "the GPU Operator's driver for these nodes",
}


class StackObjects:
    """The NVIDIA stack objects the plan rests on, as the run found them at its first wave: the device-plugin and
    MIG Manager ConfigMaps, ClusterPolicies and NVIDIADrivers its fingerprint lists, and the plugin DaemonSets its
    nodes' placement records name. A GET of each before each wave: a few requests a wave, however many nodes."""

    def __init__(self, plan: Plan) -> None:
        keys: set[Key] = set()
        for o in plan.fingerprint.get("objects") or []:
            kind = group_kind(str(o.get("group") or ""), str(o.get("kind"))) if isinstance(o, Mapping) else ""
            if kind in _FINGERPRINTED:
                keys.add((kind, str(o.get("namespace") or ""), str(o.get("name") or "")))
        for _, _, entry in plan.nodes():
            for record in entry.placement.values():
                refs = record.get("daemonSet") if isinstance(record, Mapping) else None
                for ref in str(refs or "").split(","):
                    namespace, _, name = ref.strip().partition("/")
                    if name:
                        keys.add((_DAEMONSET, namespace, name))
        self.keys = sorted(keys)
        self.at_start: dict[Key, tuple[str, str] | None] | None = None

    def _read(self, ops: Ops, key: Key) -> tuple[str, str] | None:
        obj = ops.stack_object(*key)
        if obj is None:
            return None
        return str((obj.get("metadata") or {}).get("uid") or ""), content_hash(_content(_bare(key[0]), obj))

    def changed(self, ops: Ops) -> str | None:
        """The failure when one of them was deleted, replaced, created or changed since the first wave, else None.
        One that cannot be read now (the API server busy) is not judged: the wave's steps meet a server that
        does not answer."""
        try:
            if self.at_start is None:
                self.at_start = {k: self._read(ops, k) for k in self.keys}
                return None
            for key in self.keys:
                before, now = self.at_start.get(key), self._read(ops, key)
                if before == now:
                    continue
                kind, namespace, name = _bare(key[0]), key[1], key[2]
                what = ("was created" if before is None else "was deleted" if now is None
                        else "was replaced" if before[0] != now[0] else "changed")  # fmt: skip
                return (
                    f"{kind} {namespace + '/' if namespace else ''}{name} {what} since the run began ({_WHY[kind]}): "
                    "what the plan predicted for the nodes left may no longer hold (nothing of the wave was "
                    "touched; the waves before it are done: see dra-migrate diff PLAN, then make a new plan, which "
                    "leaves the migrated nodes out, and apply it)"
                )
        except MigrateError:
            return None
        return None


def _bare(kind: str) -> str:
    """The kind without its group: how messages name it."""
    return kind.rpartition("/")[2]


def _content(kind: str, obj: Mapping[str, Any]) -> Any:
    """What of the object the plan rests on: a ConfigMap's data, a CR's spec (as the fingerprint hashes them,
    plan/fingerprint.py `dependencies`); of a DaemonSet, what decides where its pods run and what they run
    (inventory/placement.py `node_selects`: nodeSelector, required affinity, tolerations) and their images,
    not the annotations a `kubectl rollout restart` stamps."""
    if kind == "ConfigMap":
        return obj.get("data")
    if kind != "DaemonSet":
        return obj.get("spec")
    pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    images = [c.get("image") for part in ("initContainers", "containers") for c in pod.get(part) or []]
    return {k: pod.get(k) for k in ("nodeSelector", "affinity", "tolerations")} | {"images": images}


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
