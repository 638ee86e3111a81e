"""Rules about jobs under the drain: an eviction is a pod failure that the job's controller counts.

batch/v1 Jobs (and the JobSets and CronJobs over them), Volcano Jobs, the Kubeflow training operator's v1 jobs,
SparkApplications, Argo Workflows and Tekton TaskRuns each decide what a failed or deleted pod does to the job in
their own way; each is read here as its controller reads it. Which pods the drain evicts is the checks' one answer
(checks/context.py `pods_the_drain_evicts`).

Facts each rule rests on are cited beside it (primary sources); docs/rules.md is generated from the docstrings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dra_migrate.checks.context import CheckContext, pods_the_drain_evicts
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.cluster.podmeta import controller_of
from dra_migrate.cluster.state import uses_devices
from dra_migrate.inventory.dependents import as_list, as_map
from dra_migrate.inventory.fanout import state_lookup

WARNING = Severity.WARNING

# The eviction API marks the pod DisruptionTarget=True (reason EvictionByEvictionAPI) before deleting it
# (k8s.io/kubernetes@v1.37.2 pkg/registry/core/pod/storage/eviction.go L318-348). The Job controller counts a
# deleted or failed pod as a failure (pkg/controller/job/job_controller.go L2133 `isPodFailed`) unless its
# podFailurePolicy's first matching rule says Ignore (pod_failure_policy.go L33-80: rules in order, an
# onExitCodes rule matched on the terminated containers' codes), and fails the Job once failures exceed
# backoffLimit (job_controller.go L1070: `failed > backoffLimit`; default 6, batch/v1 JobSpec).
DEFAULT_BACKOFF_LIMIT = 6
# What a container stopped by the eviction reports: 143 when its process ends on the kubelet's SIGTERM (128+15),
# 137 when it is killed after the grace period (128+9). A process that handles SIGTERM may exit otherwise.
EVICTED_EXIT_CODES = (143, 137)


# Volcano (volcano.sh/volcano v1.10.0 pkg/controllers/job): a pod the drain evicts reaches the job
# controller twice. The kubelet gives a deleted pod a terminal phase, Failed when a container stopped non-zero
# (k8s.io/kubernetes@v1.37.2 pkg/kubelet/kubelet_pods.go `getPhase`, podIsTerminal), which is a `PodFailed`
# event carrying the first container's exit code (job_controller_handler.go `updatePod`); its deletion is a
# `PodEvicted` event (`deletePod`). Each takes the action of the first matching policy, the pod's task's
# policies before the job's, an event list (or "*") before an exit code (job_controller_util.go
# `applyPolicies`); none matching is SyncJob, which recreates the pod. From Running (state/running.go):
# AbortJob, TerminateJob and CompleteJob end the job; RestartJob kills every pod and counts a retry, failing
# the job once retryCount reaches maxRetry (state/restarting.go; default 3, webhooks/admission/jobs/mutate).
VOLCANO_JOB = "batch.volcano.sh/Job"
VOLCANO_TASK_LABEL = "volcano.sh/task-spec"  # set on each pod it makes (job_controller_util.go `createJobPod`)
VOLCANO_DEFAULT_MAX_RETRY = 3
_VOLCANO_ENDS = {
    "AbortJob": "aborts it (it stays Aborted until resumed)",
    "TerminateJob": "terminates it",
    "CompleteJob": "completes it before its work is done",
}
_VOLCANO_DONE = frozenset({"Completing", "Completed", "Aborting", "Aborted", "Terminating", "Terminated", "Failed"})

# The Kubeflow training operator v1 (github.com/kubeflow/training-operator@v1.9.0): the evicted pod turns
# Failed (above) before it is gone. A replica whose restartPolicy is Never fails its job on a failed pod
# (pkg/controller.v1/pytorch/pytorchjob_controller.go `UpdateJobStatus`, and each framework's beside it;
# a TFJob's workers not with enableDynamicWorker); OnFailure, Always and ExitCode restart it (143 and 137 are
# retryable exit codes, pkg/util/train/train_util.go). runPolicy.backoffLimit 0 fails the job at its first new
# failure whatever the restart policy (pkg/controller.v1/common/job.go: `previousRetry+1 > backoffLimit`).
# Each kind's replica specs, and its restartPolicy default (pkg/apis/kubeflow.org/v1/*_types.go).
KUBEFLOW_JOBS = {
    "PyTorchJob": ("pytorchReplicaSpecs", "OnFailure"),
    "TFJob": ("tfReplicaSpecs", "Never"),
    "XGBoostJob": ("xgbReplicaSpecs", "Never"),
    "PaddleJob": ("paddleReplicaSpecs", "OnFailure"),
    "JAXJob": ("jaxReplicaSpecs", "Never"),
}
KUBEFLOW_REPLICA_LABEL = "training.kubeflow.org/replica-type"  # the replica type, lower-cased

# The Kubeflow Spark operator (github.com/kubeflow/spark-operator/v2@v2.3.0): the driver pod's controller is the
# SparkApplication (internal/webhook/sparkpod_defaulter.go addOwnerReference), each executor's is the driver pod,
# and Spark replaces a lost executor. A driver pod gone or Failed turns the application FAILING
# (internal/controller/sparkapplication/controller.go updateDriverState), then FAILED for good unless
# pkg/util/sparkapplication.go `ShouldRetry` resubmits it: restartPolicy Always, or OnFailure with
# onFailureRetries set and executionAttempts <= it. restartPolicy.type defaults to Never (api/v1beta2/defaults.go).
SPARK_APP = "sparkoperator.k8s.io/SparkApplication"
SPARK_ROLE_LABEL = "spark-role"  # "driver" / "executor" (pkg/common/spark.go LabelSparkRole)
_SPARK_DONE = frozenset({"COMPLETED", "FAILED", "SUBMISSION_FAILED", "SUCCEEDING", "FAILING"})

# Argo Workflows (github.com/argoproj/argo-workflows/v3@v3.6.4): each step's pod is controlled by its Workflow
# (workflow/controller/workflowpod.go). Once the drain deletes it the controller marks the step Error "pod deleted"
# (workflow/controller/operator.go podReconciliation), or Failed where it saw the pod fail first, and retries it only
# under a retryStrategy that retries both: the template's own, else the workflow's (operator.go `retryStrategy`;
# `templateDefaults` is merged into each template), whose policy is OnFailure when unset without an expression
# (pkg/apis/workflow/v1alpha1/workflow_types.go `RetryPolicyActual`: OnFailure does not retry an Error). A step
# that is not retried fails the Workflow unless its caller continues on failure.
ARGO_WORKFLOW = "argoproj.io/Workflow"
_ARGO_RETRIES_DELETED = frozenset({"Always", "OnError"})
_ARGO_DONE = frozenset({"Succeeded", "Failed", "Error"})

# Tekton (github.com/tektoncd/pipeline v1.15.0): a TaskRun's one pod is controlled by it (pkg/pod/pod.go). The evicted
# pod turns Failed before it is gone (above), and the TaskRun reconciler then marks the TaskRun failed
# (pkg/pod/status.go `DidTaskRunFail`: phase Failed, or a step ended non-zero); it makes a new pod only when it finds
# none at all (pkg/reconciler/taskrun/taskrun.go `reconcile`: "this will result in the Pod being created"), so a
# drain fails it unless the controller missed the pod's Failed phase. A failed TaskRun runs again while
# len(status.retriesStatus) < spec.retries (taskrun_types.go `IsRetriable`; `retryTaskRun` archives the status and
# makes a new pod); spec.retries is 0 unless set, and a PipelineRun sets it from its pipeline task's `retries`
# (pkg/reconciler/pipelinerun/pipelinerun.go `createTaskRun`, which makes the PipelineRun its controller). A failed
# TaskRun fails its PipelineRun unless the task has onError: continue, which it writes on the TaskRun as the
# annotation below (pipelinerun.go; pkg/pod/status.go marks the TaskRun FailureIgnored).
TEKTON_TASKRUN = "tekton.dev/TaskRun"
TEKTON_ON_ERROR = "pipeline.tekton.dev/pipeline-task-on-error"


@dataclass(frozen=True)
class JobAtRisk:
    job: ObjectRef
    pools: tuple[str, ...]
    why: str


def _meta(o: Mapping[str, Any]) -> Mapping[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _finished(job: Mapping[str, Any], ended: tuple[str, ...] = ("Complete", "Failed")) -> bool:
    """Whether a condition of one of the `ended` types is true (a Kubeflow job's are Succeeded and Failed)."""
    return any(
        isinstance(c, Mapping) and c.get("type") in ended and c.get("status") == "True"
        for c in as_list(as_map(job.get("status")).get("conditions"))
    )


def _rule_matches_eviction(rule_: Mapping[str, Any]) -> bool:
    codes = rule_.get("onExitCodes")
    if isinstance(codes, Mapping):
        values = as_list(codes.get("values"))
        if codes.get("operator") == "In":
            return any(code in values for code in EVICTED_EXIT_CODES)
        return codes.get("operator") == "NotIn" and any(code not in values for code in EVICTED_EXIT_CODES)
    return any(
        isinstance(p, Mapping) and p.get("type") == "DisruptionTarget" and p.get("status", "True") == "True"
        for p in as_list(rule_.get("onPodConditions"))
    )


def eviction_action(job_spec: Mapping[str, Any]) -> str:
    """What the Job's podFailurePolicy does with a pod the drain evicted: the action of its first rule that
    matches (Ignore, FailJob, FailIndex, Count), "Count" when none does or there is no policy."""
    for r in as_list(as_map(job_spec.get("podFailurePolicy")).get("rules")):
        if isinstance(r, Mapping) and _rule_matches_eviction(r):
            return str(r.get("action") or "Count")
    return "Count"


def _verdict(job: Mapping[str, Any], evicted: int) -> str | None:
    """Why evicting `evicted` of the Job's pods fails it, or None when it survives them."""
    spec, status = as_map(job.get("spec")), as_map(job.get("status"))
    action = eviction_action(spec)
    if action == "Ignore":
        return None
    if action == "FailJob":
        return "its podFailurePolicy fails it at the first eviction"
    per_index = _int(spec.get("backoffLimitPerIndex"))
    if per_index is not None:
        # Per-index failure counts live on the pods' annotations, which a snapshot does not keep: only a
        # limit of 0 (or a FailIndex rule) is certain to fail the evicted pods' indexes, and with them the Job.
        if action == "FailIndex" or per_index == 0:
            return f"backoffLimitPerIndex {per_index}: each evicted pod's index fails, and with it the Job"
        return None
    limit = _int(spec.get("backoffLimit"))
    limit = DEFAULT_BACKOFF_LIMIT if limit is None else limit
    failed = _int(status.get("failed")) or 0
    if failed + evicted <= limit:
        return None
    return f"backoffLimit {limit}, {failed} failure(s) already, {evicted} pod(s) to evict"


def _owner_fate(job: Mapping[str, Any], jobsets: Mapping[str, Mapping[str, Any]]) -> str | None:
    """None when the Job's owner recreates it (a JobSet with restarts left); otherwise what else its failure
    does, to be added to the reason ("" when nothing: a Job of its own)."""
    owner = controller_of(job)
    if owner is None:
        return ""
    if owner.get("kind") == "JobSet":
        js = jobsets.get(str(owner.get("uid")))
        if js is None:
            return ""
        policy = as_map(js.get("spec")).get("failurePolicy")
        # A failed child Job restarts the whole JobSet while `restarts` < failurePolicy.maxRestarts (default 0);
        # without a failurePolicy the JobSet fails at once (sigs.k8s.io/jobset api/jobset/v1alpha2
        # jobset_types.go FailurePolicy; "Failure Policy" in the JobSet documentation).
        max_restarts = _int(as_map(policy).get("maxRestarts")) or 0
        restarts = _int(as_map(js.get("status")).get("restarts")) or 0
        if isinstance(policy, Mapping) and restarts < max_restarts:
            return None
        return f"; JobSet {_meta(js).get('name')} fails with it ({restarts} of {max_restarts} restarts used)"
    if owner.get("kind") == "CronJob":
        return f"; CronJob {owner.get('name')} runs again only at its next schedule"
    return ""


def _pods_to_evict(ctx: CheckContext) -> dict[str, list[tuple[str, Mapping[str, Any]]]]:
    """The GPU pods the drain will evict from nodes still to migrate, with their pools, by their controller's
    uid (controllers of the kinds read here only)."""
    # a Volcano Job's pods name kind Job too; the uid tells them apart
    kinds = {"Job", *KUBEFLOW_JOBS, "SparkApplication", "Workflow", "TaskRun"}
    evicted: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for pool, pod in pods_the_drain_evicts(ctx):
        owner = controller_of(pod)
        if owner is not None and owner.get("kind") in kinds and uses_devices(pod):
            evicted.setdefault(str(owner.get("uid")), []).append((pool, pod))
    return evicted


def _at_risk(kind: str, job: Mapping[str, Any], pods: list[tuple[str, Mapping[str, Any]]], why: str) -> JobAtRisk:
    return JobAtRisk(ObjectRef.of(kind, job), tuple(sorted({pool for pool, _ in pods})), why)


def jobs_the_drain_fails(ctx: CheckContext) -> list[JobAtRisk]:
    """Running jobs that evicting their GPU pods on nodes still to migrate would fail (or end) for good."""
    evicted = _pods_to_evict(ctx)
    if not evicted:
        return []
    jobsets = {str(_meta(js).get("uid")): js for js in ctx.state.of("jobset.x-k8s.io/JobSet")}
    found = []
    for job in ctx.state.of("batch/Job"):
        pods = evicted.get(str(_meta(job).get("uid")))
        if not pods or _finished(job):
            continue
        why = _verdict(job, len(pods))
        fate = _owner_fate(job, jobsets) if why is not None else None
        if why is not None and fate is not None:
            found.append(_at_risk("Job", job, pods, why + fate))
    for job in ctx.state.of(VOLCANO_JOB):
        pods = evicted.get(str(_meta(job).get("uid")))
        why = volcano_verdict(job, [p for _, p in pods]) if pods else None
        if pods and why is not None:
            found.append(_at_risk(VOLCANO_JOB, job, pods, why))
    for kind in KUBEFLOW_JOBS:
        for job in ctx.state.of(f"kubeflow.org/{kind}"):
            pods = evicted.get(str(_meta(job).get("uid")))
            why = kubeflow_verdict(kind, job, [p for _, p in pods]) if pods else None
            if pods and why is not None:
                found.append(_at_risk(kind, job, pods, why))
    for app in ctx.state.of(SPARK_APP):
        pods = evicted.get(str(_meta(app).get("uid")))
        why = spark_verdict(app, [p for _, p in pods]) if pods else None
        if pods and why is not None:
            found.append(_at_risk("SparkApplication", app, pods, why))
    for wf in ctx.state.of(ARGO_WORKFLOW):
        pods = evicted.get(str(_meta(wf).get("uid")))
        why = argo_verdict(ctx, wf) if pods else None
        if pods and why is not None:
            found.append(_at_risk("Workflow", wf, pods, why))
    for run in ctx.state.of(TEKTON_TASKRUN):
        pods = evicted.get(str(_meta(run).get("uid")))
        why = tekton_verdict(run) if pods else None
        if pods and why is not None:
            found.append(_at_risk("TaskRun", run, pods, why))
    return sorted(found, key=lambda j: j.job)


def tekton_verdict(run: Mapping[str, Any]) -> str | None:
    """Why evicting a running TaskRun's pod fails it for good (and what that does to its PipelineRun), or None when
    it has a retry left or has finished (see TEKTON_TASKRUN)."""
    succeeded = [
        c for c in as_list(as_map(run.get("status")).get("conditions")) if as_map(c).get("type") == "Succeeded"
    ]
    if any(as_map(c).get("status") in ("True", "False") for c in succeeded):
        return None  # done; a failed one being retried is Unknown (ToBeRetried)
    retries = max(_int(as_map(run.get("spec")).get("retries")) or 0, 0)
    used = len(as_list(as_map(run.get("status")).get("retriesStatus")))
    if used < retries:
        return None
    why = f"retries {retries}, {used} used" if retries else "no retries"
    why += ": its evicted pod fails it"
    owner = controller_of(run)
    if owner is not None and owner.get("kind") == "PipelineRun":
        if as_map(_meta(run).get("annotations")).get(TEKTON_ON_ERROR) == "continue":
            return f"{why}; PipelineRun {owner.get('name')} goes on without it (onError: continue)"
        return f"{why}, and PipelineRun {owner.get('name')} with it"
    return why


def _argo_spec(ctx: CheckContext, wf: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """(the spec its templates come from, the Workflow's own spec): a Workflow run by `workflowTemplateRef` takes
    its templates, and what it does not set itself, from the (Cluster)WorkflowTemplate it names."""
    spec = as_map(wf.get("spec"))
    ref = as_map(spec.get("workflowTemplateRef"))
    if not ref.get("name"):
        return spec, spec
    cluster = bool(ref.get("clusterScope"))
    key = "argoproj.io/ClusterWorkflowTemplate" if cluster else "argoproj.io/WorkflowTemplate"
    ns = "" if cluster else str(_meta(wf).get("namespace") or "")
    # the inventory's index of the WorkflowTemplates read (built once per state), not a scan per Workflow
    return as_map(state_lookup(ctx.state)(key, ns, str(ref.get("name")))), spec


def _asks_for_devices(template: Mapping[str, Any]) -> bool:
    """Whether an Argo template's pod asks for an nvidia.com/ resource: in its containers or its podSpecPatch."""
    if "nvidia.com/" in str(template.get("podSpecPatch") or ""):
        return True
    found = [template.get("container"), template.get("script"), *as_list(template.get("sidecars"))]
    found += [
        *as_list(template.get("initContainers")),
        *as_list(as_map(template.get("containerSet")).get("containers")),
    ]
    return any(uses_devices({"spec": {"containers": [c]}}) for c in found if isinstance(c, Mapping))


def argo_verdict(ctx: CheckContext, wf: Mapping[str, Any]) -> str | None:
    """Why evicting a running Workflow's GPU step pod may fail it (see ARGO_WORKFLOW), naming the first GPU template
    whose retryStrategy does not retry a deleted pod; None when each GPU template's does."""
    if as_map(wf.get("status")).get("phase") in _ARGO_DONE:
        return None
    source, own = _argo_spec(ctx, wf)
    wide = own.get("retryStrategy") or source.get("retryStrategy")
    defaults = as_map(own.get("templateDefaults") or source.get("templateDefaults")).get("retryStrategy")
    gpu = [t for t in as_list(source.get("templates")) if isinstance(t, Mapping) and _asks_for_devices(t)]
    if not gpu:
        gpu = [{"name": "(its steps, not read)"}]
    for t in gpu:
        retry = as_map(t.get("retryStrategy") or defaults or wide)
        policy = retry.get("retryPolicy") or ("Always" if retry.get("expression") else "OnFailure")
        if not retry:
            return (
                f"GPU template {t.get('name')} has no retryStrategy: an evicted step fails it unless its caller "
                "continues on failure"
            )
        if policy not in _ARGO_RETRIES_DELETED:
            return (
                f"GPU template {t.get('name')} retries {policy}, not a deleted pod (an Error): an evicted step fails it"
            )
        if str(retry.get("limit")).strip() == "0":  # an IntOrString; unset is no limit
            return f"GPU template {t.get('name')} has retryStrategy.limit 0: an evicted step fails it"
    return None


def spark_verdict(app: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> str | None:
    """Why evicting these pods (those it controls: its driver) of a running SparkApplication fails it for good,
    or None when its operator resubmits it (see SPARK_APP)."""
    status = as_map(app.get("status"))
    if as_map(status.get("applicationState")).get("state") in _SPARK_DONE:
        return None
    if not any(as_map(_meta(p).get("labels")).get(SPARK_ROLE_LABEL) == "driver" for p in pods):
        return None
    policy = as_map(as_map(app.get("spec")).get("restartPolicy"))
    kind = policy.get("type") or "Never"
    if kind == "Never":
        return "restartPolicy Never: evicting its driver fails the application"
    if kind != "OnFailure":
        return None
    retries = _int(policy.get("onFailureRetries"))
    if retries is None:
        return "restartPolicy OnFailure without onFailureRetries: evicting its driver fails the application"
    attempts = _int(status.get("executionAttempts")) or 0
    if attempts <= retries:
        return None
    return f"onFailureRetries {retries}, {max(attempts - 1, 0)} used: evicting its driver fails the application"


def _volcano_events(policy: Mapping[str, Any]) -> list[Any]:
    events = list(as_list(policy.get("events")))
    return [*events, policy["event"]] if policy.get("event") else events


def volcano_action(spec: Mapping[str, Any], task: str, event: str, exit_code: int = 0) -> str:
    """The action a Volcano Job's policies take on `event` from a pod of `task` (see VOLCANO_JOB)."""
    task_policies: list[Any] = []
    for t in as_list(spec.get("tasks")):
        if isinstance(t, Mapping) and t.get("name") == task:
            task_policies = as_list(t.get("policies"))
            break
    for policy in [*task_policies, *as_list(spec.get("policies"))]:
        if not isinstance(policy, Mapping):
            continue
        events = _volcano_events(policy)
        if events and (event in events or "*" in events):
            return str(policy.get("action") or "SyncJob")
        if exit_code and _int(policy.get("exitCode")) == exit_code:
            return str(policy.get("action") or "SyncJob")
    return "SyncJob"


def volcano_verdict(job: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> str | None:
    """Why evicting these pods of a running Volcano Job ends it, or None when it goes on."""
    spec, status = as_map(job.get("spec")), as_map(job.get("status"))
    if as_map(status.get("state")).get("phase") in _VOLCANO_DONE:
        return None
    restarts = False
    for pod in pods:
        task = str(as_map(_meta(pod).get("labels")).get(VOLCANO_TASK_LABEL, ""))
        heard = [("PodFailed", code) for code in EVICTED_EXIT_CODES] + [("PodEvicted", 0)]
        for event, code in heard:
            action = volcano_action(spec, task, event, code)
            if action in _VOLCANO_ENDS:
                return f"its policy on {event} {_VOLCANO_ENDS[action]}"
            restarts = restarts or action == "RestartJob"
    if not restarts:
        return None
    limit = _int(spec.get("maxRetry"))
    limit = VOLCANO_DEFAULT_MAX_RETRY if limit is None else limit
    used = _int(status.get("retryCount")) or 0
    if used + 1 < limit:
        return None
    return f"its policy restarts it on an eviction, and {used} of maxRetry {limit} retries are used"


def kubeflow_verdict(kind: str, job: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> str | None:
    """Why evicting these pods of a running Kubeflow v1 job fails it, or None when its operator restarts them."""
    spec = as_map(job.get("spec"))
    if _finished(job, ("Succeeded", "Failed")):
        return None
    if _int(as_map(spec.get("runPolicy")).get("backoffLimit")) == 0:
        return "runPolicy.backoffLimit 0: the first evicted pod fails it"
    field, default = KUBEFLOW_JOBS[kind]
    replicas = {str(k).lower(): as_map(v) for k, v in as_map(spec.get(field)).items()}
    for pod in pods:
        replica_type = str(as_map(_meta(pod).get("labels")).get(KUBEFLOW_REPLICA_LABEL, "")).lower()
        replica = replicas.get(replica_type)
        if replica is None:
            continue
        if kind == "TFJob" and replica_type == "worker" and spec.get("enableDynamicWorker") is True:
            continue
        if (replica.get("restartPolicy") or default) == "Never":
            return f"its {replica_type} replicas' restartPolicy is Never: an evicted pod fails it"
    return None


@rule(
    "job-fails-on-eviction",
    WARNING,
    summary="jobs the drain would fail or end for good: their controller counts an eviction as a failure",
)
def job_fails_on_eviction(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a running job has GPU pods on nodes still to migrate, and evicting them would
    fail or end it. A batch/v1 Job: its podFailurePolicy does not ignore the eviction (first matching rule on
    the `DisruptionTarget` condition or the exit codes 143/137), and its failures so far plus the pods to evict
    exceed `backoffLimit` (default 6; `backoffLimitPerIndex` 0 fails each evicted index), or a rule fails it
    outright; a child of a JobSet only when the JobSet has no restart left. A Volcano Job: the first policy
    matching `PodFailed` (exit code 143/137) or `PodEvicted`, the pod's task's before the job's, aborts,
    terminates or completes it, or restarts it with no retry left (`maxRetry`, default 3). A Kubeflow v1 job
    (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob): the evicted pod's replica has restartPolicy Never (its
    kind's default where unset), or `runPolicy.backoffLimit` is 0. A SparkApplication: its driver pod is evicted
    and its `restartPolicy` is Never (the default), OnFailure without `onFailureRetries`, or OnFailure with its
    retries used (`executionAttempts` past them); Spark replaces lost executors. An Argo Workflow: a template of it
    that asks for GPUs has no retryStrategy (its own, else `templateDefaults`', else the workflow's) that retries a
    deleted pod (`retryPolicy` Always or OnError; unset is OnFailure), or one with `limit` 0. A Tekton TaskRun: it
    has no retry left (`status.retriesStatus` has as many entries as `spec.retries`, which a PipelineRun sets from its
    pipeline task's `retries`; 0 when unset); the message names the PipelineRun that fails with it, or goes on
    without it (the task's `onError: continue`). Rests on: the
    eviction API sets `DisruptionTarget` (kubernetes `pkg/registry/core/pod/storage/eviction.go`) and the kubelet
    gives the deleted pod the phase Failed (`pkg/kubelet/kubelet_pods.go` `getPhase`); the Job controller counts
    evicted pods as failures and fails the Job past `backoffLimit` unless an Ignore rule matches
    (`pkg/controller/job/job_controller.go`, `pod_failure_policy.go`); JobSet `failurePolicy.maxRestarts`;
    Volcano `pkg/controllers/job` (`applyPolicies`, `state/running.go`, `state/restarting.go`); the Kubeflow
    training operator `pkg/controller.v1` (each framework's `UpdateJobStatus`, `common/job.go`); the Spark operator
    v2.3.0 `internal/controller/sparkapplication/controller.go` and `pkg/util/sparkapplication.go` `ShouldRetry`;
    argo-workflows v3.6.4 `workflow/controller/operator.go` (a deleted pod's step is an Error; `processNodeRetries`)
    and `RetryPolicyActual`; tektoncd/pipeline v1.15.0 `pkg/pod/status.go` (`DidTaskRunFail`),
    `pkg/reconciler/taskrun/taskrun.go` (`retryTaskRun`) and `TaskRun.IsRetriable`.
    """
    found = jobs_the_drain_fails(ctx)
    if not found:
        return
    shown = ", ".join(f"{j.job} ({j.why})" for j in found[:3])
    more = f", and {len(found) - 3} more" if len(found) > 3 else ""
    yield Finding(
        "job-fails-on-eviction",
        WARNING,
        f"{len(found)} running job(s) would fail or end for good when the drain evicts their GPU pods: {shown}{more}",
        "let them finish before their pool's wave (plan --order migrates it later, --exclude-pools leaves it "
        "out), or accept their failure in .dra-migrate-ignore.yaml; jobs made from now on survive a drain with a "
        "podFailurePolicy rule {action: Ignore, onPodConditions: [{type: DisruptionTarget}]} or a higher "
        "backoffLimit (batch/v1), a Volcano policy that restarts the task or pod on PodEvicted and PodFailed, a "
        "Kubeflow replica restartPolicy OnFailure or ExitCode, a SparkApplication restartPolicy OnFailure with "
        "onFailureRetries, an Argo GPU template's retryStrategy with retryPolicy Always or OnError, a Tekton "
        "pipeline task's retries (a TaskRun's spec.retries)",
        tuple(j.job for j in found),
        pools=tuple(sorted({p for j in found for p in j.pools})),
    )
