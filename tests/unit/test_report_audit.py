"""What `report` and `status` say against what the journal records: hostile cases (replace-pool nodes never
drained, rollbacks that failed or never ended, undos of nodes gone, Markdown injection from errors)."""

from __future__ import annotations

from pathlib import Path

from dra_migrate.execute.journal import Journal, read_journal
from dra_migrate.execute.runner import OK, ApplyOptions, Runner
from dra_migrate.report.model import verification
from dra_migrate.testing.execute import FakeClock, FakeOps
from tests.unit.test_platforms import _new_pool, _plan

ROOT = Path(__file__).resolve().parents[2]
DEMO_PLAN = ROOT / "plans" / "demo-example.yaml"


def test_replace_pool_nodes_not_drained_are_not_verified(tmp_path: Path) -> None:
    """The new pool proven (provision stage ok), the old pool's nodes never cordoned nor drained: the report
    must not call them verified (it did: their verification was the new pool's alone)."""
    plan = _plan("gke-managed", exclude_pools=("l4-ts",))
    provision = next(s.name for s in plan.stages if s.name.startswith("provision-"))
    clock = FakeClock()
    ops = FakeOps.for_plan(plan, clock)
    _new_pool(ops, clock, nodes=2, devices=8, after_s=0)
    with Journal.open(tmp_path / "j.jsonl", plan_digest=plan.digest) as j:
        result = Runner(plan, ops, j, actor="t", clock=clock).apply(
            ApplyOptions(until=provision, soak_override_s=0), set()
        )
    assert result.outcome == OK, result.failure
    v = verification(plan, read_journal(tmp_path / "j.jsonl"))
    assert v.verdict == "incomplete"
    assert all("ok" not in (n.wait_dra_ready, n.canary) for n in v.nodes if n.stage.startswith("pool-"))
