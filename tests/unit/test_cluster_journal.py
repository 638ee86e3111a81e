"""The in-cluster journal (`--state in-cluster`) on a fake of the ConfigMap API: records survive a crash
and a resume reads them, chunks stay far below the 1 MiB object cap, a second writer is refused, a write
whose answer was lost is neither lost nor doubled, a hand edit is refused. The real API server's
behaviour (merge patch preconditions, two appliers, a SIGKILL) is tests/integration/test_cluster_state.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from test_runner import MIGRATED, make_plan
from test_runner_session import FakeLock, plan_file

from dra_migrate.errors import InputError
from dra_migrate.execute.cluster_journal import CHUNK_BYTES, ClusterJournal, JournalConflict, chunk_name
from dra_migrate.execute.journal import Progress
from dra_migrate.execute.journals import ClusterStore, read_checked
from dra_migrate.execute.progress import progress_of
from dra_migrate.execute.runner import ApplyOptions, Runner
from dra_migrate.execute.session import ApplySession
from dra_migrate.plan import io as plan_io
from dra_migrate.plan.model import Plan
from dra_migrate.testing.execute import Crash, CrashableJournal, FakeClock, FakeOps
from dra_migrate.testing.kube import FakeConfigMaps

NS = "dra-migrate"
DIGEST = "sha256:" + "ab" * 32
MIB = 1024 * 1024


def chunks(store: FakeConfigMaps) -> list[dict[str, Any]]:
    return [o for (ns, _), o in sorted(store.objects.items()) if ns == NS]


def test_records_are_stored_when_record_returns_and_a_reopen_continues_the_seq() -> None:
    store = FakeConfigMaps()
    api = store.client()
    with ClusterJournal.open(api, NS, plan_digest=DIGEST) as j:
        assert j.existing == [] and j.seq == 0
        j.record("run-start", phase="apply")
        first = j.record("start", stepId="s/n/cordon", phase="apply", error=None)
        # Stored by the server before record returned: the step may act now.
        data = chunks(store)[0]["data"]
        assert orjson.loads(data[f"{first['seq']:010d}"]) == first
        assert "error" not in first
    again = ClusterJournal.open(api, NS, plan_digest=DIGEST)
    assert [r["seq"] for r in again.existing] == [1, 2]
    assert again.existing[0]["planDigest"] == DIGEST
    assert again.record("end", stepId="s/n/cordon", result="ok")["seq"] == 3
    records = read_checked(ClusterStore(api, NS), plan_digest=DIGEST)
    assert [r["event"] for r in records] == ["run-start", "start", "end"]


def test_a_long_journal_is_chunked_far_below_the_configmap_cap_and_read_back_in_order() -> None:
    store = FakeConfigMaps()
    api = store.client()
    pad = "x" * 700  # a record with its before/after states is a few hundred bytes
    with ClusterJournal.open(api, NS, plan_digest=DIGEST) as j:
        j.record("run-start", phase="apply")
        for i in range(1, 1500):
            j.record("start", stepId=f"pool/node-{i}/drain", phase="apply", before={"pad": pad})
    cms = chunks(store)
    assert len(cms) >= 4, "1 MB of records in one ConfigMap would approach the 1 MiB cap"
    for n, cm in enumerate(cms):
        size = sum(len(v.encode()) for v in cm["data"].values())
        assert size <= CHUNK_BYTES < MIB
        assert cm["metadata"]["name"] == chunk_name(DIGEST, n)
    records = ClusterJournal.open(api, NS, plan_digest=DIGEST).existing
    assert [r["seq"] for r in records] == list(range(1, 1501))


def test_a_second_writer_is_refused_and_writes_nothing() -> None:
    """A runner that lost its Lease (and does not know it yet) must not splice records into the journal of
    the runner that took over: its write is conditional on the version it last saw."""
    store = FakeConfigMaps()
    api = store.client()
    stale = ClusterJournal.open(api, NS, plan_digest=DIGEST)
    stale.record("run-start", phase="apply")
    current = ClusterJournal.open(api, NS, plan_digest=DIGEST)
    current.record("run-start", phase="apply")
    with pytest.raises(JournalConflict, match="another writer"):
        stale.record("start", stepId="s/n/drain")
    records = ClusterJournal.open(api, NS, plan_digest=DIGEST).existing
    assert [r["seq"] for r in records] == [1, 2] and records[-1]["event"] == "run-start"


def test_a_second_writer_is_refused_when_it_starts_a_new_chunk_too() -> None:
    store = FakeConfigMaps()
    api = store.client()
    stale = ClusterJournal.open(api, NS, plan_digest=DIGEST, chunk_bytes=200)
    stale.record("run-start", phase="apply")
    current = ClusterJournal.open(api, NS, plan_digest=DIGEST, chunk_bytes=200)
    current.record("start", stepId="s/n/drain", phase="apply")  # opens chunk 1
    with pytest.raises(JournalConflict):
        stale.record("start", stepId="s/other/drain", phase="apply")  # would open chunk 1 too
    assert [r["stepId"] for r in ClusterJournal.open(api, NS, plan_digest=DIGEST).existing[1:]] == ["s/n/drain"]


@pytest.mark.parametrize("chunk_bytes", [CHUNK_BYTES, 150], ids=["append", "new-chunk"])
def test_a_write_whose_answer_was_lost_is_kept_once(chunk_bytes: int) -> None:
    store = FakeConfigMaps()
    api = store.client()
    j = ClusterJournal.open(api, NS, plan_digest=DIGEST, chunk_bytes=chunk_bytes)
    j.record("run-start", phase="apply")
    store.lose_answer = 1  # stored, then the connection broke: the client retries and meets a 409
    rec = j.record("start", stepId="s/n/drain", phase="apply")
    assert rec["seq"] == 2
    j.record("end", stepId="s/n/drain", result="ok")
    assert [r["seq"] for r in ClusterJournal.open(api, NS, plan_digest=DIGEST).existing] == [1, 2, 3]


def test_a_hand_edited_record_is_refused_with_one_line() -> None:
    store = FakeConfigMaps()
    api = store.client()
    ClusterJournal.open(api, NS, plan_digest=DIGEST).record("run-start", phase="apply")
    cm = chunks(store)[0]
    cm["data"]["0000000001"] = '{"seq": 7, "event": "start"}'
    with pytest.raises(InputError, match="is not a journal record"):
        ClusterJournal.open(api, NS, plan_digest=DIGEST)


def test_another_plans_journal_is_not_this_ones() -> None:
    store = FakeConfigMaps()
    api = store.client()
    other = "sha256:" + "ab" * 20 + "cd" * 12  # the same first 40 hex digits: the same label value
    ClusterJournal.open(api, NS, plan_digest=other).record("run-start", phase="apply")
    assert ClusterJournal.open(api, NS, plan_digest=DIGEST, chunk_bytes=100).existing == []
    with pytest.raises(InputError, match="another plan"):
        ClusterJournal.open(api, NS, plan_digest=DIGEST).record("start", planDigest=other)


def _crash_then_resume(tmp_path: Path) -> tuple[Plan, FakeOps, Any]:
    plan = make_plan([["a", "b", "c"]])
    path = plan_file(tmp_path, plan)
    plan = Plan.from_dict(plan_io.load(path))
    ops = FakeOps.for_plan(plan, FakeClock())
    api = FakeConfigMaps().client()
    ops.fail("drain", "p0-b", "crash", when="mid")
    with ClusterJournal.open(api, NS, plan_digest=str(plan.digest)) as j:
        crashing = CrashableJournal(j)
        ops.journal = crashing
        with pytest.raises(Crash):
            Runner(plan, ops, crashing, actor="t", clock=ops.clock).apply(ApplyOptions(soak_override_s=None), set())
    return plan, ops, api


def test_a_crash_mid_wave_then_a_resume_from_the_cluster_journal_converges(tmp_path: Path) -> None:
    plan, ops, api = _crash_then_resume(tmp_path)
    store = ClusterStore(api, NS)
    records = read_checked(store, plan_digest=str(plan.digest))
    assert records[-1]["event"] != "run-end", "a crashed run is not closed"
    # The drain that crashed half-way was recorded before it acted: resume knows to redo it.
    assert Progress.from_records(records).status("pool-p0/p0-b/drain") == "started"
    # Another machine (a new session) resumes from the journal in the cluster, nothing on disk.
    session = ApplySession(
        plan, tmp_path / "elsewhere" / "plan.yaml", ops=ops, lock_api=None, actor="t2", lock_factory=FakeLock,
        clock=ops.clock, store=store,
    )  # fmt: skip
    assert session.resuming
    result = session.apply(ApplyOptions(soak_override_s=None))
    assert result.ok, result.failure
    assert all(v == MIGRATED for v in ops.snapshot()["nodes"].values())
    final = read_checked(store, plan_digest=str(plan.digest))
    assert progress_of(plan, final).to_dict()["remaining"] == 0
    assert [r["seq"] for r in final] == list(range(1, len(final) + 1))
    assert not (tmp_path / "elsewhere").exists(), "the in-cluster state writes no file"
