"""`job-fails-on-eviction`: running Jobs that the drain fails for good.

Found reading what the drain does to a Job's pod: the eviction API marks it DisruptionTarget and deletes it, and
the Job controller counts that as a failure. ML Jobs often run with `backoffLimit: 0` (an expensive run must
not retry on its own), so the first wave through their node failed them, while the plan said "evicted pods are
recreated by their controllers".
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.checks.rules_jobs import eviction_action
from tests.unit.helpers import container, node, obj, pod, pod_spec
from tests.unit.test_checks import GPU, findings, gpu_node, make

SHELL = pod_spec(container(limits={GPU: 1}))
IGNORE_DISRUPTION = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def _job(
    name: str = "train", owner: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    job = obj("batch/v1", "Job", name, {"template": {"spec": SHELL}, **spec}, owner=owner)
    job["status"] = status or {"active": 1}
    return job


def _pods(job: dict[str, Any], n: int = 1, node_name: str = "gpu-1", **kw: Any) -> list[dict[str, Any]]:
    return [pod(f"{job['metadata']['name']}-{i}", SHELL, owner=job, node=node_name, **kw) for i in range(n)]


def _flagged(*objects: dict[str, Any]) -> list[str]:
    found = findings(make(gpu_node("gpu-1", pool="h100"), node("cpu-1"), *objects), "job-fails-on-eviction")
    assert len(found) <= 1
    return [f"{o}: {found[0].message}" for o in found[0].objects] if found else []


def test_a_job_with_no_retry_left_is_flagged_with_its_pool() -> None:
    job = _job(backoffLimit=0)
    (f,) = findings(make(gpu_node("gpu-1", pool="h100"), job, *_pods(job)), "job-fails-on-eviction")
    assert f.severity.value == "warning" and [str(o) for o in f.objects] == ["Job ml/train"]
    assert "ml/train (backoffLimit 0, 0 failure(s) already, 1 pod(s) to evict)" in f.message
    assert f.pools == ("h100",) and "DisruptionTarget" in f.remediation


@pytest.mark.parametrize(
    ("case", "spec", "failed", "pods", "flagged"),
    [
        ("the default limit, 6: five failures and two pods exceed it", {}, 5, 2, True),
        ("the default limit, 6: four failures and two pods reach it, not exceed it", {}, 4, 2, False),
        ("a limit of 2, three pods", {"backoffLimit": 2}, 0, 3, True),
        ("a limit of 2, two pods", {"backoffLimit": 2}, 0, 2, False),
    ],
)
def test_failures_so_far_and_pods_to_evict_against_the_backoff_limit(
    case: str, spec: dict[str, Any], failed: int, pods: int, flagged: bool
) -> None:
    job = _job(status={"active": pods, "failed": failed}, **spec)
    assert bool(_flagged(job, *_pods(job, pods))) is flagged, case


@pytest.mark.parametrize(
    ("case", "rules", "action"),
    [
        ("no policy", None, "Count"),
        ("Ignore on the eviction's condition", [IGNORE_DISRUPTION], "Ignore"),
        (
            "the Kubernetes docs' example: FailJob on exit code 42 first, then Ignore the disruption",
            [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
                IGNORE_DISRUPTION,
            ],
            "Ignore",
        ),
        (
            "FailJob on any non-zero code first: a SIGTERM'd container's 143 matches it",
            [{"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}}, IGNORE_DISRUPTION],
            "FailJob",
        ),
        (
            "Ignore exit code 143, a SIGTERM'd container's",
            [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [143]}}],
            "Ignore",
        ),
        ("FailJob on the eviction's condition", [{**IGNORE_DISRUPTION, "action": "FailJob"}], "FailJob"),
        ("Count on exit code 137", [{"action": "Count", "onExitCodes": {"operator": "In", "values": [137]}}], "Count"),
        (
            "a condition with status False does not match",
            [{**IGNORE_DISRUPTION, "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}],
            "Count",
        ),
    ],
)
def test_the_first_pod_failure_policy_rule_that_matches_an_eviction_decides(
    case: str, rules: list[dict[str, Any]] | None, action: str
) -> None:
    spec = {} if rules is None else {"podFailurePolicy": {"rules": rules}}
    assert eviction_action(spec) == action, case


def test_a_policy_that_ignores_the_eviction_keeps_a_job_of_no_retries_off_the_list() -> None:
    safe = _job("safe", backoffLimit=0, podFailurePolicy={"rules": [IGNORE_DISRUPTION]})
    fails = _job("fails", backoffLimit=3, podFailurePolicy={"rules": [{**IGNORE_DISRUPTION, "action": "FailJob"}]})
    (line,) = _flagged(safe, *_pods(safe), fails, *_pods(fails))
    assert line.startswith("Job ml/fails:") and "fails it at the first eviction" in line


def test_a_per_index_limit_of_zero_fails_the_evicted_index() -> None:
    zero = _job("zero", backoffLimitPerIndex=0, completionMode="Indexed")
    one = _job("one", backoffLimitPerIndex=1, completionMode="Indexed")
    (line,) = _flagged(zero, *_pods(zero), one, *_pods(one))
    assert line.startswith("Job ml/zero:") and "backoffLimitPerIndex 0" in line


def _jobset(name: str, failure_policy: dict[str, Any] | None, restarts: int) -> dict[str, Any]:
    spec = {"replicatedJobs": []} | ({"failurePolicy": failure_policy} if failure_policy is not None else {})
    js = obj("jobset.x-k8s.io/v1alpha2", "JobSet", name, spec)
    js["status"] = {"restarts": restarts}
    return js


@pytest.mark.parametrize(
    ("case", "policy", "restarts", "flagged"),
    [
        ("restarts left: the JobSet recreates its Jobs", {"maxRestarts": 3}, 1, False),
        ("every restart used", {"maxRestarts": 3}, 3, True),
        ("no failure policy: the JobSet fails at once", None, 0, True),
    ],
)
def test_a_jobsets_child_fails_for_good_only_when_the_jobset_has_no_restart_left(
    case: str, policy: dict[str, Any] | None, restarts: int, flagged: bool
) -> None:
    js = _jobset("pretrain", policy, restarts)
    child = _job("pretrain-workers-0", owner=js, backoffLimit=0)
    lines = _flagged(js, child, *_pods(child))
    assert bool(lines) is flagged, case
    if flagged:
        assert "JobSet pretrain fails with it" in lines[0]


def test_a_cronjobs_run_is_named_with_its_cronjob() -> None:
    cron = obj("batch/v1", "CronJob", "nightly-eval", {})
    job = _job("nightly-eval-29000000", owner=cron, backoffLimit=0)
    (line,) = _flagged(cron, job, *_pods(job))
    assert "CronJob nightly-eval runs again only at its next schedule" in line


@pytest.mark.parametrize(
    ("case", "make_objects"),
    [
        (
            "the Job has finished",
            lambda j: [{**j, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}, *_pods(j)],
        ),
        ("its pod is on a CPU node", lambda j: [j, *_pods(j, node_name="cpu-1")]),
        ("its pod has finished", lambda j: [j, *_pods(j, phase="Succeeded")]),
        ("its pod uses no GPU", lambda j: [j, pod("cpu", pod_spec(container()), owner=j)]),
    ],
)
def test_what_the_drain_does_not_touch_is_not_flagged(case: str, make_objects: Any) -> None:
    assert _flagged(*make_objects(_job(backoffLimit=0))) == [], case


def test_a_node_already_migrated_is_not_drained_again() -> None:
    migrated = gpu_node(
        "gpu-2", **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    )
    migrated["status"]["allocatable"].pop(GPU)
    job = _job(backoffLimit=0)
    assert not findings(make(migrated, job, *_pods(job, node_name="gpu-2")), "job-fails-on-eviction")


# Volcano Jobs (volcano.sh/volcano v1.10.0 pkg/controllers/job): the policies' first match on PodFailed
# (exit code 143/137: the kubelet fails a deleted pod whose container stopped on SIGTERM) or PodEvicted.
def _volcano(
    policies: list[dict[str, Any]] | None = None,
    task_policies: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    tasks = [{"name": "worker", "replicas": 2, "template": {"spec": SHELL}, "policies": task_policies or []}]
    tasks.append({"name": "ps", "replicas": 1, "template": {"spec": SHELL}})
    job = obj("batch.volcano.sh/v1alpha1", "Job", "mpi", {"tasks": tasks, "policies": policies or [], **spec})
    job["status"] = status or {"state": {"phase": "Running"}}
    return job


def _labelled(pods: list[dict[str, Any]], **labels: str) -> list[dict[str, Any]]:
    for p in pods:
        p["metadata"]["labels"] = dict(labels)
    return pods


def _volcano_flagged(job: dict[str, Any], task: str = "worker") -> list[str]:
    return _flagged(job, *_labelled(_pods(job), **{"volcano.sh/task-spec": task}))


@pytest.mark.parametrize(
    ("case", "job", "flagged"),
    [
        ("no policy: SyncJob recreates the pod", _volcano(), None),
        ("AbortJob on PodEvicted", _volcano([{"event": "PodEvicted", "action": "AbortJob"}]), "aborts it"),
        ("TerminateJob on any event", _volcano([{"events": ["*"], "action": "TerminateJob"}]), "terminates it"),
        ("CompleteJob on exit code 143", _volcano([{"exitCode": 143, "action": "CompleteJob"}]), "completes it"),
        ("CompleteJob on exit code 1 only", _volcano([{"exitCode": 1, "action": "CompleteJob"}]), None),
        (
            "the task's policy on both events comes before the job's",
            _volcano(
                [{"events": ["*"], "action": "TerminateJob"}],
                [{"events": ["PodEvicted", "PodFailed"], "action": "RestartTask"}],
            ),
            None,
        ),
        (
            "the task's policy covers PodEvicted only: PodFailed reaches the job's",
            _volcano([{"events": ["*"], "action": "TerminateJob"}], [{"event": "PodEvicted", "action": "RestartTask"}]),
            "its policy on PodFailed terminates it",
        ),
        (
            "RestartJob with its last retry",
            _volcano([{"event": "PodEvicted", "action": "RestartJob"}], maxRetry=3, status={"retryCount": 2}),
            "2 of maxRetry 3",
        ),
        (
            "RestartJob, maxRetry unset (3)",
            _volcano([{"event": "PodEvicted", "action": "RestartJob"}], status={"retryCount": 2}),
            "2 of maxRetry 3",
        ),
        ("RestartJob with retries left", _volcano([{"event": "PodEvicted", "action": "RestartJob"}], maxRetry=5), None),
        (
            "the job has ended",
            _volcano([{"event": "PodEvicted", "action": "AbortJob"}], status={"state": {"phase": "Completed"}}),
            None,
        ),
    ],
)
def test_a_volcano_job_is_flagged_when_its_policy_ends_it_on_an_eviction(
    case: str, job: dict[str, Any], flagged: str | None
) -> None:
    lines = _volcano_flagged(job)
    assert bool(lines) is bool(flagged), case
    if flagged:
        assert lines[0].startswith("batch.volcano.sh/Job ml/mpi:") and flagged in lines[0], case


def test_a_volcano_task_policy_applies_to_that_tasks_pods_only() -> None:
    job = _volcano()
    job["spec"]["tasks"][1]["policies"] = [{"event": "PodEvicted", "action": "AbortJob"}]
    assert _volcano_flagged(job, task="worker") == []
    assert "aborts it" in _volcano_flagged(job, task="ps")[0]


# Kubeflow training operator v1: a replica with restartPolicy Never fails its job on a failed pod.
def _kubeflow(kind: str, replicas: dict[str, dict[str, Any]], **spec: Any) -> dict[str, Any]:
    field = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}[kind]
    specs = {rt: {"replicas": 1, "template": {"spec": SHELL}, **extra} for rt, extra in replicas.items()}
    job = obj("kubeflow.org/v1", kind, "bert", {field: specs, **spec})
    job["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    return job


@pytest.mark.parametrize(
    ("case", "job", "replica", "flagged"),
    [
        ("a PyTorchJob's default, OnFailure: restarted", _kubeflow("PyTorchJob", {"Worker": {}}), "worker", None),
        (
            "a PyTorchJob worker with restartPolicy Never",
            _kubeflow("PyTorchJob", {"Master": {}, "Worker": {"restartPolicy": "Never"}}),
            "worker",
            "worker replicas' restartPolicy is Never",
        ),
        (
            "the master restarts even so, when the evicted pod is the master",
            _kubeflow("PyTorchJob", {"Master": {}, "Worker": {"restartPolicy": "Never"}}),
            "master",
            None,
        ),
        ("a TFJob's default, Never", _kubeflow("TFJob", {"Worker": {}}), "worker", "restartPolicy is Never"),
        ("ExitCode: 143 is retryable", _kubeflow("TFJob", {"Worker": {"restartPolicy": "ExitCode"}}), "worker", None),
        ("a TFJob with dynamic workers", _kubeflow("TFJob", {"Worker": {}}, enableDynamicWorker=True), "worker", None),
        (
            "runPolicy.backoffLimit 0, whatever the restart policy",
            _kubeflow("PyTorchJob", {"Worker": {}}, runPolicy={"backoffLimit": 0}),
            "worker",
            "runPolicy.backoffLimit 0",
        ),
    ],
)
def test_a_kubeflow_job_is_flagged_when_an_evicted_pod_fails_it(
    case: str, job: dict[str, Any], replica: str, flagged: str | None
) -> None:
    lines = _flagged(job, *_labelled(_pods(job), **{"training.kubeflow.org/replica-type": replica}))
    assert bool(lines) is bool(flagged), case
    if flagged:
        assert lines[0].startswith(f"{job['kind']} ml/bert:") and flagged in lines[0], case


def test_a_kubeflow_job_that_has_succeeded_is_not_flagged() -> None:
    job = _kubeflow("TFJob", {"Worker": {}})
    job["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    assert _flagged(job, *_labelled(_pods(job), **{"training.kubeflow.org/replica-type": "worker"})) == []


# The Kubeflow Spark operator (kubeflow/spark-operator v2.3.0): the driver pod's controller is the
# SparkApplication; a driver gone or Failed makes it FAILING (internal/controller/sparkapplication/controller.go
# updateDriverState), then FAILED unless pkg/util/sparkapplication.go ShouldRetry says retry: restartPolicy Always,
# or OnFailure with onFailureRetries set and not used up. Its restartPolicy.type defaults to Never (defaults.go).
def _spark(restart: dict[str, Any] | None = None, state: str = "RUNNING", attempts: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": {"gpu": {"name": GPU, "quantity": 1}}, "executor": {"instances": 2}}
    if restart is not None:
        spec["restartPolicy"] = restart
    app = obj("sparkoperator.k8s.io/v1beta2", "SparkApplication", "etl", spec)
    app["status"] = {"applicationState": {"state": state}, "executionAttempts": attempts}
    return app


def _spark_pods(app: dict[str, Any]) -> list[dict[str, Any]]:
    (driver,) = _labelled([pod("etl-driver", SHELL, owner=app)], **{"spark-role": "driver"})
    executors = _labelled([pod(f"etl-exec-{i}", SHELL, owner=driver) for i in (1, 2)], **{"spark-role": "executor"})
    return [driver, *executors]


@pytest.mark.parametrize(
    ("case", "app", "flagged"),
    [
        ("the default, Never", _spark(), "restartPolicy Never"),
        ("OnFailure without onFailureRetries does not retry", _spark({"type": "OnFailure"}), "onFailureRetries"),
        ("OnFailure with retries left", _spark({"type": "OnFailure", "onFailureRetries": 3}, attempts=1), None),
        ("OnFailure, retries used up", _spark({"type": "OnFailure", "onFailureRetries": 1}, attempts=2), "1 used"),
        ("Always resubmits it", _spark({"type": "Always"}), None),
        ("a completed application", _spark(state="COMPLETED"), None),
    ],
)
def test_a_spark_application_is_flagged_when_evicting_its_driver_fails_it(
    case: str, app: dict[str, Any], flagged: str | None
) -> None:
    lines = _flagged(app, *_spark_pods(app))
    assert bool(lines) is bool(flagged), case
    if flagged:
        assert lines[0].startswith("SparkApplication ml/etl:") and flagged in lines[0], case


def test_a_spark_application_whose_driver_is_elsewhere_is_not_flagged_for_its_executors() -> None:
    app = _spark()
    driver, *executors = _spark_pods(app)
    driver["spec"]["nodeName"] = "cpu-1"  # Spark reschedules lost executors; only the driver's loss ends the run
    assert _flagged(app, driver, *executors) == []


# Argo Workflows (argo-workflows v3.6.4): a step's pod, controlled by its Workflow, is gone after an eviction; the
# controller marks the step Error "pod deleted" (workflow/controller/operator.go podReconciliation) or Failed, and
# retries it only under a retryStrategy whose policy covers that (RetryPolicyActual: OnFailure by default, which
# does not retry an Error). A template's retryStrategy wins over spec.retryStrategy (operator.go retryStrategy).
def _argo(phase: str = "Running", gpu_retry: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    train: dict[str, Any] = {"name": "train", "container": {"image": "train", "resources": {"limits": {GPU: 1}}}}
    if gpu_retry is not None:
        train["retryStrategy"] = gpu_retry
    cpu = {"name": "prep", "container": {"image": "prep"}}
    wf = obj("argoproj.io/v1alpha1", "Workflow", "pipeline", {"entrypoint": "train", "templates": [cpu, train], **spec})
    wf["status"] = {"phase": phase}
    return wf


@pytest.mark.parametrize(
    ("case", "wf", "flagged"),
    [
        ("no retryStrategy", _argo(), "train"),
        ("the default policy, OnFailure, does not retry a deleted pod", _argo(gpu_retry={"limit": 3}), "OnFailure"),
        ("Always retries it", _argo(gpu_retry={"limit": 3, "retryPolicy": "Always"}), None),
        ("OnError retries it", _argo(gpu_retry={"limit": "2", "retryPolicy": "OnError"}), None),
        ("a workflow-wide Always", _argo(retryStrategy={"retryPolicy": "Always"}), None),
        ("Always with limit 0 retries nothing", _argo(gpu_retry={"limit": 0, "retryPolicy": "Always"}), "limit 0"),
        (
            "the template's own strategy wins over the workflow's",
            _argo(gpu_retry={"retryPolicy": "OnFailure"}, retryStrategy={"retryPolicy": "Always"}),
            "OnFailure",
        ),
        ("templateDefaults", _argo(templateDefaults={"retryStrategy": {"retryPolicy": "Always"}}), None),
        ("a finished workflow", _argo(phase="Succeeded"), None),
    ],
)
def test_an_argo_workflow_is_flagged_when_an_evicted_step_is_not_retried(
    case: str, wf: dict[str, Any], flagged: str | None
) -> None:
    lines = _flagged(wf, pod("pipeline-train-123", SHELL, owner=wf))
    assert bool(lines) is bool(flagged), case
    if flagged:
        assert lines[0].startswith("Workflow ml/pipeline:") and flagged in lines[0], case


def test_an_argo_workflow_run_from_a_workflow_template_is_read_through_its_reference() -> None:
    tmpl = obj("argoproj.io/v1alpha1", "WorkflowTemplate", "finetune", _argo()["spec"])
    wf = obj("argoproj.io/v1alpha1", "Workflow", "pipeline", {"workflowTemplateRef": {"name": "finetune"}})
    wf["status"] = {"phase": "Running"}
    lines = _flagged(tmpl, wf, pod("pipeline-train-123", SHELL, owner=wf))
    assert lines and "train" in lines[0]
    tmpl["spec"]["retryStrategy"] = {"retryPolicy": "Always"}
    assert _flagged(tmpl, wf, pod("pipeline-train-123", SHELL, owner=wf)) == []
