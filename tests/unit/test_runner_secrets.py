"""The journal (a file beside the plan, or ConfigMaps any reader of the lock's namespace can read) and the
apply log on stderr never hold a credential that a failure's message quotes.

An error comes back from the API server or whatever stands in front of it: an authenticating proxy's 401 that
quotes the bearer token it refused, an admission webhook's denial that quotes the request (`password=...`),
a canary pod's event. `status` and `report` scrubbed these when they printed them, but the journal record was
written with the raw text, and `apply`'s `FAILED <step>: <error>` line went to stderr unscrubbed.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from dra_migrate.execute.contract import Cancel, StepFailed
from dra_migrate.execute.runner import Runner
from dra_migrate.kube import ApiError
from tests.unit import test_runner
from tests.unit.test_runner import BARRIER_S, BEFORE, Rig, make_plan

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
PASSWORD = "hunter2-webhook-echo"


def _hostile(fault: Any, op: str, node: str | None, cancel: Cancel) -> None:
    if op == "canary":
        message = f"proxy refused Authorization: Bearer {JWT} (password={PASSWORD})"
        body = orjson.dumps({"kind": "Status", "status": "Failure", "message": message, "code": 403})
        raise ApiError("POST", "/api/v1/namespaces/default/pods", 403, body)
    raise StepFailed(f"{op} of {node}: webhook said token={PASSWORD}", "", details={"event": f"Bearer {JWT}"})


def test_journal_records_and_log_lines_hold_no_quoted_credential(tmp_path: Path, monkeypatch: Any) -> None:
    rig = Rig(tmp_path, make_plan([["a", "b", "c"]]))
    monkeypatch.setattr(rig.ops, "_raise", _hostile)
    rig.ops.fail("canary", "p0-a", "permanent")
    # The rollback's label restore on b fails too: its error is journaled in `rollback-incomplete` and `run-end`.
    rig.ops.fail("set_label", "p0-b", "permanent", after=2, times=99)
    rig.ops.barriers["canary"] = threading.Barrier(3, timeout=BARRIER_S)  # b has switched both labels when a fails
    lines: list[str] = []
    monkeypatch.setattr(test_runner, "Runner", partial(Runner, log=lines.append))  # the CLI passes its stderr sink
    result = rig.run()
    assert not result.ok
    text = rig.path.read_text()
    assert '"error"' in text and "<redacted>" in text  # the failures are recorded, minus the credentials
    assert JWT not in text and PASSWORD not in text
    log = "\n".join(lines)
    assert "FAILED" in log and JWT not in log and PASSWORD not in log
    assert rig.nodes()["p0-a"] == BEFORE  # the failure itself is handled as before


def test_apply_log_lines_on_stderr_are_scrubbed(capsys: Any) -> None:
    """`apply`'s own lines (`the rollback would stop: <failure>`) go to stderr by click, not by logging: no filter."""
    from dra_migrate.cli import apply

    apply._log(f"the rollback would stop: 401 Authorization: Bearer {JWT}")
    err = capsys.readouterr().err
    assert "the rollback would stop" in err and JWT not in err
