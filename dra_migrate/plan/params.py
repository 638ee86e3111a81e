"""Planning parameters: validated once, recorded in the plan, so a plan says how it was made."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from dra_migrate.errors import InputError
from dra_migrate.plan.durations import MAX_DURATION as MAX_DURATION
from dra_migrate.plan.durations import checked_duration as checked_duration
from dra_migrate.plan.durations import parse_duration as parse_duration

# Node labels from the GPU Operator and the DRA driver docs: the device plugin DaemonSet selects
# nvidia.com/gpu.deploy.device-plugin=true and an existing non-empty value is kept by the operator, so
# "false" keeps it off (NVIDIA/gpu-operator controllers/state_manager.go); the standalone DRA chart is
# installed with kubeletPlugin.nodeSelector nvidia.com/dra-kubelet-plugin=true (GPU Operator docs,
# dra-intro-install.rst, "standalone DRA driver next to a ClusterPolicy").
DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
DEVICE_PLUGIN_OFF = "false"
DRA_LABEL = "nvidia.com/dra-kubelet-plugin"
DRA_ON = "true"
# The canary proves use (dra_migrate/execute/canary.py). NVIDIA's CDI spec (NVIDIA Container Toolkit, what the
# DRA driver hands the runtime) mounts the host's nvidia-smi into the container (NVIDIA/nvidia-container-toolkit
# v1.19.1, the version dra-driver-nvidia-gpu v0.4.1 builds with, pkg/nvcdi/driver-nvml.go: "nvidia-smi" among the
# driver binaries), so any image with a shell and awk will do. The command counts the devices `nvidia-smi -L`
# lists against the request: each `MIG ...` line (listed under its parent GPU's line), and each `GPU <i>: ...`
# line without MIG devices under it. Counting `GPU` lines alone counted a MIG device's parent, so a container
# that saw MIG devices of its GPU besides its own passed.
CANARY_IMAGE = "ubuntu:24.04"
CANARY_COMMAND = (
    "nvidia-smi -L && test \"$(nvidia-smi -L | awk '/^GPU /{n+=g; g=1} /^[[:space:]]*MIG /{n++; g=0} "
    'END{print n+g}\')" -eq "$DRA_MIGRATE_CANARY_DEVICES"'
)
CANARY_NAMESPACE = "default"
DRA_DRIVER = "gpu.nvidia.com"  # kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin DriverName

_COUNT_RE = re.compile(r"[0-9]{1,9}%?", re.ASCII)
# Kubernetes' label syntax, k8s.io/apimachinery v0.37.2 pkg/api/validate/content/kube.go (IsLabelKey, which
# pkg/util/validation's IsQualifiedName aliases, and IsLabelValue), and IsDNS1123Subdomain for the prefix.
# Python's fullmatch stands for Go's ^...$ (Go's $ never matches before a trailing newline).
_LABEL_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]", re.ASCII)
_DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?", re.ASCII)
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.ASCII)
_LABEL_NAME_MAX, _LABEL_VALUE_MAX, _DNS1123_SUBDOMAIN_MAX = 63, 63, 253


def label_key_problem(key: object) -> str | None:
    """Why `key` is not a valid label key (qualified name), or None when it is."""
    if not isinstance(key, str) or not key:
        return "empty" if key == "" else "not a string"
    parts = key.split("/")
    if len(parts) > 2:
        return "more than one '/'"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "empty prefix before '/'"
        if len(prefix) > _DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return "its prefix is not a DNS subdomain (lower case, digits, '-' and '.')"
    if not name:
        return "empty name"
    if len(name) > _LABEL_NAME_MAX:
        return f"its name is longer than {_LABEL_NAME_MAX} characters"
    if not _LABEL_NAME.fullmatch(name):
        return "its name must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_value_problem(value: object, *, empty_ok: bool = False) -> str | None:
    """Why `value` is not a label value apply can set, or None. Kubernetes allows "", but a switch label
    set to "" selects nothing the operator or the DRA chart looks for, so it is refused unless `empty_ok`."""
    if not isinstance(value, str):
        return "not a string"
    if not value:
        return None if empty_ok else "empty"
    if len(value) > _LABEL_VALUE_MAX:
        return f"longer than {_LABEL_VALUE_MAX} characters"
    if not _LABEL_NAME.fullmatch(value):
        return "must be alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
    return None


def check_label_key(name: str, key: object) -> None:
    problem = label_key_problem(key)
    if problem:
        raise InputError(f"bad {name} {key!r}: not a Kubernetes label key ({problem})", "e.g. example.com/my-label")


def check_label_value(name: str, value: object) -> None:
    problem = label_value_problem(value)
    if problem:
        raise InputError(f"bad {name} {value!r}: not a label value apply can set ({problem})", "e.g. true")


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
    canary_command: str = CANARY_COMMAND
    # Where the canary pods run, and the Secrets (of that namespace) the kubelet pulls --canary-image with.
    canary_namespace: str = CANARY_NAMESPACE
    canary_pull_secrets: tuple[str, ...] = ()
    pool_labels: tuple[str, ...] = ()
    dra_driver: str = DRA_DRIVER  # --dra-driver: DeviceClasses, wait-dra-ready, the canary, the checks
    pools: tuple[str, ...] = ()  # plan only these pools (empty: every pool)
    exclude_pools: tuple[str, ...] = ()  # leave these pools out (a partial migration)

    def validate(self) -> PlanParams:
        """Refuse, at plan time, any value apply could not carry out; messages name the option."""
        self._check_types()

        from dra_migrate.inventory.dra import check_driver_name

        check_driver_name(self.dra_driver)
        if self.drain not in ("gpu", "all"):
            raise InputError(f"bad --drain {self.drain!r}", "use gpu or all")
        self.wave_size(10)
        checked_duration("--soak", self.soak, zero_ok=True)
        for option, d in (("drain timeout", self.drain_timeout), ("ready timeout", self.ready_timeout),
                          ("canary timeout", self.canary_timeout)):  # fmt: skip
            checked_duration(option, d)
        check_label_key("--device-plugin-label", self.device_plugin_label)
        check_label_key("--dra-label", self.dra_label)
        if self.device_plugin_label == self.dra_label:
            raise InputError("--device-plugin-label and --dra-label are the same label", "give two different keys")
        check_label_value("device-plugin-off value", self.device_plugin_off)
        check_label_value("dra-on value", self.dra_on)
        for key in self.pool_labels:
            check_label_key("--pool-label", key)
        for i, pool in enumerate(self.order):
            if not pool.strip():
                raise InputError("bad --order: an empty pool name", "give pool names, comma-separated")
            if pool in self.order[:i]:  # it would get two stages of one name, a plan no command loads
                raise InputError(f"--order names {pool} twice", "name each pool once")
        if not self.canary_image.strip() or any(c.isspace() for c in self.canary_image):
            raise InputError(f"bad canary image {self.canary_image!r}", "give an image reference")
        if not self.canary_command.strip():
            raise InputError("empty --canary-command", "give a command line that exits 0 when it sees its devices")
        # A namespace's name is a DNS-1123 label, a Secret's a DNS-1123 subdomain (k8s.io/apimachinery v0.37.2
        # pkg/api/validation ValidateNamespaceName, NameIsDNSSubdomain): refused here, not by the first canary.
        ns = self.canary_namespace
        if len(ns) > _LABEL_NAME_MAX or not _DNS1123_LABEL.fullmatch(ns):
            raise InputError(f"bad --canary-namespace {ns!r}", "give a namespace name (lowercase, digits, '-')")
        for i, secret in enumerate(self.canary_pull_secrets):
            if len(secret) > _DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.fullmatch(secret):
                raise InputError(f"bad --canary-pull-secret {secret!r}", "give a Secret's name")
            if secret in self.canary_pull_secrets[:i]:
                raise InputError(f"--canary-pull-secret names {secret} twice", "name each Secret once")
        return self

    def canary_placement(self) -> dict[str, Any]:
        """What a canary step's params add for --canary-namespace and --canary-pull-secret: nothing when
        they are the defaults (plans made before them say the same)."""
        out: dict[str, Any] = {}
        if self.canary_namespace != CANARY_NAMESPACE:
            out["namespace"] = self.canary_namespace
        if self.canary_pull_secrets:
            out["imagePullSecrets"] = list(self.canary_pull_secrets)
        return out

    def _check_types(self) -> None:
        """A plan's `parameters` come from a file: a number where a string belongs is an error, not a crash."""
        for name, f in self.__dataclass_fields__.items():
            value = getattr(self, name)
            if f.type == "tuple[str, ...]":
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            else:
                ok = isinstance(value, str)
            if not ok:
                raise InputError(f"bad plan parameter {_camel(name)}: {value!r} is not {f.type}", "regenerate the plan")

    def wave_size(self, pool_nodes: int) -> int:
        text = self.max_unavailable.strip()
        try:
            if not _COUNT_RE.fullmatch(text):  # int() alone would take "+5", "1_0" and "٣"
                raise ValueError
            if text.endswith("%"):
                pct = int(text[:-1])
                if not 0 < pct <= 100:
                    raise ValueError
                # Rounded down but never to 0, as a Deployment without surge resolves maxUnavailable
                # (k8s.io/kubernetes@v1.37.2 pkg/controller/deployment/util/deployment_util.go ResolveFenceposts:
                # GetScaledValueFromIntOrPercent(..., roundUp=false), then 1 when both fenceposts are 0). A
                # DaemonSet rounds up instead (pkg/controller/daemon/util/daemonset_util.go UnavailableCount):
                # a node here is a drained pool member, so the smaller wave is taken. 0 is refused, as
                # pkg/apis/apps/validation ValidateRollingUpdateDeployment refuses maxUnavailable 0 without
                # maxSurge (there is no surge here).
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
        if not isinstance(d, dict):
            raise InputError("plan parameters are not a mapping", "regenerate the plan")
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
