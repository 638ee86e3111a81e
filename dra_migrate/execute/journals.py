"""Where a plan's journal lives (`--state`): a file beside the plan, or ConfigMaps in the cluster.

apply, rollback, status and report ask a `JournalStore` for the records and (apply, rollback) for an
open journal; what they do with them is the same for both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from dra_migrate.cluster.identity import ClusterIdentity
from dra_migrate.errors import InputError
from dra_migrate.execute.cluster_journal import ClusterJournal, read_cluster_journal, where
from dra_migrate.execute.journal import ROLLED_BACK, Journal, Progress, Record, checked, journal_path, read_journal
from dra_migrate.plan.model import Plan

AUTO, FILE, IN_CLUSTER = "auto", "file", "in-cluster"
STATES = (AUTO, FILE, IN_CLUSTER)


def resolve_state(state: str, kubeconfig: Path | None, plan_path: Path, *, file_given: bool = False) -> str:
    """`auto`: a file beside the plan when there is one (or `file_given`: --journal, --snapshot); else in the
    cluster when the tool runs there on its pod's own credentials (the apply Job: a killed pod leaves no file
    behind, and the next one, or anyone with access, must find the journal); else a file. A pod given a
    kubeconfig works on that cluster as a laptop would: a file."""
    if state != AUTO:
        return state
    if file_given or journal_path(plan_path).exists():
        return FILE
    from dra_migrate.kube.config import uses_in_cluster_credentials

    return IN_CLUSTER if uses_in_cluster_credentials(kubeconfig) else FILE


class JournalStore(Protocol):
    def where(self, plan_digest: str) -> str: ...

    def records(self, plan_digest: str) -> list[Record]: ...

    def open(self, plan_digest: str) -> Any: ...


class FileStore:
    """`<plan>.journal.jsonl` beside the plan (execute/journal.py)."""

    def __init__(self, plan_path: Path) -> None:
        self.path = journal_path(plan_path)

    def where(self, plan_digest: str) -> str:
        return str(self.path)

    def records(self, plan_digest: str) -> list[Record]:
        return read_journal(self.path)

    def open(self, plan_digest: str) -> Journal:
        return Journal.open(self.path, plan_digest=plan_digest)


class ClusterStore:
    """ConfigMaps in `namespace`, the lock's (execute/cluster_journal.py)."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.api_client = api_client
        self.namespace = namespace

    def where(self, plan_digest: str) -> str:
        return where(self.namespace, plan_digest)

    def records(self, plan_digest: str) -> list[Record]:
        return read_cluster_journal(self.api_client, self.namespace, plan_digest)

    def open(self, plan_digest: str) -> ClusterJournal:
        return ClusterJournal.open(self.api_client, self.namespace, plan_digest=plan_digest)


def read_checked(
    store: JournalStore,
    *,
    plan_digest: str,
    require_owner: bool = True,
    cluster: ClusterIdentity | None = None,
) -> list[Record]:
    """The plan's records, validated as `journal.read_records` validates the file's."""
    return checked(
        store.records(plan_digest),
        store.where(plan_digest),
        plan_digest=plan_digest,
        require_owner=require_owner,
        cluster=cluster,
    )


def refuse_if_rebased_mid_run(plan: Plan, plan_path: Path, store: JournalStore) -> None:
    """Refuse a plan rebased (`plan --rebase`) from a plan whose journal shows steps still in effect (done,
    half-done, failed, not rolled back). The edit re-digests the plan, and its journal is keyed by the digest:
    beside the plan, the old journal would be refused as another plan's; in the cluster (ConfigMaps per digest),
    the edited plan would find none and start afresh over the old run's cordons and labels, its step ids
    matched against nothing. Either way the old plan is the one that can finish or undo its own steps."""
    for previous in reversed((plan.edited or {}).get("previousDigests") or []):
        if not isinstance(previous, str) or previous == plan.digest:
            continue
        records = store.records(previous)
        digests = {r.get("planDigest") for r in records if r.get("planDigest")}
        if digests != {previous}:
            continue  # not that plan's journal (none, or another plan's: read_checked says so)
        steps = Progress.from_records(records).steps
        if any(s.status != ROLLED_BACK for s in steps.values()):
            raise InputError(
                f"{plan_path} was rebased from plan {previous[:19]}..., which the journal {store.where(previous)} "
                "shows partly applied: the edited plan cannot take over its steps",
                "finish or undo the plan as it was first (dra-migrate apply, or dra-migrate rollback, with that "
                "plan file), then apply the edited one",
            )
