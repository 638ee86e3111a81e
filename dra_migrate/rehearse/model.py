"""What a rehearsal found, read from the journal of the run on the twin (JSON contract in README "Rehearsal")."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from dra_migrate.checks.run import assess
from dra_migrate.cluster.state import ClusterState
from dra_migrate.errors import InputError
from dra_migrate.execute.journal import Record
from dra_migrate.plan.model import Plan
from dra_migrate.plan.params import format_duration, parse_duration
from dra_migrate.secrets import scrub

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
    real_s: float = 0.0  # of its span, what ran at real speed (canaries, API round trips): not unscaled
    timing: dict[str, Any] = field(default_factory=dict)  # where its wall time went (`wave_timing`), real seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "wave": self.wave,
            "result": self.result,
            "seconds": round(self.seconds, 1),
            "realSeconds": round(self.real_s, 1),
            "stalledDrains": self.stalled_drains,
            "pendingPods": self.pending_pods,
            "canaries": self.canaries,
            "gate": self.gate,
            "error": self.error,
            **({"timing": self.timing} if self.timing else {}),
        }


@dataclass
class Rehearsal:
    plan_digest: str  # the reviewed plan's, not the twin's re-fingerprinted copy: what the report checks
    result: str  # ok | failed
    waves: list[WaveResult]
    rehearsed_seconds: float
    estimated_duration: str | None
    time_scale: float
    unreproduced: list[str]
    end_state: dict[str, Any]
    failure: str | None = None
    # The executor's requests as the twin's API server counted them (rehearse.apf.RequestMeter.summary).
    api_requests: dict[str, Any] | None = None
    # Quota continuity while the plan ran (rehearse/continuity.py ContinuityCheck.to_dict): events seen, the
    # namespaces and queues watched, and each window of unlimited or blocked GPU use.
    quota_continuity: dict[str, Any] | None = None

    def judge_continuity(self, checked: dict[str, Any], failure: str | None) -> None:
        """A window of unlimited or blocked GPU use fails the rehearsal, as a failed wave does."""
        self.quota_continuity = checked
        if failure is not None:
            self.result = "failed"
            self.failure = f"{self.failure}; {failure}" if self.failure else failure

    # The estimate's high end, when the plan's is a range (budgets that can hold drains: plan.estimate).
    estimated_max_duration: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "plan": {"digest": self.plan_digest},
            "result": self.result,
            "failure": self.failure,
            "timeScale": self.time_scale,
            "rehearsedDuration": format_duration(round(self.rehearsed_seconds)),
            "rehearsedSeconds": round(self.rehearsed_seconds, 1),
            "estimatedDuration": self.estimated_duration,
            **({"estimatedMaxDuration": self.estimated_max_duration} if self.estimated_max_duration else {}),
            "waves": [w.to_dict() for w in self.waves],
            "endState": self.end_state,
            "unreproduced": self.unreproduced,
            **({"apiRequests": self.api_requests} if self.api_requests is not None else {}),
            **({"quotaContinuity": self.quota_continuity} if self.quota_continuity is not None else {}),
        }


def _time(rec: Record) -> float | None:
    try:
        return datetime.fromisoformat(str(rec.get("time", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _stalled(details: dict[str, Any]) -> list[dict[str, Any]]:
    budgets = [str(b) for b in details.get("budgets") or []]
    return [{"pod": str(p), "budgets": budgets} for p in details.get("pods") or []]


def _waves_of(records: list[Record], scale: float, reasons: dict[str, str], real_s: float) -> list[WaveResult]:
    """Each wave's result, its span unscaled: divided by the scale, less what ran at real speed — the
    `real_s` of a wave with canaries (their pod's start and run; the wave's canaries run at once) and the
    API round trips of its slowest node (`requestSeconds` of its steps' journal records: the twin's clock
    scales the cluster's components, not the API server's answers, which took as long as they took)."""
    where: dict[str, tuple[str, str | None]] = {}
    lanes: dict[tuple[str, str | None], dict[str, list[float]]] = {}  # wave -> node -> [first, last, requests]
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
        if key is not None and rec.get("phase") == "apply":
            _lane(lanes.setdefault(key, {}), step, _time(rec), rec.get("requestSeconds"))
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
    for key, timing in wave_timing(records).items():
        if key in waves:
            waves[key].timing = timing
    for key, times in spans.items():
        w = waves[key]
        w.seconds = (max(times) - min(times)) / scale if times else 0.0
        w.real_s = (real_s if w.canaries else 0.0) + _slowest_lane_requests(lanes.get(key, {}))
        w.seconds = max(w.seconds - real_correction(w.real_s, scale), 0.0)
    return list(waves.values())


def wave_timing(records: list[Record]) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Where each wave's wall time went, in real seconds from its first step's start: when its last lane
    ended each action (`steps`), the health gate's record (`gate`: the soak and the gate's read after the
    last step), and its canaries' points (`canary`: median and slowest of when each was created, seen bound
    with its allocation, seen ended and deleted, from its POST: ops_canary._with_timing)."""
    first: dict[tuple[str, str | None], float] = {}
    ends: dict[tuple[str, str | None], dict[str, float]] = {}
    marks: dict[tuple[str, str | None], dict[str, list[float]]] = {}
    gates: dict[tuple[str, str | None], float] = {}
    where: dict[str, tuple[str, str | None]] = {}
    for rec in records:
        t = _time(rec)
        if t is None or rec.get("phase") not in ("apply", None):
            continue
        step = str(rec.get("stepId", ""))
        if rec.get("event") == "start" and rec.get("wave") is not None:
            key = where[step] = (str(rec.get("stage")), rec.get("wave"))
            first[key] = min(first.get(key, t), t)
        elif rec.get("event") == "end" and step in where and rec.get("result") == "ok":
            key = where[step]
            action = step.rsplit("/", 1)[-1]
            ends.setdefault(key, {})[action] = max(ends.get(key, {}).get(action, t), t)
            after = rec.get("after")
            points = after.get("timing") if isinstance(after, dict) else None
            for name, value in (points if isinstance(points, dict) else {}).items():
                if name != "attempt" and isinstance(value, (int, float)):
                    marks.setdefault(key, {}).setdefault(name, []).append(float(value))
        elif rec.get("event") == "gate":
            gates[(str(rec.get("stage")), rec.get("wave"))] = t
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for key, start in first.items():
        timing: dict[str, Any] = {"steps": {a: round(t - start, 2) for a, t in (ends.get(key) or {}).items()}}
        if key in gates:
            timing["gate"] = round(gates[key] - start, 2)
        if key in marks:
            timing["canary"] = {
                name: {"median": round(statistics.median(v), 2), "max": round(max(v), 2)}
                for name, v in marks[key].items()
            }
        out[key] = timing
    return out


def _lane(nodes: dict[str, list[float]], step: str, t: float | None, requests: Any) -> None:
    """Note one journal record of `step` ("<stage>/<node>/<action>") on its node's lane: its span and the
    seconds of API round trips its steps reported."""
    node = step.split("/")[1] if step.count("/") >= 2 else ""
    lane = nodes.setdefault(node, [math.inf, -math.inf, 0.0])
    if t is not None:
        lane[0], lane[1] = min(lane[0], t), max(lane[1], t)
    if isinstance(requests, (int, float)) and not isinstance(requests, bool) and requests > 0:
        lane[2] += float(requests)


def _slowest_lane_requests(nodes: dict[str, list[float]]) -> float:
    """The API round trips of the wave's longest lane: the one its span waited for."""
    if not nodes:
        return 0.0
    return max(nodes.values(), key=lambda lane: lane[1] - lane[0])[2]


def real_correction(real_s: float, scale: float) -> float:
    """What dividing `real_s` seconds that ran at real speed by the scale adds, to take off again."""
    return real_s * (1 / scale - 1)


def end_state(after: ClusterState) -> dict[str, Any]:
    """What the migration left, as the cluster shows it: per GPU node its plugins, cordon, allocatable
    and published devices; per pool the capacity after and the demand on it."""
    readiness = assess(after)
    nodes = readiness.inventory.nodes
    migrated = [n.name for n in nodes if n.dra_plugin_enabled and not n.device_plugin_enabled]
    return {
        "nodesMigrated": len(migrated),
        "nodes": len(nodes),
        "nodeStates": [
            {
                "name": n.name,
                "pool": n.pool,
                "devicePluginEnabled": n.device_plugin_enabled,
                "draPluginEnabled": n.dra_plugin_enabled,
                "unschedulable": n.unschedulable,
                "allocatable": dict(sorted(n.allocatable.items())),
                "draDevices": dict(sorted(n.dra_devices.items())),
            }
            for n in sorted(nodes, key=lambda n: n.name)
        ],
        "capacity": [
            {"pool": c.pool, "resource": c.resource, "after": c.after, "demand": c.demand, "fits": c.fits}
            for c in readiness.capacity
        ],
    }


def from_journal(
    plan: Plan,
    records: list[Record],
    *,
    time_scale: float,
    wall_seconds: float,
    ok: bool,
    failure: str | None,
    reasons: dict[str, str],
    after: ClusterState,
    unreproduced: list[str],
    real_s_per_wave: float = 0.0,
) -> Rehearsal:
    """`real_s_per_wave`: seconds of each wave with canaries that ran unscaled (`run.twin_timing`)."""
    estimate = plan.summary.get("estimatedDuration")
    if isinstance(estimate, str):
        parse_duration(estimate)  # an estimate apply could not read is a bad plan, said here too
    high = plan.summary.get("estimatedMaxDuration")
    waves = _waves_of(records, time_scale, reasons, real_s_per_wave)
    corrected = sum(real_correction(w.real_s, time_scale) for w in waves)
    return Rehearsal(
        plan_digest=plan.digest or "",
        result="ok" if ok else "failed",
        waves=waves,
        rehearsed_seconds=max(wall_seconds / time_scale - corrected, 0.0),
        estimated_duration=estimate if isinstance(estimate, str) else None,
        estimated_max_duration=high if isinstance(high, str) else None,
        time_scale=time_scale,
        unreproduced=unreproduced,
        end_state=end_state(after),
        failure=failure,
    )


REQUIRED = ("result", "waves", "rehearsedDuration", "estimatedDuration", "unreproduced", "endState", "plan")


def load_rehearsal(path: Path, plan_digest: str) -> dict[str, Any]:
    """A rehearsal's JSON (`rehearse -o json --out FILE`) for the report: of this plan, or refused.

    A rehearsal of another plan (or of this plan before an edit) says nothing about this one, as a
    journal of another plan does not (`execute.journal.read_records`).
    """
    hint = f"rehearse this plan again: dra-migrate rehearse PLAN --snapshot FILE -o json --out {path}"
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as e:
        raise InputError(f"rehearsal {path}: {e.strerror or e}", "check the path") from e
    except orjson.JSONDecodeError as e:
        raise InputError(f"rehearsal {path} is not JSON: {e}", hint) from e
    if not isinstance(data, dict) or data.get("formatVersion") != FORMAT_VERSION:
        version = data.get("formatVersion") if isinstance(data, dict) else None
        raise InputError(f"rehearsal {path}: formatVersion {version!r}, this dra-migrate reads {FORMAT_VERSION}", hint)
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise InputError(f"rehearsal {path} lacks {', '.join(missing)}", hint)
    if data["result"] not in ("ok", "failed") or not isinstance(data["waves"], list):
        raise InputError(f"rehearsal {path}: result must be ok or failed and waves a list", hint)
    for i, w in enumerate(data["waves"]):
        if not _is_wave(w):
            raise InputError(f"rehearsal {path}: waves[{i}] is not a wave (stage, wave, result, seconds, lists)", hint)
    digest = data["plan"].get("digest") if isinstance(data["plan"], dict) else None
    if digest != plan_digest:
        theirs = str(digest)[:19]
        raise InputError(f"rehearsal {path} is of another plan (digest {theirs}, not {plan_digest[:19]})", hint)
    scrubbed: dict[str, Any] = _scrubbed(data)
    return scrubbed


def _scrubbed(value: Any) -> Any:
    """Every string of a rehearsal scrubbed (`secrets.scrub`): its failure, stalled drains and pending reasons
    quote the twin's API errors and scheduler messages, and the report is handed on; a file written by hand or
    by another tool may carry anything."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _is_wave(w: Any) -> bool:
    return (
        isinstance(w, dict)
        and isinstance(w.get("stage"), str)
        and (w.get("wave") is None or isinstance(w.get("wave"), str))
        and isinstance(w.get("result"), str)
        and isinstance(w.get("seconds"), int | float)
        and all(isinstance(w.get(k), list) for k in ("stalledDrains", "pendingPods"))
    )
