"""Drain, as `kubectl drain` does it but only through the Eviction API (part of `LiveOps`)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor

from dra_migrate.cluster.podmeta import do_not_interrupt_mark, drain_skips, is_finished, lost_if_evicted
from dra_migrate.cluster.state import uses_devices
from dra_migrate.errors import InputError
from dra_migrate.execute.contract import NEVER, Cancel, Change, StepFailed
from dra_migrate.execute.ops_base import (
    CANARY_LABEL,
    DRY_RUN,
    EVICTION_BACKOFF_CAP_S,
    EVICTION_WORKERS,
    PODS,
    POLL_GROWTH,
    OpsBase,
    _key,
    _meta,
    _uid,
)
from dra_migrate.inventory.placement import pdb_selects
from dra_migrate.kube import ApiError, Obj, path_of

log = logging.getLogger("dra_migrate.execute")


class DrainOps(OpsBase):
    def drain(
        self,
        node: str,
        scope: str,
        timeout_s: float,
        *,
        dry_run: bool = False,
        cancel: Cancel = NEVER,
        reviewed: Collection[str] | None = frozenset(),
        marked_named: Collection[str] = frozenset(),
    ) -> Change:
        """Evict the node's pods in `scope` as `kubectl drain` does, but only through the Eviction API.

        Skipped as kubectl's filters skip them (kubernetes/kubectl pkg/drain/filters.go): DaemonSet pods
        (their controller ignores unschedulable and would recreate them at once) and mirror pods (the
        kubelet's static pods; the API object cannot be evicted). A pod no controller owns is evicted only
        when its uid is in `reviewed`: the plan recorded it and `check` and the plan listed it for review
        (finding `unmanaged-gpu-pod`), so the operator saw that it goes for good. Any other (made after the
        plan, or outside its GPU scope under `--drain all`) stops the drain before anything is evicted, as
        kubectl's `unreplicatedFilter` does without `--force`: nothing would bring it back.

        A pod marked not to be interrupted (Karpenter's do-not-disrupt, the autoscaler's safe-to-evict: `_marks`)
        that the plan's review did not name (`marked_named`, "namespace/name") stops the drain the same way: the
        eviction reads no mark, and one added after the review would be ignored without a word. The ones it
        named are evicted as planned, each logged and listed in the change (`before.marked`).
        """
        if scope not in ("gpu", "all"):
            raise InputError(f"drain scope must be 'gpu' or 'all', not {scope!r}")
        deadline = self.clock.monotonic() + timeout_s
        evicted: list[str] = []
        marked: list[str] = []  # "ns/name (mark)" of the marked pods evicted, as the review named them
        gone: set[str] = set()  # uids evicted (or already terminating) and waited for
        while True:
            # Listed again once a round's pods are gone: the scheduler binds from a snapshot taken at the start
            # of each cycle (k8s.io/kubernetes@v1.37.2 pkg/scheduler/schedule_one.go, UpdateSnapshot), so a
            # cycle that began before it saw the cordon places a pod here after the first list (the wave's own
            # evictions make the pending GPU pods it places). kubectl drain lists once (k8s.io/kubectl v0.37.2
            # pkg/drain/drain.go, GetPodsForDeletion); here the device plugin goes off next, and a GPU pod left
            # holding its GPU is one the DRA driver then publishes and hands to another pod.
            pods = [
                p
                for p in self._pods_on(node)
                if _uid(p) not in gone and not self._skips(p) and (scope == "all" or uses_devices(p))
            ]
            if not pods:
                return _drained(node, evicted, marked, dry_run)
            if reviewed is not None:  # None: apply --delete-unowned-pods, as kubectl drain --force
                unreviewed = sorted(_key(p) for p in pods if _lost_unreviewed(p, reviewed))
                if unreviewed:
                    raise _unreviewed(node, unreviewed)
            marks = _marks(pods)
            unnamed = [(key, mark) for key, (mark, gpu) in marks.items() if gpu and key not in marked_named]
            if unnamed:
                raise _marked_unnamed(node, unnamed)
            if gone and self.clock.monotonic() >= deadline:
                raise _still_coming(node, timeout_s, sorted(_key(p) for p in pods))
            marked += _say_marked(node, marks, dry_run)
            evicted += [_key(p) for p in pods]
            self._drain_round(node, pods, deadline, timeout_s, dry_run, cancel)
            if dry_run:  # nothing was evicted: a second list would show the same pods
                return _drained(node, evicted, marked, dry_run)
            gone.update(_uid(p) for p in pods)

    def _drain_round(
        self, node: str, pods: list[Obj], deadline: float, timeout_s: float, dry_run: bool, cancel: Cancel
    ) -> None:
        """Evict `pods` (retrying what a budget refuses until the deadline), then wait until they are gone."""
        # Pods already being deleted need no eviction, only the wait for them to go.
        to_evict = {_key(p): p for p in pods if not _meta(p).get("deletionTimestamp")}
        blocked: dict[str, str] = {}
        delay = self.poll_s
        while True:
            for key, reason in self._evict_all(to_evict, dry_run).items():
                if reason is None:
                    del to_evict[key]
                    blocked.pop(key, None)
                else:
                    blocked[key] = reason
            # A dry run changes nothing that would unblock a disruption budget: report at once.
            if not to_evict:
                break
            if dry_run or self.clock.monotonic() >= deadline:
                raise self._blocked(node, timeout_s, to_evict, blocked, dry_run)
            self._pause(delay, deadline, cancel)
            delay = min(delay * 2, EVICTION_BACKOFF_CAP_S)
        if not dry_run:
            self._wait_gone(node, {_uid(p): _key(p) for p in pods}, deadline, timeout_s, cancel)

    def _evict_all(self, pods: Mapping[str, Obj], dry_run: bool) -> dict[str, str | None]:
        """Evict every pod at once; per pod None (evicted or gone) or why the server refused for now."""
        if len(pods) <= 1:
            return {key: self._evict(pod, dry_run) for key, pod in pods.items()}
        with ThreadPoolExecutor(max_workers=min(len(pods), EVICTION_WORKERS), thread_name_prefix="evict") as pool:
            reasons = pool.map(lambda pod: self._evict(pod, dry_run), pods.values())
            return dict(zip(pods, reasons, strict=True))

    def unreviewed_pods(self, node: str, scope: str, reviewed: Collection[str]) -> list[str]:
        watched = self.cache
        if watched is None:
            return []  # not watching (a dry run): the drain itself still refuses them
        pods = [p for p in watched.pods_on(node) if not self._skips(p) and (scope == "all" or uses_devices(p))]
        return sorted(_key(p) for p in pods if _lost_unreviewed(p, reviewed))

    def _skips(self, pod: Obj) -> bool:
        """A pod no drain evicts: kubectl drain's (DaemonSet and mirror pods), and the tool's own pod. The in-cluster
        Job stays off GPU nodes by their labels, but a GPU node the device plugin alone serves has none; under
        `--drain all` its drain would evict the apply running it, mid-wave. It uses no device, so staying on a
        node the plugins are switched on is harmless; the node is cordoned, so no replacement lands there."""
        return drain_skips(pod) or (self.own_pod_uid is not None and _uid(pod) == self.own_pod_uid)

    def _pods_on(self, node: str) -> list[Obj]:
        items, _ = self.kube.list_all(PODS, [("fieldSelector", f"spec.nodeName={node}")])
        return items

    def _evict(self, pod: Obj, dry_run: bool) -> str | None:
        """None when evicted (or already gone); the server's reason when it refused for now (429)."""
        meta = _meta(pod)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
            # Only this pod: a newer one of the same name (a StatefulSet's) is not ours to evict.
            "deleteOptions": {"preconditions": {"uid": meta.get("uid")}, **({"dryRun": ["All"]} if dry_run else {})},
        }
        path = path_of("v1", "pods", name, ns, sub="eviction")
        try:
            # 429 is left out of the request's own retries: here it means a PodDisruptionBudget
            # forbids the eviction now, and the caller retries on its own schedule.
            self.kube.request(
                "POST",
                path,
                body=body,
                query=[DRY_RUN] if dry_run else [],
                retry_status={500, 502, 503, 504},
            )
        except ApiError as e:
            if e.status == 404:
                return None  # gone already
            if e.status == 409 and meta.get("uid"):
                return None  # the uid precondition failed: this pod is gone, another took its name
            if e.status == 429:
                return e.api_message or "Too Many Requests"
            if e.status == 403 and _namespace_terminating(e):
                # Admission refuses every create, evictions included, in a namespace being deleted; the
                # namespace controller deletes the pod soon. kubectl drain does the same: a pod already
                # marked for deletion only needs waiting for, any other is retried (pkg/drain/drain.go,
                # NamespaceTerminatingCause).
                current = self.kube.get_or_none(path_of("v1", "pods", name, ns))
                if current is None or _uid(current) != _uid(pod) or _meta(current).get("deletionTimestamp"):
                    return None
                if dry_run:
                    return None  # it goes with its namespace: nothing blocks a real drain here
                return f"namespace {ns} is being deleted"
            # More than one budget selecting the pod makes the API server refuse every eviction with
            # a 500 (policy/v1 Eviction docs): no retry helps, the budgets must be fixed.
            if e.status == 500 and "more than one" in e.api_message.lower():
                budgets = self._budgets_for(pod)
                raise StepFailed(
                    f"cannot evict {ns}/{name}: {e.api_message}",
                    "leave one PodDisruptionBudget selecting the pod",
                    {"budgets": budgets, "pods": [f"{ns}/{name}"]},
                ) from e
            raise
        return None

    def _blocked(
        self, node: str, timeout_s: float, pending: Mapping[str, Obj], reasons: Mapping[str, str], dry_run: bool
    ) -> StepFailed:
        budgets = sorted({b for pod in pending.values() for b in self._budgets_for(pod)})
        pods = sorted(pending)
        why = f"PodDisruptionBudget {', '.join(budgets)}" if budgets else "the API server"
        when = "a dry-run eviction" if dry_run else f"{timeout_s:g}s of retries"
        said = "; ".join(sorted({reasons[k] for k in pods if reasons.get(k)}))
        return StepFailed(
            f"drain of node {node}: {len(pods)} pod(s) still there after {when}, eviction refused by {why}: "
            f"{', '.join(pods)}" + (f" ({said})" if said else ""),
            "wait until the budget allows a disruption (more replicas ready), or relax the budget, then resume",
            {"budgets": budgets, "pods": pods},
        )

    def _budgets_for(self, pod: Obj) -> list[str]:
        """The PodDisruptionBudgets of the pod's namespace whose selector matches its labels."""
        ns = str(_meta(pod).get("namespace", ""))
        items, _ = self.kube.list_all(path_of("policy/v1", "poddisruptionbudgets", namespace=ns))
        return sorted(f"{ns}/{_meta(b).get('name')}" for b in items if pdb_selects(b, pod))

    def _wait_gone(self, node: str, uids: Mapping[str, str], deadline: float, timeout_s: float, cancel: Cancel) -> None:
        """Until no evicted pod (by uid: a recreated pod of the same name is another pod) is left on the
        node, as kubectl drain's waitForDelete does."""
        delay = self.poll_s
        with self._changes(node) as changed:
            while True:
                if changed is not None:
                    changed.clear()  # before the read: a change after it wakes the pause below
                on_node = self.cache.pods_on(node) if self.cache is not None else self._pods_on(node)
                left = sorted(uids[_uid(p)] for p in on_node if _uid(p) in uids)
                if not left:
                    return
                if self.clock.monotonic() >= deadline:
                    raise StepFailed(
                        f"drain of node {node}: {len(left)} evicted pod(s) still terminating after {timeout_s:g}s: "
                        f"{', '.join(left)}",
                        "check the kubelet on that node and the pods' finalizers, then resume",
                        {"budgets": [], "pods": left},
                    )
                self._pause(delay, deadline, cancel, changed)
                delay = min(delay * POLL_GROWTH, self.poll_cap_s)


def _lost_unreviewed(pod: Obj, reviewed: Collection[str]) -> bool:
    """Whether evicting the pod deletes, for good, work nobody reviewed: the plan did not record it. This
    tool's own canary (an interrupted canary step leaves one; the drain before a rollback switches the
    plugins back meets it) is nobody's work."""
    return lost_if_evicted(pod) and _uid(pod) not in reviewed and CANARY_LABEL not in (_meta(pod).get("labels") or {})


def _marks(pods: list[Obj]) -> dict[str, tuple[str, bool]]:
    """ "ns/name" -> (its mark, whether it uses devices) of the pods of a drain round marked not to be interrupted,
    sorted. A pod that has finished or is already being deleted is not judged, as Karpenter judges none
    (kubernetes-sigs/karpenter v1.6.2 pkg/utils/pod/scheduling.go `IsDisruptable`: only an active pod's
    `HasDoNotDisrupt` counts, the value "true" exactly, pkg/apis/v1/labels.go `DoNotDisruptAnnotationKey`), nor is
    one the drain skips (DaemonSet, mirror pods: not in the round), as `checks/context.py` `pods_the_drain_evicts`
    leaves them out of `check`'s finding. Only a pod that uses devices can be named: the snapshot keeps no other
    (cluster/state.py), so under `--drain all` the rest are evicted and said, not refused."""
    found = {}
    for p in pods:
        mark = do_not_interrupt_mark(p)
        if mark is not None and not is_finished(p) and not _meta(p).get("deletionTimestamp"):
            found[_key(p)] = (mark, uses_devices(p))
    return dict(sorted(found.items()))


def _say_marked(node: str, marks: Mapping[str, tuple[str, bool]], dry_run: bool) -> list[str]:
    """A warning (stderr, the in-cluster Job's log) for each marked pod the drain is about to evict; what the
    journal's record of the step lists (`before.marked`)."""
    for key, (mark, gpu) in marks.items():
        why = "named by the reviewed plan" if gpu else "outside the GPU scope (--drain all), which no review names"
        log.warning(
            "drain of node %s: %s %s, marked %s: %s (pods-marked-do-not-disrupt)",
            node, "would evict" if dry_run else "evicting", key, mark, why,
        )  # fmt: skip
    return [f"{key} ({mark})" for key, (mark, _) in marks.items()]


def _marked_unnamed(node: str, pods: list[tuple[str, str]]) -> StepFailed:
    """Karpenter itself does not evict such a pod when it drains a node (kubernetes-sigs/karpenter v1.6.2
    pkg/utils/pod/scheduling.go `IsEvictable`: `!HasDoNotDisrupt`); the drain evicts only those the operator was
    shown at review (`pods-marked-do-not-disrupt`), and stops at any other before it evicts anything."""
    (first, mark), *_ = pods
    namespace, _, name = first.partition("/")
    key = mark.partition(":")[0]
    return StepFailed(
        f"drain of node {node}: {len(pods)} pod(s) marked not to be interrupted that the reviewed plan did not name "
        f"(marked or started since it was made): {', '.join(f'{k} ({m})' for k, m in pods)}; nothing evicted",
        f"once they may be interrupted, remove the mark (kubectl annotate pod -n {namespace} {name} {key}-), then "
        "run the same command again (apply resumes, rollback goes on); or make a new plan (dra-migrate plan), whose "
        "review names them (pods-marked-do-not-disrupt), and apply that",
        {"budgets": [], "pods": [k for k, _ in pods]},
    )


def _drained(node: str, evicted: list[str], marked: list[str], dry_run: bool) -> Change:
    before = {"pods": sorted(evicted), **({"marked": sorted(marked)} if marked else {})}
    return Change(f"Node {node}", before, {"pods": []}, dry_run)


def _unreviewed(node: str, pods: list[str]) -> StepFailed:
    first = pods[0].partition("/")
    return StepFailed(
        f"drain of node {node}: {len(pods)} pod(s) no controller owns, not in the reviewed plan (made since, or "
        f"outside its GPU scope): {', '.join(pods)}; evicting them would delete them for good, nothing evicted",
        f"ask their owners to save and delete them (kubectl delete pod -n {first[0]} {first[2]}), then run the "
        "same command again (apply resumes, rollback goes on), or run it with --delete-unowned-pods to let drains "
        "delete such pods",
        {"budgets": [], "pods": pods},
    )


def _still_coming(node: str, timeout_s: float, pods: list[str]) -> StepFailed:
    return StepFailed(
        f"drain of node {node}: pods are still being bound to the node after {timeout_s:g}s, each round of "
        f"evictions followed by more: {', '.join(pods)}",
        "something places pods on the cordoned node (a controller that sets spec.nodeName itself, or a "
        "scheduler far behind): stop it, then run the same command again",
        {"budgets": [], "pods": pods},
    )


def _namespace_terminating(e: ApiError) -> bool:
    causes = e.details.get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)
