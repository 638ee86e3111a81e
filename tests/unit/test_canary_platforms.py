"""The canary on real platforms: what the canary's namespace and its nodes add to a pod the tool made.

A service mesh that injects its proxy into every pod of the namespace (Istio's `istio-injection=enabled`,
Linkerd's `linkerd.io/inject: enabled`, the documented first step of both: they label `default`) adds a
container that never exits: the canary's own container ends with exit 0 naming its device, but the pod stays
`Running` (a pod is Running while one of its containers is; only native sidecars, KEP-753, are stopped by
the kubelet when the regular containers end). Before, the step waited for `Succeeded` until its timeout and
the wave, drained and switched, rolled back on a node that served its GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.execute import canary
from dra_migrate.execute.contract import StepFailed
from dra_migrate.execute.ops_canary import _canary_pod
from tests.unit.test_canary_races import GPU, NODE, LaggingScheduler, ops_on

UUID = "GPU-aaaa"
SAW = f"GPU 0: NVIDIA A100 (UUID: {UUID})"


def with_sidecar(phase: str, canary_state: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": canary.CONTAINER, "state": canary_state},
                {"name": "istio-proxy", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
            ],
        }
    }


def test_a_canary_whose_injected_sidecar_keeps_running_is_judged_by_its_own_container() -> None:
    pod = with_sidecar("Running", {"terminated": {"exitCode": 0, "message": SAW}})
    assert canary.verdict(pod, [UUID]).state == "ok"


def test_an_injected_sidecar_does_not_make_a_failing_canary_pass() -> None:
    failed = with_sidecar("Running", {"terminated": {"exitCode": 6, "message": "No devices were found"}})
    assert canary.verdict(failed, [UUID]).state == "failed"
    missing = with_sidecar("Running", {"terminated": {"exitCode": 0, "message": "GPU 0: (UUID: GPU-other)"}})
    assert canary.verdict(missing, [UUID]).state == "failed"
    running = with_sidecar("Running", {"running": {}})
    assert canary.verdict(running, [UUID]).state == "pending"


class MeshedNamespace(LaggingScheduler):
    """A namespace with sidecar injection: the canary ends, the pod stays Running (the proxy runs on)."""

    def create(self, path: str, body: dict[str, Any], query: Any = ()) -> dict[str, Any]:
        pod = super().create(path, body, query)
        status = pod["status"]
        status["phase"] = "Running"
        status["containerStatuses"].append({"name": "istio-proxy", "state": {"running": {}}})
        return pod


def test_the_canary_step_passes_on_a_meshed_namespace_before_its_timeout() -> None:
    fake = MeshedNamespace(stale=0, saw=SAW)
    change = ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 2)
    assert change.after["saw"] == SAW and change.after["expected"] == [UUID]
    assert set(fake.deleted) >= set(fake.created), "the canary, still Running by its proxy, is deleted"


def test_a_meshed_canary_that_saw_no_device_still_fails() -> None:
    fake = MeshedNamespace(stale=0, saw="No devices were found")
    with pytest.raises(StepFailed, match="did not see GPU-aaaa"):
        ops_on(fake).canary(NODE, GPU, "ubuntu:24.04", 2)


def test_the_canary_opts_out_of_mesh_injection() -> None:
    """Istio skips a pod labelled `sidecar.istio.io/inject: "false"`; Linkerd one annotated
    `linkerd.io/inject: disabled` (istio.io docs/setup/additional-setup/sidecar-injection, "Controlling the
    injection policy"; linkerd.io/2/features/proxy-injection, "Overriding injection"): the proxy's init
    container needs NET_ADMIN and its image a pull, neither of which the canary should depend on."""
    pod = _canary_pod(NODE, {}, GPU, "ubuntu:24.04", "t", "true")
    assert pod["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    assert pod["metadata"]["annotations"]["linkerd.io/inject"] == "disabled"
