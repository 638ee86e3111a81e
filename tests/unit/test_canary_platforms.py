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


# -- the canary image's pull ---------------------------------------------------------------------
# A wave's nodes pull the canary image at once, on nodes just drained: a registry that throttles them (an
# anonymous Docker Hub pull is limited per IP address, nodes behind one NAT share it; ECR and Artifact
# Registry throttle bursts with 429) or a blip of its network fails a pull the kubelet retries on a backoff
# of 10 s, doubling (k8s.io/kubernetes@v1.37.2 pkg/kubelet/images/image_manager.go EnsureImageExists,
# pkg/kubelet/kubelet.go imageBackOffPeriod). Before, the first failed pull failed the canary, and the wave
# (drained, switched) rolled back, on a node that served its GPU.

PULL_ERROR = (
    'failed to pull and unpack image "docker.io/library/ubuntu:24.04": failed to copy: httpReadSeeker: failed '
    "open: unexpected status code https://registry-1.docker.io/v2/library/ubuntu/manifests/sha256:ab: "
    "429 Too Many Requests - Server message: toomanyrequests: You have reached your unauthenticated pull rate limit"
)


def pulling(reason: str) -> dict[str, Any]:
    message = PULL_ERROR
    if reason == "ImagePullBackOff":
        message = f'Back-off pulling image "ubuntu:24.04": ErrImagePull: {PULL_ERROR}'
    return {"status": {"phase": "Pending", "containerStatuses": [
        {"name": canary.CONTAINER, "state": {"waiting": {"reason": reason, "message": message}}}]}}  # fmt: skip


def pull_events(failed_pulls: int, restated: int = 0) -> list[dict[str, Any]]:
    """The kubelet's events of a failing pull: `Failed` "Failed to pull image ..." once per pull tried, and
    `Failed` "Error: ErrImagePull"/"Error: ImagePullBackOff" restating it at each pod sync."""
    evs = [{"type": "Warning", "reason": "Failed", "count": failed_pulls, "lastTimestamp": "2026-01-01T00:00:30Z",
            "message": f'Failed to pull image "ubuntu:24.04": {PULL_ERROR}'}]  # fmt: skip
    if restated:
        evs.append({"type": "Warning", "reason": "Failed", "count": restated, "lastTimestamp": "2026-01-01T00:00:40Z",
                    "message": "Error: ImagePullBackOff"})  # fmt: skip
    return evs


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_a_pull_the_kubelet_retries_does_not_fail_the_canary_at_once(reason: str) -> None:
    assert canary.verdict(pulling(reason), [UUID], pull_events(1)).state == "pending"
    # Its restatements at each sync are the same one failure, not a repeated warning.
    assert canary.verdict(pulling(reason), [UUID], pull_events(1, restated=5)).state == "pending"


def test_a_pull_that_keeps_failing_fails_the_canary_with_the_registrys_words() -> None:
    v = canary.verdict(pulling("ImagePullBackOff"), [UUID], pull_events(canary.REPEATS_TO_FAIL, restated=4))
    assert v.state == "failed" and "toomanyrequests" in v.reason and f"{canary.REPEATS_TO_FAIL} times" in v.reason


def test_a_pull_still_failing_at_the_timeout_is_named_by_its_error() -> None:
    reason = canary.timed_out(pulling("ImagePullBackOff"), pull_events(2, restated=4), 180)
    assert "toomanyrequests" in reason and "ImagePullBackOff" in reason


def test_an_image_that_cannot_be_pulled_at_all_still_fails_at_once() -> None:
    for reason in ("InvalidImageName", "ErrImageNeverPull"):
        v = canary.verdict(pulling(reason), [UUID])
        assert v.state == "failed" and reason in v.reason
