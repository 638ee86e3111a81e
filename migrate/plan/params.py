"""Planning parameters: validated once, recorded in the plan, so a plan says how it was made."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from migrate.errors import InputError

# Node labels from the GPU Operator and the DRA driver docs: the device plugin DaemonSet selects
# nvidia.com/gpu.deploy.device-plugin=true and an existing non-empty value is kept by the operator, so
# "false" keeps it off (NVIDIA/gpu-operator controllers/state_manager.go); the standalone DRA chart is
# installed with kubeletPlugin.nodeSelector nvidia.com/dra-kubelet-plugin=true (GPU Operator docs,
# dra-intro-install.rst, "standalone DRA driver next to a ClusterPolicy").
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DEVICE_PLUGIN_OFF = "false"
DRA_LABEL = "nvidia.com/dra-kubelet-plugin"
DRA_ON = "true"
CANARY_IMAGE = "registry.k8s.io/pause:3.10"

_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int:
    """ "1h30m", "5m", "0s" -> seconds (Go duration subset: h, m, s)."""
    m = _DURATION_RE.match(text.strip())
    if not text.strip() or not m or not any(m.groups()):
        raise InputError(f"bad duration {text!r}", "write it like 90s, 5m or 1h30m")
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


def format_duration(seconds: int) -> str:
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    out = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    return out or "0s"


@dataclass(frozen=True)
class PlanParams:
    max_unavailable: str = "10%"  # N nodes or N% of the pool per wave, at least 1 node
    soak: str = "5m"
    drain: str = "gpu"  # gpu | all
    order: tuple[str, ...] = ()  # pools first in this order; the rest in the safe default order
    device_plugin_label: str = DEVICE_PLUGIN_LABEL
    device_plugin_off: str = DEVICE_PLUGIN_OFF
    dra_label: str = DRA_LABEL
    dra_on: str = DRA_ON
    drain_timeout: str = "10m"
    ready_timeout: str = "5m"
    canary_timeout: str = "3m"
    canary_image: str = CANARY_IMAGE
    pool_labels: tuple[str, ...] = ()
    pools: tuple[str, ...] = ()  # plan only these pools (empty: every pool)
    exclude_pools: tuple[str, ...] = ()  # leave these pools out (a partial migration)

    def validate(self) -> PlanParams:
        if self.drain not in ("gpu", "all"):
            raise InputError(f"bad --drain {self.drain!r}", "use gpu or all")
        self.wave_size(10)
        for d in (self.soak, self.drain_timeout, self.ready_timeout, self.canary_timeout):
            parse_duration(d)
        return self

    def wave_size(self, pool_nodes: int) -> int:
        text = self.max_unavailable.strip()
        try:
            if text.endswith("%"):
                pct = int(text[:-1])
                if not 0 < pct <= 100:
                    raise ValueError
                # Rounded down, as Kubernetes rounds maxUnavailable percentages, but never below one node.
                return max(1, pool_nodes * pct // 100)
            n = int(text)
            if n < 1:
                raise ValueError
            return n
        except ValueError:
            raise InputError(f"bad --max-unavailable {text!r}", "give a node count (2) or a percentage (10%)") from None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {_camel(k): list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlanParams:
        kwargs: dict[str, Any] = {}
        for k, v in d.items():
            snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k)
            kwargs[snake] = tuple(v) if isinstance(v, list) else v
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise InputError(f"unknown plan parameter {unknown[0]!r}", "regenerate the plan with this version")
        return cls(**kwargs).validate()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
