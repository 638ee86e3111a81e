"""Writing a plan encodes it once (issue 29): `write_sealed` digests the plan's file form and writes that
same form, as `dumps(seal(plan))` would write it, instead of encoding the plan a second time (on a fleet of
400 five-node pools the second encoding was a tenth of `plan`'s own work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dra_migrate.plan import io as plan_io
from dra_migrate.plan import wire
from dra_migrate.plan.build import build_plan
from dra_migrate.plan.params import PlanParams
from tests.unit.helpers import node, state


def _plan(pools: int) -> Any:
    gpu = {"nvidia.com/gpu": "8"}
    nodes = [
        node(f"gpu-{i:03d}", {"pool": f"p{i // 2:02d}", "nvidia.com/gpu.present": "true"}, gpu)
        for i in range(2 * pools)
    ]
    return build_plan(state(*nodes), PlanParams(pool_labels=("pool",)))


def test_write_sealed_encodes_once_and_writes_what_seal_and_dumps_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(6)
    expected = plan_io.dumps(plan_io.seal(plan))
    calls = []
    encode = wire.encode

    def counted(body: Any) -> Any:
        calls.append(1)
        return encode(body)

    monkeypatch.setattr(wire, "encode", counted)
    path = tmp_path / "p.yaml"
    sealed = plan_io.write_sealed(plan, path)
    assert len(calls) == 1
    assert path.read_text() == expected
    assert sealed.digest == plan_io.seal(plan)["digest"]
    assert plan_io.load(path)["digest"] == sealed.digest  # the file reads back under its own digests


def test_sharing_reads_each_stage_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`nodeSteps` and `profiles` alike between stages are found from one repr of each stage's (each was
    made twice: a quarter of encoding a plan of 400 pools)."""
    body = plan_io.body_of(_plan(wire.SHARE_FROM + 2).to_dict())
    made: list[str] = []

    def counted(value: Any) -> str:
        if isinstance(value, list):  # a stage's steps or profiles (a node's profile, a dict, is keyed too)
            made.append(repr(value))
        return repr(value)

    monkeypatch.setattr(wire, "repr", counted, raising=False)  # the module's globals come before builtins
    out = wire.encode(body)
    pool_stages = [s for s in body["stages"] if "pool" in s]
    assert len(pool_stages) == wire.SHARE_FROM + 2
    assert len(made) == len(pool_stages) * len(wire.SHARED)
    steps = [s["nodeSteps"] for s in out["stages"] if "pool" in s]
    assert steps.count({wire.SAME_AS: _stater(out)}) == len(pool_stages) - 1  # still shared as before


def _stater(out: dict[str, Any]) -> str:
    """The one pool stage that states its node steps (the others name it)."""
    (name,) = [s["name"] for s in out["stages"] if "pool" in s and isinstance(s["nodeSteps"], list)]
    return str(name)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 2**64, -(2**63) - 1])
def test_sealing_still_refuses_what_has_no_canonical_form_wherever_it_sits(value: Any) -> None:
    """The walk that refuses NaN, infinities and integers beyond 64 bits passes over strings first (most
    of a plan): a regression guard that it still finds each, deep in a stage and among strings."""
    from dra_migrate.errors import InputError

    body = plan_io.body_of(_plan(2).to_dict())
    stage = next(s for s in body["stages"] if "pool" in s)
    stage["waves"][0]["nodes"][0]["original"]["labels"]["x"] = value
    with pytest.raises(InputError, match="no canonical form"):
        plan_io.seal(body)
