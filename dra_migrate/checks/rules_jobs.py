"""Rules about batch Jobs under the drain: an eviction is a pod failure that the Job counts.

Facts each rule rests on are cited beside it (primary sources); docs/rules.md is generated from the docstrings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dra_migrate.checks.context import CheckContext, still_to_migrate
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.cluster.podmeta import controller_of, drain_skips, is_finished
from dra_migrate.cluster.state import uses_devices

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


@dataclass(frozen=True)
class JobAtRisk:
    job: ObjectRef
    pools: tuple[str, ...]
    why: str


def _meta(o: Mapping[str, Any]) -> Mapping[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _finished(job: Mapping[str, Any]) -> bool:
    conditions = _dict(job.get("status")).get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in conditions
    )


def _rule_matches_eviction(rule_: Mapping[str, Any]) -> bool:
    codes = rule_.get("onExitCodes")
    if isinstance(codes, Mapping):
        listed = codes.get("values")
        values: list[Any] = listed if isinstance(listed, list) else []
        if codes.get("operator") == "In":
            return any(code in values for code in EVICTED_EXIT_CODES)
        return codes.get("operator") == "NotIn" and any(code not in values for code in EVICTED_EXIT_CODES)
    patterns = rule_.get("onPodConditions")
    return isinstance(patterns, list) and any(
        isinstance(p, Mapping) and p.get("type") == "DisruptionTarget" and p.get("status", "True") == "True"
        for p in patterns
    )


def eviction_action(job_spec: Mapping[str, Any]) -> str:
    """What the Job's podFailurePolicy does with a pod the drain evicted: the action of its first rule that
    matches (Ignore, FailJob, FailIndex, Count), "Count" when none does or there is no policy."""
    rules = _dict(job_spec.get("podFailurePolicy")).get("rules")
    for r in rules if isinstance(rules, list) else ():
        if isinstance(r, Mapping) and _rule_matches_eviction(r):
            return str(r.get("action") or "Count")
    return "Count"


def _verdict(job: Mapping[str, Any], evicted: int) -> str | None:
    """Why evicting `evicted` of the Job's pods fails it, or None when it survives them."""
    spec, status = _dict(job.get("spec")), _dict(job.get("status"))
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
        policy = _dict(js.get("spec")).get("failurePolicy")
        # A failed child Job restarts the whole JobSet while `restarts` < failurePolicy.maxRestarts (default 0);
        # without a failurePolicy the JobSet fails at once (sigs.k8s.io/jobset api/jobset/v1alpha2
        # jobset_types.go FailurePolicy; "Failure Policy" in the JobSet documentation).
        max_restarts = _int(_dict(policy).get("maxRestarts")) or 0
        restarts = _int(_dict(js.get("status")).get("restarts")) or 0
        if isinstance(policy, Mapping) and restarts < max_restarts:
            return None
        return f"; JobSet {_meta(js).get('name')} fails with it ({restarts} of {max_restarts} restarts used)"
    if owner.get("kind") == "CronJob":
        return f"; CronJob {owner.get('name')} runs again only at its next schedule"
    return ""


def jobs_the_drain_fails(ctx: CheckContext) -> list[JobAtRisk]:
    """Running Jobs that evicting their GPU pods on nodes still to migrate would fail for good."""
    pool_of = {n.name: n.pool for n in ctx.inventory.nodes if still_to_migrate(n)}
    evicted: dict[str, list[str]] = {}  # Job uid -> pools of its pods to evict
    for pod in ctx.state.of("Pod"):
        node = _dict(pod.get("spec")).get("nodeName")
        owner = controller_of(pod)
        if node not in pool_of or owner is None or owner.get("kind") != "Job" or not uses_devices(pod):
            continue
        if is_finished(pod) or drain_skips(pod) or _meta(pod).get("deletionTimestamp"):
            continue
        evicted.setdefault(str(owner.get("uid")), []).append(pool_of[node])
    if not evicted:
        return []
    jobsets = {str(_meta(js).get("uid")): js for js in ctx.state.of("jobset.x-k8s.io/JobSet")}
    found = []
    for job in ctx.state.of("batch/Job"):
        pools = evicted.get(str(_meta(job).get("uid")))
        if not pools or _finished(job):
            continue
        why = _verdict(job, len(pools))
        fate = _owner_fate(job, jobsets) if why is not None else None
        if why is not None and fate is not None:
            found.append(JobAtRisk(ObjectRef.of("Job", job), tuple(sorted(set(pools))), why + fate))
    return sorted(found, key=lambda j: j.job)


@rule(
    "job-fails-on-eviction",
    WARNING,
    summary="Jobs the drain would fail for good: an eviction counts against their backoffLimit",
)
def job_fails_on_eviction(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a running Job has GPU pods on nodes still to migrate, and evicting them would
    fail it: its podFailurePolicy does not ignore the eviction (first matching rule on the `DisruptionTarget`
    condition or the exit codes 143/137), and its failures so far plus the pods to evict exceed `backoffLimit`
    (default 6; `backoffLimitPerIndex` 0 fails each evicted index), or a rule fails it outright; a child of a
    JobSet only when the JobSet has no restart left. Rests on: the eviction API sets `DisruptionTarget`
    (kubernetes `pkg/registry/core/pod/storage/eviction.go`); the Job controller counts evicted pods as
    failures and fails the Job past `backoffLimit` unless an Ignore rule matches
    (`pkg/controller/job/job_controller.go`, `pod_failure_policy.go`); JobSet `failurePolicy.maxRestarts`.
    """
    found = jobs_the_drain_fails(ctx)
    if not found:
        return
    shown = ", ".join(f"{j.job.namespace}/{j.job.name} ({j.why})" for j in found[:3])
    more = f", and {len(found) - 3} more" if len(found) > 3 else ""
    yield Finding(
        "job-fails-on-eviction",
        WARNING,
        f"{len(found)} running Job(s) would fail for good when the drain evicts their GPU pods: {shown}{more}",
        "let them finish before their pool's wave (plan --order migrates it later, --exclude-pools leaves it "
        "out), or accept their failure in .dra-migrate-ignore.yaml; Jobs made from now on survive a drain with a "
        "podFailurePolicy rule {action: Ignore, onPodConditions: [{type: DisruptionTarget}]} or a higher "
        "backoffLimit",
        tuple(j.job for j in found),
        pools=tuple(sorted({p for j in found for p in j.pools})),
    )
