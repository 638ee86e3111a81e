"""Tekton TaskRuns and PipelineRuns (tekton.dev/v1) under the drain.

A TaskRun's pod is controlled by the TaskRun (tektoncd/pipeline v1.15.0 pkg/pod/pod.go), a PipelineRun's TaskRuns by
the PipelineRun (pkg/reconciler/pipelinerun/pipelinerun.go `createTaskRun`). An evicted pod turns Failed and fails its
TaskRun (pkg/pod/status.go `DidTaskRunFail`), which runs again only while len(status.retriesStatus) < spec.retries
(pkg/apis/pipeline/v1/taskrun_types.go `IsRetriable`; the PipelineRun copies its pipeline task's `retries` there).
Before, the kinds were not read: the pods were GPU consumers under an owner the tool did not know, and a drain that
failed a CI run's GPU task (and its PipelineRun) said nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dra_migrate.cluster.kinds import KINDS_BY_KEY
from dra_migrate.cluster.redact import for_snapshot
from dra_migrate.errors import InputError
from tests.unit.helpers import container, node, obj, pod, pod_spec, readonly_role_lists, state
from tests.unit.test_checks import GPU, findings, gpu_node, make
from tests.unit.test_consumers import consumers

TEKTON = "tekton.dev/v1"
SHELL = pod_spec(container(limits={GPU: 1}))
RUNNING = {"type": "Succeeded", "status": "Unknown", "reason": "Running"}


def pipeline_run(name: str = "build-42") -> dict[str, Any]:
    pr = obj(TEKTON, "PipelineRun", name, {"pipelineRef": {"name": "build"}})
    pr["status"] = {"conditions": [dict(RUNNING)]}
    return pr


def task_run(
    name: str = "train",
    owner: dict[str, Any] | None = None,
    retries: int | None = None,
    used: int = 0,
    condition: dict[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"taskRef": {"name": "train"}}
    if retries is not None:
        spec["retries"] = retries
    run = obj(TEKTON, "TaskRun", name, spec, owner=owner, **meta)
    failed = {"conditions": [{"type": "Succeeded", "status": "False", "reason": "Failed"}], "podName": "x"}
    run["status"] = {"conditions": [condition or dict(RUNNING)], "podName": f"{name}-pod"}
    if used:
        run["status"]["retriesStatus"] = [copy.deepcopy(failed) for _ in range(used)]
    return run


def _flagged(*objects: dict[str, Any]) -> list[str]:
    found = findings(make(gpu_node("gpu-1", pool="h100"), node("cpu-1"), *objects), "job-fails-on-eviction")
    assert len(found) <= 1
    return [f"{o}: {found[0].message}" for o in found[0].objects] if found else []


def _pod_of(run: dict[str, Any], node_name: str = "gpu-1") -> dict[str, Any]:
    return pod(f"{run['metadata']['name']}-pod", SHELL, owner=run, node=node_name)


def test_a_running_task_run_without_retries_is_flagged_with_its_pool() -> None:
    run = task_run()
    (f,) = findings(make(gpu_node("gpu-1", pool="h100"), run, _pod_of(run)), "job-fails-on-eviction")
    assert [str(o) for o in f.objects] == ["TaskRun ml/train"] and f.pools == ("h100",)
    assert "TaskRun ml/train (no retries: its evicted pod fails it)" in f.message
    assert "retries" in f.remediation


def test_a_pipeline_run_task_with_a_retry_left_is_not_flagged_and_one_with_none_names_the_pipeline_run() -> None:
    pr = pipeline_run()
    left = task_run("build-42-train", owner=pr, retries=2, used=1)
    assert _flagged(pr, left, _pod_of(left)) == []
    spent = task_run("build-42-train", owner=pr, retries=2, used=2)
    (line,) = _flagged(pr, spent, _pod_of(spent))
    assert line.startswith("TaskRun ml/build-42-train:")
    assert "retries 2, 2 used: its evicted pod fails it, and PipelineRun build-42 with it" in line


def test_a_task_with_on_error_continue_is_flagged_saying_its_pipeline_run_goes_on() -> None:
    pr = pipeline_run()
    run = task_run("build-42-lint", owner=pr, annotations={"pipeline.tekton.dev/pipeline-task-on-error": "continue"})
    (line,) = _flagged(pr, run, _pod_of(run))
    assert "PipelineRun build-42 goes on without it (onError: continue)" in line


@pytest.mark.parametrize(
    ("case", "condition", "flagged"),
    [
        ("succeeded", {"type": "Succeeded", "status": "True", "reason": "Succeeded"}, False),
        ("failed for good", {"type": "Succeeded", "status": "False", "reason": "Failed"}, False),
        ("being retried (Unknown, ToBeRetried) with no retry left after it", None, True),
    ],
)
def test_a_finished_task_run_is_not_flagged(case: str, condition: dict[str, Any] | None, flagged: bool) -> None:
    run = task_run(retries=1, used=1, condition=condition)
    if condition is None:
        run["status"]["conditions"][0]["reason"] = "ToBeRetried"
    assert bool(_flagged(run, _pod_of(run))) is flagged, case


def test_only_gpu_pods_on_nodes_still_to_migrate_count() -> None:
    run = task_run()
    assert _flagged(run, _pod_of(run, node_name="cpu-1")) == [], "a pod on a node the drain does not touch"
    cpu_pod = pod("train-pod", pod_spec(container(image="busybox")), owner=run)
    assert _flagged(run, cpu_pod) == [], "a pod without GPUs"


def test_a_pipeline_runs_gpu_pods_are_one_consumer_at_the_pipeline_run() -> None:
    pr = pipeline_run()
    a, b = task_run("build-42-a", owner=pr), task_run("build-42-b", owner=pr)
    got = consumers(gpu_node("gpu-1"), pr, a, b, _pod_of(a), _pod_of(b))
    assert list(got) == ["PipelineRun/build-42"]


def test_the_tekton_kinds_are_read_and_the_read_only_role_lists_them() -> None:
    for kind, plural in (("TaskRun", "taskruns"), ("PipelineRun", "pipelineruns")):
        k = KINDS_BY_KEY[f"tekton.dev/{kind}"]
        assert (k.api_version, k.plural, k.optional, k.namespaced) == (TEKTON, plural, True, True)
    listed = readonly_role_lists()
    assert {("tekton.dev", "taskruns"), ("tekton.dev", "pipelineruns")} <= listed


@pytest.mark.parametrize(
    ("case", "path", "value", "field"),
    [
        ("retries as a string", ("spec", "retries"), "2", r"spec\.retries must be an integer"),
        ("retries as a boolean", ("spec", "retries"), True, r"spec\.retries must be an integer"),
        ("conditions as a map", ("status", "conditions"), {"type": "Succeeded"}, r"status\.conditions must be a list"),
        ("a condition's status as a boolean", None, None, r"status\.conditions\[0\]\.status must be a string"),
        ("retriesStatus as a map", ("status", "retriesStatus"), {"a": 1}, r"status\.retriesStatus must be a list"),
        ("a retry's status as a string", ("status", "retriesStatus"), ["Failed"], r"retriesStatus\[0\] must be a map"),
    ],
)
def test_a_malformed_task_run_is_refused_naming_the_field(
    case: str, path: tuple[str, str] | None, value: Any, field: str
) -> None:
    run = task_run(retries=1)
    if path is None:
        run["status"]["conditions"][0]["status"] = False
    else:
        run[path[0]][path[1]] = value
    with pytest.raises(InputError, match=field):
        state(gpu_node("gpu-1"), run)


def test_a_task_run_with_no_status_yet_or_whose_pipeline_run_is_not_read_is_still_judged() -> None:
    run = task_run()
    del run["status"]  # just created: no condition yet, so running
    assert _flagged(run, _pod_of(run))
    pr = pipeline_run()
    orphan = task_run("build-42-x", owner=pr, retries=0)  # its PipelineRun not read: named from the reference
    (line,) = _flagged(orphan, _pod_of(orphan))
    assert "PipelineRun build-42 with it" in line


def test_a_snapshot_keeps_no_param_result_script_env_or_termination_message_values() -> None:
    """Params carry tokens as often as env does; a step's `script` is its code; Tekton's entrypoint writes a step's
    results into its termination message; the resolved spec and each retry's archived status repeat them."""
    secret = "ghp-SECRET-123"
    step = {"name": "train", "image": "trainer", "script": f"echo {secret}", "env": [{"name": "T", "value": secret}]}
    task_spec = {
        "params": [{"name": "token", "type": "string", "default": secret}],
        "steps": [step, {"name": "push", "image": "pusher", "args": [f"--token={secret}"]}],
        "stepTemplate": {"env": [{"name": "HF_TOKEN", "value": secret}]},
    }
    run = obj(TEKTON, "TaskRun", "train", {"params": [{"name": "token", "value": secret}], "taskSpec": task_spec})
    status = {
        "conditions": [dict(RUNNING)],
        "taskSpec": copy.deepcopy(task_spec),
        "results": [{"name": "digest", "type": "string", "value": secret}],
        "steps": [{"name": "train", "terminated": {"exitCode": 0, "message": f'[{{"key":"d","value":"{secret}"}}]'}}],
    }
    run["status"] = {**copy.deepcopy(status), "retriesStatus": [copy.deepcopy(status)]}
    pr = obj(TEKTON, "PipelineRun", "build-42", {"params": [{"name": "token", "value": {"k": secret}}]})
    pr["status"] = {"pipelineSpec": {"tasks": [{"name": "train", "taskSpec": copy.deepcopy(task_spec)}]}}
    for o in (run, pr):
        kept = for_snapshot(copy.deepcopy(o), keep_env=False)
        assert kept is not None and secret not in str(kept), kept
    kept = for_snapshot(copy.deepcopy(run), keep_env=False)
    assert kept is not None and kept["spec"]["params"][0]["name"] == "token", "names stay: only values go"
    assert kept["status"]["conditions"] == [RUNNING] and len(kept["status"]["retriesStatus"]) == 1
    kept = for_snapshot(copy.deepcopy(run), keep_env=True)
    assert kept is not None and secret in str(kept), "--keep-env keeps them, as it keeps env values"
