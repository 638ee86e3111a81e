"""The canary's contract (dra_migrate/execute/canary.py): its container wrapper, run by a real shell, and the
verdict on pod states the kubelet produces."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.execute import canary

UUID0 = "GPU-11111111-2222-3333-4444-555555555555"
UUID1 = "GPU-66666666-7777-8888-9999-000000000000"


def run_wrapper(tmp_path: Path, command: str, devices: int = 1, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Runs the container's `sh -c` wrapper as the runtime would, with the termination log redirected."""
    spec = canary.container("img", command, devices)
    log = tmp_path / "termination-log"
    script = spec["command"][2].replace(canary.TERMINATION_LOG, str(log))
    cenv = {e["name"]: e["value"] for e in spec["env"]} | {"PATH": "/usr/bin:/bin"} | (env or {})
    rc = subprocess.run(["sh", "-c", script], env=cenv, capture_output=True, timeout=10).returncode
    return rc, log.read_text()


def fake_nvidia_smi(tmp_path: Path, lines: list[str]) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    body = "".join(f"echo '{line}'\n" for line in lines) or "echo 'No devices were found'; exit 6\n"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_default_command_passes_only_on_exactly_the_requested_count(tmp_path: Path) -> None:
    one = fake_nvidia_smi(tmp_path, [f"GPU 0: NVIDIA A100 (UUID: {UUID0})"])
    rc, msg = run_wrapper(tmp_path, canary.DEFAULT_COMMAND, 1, one)
    assert rc == 0 and UUID0 in msg
    rc, msg = run_wrapper(tmp_path, canary.DEFAULT_COMMAND, 2, one)
    assert rc != 0 and UUID0 in msg  # saw one, asked for two: fails, message still says what it saw


def test_default_command_fails_when_no_device_is_visible(tmp_path: Path) -> None:
    rc, msg = run_wrapper(tmp_path, canary.DEFAULT_COMMAND, 1, fake_nvidia_smi(tmp_path, []))
    assert rc != 0 and "No devices were found" in msg


def test_wrapper_keeps_stderr_quotes_and_exit_status_of_any_command(tmp_path: Path) -> None:
    rc, msg = run_wrapper(tmp_path, 'echo "it\'s $DRA_MIGRATE_CANARY_DEVICES"; echo oops >&2; exit 7', 3)
    assert rc == 7
    assert msg.splitlines() == ["it's 3", "oops"]


def test_wrapper_truncates_the_message_to_the_kubelet_limit(tmp_path: Path) -> None:
    rc, msg = run_wrapper(tmp_path, "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done")
    assert rc == 0
    assert len(msg.encode()) <= canary.MESSAGE_LIMIT and msg.endswith("line1999\n")


def pod(phase: str, **container: Any) -> dict[str, Any]:
    cs = {"name": canary.CONTAINER, "state": container} if container else None
    return {"status": {"phase": phase, "containerStatuses": [cs] if cs else []}}


def terminated(code: int, message: str, reason: str = "Completed") -> dict[str, Any]:
    return {"exitCode": code, "message": message, "reason": reason}


def test_ok_needs_succeeded_exit_zero_and_every_device_named() -> None:
    msg = f"GPU 0: x (UUID: {UUID0})\nGPU 1: x (UUID: {UUID1})"
    assert canary.verdict(pod("Succeeded", terminated=terminated(0, msg)), [UUID0, UUID1]).state == "ok"
    missing = canary.verdict(pod("Succeeded", terminated=terminated(0, msg.splitlines()[0])), [UUID0, UUID1])
    assert missing.state == "failed" and UUID1 in missing.reason and missing.details["missing"] == [UUID1]
    # Terminated but the kubelet has not yet moved the phase: not ok yet, not failed either.
    assert canary.verdict(pod("Running", terminated=terminated(0, msg)), [UUID0, UUID1]).state == "pending"


def test_a_nonzero_exit_fails_with_what_the_container_saw() -> None:
    v = canary.verdict(pod("Failed", terminated=terminated(6, "No devices were found", "Error")), [UUID0])
    assert v.state == "failed" and v.exit_code == 6
    assert "exited 6" in v.reason and "No devices were found" in v.reason


def test_an_empty_id_list_cannot_make_a_silent_container_pass() -> None:
    """Names are compared literally: a device without uuid is expected by name."""
    results = [{"driver": "d", "pool": "p", "device": "gpu-0"}]
    ids = canary.expected_ids(results, [])
    assert ids == ["gpu-0"]
    assert canary.verdict(pod("Succeeded", terminated=terminated(0, "")), ids).state == "failed"


def test_admission_rejection_fails_with_the_kubelets_reason() -> None:
    p = {"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "Allocate failed due to x"}}
    v = canary.verdict(p, [UUID0])
    assert v.state == "failed" and "UnexpectedAdmissionError" in v.reason and "Allocate failed" in v.reason


@pytest.mark.parametrize(
    "reason", ["ErrImageNeverPull", "InvalidImageName", "CreateContainerError", "CrashLoopBackOff"]
)
def test_terminal_waiting_reasons_fail_at_once(reason: str) -> None:
    v = canary.verdict(pod("Pending", waiting={"reason": reason, "message": "detail"}), [UUID0])
    assert v.state == "failed" and reason in v.reason and "detail" in v.reason


def test_container_creating_is_pending() -> None:
    assert canary.verdict(pod("Pending", waiting={"reason": "ContainerCreating"}), [UUID0]).state == "pending"


def event(reason: str, count: int, ts: str, kind: str = "Warning") -> dict[str, Any]:
    return {"type": kind, "reason": reason, "count": count, "lastTimestamp": ts, "message": f"{reason} said so"}


def test_a_failed_prepare_fails_at_once_other_warnings_when_repeated() -> None:
    prepare = [event(canary.PREPARE_FAILED, 1, "2026-01-01T00:00:01Z")]
    v = canary.verdict(pod("Pending"), [UUID0], prepare)
    assert v.state == "failed" and v.reason.startswith(canary.PREPARE_FAILED) and "said so" in v.reason
    mount = [event("FailedMount", 1, "2026-01-01T00:00:01Z")]
    assert canary.verdict(pod("Pending"), [UUID0], mount).state == "pending"
    mount3 = [event("FailedMount", canary.REPEATS_TO_FAIL, "2026-01-01T00:00:01Z")]
    assert canary.verdict(pod("Pending"), [UUID0], mount3).reason.startswith("FailedMount")
    # A later unrelated warning does not hide the failed prepare.
    both = [event("FailedMount", 5, "2026-01-01T00:00:09Z"), event(canary.PREPARE_FAILED, 1, "2026-01-01T00:00:05Z")]
    assert canary.verdict(pod("Pending"), [UUID0], both).reason.startswith(canary.PREPARE_FAILED)
    normal = [event("Scheduled", 9, "2026-01-01T00:00:09Z", kind="Normal")]
    assert canary.verdict(pod("Pending"), [UUID0], normal).state == "pending"


def test_a_prepare_the_node_authorizer_refused_for_its_lag_waits_for_the_kubelets_retry() -> None:
    """The real-node tier: the kubelet read the canary's claim before the node authorizer's graph linked it
    to the pod bound there; the canary failed at once and its wave rolled back, on a claim the kubelet
    read at its next sync."""
    lag = (
        "Failed to prepare dynamic resources: prepare dynamic resources: fetch ResourceClaim c-extended-resources-x: "
        'resourceclaims.resource.k8s.io "c-extended-resources-x" is forbidden: User "system:node:n1" cannot get '
        'resource "resourceclaims" in API group "resource.k8s.io" in the namespace "default": node: no '
        "relationship found between node 'n1' and this object"
    )
    once = [{**event(canary.PREPARE_FAILED, 1, "2026-01-01T00:00:01Z"), "message": lag}]
    assert canary.verdict(pod("Pending"), [UUID0], once).state == "pending"
    # The same refusal met again and again is no race: it fails, naming it.
    again = [{**once[0], "count": canary.REPEATS_TO_FAIL}]
    v = canary.verdict(pod("Pending"), [UUID0], again)
    assert v.state == "failed" and "no relationship found" in v.reason
    # After the retry the container runs: the verdict is the container's.
    ran = pod("Succeeded", terminated=terminated(0, f"GPU 0: A100 (UUID: {UUID0})"))
    assert canary.verdict(ran, [UUID0], once).state == "ok"
    # Any other failed prepare still fails at once.
    other = [{**once[0], "message": "prepare dynamic resources: NodePrepareResources failed: CDI spec not written"}]
    assert canary.verdict(pod("Pending"), [UUID0], other).state == "failed"


def test_timed_out_names_the_last_warning_or_the_waiting_state() -> None:
    evs = [event(canary.PREPARE_FAILED, 1, "2026-01-01T00:00:01Z")]
    assert canary.timed_out(pod("Pending"), evs, 30).startswith(canary.PREPARE_FAILED)
    assert "ContainerCreating" in canary.timed_out(pod("Pending", waiting={"reason": "ContainerCreating"}), [], 30)
    assert "Pending after 30s" in canary.timed_out(pod("Pending"), [], 30)


def test_expected_ids_use_the_newest_generation_uuid() -> None:
    def slice_(gen: int, uuid: str) -> dict[str, Any]:
        dev = {"name": "gpu-0", "attributes": {"uuid": {"string": uuid}}}
        return {"spec": {"driver": "gpu.nvidia.com", "pool": {"name": "n1", "generation": gen}, "devices": [dev]}}

    results = [{"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]
    assert canary.expected_ids(results, [slice_(2, UUID1), slice_(1, UUID0)]) == [UUID1]
    other_pool = [{"driver": "gpu.nvidia.com", "pool": "n2", "device": "gpu-0"}]
    assert canary.expected_ids(other_pool, [slice_(1, UUID0)]) == ["gpu-0"]


def test_command_line_from_the_plans_argv() -> None:
    assert canary.command_line(None) == canary.DEFAULT_COMMAND
    assert canary.command_line([]) == canary.DEFAULT_COMMAND
    assert canary.command_line(["sh", "-c", "nvidia-smi -L | wc -l"]) == "nvidia-smi -L | wc -l"
    # Any other argv runs as that program with those arguments, quoted for the shell.
    assert canary.command_line(["ls", "/dev/nvidia 0", "$HOME"]) == "ls '/dev/nvidia 0' '$HOME'"


def test_an_argv_command_runs_literally_in_the_wrapper(tmp_path: Path) -> None:
    rc, msg = run_wrapper(tmp_path, canary.command_line(["echo", "a;b", "$X"]))
    assert rc == 0 and msg == "a;b $X\n"


MIG0 = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
MIG1 = "MIG-ffffffff-0000-1111-2222-333333333333"


def test_default_command_counts_mig_devices_not_their_parent_gpus(tmp_path: Path) -> None:
    """`nvidia-smi -L` lists a MIG device under its parent GPU's line (NVIDIA MIG User Guide, "Device
    Enumeration"). The canary asks for one device: one MIG device passes; a container that sees two MIG
    devices of the same GPU saw more than it was given (one `GPU` line: counting those passed it)."""
    parent = f"GPU 0: NVIDIA A100-SXM4-40GB (UUID: {UUID0})"
    mig = [parent, f"  MIG 1g.5gb      Device  0: (UUID: {MIG0})"]
    rc, msg = run_wrapper(tmp_path, canary.DEFAULT_COMMAND, 1, fake_nvidia_smi(tmp_path, mig))
    assert rc == 0 and MIG0 in msg
    leak = tmp_path / "leak"
    leak.mkdir()
    two = [*mig, f"  MIG 1g.5gb      Device  1: (UUID: {MIG1})"]
    rc, msg = run_wrapper(leak, canary.DEFAULT_COMMAND, 1, fake_nvidia_smi(leak, two))
    assert rc != 0 and MIG1 in msg
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    # A full GPU next to a MIG-enabled one: two devices (the full GPU, the MIG device), the parent not one.
    both = [f"GPU 0: NVIDIA A100 (UUID: {UUID1})", *[line.replace("GPU 0", "GPU 1") for line in mig]]
    env = fake_nvidia_smi(mixed, both)
    rc, _ = run_wrapper(mixed, canary.DEFAULT_COMMAND, 2, env)
    assert rc == 0
    rc, _ = run_wrapper(mixed, canary.DEFAULT_COMMAND, 3, env)
    assert rc != 0
