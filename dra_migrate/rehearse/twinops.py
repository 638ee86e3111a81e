"""The twin's live ops as `rehearse` hands them to the executor: the health gate that allows for the twin's
real-time scheduler, the scheduler's reason for every pod it finds Pending, and a replace-pool's new nodes
made to appear when the plan waits for them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dra_migrate.dra.devices import NodeDevices
from dra_migrate.execute.ops import LiveOps
from dra_migrate.plan.actions import Action
from dra_migrate.plan.model import Plan
from dra_migrate.sim.kwok import CONTROLLER_TAINTS
from dra_migrate.sim.spec import LABEL_DEVICE_PLUGIN, LABEL_DRA_KUBELET_PLUGIN, DeviceSpec, GpuNodeSpec

# The twin's scheduler retries a Pending pod in real time, not scaled: a pod that failed to schedule waits
# out a backoff of 1 s doubling to 10 s before its next attempt (kube-scheduler's defaults,
# k8s.io/kubernetes@v1.37.2 pkg/scheduler/apis/config/v1/defaults.go PodInitialBackoffSeconds and
# PodMaxBackoffSeconds). At --time-scale 0.01 the gate's 120 s are 1.2 s: a pod evicted in the wave and
# still in its backoff, about to be placed, read as stuck (the integration tier saw it: a wave rolled back
# whose pods were bound seconds later). A pod the gate finds Pending is therefore looked at again once it
# has waited longer than the scheduler's longest backoff and one attempt after it; only a pod still Pending
# then fails the gate, so a pod that cannot be placed still fails it, a few seconds later.
SCHEDULER_RETRY_S = 10.0 + 2.0


class WatchingOps:
    """The live ops of the twin, noting the scheduler's reason for every pod the health gate finds Pending;
    and, when a replace-pool plan waits for its new pool, making that pool's nodes appear (`provision`)."""

    def __init__(
        self,
        inner: LiveOps,
        provision: Callable[[dict[str, str], int], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._inner = inner
        self._provision = provision
        self._sleep = sleep
        self.reasons: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def wait_pool(self, selector: dict[str, str], nodes: int, *args: Any, **kwargs: Any) -> Any:
        if self._provision is not None:
            self._provision(selector, nodes)
        return self._inner.wait_pool(selector, nodes, *args, **kwargs)

    def pending_gpu_pods(self, older_than_s: float, *, created_after: str | None = None) -> list[str]:
        pending = self._inner.pending_gpu_pods(older_than_s, created_after=created_after)
        if pending and older_than_s < SCHEDULER_RETRY_S:  # see SCHEDULER_RETRY_S
            self._sleep(SCHEDULER_RETRY_S)
            pending = self._inner.pending_gpu_pods(SCHEDULER_RETRY_S, created_after=created_after)
        for key in pending:
            if " " in key:  # a gang, one failure for all its pods (execute/ops.group_pending)
                self.reasons[key] = "the gang waits whole: not all of its pods can be placed at once"
                continue
            ns, _, name = key.partition("/")
            pod = self._inner.kube.get_or_none(f"/api/v1/namespaces/{ns}/pods/{name}") or {}
            self.reasons[key] = scheduler_reason(pod)
        return pending


def scheduler_reason(pod: dict[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "unschedulable")
    return "not yet scheduled"


class NewPools:
    """The twin's side of a replace-pool plan's `await-pool`: the nodes the emitted platform command would make,
    played by the simulator — the replaced pool's nodes under new names, with the new pool's labels (the
    step's selector), the DRA kubelet plugin on and the device plugin off (what the platform's own switch,
    e.g. GKE's gke-no-default-nvidia-gpu-device-plugin=true, does on a real node)."""

    def __init__(
        self,
        plan: Plan,
        specs: list[GpuNodeSpec],
        predicted: dict[str, NodeDevices],
        start: Callable[[list[GpuNodeSpec]], Any],
        say: Callable[[str], None],
    ) -> None:
        self._by_selector: dict[str, list[str]] = {}
        by_pool: dict[str | None, list[str]] = {}  # once: each await-pool scanning every node was pools x nodes
        for s, _, n in plan.nodes():
            by_pool.setdefault(s.pool, []).append(n.node)
        for stage in plan.stages:
            for step in stage.steps:
                if step.action == Action.AWAIT_POOL:
                    pool = stage.name[len("provision-") :]
                    self._by_selector[_key(step.params["selector"])] = by_pool.get(pool, [])
        # A node the platform's stack serves shows no GFD labels: its devices are the planner's prediction (from
        # its capacity), the devices the plan's await-pool expects of each new node.
        self._specs = {
            s.name: s if s.devices or s.name not in predicted else
            replace(s, devices=tuple(DeviceSpec.from_json(d) for d in predicted[s.name].devices))
            for s in specs
        }  # fmt: skip
        self._start = start
        self._say = say
        self._made: set[str] = set()

    def provision(self, selector: dict[str, str], nodes: int) -> None:
        key = _key(selector)
        old = [self._specs[n] for n in self._by_selector.get(key, []) if n in self._specs]
        if key in self._made or not old:
            return
        self._made.add(key)
        base = "-".join(v for v in selector.values())[:40]
        new = [
            replace(
                old[i % len(old)],
                name=f"{base}-{i}",
                labels={
                    **old[i % len(old)].labels,
                    **selector,
                    "kubernetes.io/hostname": f"{base}-{i}",
                    LABEL_DRA_KUBELET_PLUGIN: "true",
                    LABEL_DEVICE_PLUGIN: "false",
                },
                # New machines: not cordoned, and none of the taints the node lifecycle controller keeps for
                # the old ones' state (their cordon, not-ready); the taints the pool itself sets stay.
                unschedulable=False,
                ready="True",
                taints=tuple(t for t in old[i % len(old)].taints if t.get("key") not in CONTROLLER_TAINTS),
            )
            for i in range(nodes)
        ]
        self._say(f"twin: the new pool {selector} appears as its platform command makes it ({nodes} node(s))")
        self._start(new)


def _key(selector: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(dict(selector).items()))
