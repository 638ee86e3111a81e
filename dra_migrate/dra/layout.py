"""Layout: what each physical GPU of a node is, a full GPU or a list of MIG instances, from its GPU Feature
Discovery labels (and, under mixed MIG, the MIG Manager's applied config). `dra/devices.py` turns a layout into
the devices the NVIDIA DRA driver publishes; the simulator (`sim/spec.py`) publishes the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_migrate.dra.products import (
    LABEL_PRODUCT,
    PROFILE_RE,
    MigProfile,
    mig_profile,
    profile_from_resource,
    single_profile,
)
from dra_migrate.inventory.migparted import CONFIG_LABEL, STATE_LABEL, GpuMig

LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_MIG_CAPABLE = "nvidia.com/mig.capable"
# The MIG Manager preset that turns MIG off on every GPU (the GPU Operator's default-mig-parted-config; the value
# the operator labels MIG-capable nodes with by default).
MIG_OFF_PRESET = "all-disabled"


@dataclass(frozen=True)
class MigInstance:
    profile: str
    start: int
    geometry: MigProfile


# One entry per physical GPU: None is a full GPU, a tuple is a MIG-enabled GPU's instances.
Layout = tuple[tuple[MigInstance, ...] | None, ...]


def mig_strategy(labels: Mapping[str, str]) -> str:
    """The MIG strategy in effect: `single` when GFD reports a `-MIG-<profile>` product, `mixed` when it
    reports per-profile counts, else `none`. The operator's default strategy label is `single` even where
    MIG is off: GFD then reports whole GPUs and a product without the suffix, which is `none` here."""
    if single_profile(labels.get(LABEL_PRODUCT, "")) is not None:
        return "single"
    if labels.get(LABEL_MIG_STRATEGY) == "mixed" and mixed_counts(labels):
        return "mixed"
    return "none"


def mixed_counts(labels: Mapping[str, str]) -> dict[str, int]:
    """Profile -> instances on the node, from GFD's `nvidia.com/mig-<p>.count` labels."""
    out: dict[str, int] = {}
    for key, value in labels.items():
        if key.startswith("nvidia.com/mig-") and key.endswith(".count") and label_int(value) > 0:
            profile = profile_from_resource(key[len("nvidia.com/mig-") : -len(".count")])
            if PROFILE_RE.match(profile):
                out[profile] = label_int(value)
    return out


def unpredictable_layout(labels: Mapping[str, str], mig_configs: Mapping[str, Any] | None = None) -> str | None:
    """Why GFD's labels cannot say what the DRA driver publishes on the node, or None when they can.

    `mig_configs`: the MIG Manager's `mig-configs` (inventory/migparted.py `mig_parted_configs`), which say whether
    the config a node is labelled with turns MIG on; see `mig_mode_unseen` for the device plugin's none strategy.

    Under the single strategy GFD labels a node whose GPUs are not all MIG-enabled with instances of one profile
    `<model>-MIG-INVALID` with `gpu.count` 0 (k8s-device-plugin v0.18.0 internal/lm/mig-strategy.go L188-240
    newMigStrategySingleLabeler, L244-264 newInvalidMigStrategyLabeler), while the DRA driver still publishes each
    MIG-disabled GPU whole and every MIG device of the others (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/
    nvlib.go L302-327): how many, no label says. So for any `-MIG-<suffix>` that is not a profile we can read."""
    product = labels.get(LABEL_PRODUCT, "")
    profile = single_profile(product)
    if profile is None:
        return mig_mode_unseen(labels, mig_configs or {})
    try:
        mig_profile(profile, labels)
    except ValueError:
        return (
            f"GFD labels its GPUs `{product}` with gpu.count {labels.get(LABEL_COUNT, '?')} under the single MIG "
            "strategy (GPUs MIG-enabled without instances, MIG-enabled beside MIG-disabled, or several profiles): "
            "the DRA driver publishes its whole GPUs and MIG devices, how many no label says"
        )
    return None


def mig_mode_unseen(labels: Mapping[str, str], mig_configs: Mapping[str, Any]) -> str | None:
    """Why the MIG mode of a node's GPUs is in no GFD label while the MIG Manager may have turned it on, or None.

    Under the device plugin's `mig.strategy=none` GFD writes no `nvidia.com/mig.strategy` label and no MIG label, and
    labels a MIG-enabled GPU whole under the same `gpu.count` and product as the others (k8s-device-plugin v0.18.0
    internal/lm/mig-strategy.go NewResourceLabeler returns the full-GPU labeler alone under none, newGPULabelers
    counts `devicesByMigEnabled[true]` with the rest; internal/lm/strategy.go migStrategyLabeler writes nothing for
    none); the device plugin advertises it as one `nvidia.com/gpu` (internal/rm/device_map.go buildGPUDeviceMap skips
    MIG-enabled GPUs only `if migEnabled && *b.migStrategy != spec.MigStrategyNone`). The DRA driver publishes a
    MIG-enabled GPU as its MIG devices only, never whole, and nothing for one without instances (dra-driver-nvidia-gpu
    v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go GetPerGpuAllocatableDevices L302-327). So where the MIG Manager's
    `nvidia.com/mig.config` label says a config was asked for, the whole GPUs GFD counts are the driver's devices
    only when that config was applied (`nvidia.com/mig.config.state=success`) and keeps MIG off on every GPU:
    `all-disabled`, or a config of the mig-parted ConfigMap read whose every entry has `mig-enabled: false`.
    Without the MIG Manager's label nothing says MIG is on (MIG turned on by hand is not seen: docs/readiness.md).
    Under GFD's single or mixed strategy MIG devices are labelled and none of this applies."""
    key = labels.get(CONFIG_LABEL, "")
    if not key or labels.get(LABEL_MIG_STRATEGY) in ("single", "mixed") or labels.get(LABEL_MIG_CAPABLE) == "false":
        return None
    if mig_strategy(labels) != "none":
        return None
    state = labels.get(STATE_LABEL, "")
    head = (
        f"the MIG Manager's {CONFIG_LABEL}={key}, and GFD under the device plugin's mig.strategy none labels every GPU "
        "whole (no nvidia.com/mig.strategy, no MIG counts) while the DRA driver publishes a MIG-enabled GPU as its MIG "
        "devices only"
    )
    if state != "success":
        return f"{head}: the config is in state `{state or 'unset'}`, so the GPUs keep a MIG mode no label says"
    enables = _config_enables_mig(key, mig_configs)
    if enables is None:
        return (
            f"{head}: `{key}` is no config of the MIG Manager's ConfigMap read here: whether it turns MIG on is unknown"
        )
    if enables:
        return f"{head}: `{key}` turns MIG on, and how many MIG devices its GPUs hold no GFD label says"
    return None


def _config_enables_mig(key: str, mig_configs: Mapping[str, Any]) -> bool | None:
    """Whether the mig-parted config `key` turns MIG on for any GPU (an entry not `mig-enabled: false`, device
    filters included: they name PCI IDs no label carries); None when the config is not known."""
    entries = mig_configs.get(key)
    if isinstance(entries, list) and entries:
        return any(not isinstance(e, dict) or e.get("mig-enabled") is not False for e in entries)
    return False if key == MIG_OFF_PRESET else None


def has_gpu_labels(labels: Mapping[str, Any]) -> bool:
    return labels.get("nvidia.com/gpu.present") == "true" or LABEL_COUNT in labels


def full_gpus_from_capacity(labels: Mapping[str, str], capacity: Mapping[str, Any]) -> int | None:
    """Under the mixed strategy, the GPUs left whole, when the device plugin advertises them: its
    `nvidia.com/gpu` (or renamed `nvidia.com/gpu.shared`) capacity over the time-slicing replicas, 0 when it
    advertises MIG devices only. None otherwise (unknown, or not needed)."""
    if labels.get(LABEL_MIG_STRATEGY) != "mixed" or mig_strategy(labels) == "single":
        return None
    advertised = label_int(capacity.get("nvidia.com/gpu", 0)) or label_int(capacity.get("nvidia.com/gpu.shared", 0))
    if advertised <= 0:
        # MIG devices advertised and no whole GPU under any name: every GPU is MIG-enabled. The device plugin skips
        # MIG-enabled GPUs for nvidia.com/gpu under mixed (k8s-device-plugin v0.18.0 internal/rm/device_map.go
        # buildGPUDeviceMap) and registers no resource without devices; the DRA driver publishes such a GPU as its
        # MIG devices only (dra-driver-nvidia-gpu v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go L302-327).
        served = {str(k) for k, v in capacity.items() if str(k).startswith("nvidia.com/") and label_int(v) > 0}
        if served and all(k.startswith("nvidia.com/mig-") for k in served):
            return 0
        return None
    return advertised // max(label_int(labels.get(LABEL_REPLICAS, 1)), 1)


def unlabelled_gpus(labels: Mapping[str, str], capacity: Mapping[str, Any], replicas: int = 1) -> int:
    """Without MIG devices (strategy `none` here), the GPUs the device plugin advertises beyond GFD's `gpu.count`:
    GPUs of another product. GFD labels each product's count under the same `nvidia.com/gpu.count`, the last
    written winning (k8s-device-plugin v0.18.0 internal/lm/mig-strategy.go L114-170 newGPULabelers: `counts[name]`,
    "Multiple device types detected"; internal/lm/list.go Labels), while the device plugin advertises every GPU
    (internal/rm/device_map.go buildGPUDeviceMap) and the DRA driver publishes every one (dra-driver-nvidia-gpu
    v0.4.1 cmd/gpu-kubelet-plugin/nvlib.go L209 GetPerGpuAllocatableDevices). The advertised count is over the
    time-slicing/MPS replicas (GFD's `gpu.replicas` or `replicas`, the device-plugin config's, the larger); when
    neither says the GPUs are shared and the advertised count is a multiple of GFD's, it may as well be replicas
    GFD was not told of, and nothing is added."""
    if mig_strategy(labels) != "none" or labels.get(LABEL_MIG_STRATEGY) == "mixed":
        return 0  # under mixed, `gpu_layout` counts the GPUs advertised whole
    count = label_int(labels.get(LABEL_COUNT, 0))
    advertised = label_int(capacity.get("nvidia.com/gpu", 0)) or label_int(capacity.get("nvidia.com/gpu.shared", 0))
    shared = max(label_int(labels.get(LABEL_REPLICAS, 1)), replicas, 1)
    if count <= 0 or advertised % shared or (shared == 1 and advertised % count == 0):
        return 0
    return max(advertised // shared - count, 0)


def _place(instances: Sequence[tuple[str, MigProfile]]) -> tuple[MigInstance, ...] | None:
    """Place instances on one GPU; None when they do not fit.

    Largest first, each at the highest free valid start: this reproduces the placements nvidia-smi
    shows for the mig-parted presets (e.g. all-balanced: 1g@0, 1g@1, 2g@2, 3g@4).
    """
    used = [False] * 8
    placed: list[MigInstance] = []
    for profile, geo in sorted(instances, key=lambda pg: (-pg[1].size, pg[0])):
        for start in sorted(geo.starts, reverse=True):
            cells = range(start, start + geo.size)
            if start + geo.size <= 8 and not any(used[c] for c in cells):
                for c in cells:
                    used[c] = True
                placed.append(MigInstance(profile, start, geo))
                break
        else:
            return None
    return tuple(sorted(placed, key=lambda i: i.start))


def gpu_layout(labels: Mapping[str, str], *, full_gpus: int | None = None, per_gpu_mig: GpuMig | None = None) -> Layout:
    """The node's GPUs as GFD's labels describe them.

    Mixed MIG with `per_gpu_mig` (each GPU's instances per the applied MIG Manager config, checked against
    GFD's counts): exactly that, a MIG-enabled GPU without instances publishing nothing.

    Mixed MIG: `full_gpus` GPUs (when known from capacity) stay whole; each profile's instances are
    dealt round-robin over the others, so a uniform layout (`all-3g.40gb`) comes back exactly. An
    instance that fits nowhere is left out. Single MIG: gpu.count is the number of MIG devices, all of
    the profile in gpu.product, packed onto as few GPUs as they fit.
    """
    strategy = mig_strategy(labels)
    count = label_int(labels.get(LABEL_COUNT, 0))
    profile = single_profile(labels.get(LABEL_PRODUCT, ""))
    if strategy == "single" and profile is not None:
        try:
            geo = mig_profile(profile, labels)
        except ValueError:
            return ()  # a product suffix we cannot read: what the GPUs are is unknown
        per_gpu = len(_place_greedy(profile, geo))
        gpus = -(-count // per_gpu) if per_gpu else 0
        out: list[tuple[MigInstance, ...] | None] = []
        remaining = count
        for _ in range(gpus):
            n = min(per_gpu, remaining)
            remaining -= n
            out.append(_place([(profile, geo)] * n))
        return tuple(out)
    if strategy != "mixed":
        if full_gpus is not None and labels.get(LABEL_MIG_STRATEGY) == "mixed":
            # Mixed, and no MIG device: the GPUs not advertised whole are MIG-enabled without instances, which the
            # driver publishes nothing for (dra-driver-nvidia-gpu v0.4.1 nvlib.go L320-324 "MIG mode enabled but no
            # configured MIG devices"); the device plugin skips them (k8s-device-plugin v0.18.0 device_map.go).
            return (None,) * full_gpus + ((),) * max(count - full_gpus, 0)
        return (None,) * count
    if per_gpu_mig is not None and len(per_gpu_mig) == count:
        return tuple(None if g is None else _instances_of(g, labels) for g in per_gpu_mig)
    # Without the device plugin's capacity (its plugin left and the kubelet zeroed it), how many GPUs are
    # whole is not in the labels: the instances are taken to be on as few GPUs as hold them.
    # With it, the GPUs left whole are those it advertises, and the MIG-enabled ones at least as many as GFD's
    # instances need: where the node has GPUs of two products, `gpu.count` is one product's (GFD labels each
    # product's count under the same key, the last written wins: k8s-device-plugin v0.18.0 internal/lm/
    # mig-strategy.go L114-170 newGPULabelers, internal/lm/list.go Labels), and the instances may be the other's.
    if full_gpus is not None:
        whole = full_gpus
        mig_gpus = max(count - full_gpus, _fewest_gpus_possible(labels))
    else:
        mig_gpus = _fewest_gpus_holding(labels, count)
        whole = count - mig_gpus
    if mig_gpus == 0:
        return (None,) * whole
    wanted: list[list[tuple[str, MigProfile]]] = [[] for _ in range(mig_gpus)]
    for name, n in sorted(mixed_counts(labels).items()):
        geo = mig_profile(name, labels)
        for j in range(n):
            wanted[j % mig_gpus].append((name, geo))
    # The driver publishes every existing MIG device (dra-driver-nvidia-gpu nvlib.go
    # GetPerGpuAllocatableDevices), so the count must be the sum of GFD's counts whatever the layout
    # across GPUs: what a GPU cannot hold goes to another that can (one GPU as 7g.40gb and one as
    # 7x1g.5gb publish 8), and what fits nowhere by our geometry is still counted (`_place_anyway`).
    placed_on: list[list[tuple[str, MigProfile]]] = [[] for _ in range(mig_gpus)]
    left: list[tuple[str, MigProfile]] = []
    for i, want in enumerate(wanted):
        for inst in sorted(want, key=lambda pg: (-pg[1].size, pg[0])):
            if _place([*placed_on[i], inst]) is not None:
                placed_on[i].append(inst)
            else:
                left.append(inst)
    for inst in sorted(left, key=lambda pg: (-pg[1].size, pg[0])):
        home = next((g for g in placed_on if _place([*g, inst]) is not None), None)
        if home is not None:
            home.append(inst)
        else:
            min(placed_on, key=len).append(inst)
    # A MIG-enabled GPU the instances do not reach stays a MIG GPU with no devices: the driver publishes
    # nothing for it (dra-driver-nvidia-gpu v0.4.1 nvlib.go "MIG mode enabled but no configured MIG devices").
    layout: list[tuple[MigInstance, ...] | None] = [_place(m) or _place_anyway(m) for m in placed_on]
    layout.extend([None] * whole)
    return tuple(layout)


def _instances_of(profiles: Mapping[str, int], labels: Mapping[str, str]) -> tuple[MigInstance, ...]:
    wanted = [(p, mig_profile(p, labels)) for p, n in sorted(profiles.items()) for _ in range(n)]
    return _place(wanted) or _place_anyway(wanted)


def _fewest_gpus_holding(labels: Mapping[str, str], count: int) -> int:
    """Under mixed MIG, the fewest of the node's `count` GPUs that hold GFD's MIG instances (first fit, largest
    first, by our geometry). Exact when every MIG-enabled GPU is needed for its instances; a MIG-enabled GPU
    with no instances, or instances spread thinner than they pack, cannot be seen in GFD's labels (they count
    instances per profile and GPUs per product, not per GPU): docs/nvidia-tier.md."""
    instances = [(p, mig_profile(p, labels)) for p, n in sorted(mixed_counts(labels).items()) for _ in range(n)]
    gpus: list[list[tuple[str, MigProfile]]] = []
    for inst in sorted(instances, key=lambda pg: (-pg[1].size, pg[0])):
        home = next((g for g in gpus if _place([*g, inst]) is not None), None)
        if home is not None:
            home.append(inst)
        else:
            gpus.append([inst])
    return min(len(gpus), count)


def _fewest_gpus_possible(labels: Mapping[str, str]) -> int:
    """A lower bound on the GPUs that hold GFD's MIG instances: their memory slices over 8, their compute slices over
    7, and each profile's instances over the most one GPU holds. Never more than the truth, unlike first fit
    (`_fewest_gpus_holding`), which can take one GPU more than a tight layout (all-balanced on 8 A100s: 9)."""
    bound = 0
    memory = compute = 0
    for p, n in mixed_counts(labels).items():
        geo = mig_profile(p, labels)
        memory += geo.size * n
        m = PROFILE_RE.match(p)
        compute += (int(m.group(1)) if m else 1) * n
        per_gpu = len(_place_greedy(p, geo))
        if per_gpu:
            bound = max(bound, -(-n // per_gpu))
    return max(bound, -(-memory // 8), -(-compute // 7))


def _place_anyway(instances: Sequence[tuple[str, MigProfile]]) -> tuple[MigInstance, ...]:
    """Instances our geometry cannot fit on one GPU (labels from a layout we do not model): each at the
    first of its starts that no instance of the same profile took, so names stay unique."""
    taken: set[tuple[str, int]] = set()
    out: list[MigInstance] = []
    for profile, geo in instances:
        start = next((s for s in geo.starts if (profile, s) not in taken), None)
        if start is None:
            start = max((s for p, s in taken if p == profile), default=-1) + 1
        taken.add((profile, start))
        out.append(MigInstance(profile, start, geo))
    return tuple(sorted(out, key=lambda i: (i.start, i.profile)))


def _place_greedy(profile: str, geo: MigProfile) -> tuple[MigInstance, ...]:
    """As many instances of one profile as fit on a GPU."""
    best: tuple[MigInstance, ...] = ()
    for n in range(1, 9):
        placed = _place([(profile, geo)] * n)
        if placed is None:
            break
        best = placed
    return best


def label_int(value: Any) -> int:
    """A label or count as an int; 0 when it is not one."""
    try:
        return int(str(value))
    except ValueError:
        return 0
