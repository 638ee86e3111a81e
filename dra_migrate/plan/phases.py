"""The estimate as a reader sees it (`estimate_text`), and the kubelets' status-sync phases that make it a
range: what `show`, `status` and the report say of a plan's duration. Apart from `estimate.py` (which makes
the estimate, and re-exports these) so that drawing a plan does not import what planning needs (the model,
the pod rules): a module is memory, and issue 29 holds `show`'s peak to 5x the plan file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.plan.durations import parse_duration
from dra_migrate.sim.timing import REALISTIC, TimingProfile


@dataclass(frozen=True)
class ExecutorCosts:
    """What the executor itself adds, beside what the cluster's components take."""

    request_s: float = 0.02  # one API round trip on a healthy control plane
    poll_s: float = 0.5  # waits re-read state this often (LiveOps.poll_s): a change is seen ≤ one poll late
    # The scheduler allocating the canary's device through DRA and binding it (measured on the test
    # control plane: bench/apply.py's canary step, 0.6 s with its first poll).
    scheduling_s: float = 0.25
    qps: float | None = None  # the client's rate limit, when known (None: unbounded)
    # The canary passes when its container has run (`nvidia-smi -L`) and exited 0, not when it is bound.
    canary_waits_for_exit: bool = True


def sync_wait(period_s: float, wave_size: int, quantile: float | None = None) -> float:
    """How long the slowest of `wave_size` nodes waits for its kubelet's next status sync, whose phases
    are spread uniformly over the period: on average n/(n+1) of it; `quantile` q: the largest of n uniform
    waits is below x with probability (x/T)^n, so its q-quantile is T·q^(1/n)."""
    n = max(wave_size, 1)
    return period_s * (quantile ** (1 / n) if quantile is not None else n / (n + 1))


def _wait_ready(profile: TimingProfile, costs: ExecutorCosts, sync_s: float) -> float:
    """`wait-dra-ready`: the later of allocatable 0 (the plugin's exit, then a status sync) and the DRA
    plugin's slice (its label is written one step, two requests, after the device plugin's); one poll."""
    rt = costs.request_s
    allocatable_zero = profile.plugin_exit_s + sync_s
    slices_published = profile.dra_plugin_start_s - 2 * rt
    return max(allocatable_zero - 2 * rt, slices_published, 0.0) + costs.poll_s / 2 + rt


# The phase of each kubelet's status-sync timer is what no plan can know: for a wave of many nodes the slowest
# wait is near a whole period whatever the phases, but a wave of one node waits anywhere in it. Measured on
# the real NVIDIA stack (docs/twin.md): the same one-node apply took 9.7, 7.0 and 4.5 s started 0, 2.5 and
# 6 s later. The estimate is the mean; `phase_range` gives the 5th to 95th percentile of each wave, added up.
PHASE_QUANTILES = (0.05, 0.95)


def phase_range(wave_sizes: Iterable[int], profile: TimingProfile = REALISTIC) -> tuple[float, float]:
    """(below, above): how far the kubelets' sync phases can move a plan's apply from its estimate, the
    sum over waves of `wave_sizes` (concurrent) of the slowest node's 5th and 95th percentile wait."""
    costs, period = ExecutorCosts(), profile.node_status_sync_s
    below = above = 0.0
    for n in wave_sizes:
        mean = _wait_ready(profile, costs, sync_wait(period, n))
        low, high = (_wait_ready(profile, costs, sync_wait(period, n, q)) for q in PHASE_QUANTILES)
        below, above = below + mean - low, above + high - mean
    return below, above


def format_seconds(seconds: float) -> str:
    """A duration rounded up to whole seconds, as plans write durations ("1m5s")."""
    total = math.ceil(seconds - 1e-9)
    h, rest = divmod(max(total, 0), 3600)
    m, s = divmod(rest, 60)
    return ((f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")) or "0s"


# The sync phases are said as a range when they move the estimate by more than this share of it (a plan of
# few small waves and short soaks); a fleet's waves wait near a whole period whatever the phases.
PHASE_SHOWN = 0.1


def estimate_text(summary: Mapping[str, Any], note: str = "", wave_sizes: Sequence[int] = ()) -> str:
    """The estimate as a reader sees it: a point, or a range with what makes it one; `note` goes in its
    parentheses (e.g. "soaks included"). `wave_sizes`, the nodes of each wave in order, give the range the
    kubelets' status-sync phases make (`phase_range`) where it matters."""
    point = str(summary.get("estimatedDuration") or "?")
    high = summary.get("estimatedMaxDuration")
    holds = summary.get("drainHolds") or {}
    held = bool(high) and isinstance(holds, Mapping) and bool(holds)
    reasons = [note] if note else []
    span = _phase_span(point, str(high) if held else point, wave_sizes)
    if span is not None:
        reasons.append(f"the kubelets' status syncs, every {REALISTIC.node_status_sync_s:g} s at phases no plan knows")
    if held:
        budgets = sorted(set(map(str, holds.values())))
        shown = ", ".join(budgets[:3]) + (f" and {len(budgets) - 3} more" if len(budgets) > 3 else "")
        reasons.append(
            f"PodDisruptionBudget {shown} can hold the drain of {len(holds)} node(s) until replacements are "
            "Ready elsewhere, at most until the drain's timeout"
        )
    if span is not None:
        return f"{point}, {span} ({'; '.join(reasons)})"
    if held:
        return f"{point}–{high} ({'; '.join(reasons)})"
    return f"{point} ({note})" if note else point


def _phase_span(low: str, high: str, wave_sizes: Sequence[int]) -> str | None:
    """The estimate's range with the sync phases' (`phase_range`), "6s" to "15s" joined by an en dash,
    when they move it by more than PHASE_SHOWN; None otherwise."""
    low_s, high_s = _seconds(low), _seconds(high)
    below, above = phase_range(wave_sizes)
    if low_s is None or high_s is None or max(below, above) <= PHASE_SHOWN * low_s:
        return None
    return f"{format_seconds(max(low_s - below, 0.0))}–{format_seconds(high_s + above)}"


def _seconds(text: str) -> float | None:
    try:
        return float(parse_duration(text))
    except InputError:
        return None
