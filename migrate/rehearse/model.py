"""What a rehearsal found, read from the journal of the run on the twin (JSON contract in README "Rehearsal")."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from migrate.checks.run import assess
from migrate.cluster.state import ClusterState
from migrate.execute.journal import Record
from migrate.plan.params import format_duration, parse_duration

FORMAT_VERSION = 1


@dataclass
class WaveResult:
    stage: str
    wave: str | None  # None for `prepare`
    result: str = "ok"  # ok | failed | rolled-back
    seconds: float = 0.0  # unscaled back to real time
    stalled_drains: list[dict[str, Any]] = field(default_factory=list)  # [{pod, budgets}]
    pending_pods: list[dict[str, str]] = field(default_factory=list)  # [{pod, reason}]
    canaries: list[dict[str, str]] = field(default_factory=list)  # [{node, result}]
    gate: str | None = None  # ok | failed | None (not reached)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "wave": self.wave,
            "result": self.result,
            "seconds": round(self.seconds, 1),
            "stalledDrains": self.stalled_drains,
            "pendingPods": self.pending_pods,
            "canaries": self.canaries,
            "gate": self.gate,
            "error": self.error,
        }


@dataclass
class Rehearsal:
    result: str  # ok | failed
    waves: list[WaveResult]
    rehearsed_seconds: float
    estimated_duration: str | None
    time_scale: float
    unreproduced: list[str]
    end_state: dict[str, Any]
    failure: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "result": self.result,
            "failure": self.failure,
            "timeScale": self.time_scale,
            "rehearsedDuration": format_duration(round(self.rehearsed_seconds)),
            "rehearsedSeconds": round(self.rehearsed_seconds, 1),
            "estimatedDuration": self.estimated_duration,
            "waves": [w.to_dict() for w in self.waves],
            "endState": self.end_state,
            "unreproduced": self.unreproduced,
        }


def _time(rec: Record) -> float | None:
    try:
        return datetime.fromisoformat(str(rec.get("time", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _stalled(details: dict[str, Any]) -> list[dict[str, Any]]:
    budgets = [str(b) for b in details.get("budgets") or []]
    return [{"pod": str(p), "budgets": budgets} for p in details.get("pods") or []]


def _waves_of(records: list[Record], scale: float, reasons: dict[str, str]) -> list[WaveResult]:
    where: dict[str, tuple[str, str | None]] = {}
    waves: dict[tuple[str, str | None], WaveResult] = {}
    spans: dict[tuple[str, str | None], list[float]] = {}

    def wave_of(key: tuple[str, str | None]) -> WaveResult:
        if key not in waves:
            waves[key] = WaveResult(key[0], key[1])
        return waves[key]

    for rec in records:
        event = rec.get("event")
        step = str(rec.get("stepId", ""))
        if event == "start" and rec.get("phase") == "apply":
            where[step] = (str(rec.get("stage")), rec.get("wave"))
        key = where.get(step) if step else None
        if event == "gate":
            key = (str(rec.get("stage")), rec.get("wave"))
            w = wave_of(key)
            w.gate = str(rec.get("result"))
            w.pending_pods = [{"pod": p, "reason": reasons.get(p, "unknown")} for p in rec.get("pending") or []]
            if w.gate == "failed":
                w.result = "failed"
        if key is None:
            continue
        w = wave_of(key)
        t = _time(rec)
        if t is not None:
            spans.setdefault(key, []).append(t)
        if event != "end":
            continue
        if rec.get("phase") == "rollback":
            w.result = "rolled-back"
            continue
        if rec.get("result") == "failed":
            w.result = "failed"
            w.error = str(rec.get("error") or "")
            w.stalled_drains.extend(_stalled(rec.get("details") or {}))
        if step.endswith("/canary"):
            w.canaries.append({"node": step.split("/")[1], "result": str(rec.get("result"))})
    for key, times in spans.items():
        waves[key].seconds = (max(times) - min(times)) / scale if times else 0.0
    return list(waves.values())


def _end_state(after: ClusterState) -> dict[str, Any]:
    readiness = assess(after)
    nodes = readiness.inventory.nodes
    migrated = [n.name for n in nodes if n.dra_plugin_enabled and not n.device_plugin_enabled]
    return {
        "nodesMigrated": len(migrated),
        "nodes": len(nodes),
        "capacity": [
            {"pool": c.pool, "resource": c.resource, "after": c.after, "demand": c.demand, "fits": c.fits}
            for c in readiness.capacity
        ],
    }


def from_journal(
    plan: dict[str, Any],
    records: list[Record],
    *,
    time_scale: float,
    wall_seconds: float,
    ok: bool,
    failure: str | None,
    reasons: dict[str, str],
    after: ClusterState,
    unreproduced: list[str],
) -> Rehearsal:
    estimate = (plan.get("summary") or {}).get("estimatedDuration")
    if isinstance(estimate, str):
        parse_duration(estimate)  # an estimate apply could not read is a bad plan, said here too
    return Rehearsal(
        result="ok" if ok else "failed",
        waves=_waves_of(records, time_scale, reasons),
        rehearsed_seconds=wall_seconds / time_scale,
        estimated_duration=estimate if isinstance(estimate, str) else None,
        time_scale=time_scale,
        unreproduced=unreproduced,
        end_state=_end_state(after),
        failure=failure,
    )
