"""Journals with records missing: every writer numbers its records 1, 2, 3, ... with no gap, so a gap is records
lost (a line cut out of the file, an in-cluster chunk ConfigMap deleted), and `report`, `status`, `apply` and
`rollback` refuse what is left rather than read it as a shorter run that ended well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from dra_migrate.errors import InputError
from dra_migrate.execute.cluster_journal import _all_records
from dra_migrate.execute.journal import checked, read_records
from tests.unit.test_report_audit import _demo, _records


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_a_journal_with_a_line_cut_out_is_refused(tmp_path: Path) -> None:
    """A record gone from the middle (a failed step's end, a rollback's start) would make a partial run read as
    complete; `seq` runs 1, 2, 3, ... with no gap in every journal the runner writes (execute/journal.py)."""
    plan = _demo()
    records = _records(plan, [{"result": "ok"}], "ok")
    del records[5]
    path = _write(tmp_path / "j.jsonl", records)
    with pytest.raises(InputError, match=r"record 6 is missing \(seq 5 is followed by seq 7\)"):
        read_records(path, plan_digest=str(plan.digest), require_owner=False)


def test_a_journal_missing_its_first_records_is_refused(tmp_path: Path) -> None:
    plan = _demo()
    records = _records(plan, [{"result": "ok"}], "ok")[3:]
    path = _write(tmp_path / "j.jsonl", records)
    with pytest.raises(InputError, match=r"records 1 to 3 are missing"):
        read_records(path, plan_digest=str(plan.digest), require_owner=False)


def test_an_in_cluster_journal_missing_a_chunk_is_refused() -> None:
    """Chunk 1 of 0..2 deleted (by hand, or by a namespace clean-up matching its name): the records of
    chunks 0 and 2 alone must not read as the whole run."""
    plan = _demo()
    records = _records(plan, [{"result": "ok"}], "ok")

    def chunk(n: int, recs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "metadata": {"name": f"c-{n}", "labels": {"dra-migrate.io/chunk": str(n)}},
            "data": {f"{r['seq']:010d}": orjson.dumps(r).decode() for r in recs},
        }

    chunks = [chunk(0, records[:4]), chunk(2, records[8:])]
    with pytest.raises(InputError, match=r"records 5 to 8 are missing"):
        checked(_all_records(chunks, "ns/j"), "ns/j", plan_digest=str(plan.digest), require_owner=False)
