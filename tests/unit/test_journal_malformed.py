"""Every malformed journal is refused with one line naming the file, the line and the key, by every
command that reads it (`status`, `apply` resuming, `rollback`, `report`), before anything contacts the
cluster: exit 1, no traceback (docs/exit-codes.md). A last line cut short by a crash is not malformed:
it is dropped as before."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dra_migrate.execute.journal import Journal, journal_path, read_journal
from dra_migrate.plan import io as plan_io
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "fixtures" / "clusters" / "demo.yaml")
# Nothing listens here: a command that got past the journal would fail on the connection, not on the journal.
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("plan")
    path = d / "plan.yaml"
    assert run("plan", "--snapshot", DEMO, "--out", str(path)).code == 0
    kubeconfig = d / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    return path, kubeconfig


def _line(**fields: object) -> bytes:
    return orjson.dumps(fields)


# (what is wrong, the line 2 written, what the one error line must name)
CASES = [
    ("truncated JSON line", b'{"seq":2,"time":"2026-01-01T00:00:00Z","event":"sta', "not a journal record"),
    ("not an object", b'[2, "start"]', "not an object"),
    ("seq of the wrong type", _line(seq="2", time="t", event="start"), "`seq`"),
    ("stepId of the wrong type", _line(seq=2, time="t", event="start", stepId=7), "`stepId` is 7"),
    ("dryRun of the wrong type", _line(seq=2, time="t", event="run-start", dryRun="yes"), "`dryRun`"),
    # A list or map checked against the set of phases: `in` hashed it (TypeError; found by fuzzing).
    ("phase that is a list", _line(seq=2, time="t", event="start", phase=["apply"]), '`phase` is ["apply"]'),
    ("phase that is a map", _line(seq=2, time="t", event="start", phase={"apply": 1}), "`phase`"),
    ("cluster of the wrong type", _line(seq=2, time="t", event="run-start", cluster="prod"), "`cluster`"),
    ("unknown record kind", _line(seq=2, time="t", event="teleport"), "unknown record kind `event: teleport`"),
    ("no event", _line(seq=2, time="t"), "`event` is missing"),
    (
        "duplicate keys",
        b'{"seq":2,"time":"t","event":"start","stepId":"a","stepId":"b"}',
        "the key 'stepId' appears twice",
    ),
    ("non-UTF-8", b'{"seq":2,"time":"t","event":"end","error":"\xff\xfe"}', "not UTF-8"),
]


def _journal(plan_path: Path, bad: bytes, *, last: bool = False) -> Path:
    digest = plan_io.load(plan_path)["digest"]
    path = journal_path(plan_path)
    first = _line(seq=1, time="2026-01-01T00:00:00Z", event="run-start", phase="apply", planDigest=digest)
    third = _line(seq=3, time="2026-01-01T00:00:01Z", event="run-end", phase="apply", result="ok")
    path.write_bytes(first + b"\n" + bad + b"\n" + (b"" if last else third + b"\n"))
    return path


def _commands(plan_path: Path, kubeconfig: Path, tmp: Path) -> dict[str, tuple[str, ...]]:
    kc = ("--kubeconfig", str(kubeconfig))
    return {
        "status": ("status", str(plan_path)),
        "apply": ("apply", str(plan_path), "--yes", *kc),
        "rollback": ("rollback", str(plan_path), "--yes", *kc),
        "report": ("report", str(plan_path), "--out", str(tmp / "r.md")),
    }


@pytest.mark.parametrize(("case", "bad", "named"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("command", ["status", "apply", "rollback", "report"])
def test_a_malformed_journal_is_one_line_naming_file_line_and_key(
    plan: tuple[Path, Path], tmp_path: Path, command: str, case: str, bad: bytes, named: str
) -> None:
    plan_path, kubeconfig = plan
    journal = _journal(plan_path, bad)
    before = journal.read_bytes()
    r = run(*_commands(plan_path, kubeconfig, tmp_path)[command])
    assert r.code == 1, (case, r.code, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if str(journal) in line]
    assert len(errors) == 1, r.stderr
    assert f"{journal}:2:" in errors[0] and named in errors[0], errors[0]
    assert journal.read_bytes() == before  # nothing repaired, nothing appended
    assert not (tmp_path / "r.md").exists()


@pytest.mark.parametrize(
    ("case", "bad", "named"), [c for c in CASES if c[0] != "truncated JSON line"], ids=lambda c: str(c)[:30]
)
def test_a_whole_last_line_that_is_malformed_is_refused_not_dropped_as_torn(
    tmp_path: Path, case: str, bad: bytes, named: str
) -> None:
    """Only a write cut short may be dropped: a whole bad last line is damage, and `Journal.open` would
    have truncated it away (a non-UTF-8 record was read as torn)."""
    path = tmp_path / "j.jsonl"
    path.write_bytes(_line(seq=1, time="t", event="run-start") + b"\n" + bad + b"\n")
    before = path.read_bytes()
    with pytest.raises(Exception, match=r"j\.jsonl:2: ") as e:
        read_journal(path)
    assert named in str(e.value)
    with pytest.raises(Exception, match=r"j\.jsonl:2: "):
        Journal.open(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "torn",
    [b'{"seq":2,"time":"2026-01-01T0', b'{"seq":2,"error":"\xe2\x82', b"\x00\x00\x00\x00", b'{"seq":2,\x00\x00'],
    ids=["cut", "cut-in-utf8", "zeros", "cut-then-zeros"],
)
def test_a_torn_last_line_is_still_dropped(tmp_path: Path, torn: bytes) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(_line(seq=1, time="t", event="run-start") + b"\n" + torn)
    assert [r["seq"] for r in read_journal(path)] == [1]
    with Journal.open(path) as j:
        assert j.repaired
