"""Which MIG instances each GPU of a node holds, from the MIG Manager's config: what GFD's labels cannot say.

GPU Feature Discovery counts MIG instances per profile and GPUs per product (k8s-device-plugin v0.18.0
internal/lm/mig-strategy.go `newGPULabelers`, `newMigStrategyMixedLabeler`: "we ignore devices configured with
migEnabled=true but exposing no MIG devices"), so once the device plugin's `nvidia.com/gpu` capacity is gone a
mixed-MIG node's per-GPU layout is not in its labels. Where the GPU Operator's MIG Manager configured the node,
the layout is written down: the node's `nvidia.com/mig.config` label names a key of the mig-parted config
(`config.yaml` of the ConfigMap in ClusterPolicy `spec.migManager.config.name`, the operator's
`default-mig-parted-config` when unset), and `nvidia.com/mig.config.state=success` says it was applied
(GPU Operator docs gpu-operator-mig.rst). mig-parted's format (NVIDIA/mig-parted README, api/spec/v1):

    version: v1
    mig-configs:
      <key>:
        - devices: all | [0, 1]        # GPU indices
          device-filter: ["0x20B010DE"] # optional: PCI device IDs the entry applies to
          mig-enabled: true
          mig-devices: {"1g.5gb": 2, "3g.20gb": 1}

A layout is used only when it accounts for exactly the instances GFD counts per profile; otherwise (the config
was edited since, an entry's device filter could not be judged) the caller keeps its estimate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_migrate.cluster.configrefs import MIG_MANAGER_DEFAULT_CONFIGMAP as DEFAULT_CONFIGMAP
from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.errors import InputError

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
CONFIG_KEY = "config.yaml"  # the key a MIG Manager ConfigMap must have (ClusterPolicy migManager.config docs)
LABEL_COUNT = "nvidia.com/gpu.count"

# Per GPU index: None when MIG is off, else profile -> instances (empty: MIG on, no instances).
GpuMig = tuple[dict[str, int] | None, ...]


def _meta(o: Obj) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def is_mig_parted_text(text: object) -> bool:
    """Whether a ConfigMap value reads as a mig-parted config (`version` and `mig-configs`): the check before
    parsing a ConfigMap the ClusterPolicy names (which ConfigMaps are read at all: cluster/configrefs.py)."""
    return isinstance(text, str) and "version:" in text and "mig-configs:" in text


def mig_parted_configs(state: ClusterState) -> dict[str, Any]:
    """The `mig-configs` of the MIG Manager config in use: the ClusterPolicy's ConfigMap (or the operator's
    default), else the only mig-parted ConfigMap read. {} when none is known."""
    policies = sorted(
        state.of("nvidia.com/ClusterPolicy"),
        key=lambda o: (str(_meta(o).get("creationTimestamp", "")), str(_meta(o).get("name", ""))),
    )
    wanted: tuple[str | None, str] | None = None
    if policies:
        spec = policies[0].get("spec") if isinstance(policies[0].get("spec"), dict) else {}
        mm = spec.get("migManager") if isinstance(spec, dict) else None
        cfg = mm.get("config") if isinstance(mm, dict) else None
        name = cfg.get("name") if isinstance(cfg, dict) else None
        status = policies[0].get("status")
        ns = status.get("namespace") if isinstance(status, dict) else None
        wanted = (
            ns if isinstance(ns, str) and ns else None,
            name if isinstance(name, str) and name else DEFAULT_CONFIGMAP,
        )
    candidates = []
    for cm in state.of("ConfigMap"):
        data = cm.get("data")
        text = data.get(CONFIG_KEY) if isinstance(data, dict) else None
        if not is_mig_parted_text(text):
            continue
        m = _meta(cm)
        if wanted is None or (m.get("name") == wanted[1] and wanted[0] in (None, m.get("namespace"))):
            candidates.append((str(m.get("namespace", "")), str(m.get("name", "")), str(text)))
    if len(candidates) != 1:
        return {}
    ns, name, text = candidates[0]
    return parse_mig_configs(text, f"ConfigMap {ns}/{name} key {CONFIG_KEY}")


def parse_mig_configs(text: str, where: str) -> dict[str, Any]:
    try:
        docs = list(load_yaml_documents(text, where))
    except InputError:
        return {}
    doc = docs[0] if docs else None
    configs = doc.get("mig-configs") if isinstance(doc, dict) else None
    return configs if isinstance(configs, dict) else {}


def node_gpu_mig(
    labels: Mapping[str, str], configs: Mapping[str, Any], mixed_counts: Mapping[str, int]
) -> GpuMig | None:
    """Per GPU of a node, its MIG instances per the applied MIG Manager config; None when not known exactly.

    Known means: the node's config key exists, its state is `success`, and the layout's instances per
    profile equal GFD's (`mixed_counts`). Entries with a device filter apply when GFD shows every profile
    they create (the filter names PCI device IDs, which no label carries)."""
    entries = configs.get(labels.get(CONFIG_LABEL, ""))
    count = labels.get(LABEL_COUNT, "")
    if labels.get(STATE_LABEL) != "success" or not isinstance(entries, list) or not count.isdecimal():
        return None
    gpus: list[dict[str, int] | None] = [None] * int(count)
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        wanted = _mig_devices(entry.get("mig-devices"))
        if wanted is None:
            return None
        if entry.get("device-filter") and any(p not in mixed_counts for p in wanted):
            continue  # written for another product
        indices = _indices(entry.get("devices"), len(gpus))
        if indices is None:
            return None
        for i in indices:
            gpus[i] = dict(wanted) if entry.get("mig-enabled") is True else None
    totals: dict[str, int] = {}
    for g in gpus:
        for p, n in (g or {}).items():
            totals[p] = totals.get(p, 0) + n
    return tuple(gpus) if totals == dict(mixed_counts) else None


def _mig_devices(raw: object) -> dict[str, int] | None:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        return None
    out: dict[str, int] = {}
    for k, v in raw.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return None
        if v:
            out[str(k)] = v
    return out


def _indices(raw: object, count: int) -> list[int] | None:
    if raw == "all":
        return list(range(count))
    if isinstance(raw, list) and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in raw):
        return list(raw)
    return None
