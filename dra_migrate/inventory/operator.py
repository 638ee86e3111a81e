"""The NVIDIA stack as the cluster shows it: GPU Operator CRs, device-plugin sharing configs, plugins.

Facts used (primary sources):
  * ClusterPolicy spec/status fields: NVIDIA/gpu-operator api/nvidia/v1/clusterpolicy_types.go;
    several ClusterPolicies -> the oldest is used, the others are `ignored`.
  * device-plugin config format (sharing.timeSlicing|mps.resources[].{name,rename,replicas},
    renameByDefault, flags.migStrategy): NVIDIA/k8s-device-plugin api/config/v1/{config,sharing}.go,
    read by `inventory.sharing_config.parse_sharing`.
  * a node picks a config key with the label nvidia.com/device-plugin.config, else the default key
    (k8s-device-plugin README "Updating Per-Node Configuration With a Node Label").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.configrefs import configmaps_named, mig_manager_configmap
from dra_migrate.cluster.configrefs import names as is_one_of
from dra_migrate.cluster.state import ClusterState, Obj
from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.errors import InputError
from dra_migrate.inventory.computedomain import compute_domain_only
from dra_migrate.inventory.gke import GKE_ACCELERATOR_COUNT, GKE_NO_DEFAULT_PLUGIN, GKE_SHARING_LABELS
from dra_migrate.inventory.images import template_images
from dra_migrate.inventory.operator_activity import swept_note, unpaused_node
from dra_migrate.inventory.placement import (
    label_to_deselect,
    label_to_select,
    node_inputs,
    node_selects,
    settable_label,
)
from dra_migrate.inventory.resources import DEFAULT_GPU, GPU_PREFIX, SHARED_GPU
from dra_migrate.inventory.sharing_config import SharedResource, parse_sharing

CONFIG_LABEL = "nvidia.com/device-plugin.config"


@dataclass
class SharingConfig:
    namespace: str
    config_map: str
    key: str
    strategy: str  # timeSlicing | mps | none
    resources: list[SharedResource]
    mig_strategy: str | None
    fail_requests_greater_than_one: bool
    nodes: list[str] = field(default_factory=list)
    is_default: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "configMap": self.config_map,
            "key": self.key,
            "default": self.is_default,
            "strategy": self.strategy,
            "resources": [r.to_dict() for r in self.resources],
            "migStrategy": self.mig_strategy,
            "failRequestsGreaterThanOne": self.fail_requests_greater_than_one,
            "nodes": self.nodes,
            "error": self.error,
        }


def _meta(o: Obj) -> dict[str, Any]:
    m = o.get("metadata")
    return m if isinstance(m, dict) else {}


def _dig(o: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(o, dict):
            return None
        o = o.get(p)
    return o


def _name(o: Obj) -> str:
    return str(_meta(o).get("name", ""))


def custom_resource_names(text: str, where: str) -> set[str]:
    """Names a config defines beyond the defaults: resources.gpus[].name / mig[].name, renames."""
    docs = list(load_yaml_documents(text, where))
    cfg = docs[0] if docs else {}
    out: set[str] = set()
    if not isinstance(cfg, dict):
        return out
    for group in ("gpus", "mig"):
        for r in _dig(cfg, "resources", group) or []:
            if isinstance(r, dict) and isinstance(r.get("name"), str):
                out.add(r["name"] if r["name"].startswith(GPU_PREFIX) else GPU_PREFIX + r["name"])
    try:
        _, shared, _, _ = parse_sharing(text, where)
    except InputError:
        return out
    out.update(s.advertised_as for s in shared)
    return out


def cluster_policies(state: ClusterState) -> list[Obj]:
    """ClusterPolicies, the one the operator uses first (oldest; NVIDIA/gpu-operator a6f6dbff0)."""
    return sorted(
        state.of("nvidia.com/ClusterPolicy"),
        key=lambda o: (str(_meta(o).get("creationTimestamp", "")), _name(o)),
    )


def device_plugin_config_ref(state: ClusterState) -> tuple[str | None, str | None, str | None]:
    """(namespace, ConfigMap name, default key) that the operator's device plugin uses, if any."""
    policies = cluster_policies(state)
    if not policies:
        return None, None, None
    cp = policies[0]
    name = _dig(cp, "spec", "devicePlugin", "config", "name")
    default = _dig(cp, "spec", "devicePlugin", "config", "default")
    ns = _dig(cp, "status", "namespace")
    return (ns if isinstance(ns, str) else None, name or None, default or None)


def sharing_configs(state: ClusterState, gpu_nodes: list[tuple[str, dict[str, str]]]) -> list[SharingConfig]:
    """Every device-plugin config key found, with the nodes that use it."""
    ref_ns, ref_name, ref_default = device_plugin_config_ref(state)
    mig_configs = _mig_manager_configmaps(state)
    out: list[SharingConfig] = []
    for cm in sorted(state.of("ConfigMap"), key=lambda o: (str(_meta(o).get("namespace")), _name(o))):
        ns, name = str(_meta(cm).get("namespace", "")), _name(cm)
        if is_one_of(cm, mig_configs):
            continue  # the MIG Manager's config (inventory/migparted.py), not the device plugin's
        if ref_name and name != ref_name:
            continue  # the operator names its config; other look-alikes are not in use
        if ref_ns and ns != ref_ns:
            continue
        data = cm.get("data") or {}
        keys = sorted(k for k, v in data.items() if isinstance(v, str))
        # The config-manager's choice for a node without the label (k8s-device-plugin v0.18.0 cmd/config-manager
        # main.go updateConfigName): the explicit default (the ClusterPolicy's `devicePlugin.config.default`, the
        # chart's `config.default` as DEFAULT_CONFIG), else the fallbacks `named` ("default"), then `single`.
        explicit = ref_default if ref_name else _mounted_default_config(state, ns, name)
        default_key = explicit or ("default" if "default" in keys else (keys[0] if len(keys) == 1 else None))
        for key in keys:
            sc = _one_config(ns, name, key, data[key])
            sc.is_default = key == default_key
            sc.nodes = [n for n, labels in gpu_nodes if _config_key(labels, keys, default_key) == key]
            out.append(sc)
    return out


def _mounted_default_config(state: ClusterState, namespace: str, config_map: str) -> str | None:
    """DEFAULT_CONFIG of the config-manager in the device-plugin DaemonSet that mounts the ConfigMap (the
    chart's `config.default`: deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml)."""
    for ds in device_plugin_daemonset_objects(state):
        if (namespace, config_map) not in configmaps_named(ds):
            continue
        spec = _dig(ds, "spec", "template", "spec") or {}
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            for e in (c.get("env") if isinstance(c, dict) else None) or []:
                value = e.get("value") if isinstance(e, dict) and e.get("name") == "DEFAULT_CONFIG" else None
                if isinstance(value, str) and value:
                    return value
    return None


def node_config_replicas(state: ClusterState) -> dict[str, dict[str, int]]:
    """Node -> {name the device plugin advertises -> its time-slicing/MPS replicas (> 1)}, from the config key
    the node runs (`sharing_configs`). What the replicas are where GFD, which labels them, does not run (the
    standalone chart's default: `gfd.enabled: false`). A node two configs claim with different replicas is
    left out: which one its plugin runs is not known."""

    def compute() -> dict[str, dict[str, int]]:
        nodes = [
            (str(_meta(n).get("name", "")), {str(k): str(v) for k, v in (_meta(n).get("labels") or {}).items()})
            for n in state.of("Node")
        ]
        out: dict[str, dict[str, int]] = {}
        unknown: set[str] = set()
        for sc in sharing_configs(state, nodes):
            replicas = {r.advertised_as: r.replicas for r in sc.resources if r.replicas > 1}
            for n in sc.nodes:
                if sc.error or out.get(n, replicas) != replicas:
                    unknown.add(n)
                out[n] = replicas
        gke = dict(g for n in state.of("Node") for g in _gke_replicas(n))
        return {
            **{n: r for n, r in gke.items() if n not in out},
            **{n: r for n, r in out.items() if r and n not in unknown},
        }

    return state.memo("inventory.node_config_replicas", compute)


def _gke_replicas(node: Obj) -> list[tuple[str, dict[str, int]]]:
    """[(node, {"nvidia.com/gpu": replicas})] for a node GKE's managed device plugin shares: that plugin has no
    ConfigMap, the node pool's GPU sharing config says it, in node labels. It advertises each GPU
    `gke-max-shared-clients-per-gpu` times under time-sharing or MPS, and each MIG partition
    (`gke-gpu-partition-size`) as one nvidia.com/gpu (cloud.google.com/kubernetes-engine/docs/how-to/
    timesharing-gpus, nvidia-mps-gpus, gpus-multi): the advertised count over the node's physical GPUs
    (`gke-accelerator-count`) is what each GPU stands for. Not where another plugin serves the node."""
    labels = {str(k): str(v) for k, v in (_meta(node).get("labels") or {}).items()}
    if labels.get(GKE_NO_DEFAULT_PLUGIN) == "true" or not any(k in labels for k in GKE_SHARING_LABELS):
        return []
    gpus, advertised = (
        labels.get(GKE_ACCELERATOR_COUNT, ""),
        str(((node.get("status") or {}).get("capacity") or {}).get(DEFAULT_GPU, "")),
    )
    if not (gpus.isdecimal() and advertised.isdecimal() and int(gpus) > 0):
        return []
    replicas = int(advertised) // int(gpus)
    return [(str(_meta(node).get("name", "")), {DEFAULT_GPU: replicas})] if replicas > 1 else []


def _config_key(labels: dict[str, str], keys: list[str], default_key: str | None) -> str | None:
    """The key a node uses: its label when the key exists; else the default (an unknown key makes the
    plugin keep its previous config, which we cannot see, so the default is the best estimate)."""
    chosen = labels.get(CONFIG_LABEL)
    return chosen if chosen in keys else default_key


def _one_config(ns: str, name: str, key: str, text: str) -> SharingConfig:
    where = f"ConfigMap {ns}/{name} key {key}"
    try:
        strategy, resources, mig, fail = parse_sharing(text, where)
    except InputError as e:
        return SharingConfig(ns, name, key, "unknown", [], None, False, error=e.message)
    return SharingConfig(ns, name, key, strategy, resources, mig, fail)


def summarize_operator(state: ClusterState, configs: list[SharingConfig]) -> dict[str, Any]:
    policies = cluster_policies(state)
    cp = policies[0] if policies else None
    return {
        "clusterPolicy": _policy_summary(cp) if cp else None,
        "ignoredClusterPolicies": [_name(p) for p in policies[1:]],
        "nvidiaDrivers": [
            {
                "name": _name(d),
                "version": _dig(d, "spec", "version"),
                "driverType": _dig(d, "spec", "driverType") or "gpu",
                "default": bool(_dig(d, "spec", "default")),
                "state": _dig(d, "status", "state"),
            }
            for d in sorted(state.of("nvidia.com/NVIDIADriver"), key=_name)
        ],
        "gpuClusters": [
            {
                "name": _name(g),
                "draDriverVersion": _dig(g, "spec", "draDriver", "version"),
                "state": _dig(g, "status", "state"),
            }
            for g in sorted(state.of("nvidia.com/GPUCluster"), key=_name)
        ],
        "devicePluginDaemonSets": device_plugin_daemonsets(state),
        "sharingConfigs": [c.to_dict() for c in configs],
    }


def operator_installs_driver(state: ClusterState) -> bool:
    """A ClusterPolicy whose `spec.driver.enabled` is not false (its default is true): the GPU Operator brings the
    driver. Off, it runs on the node image's (on AKS, the one AKS installs: NVIDIA, "GPU Operator with Azure
    Kubernetes Service", docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/microsoft-aks.html), which a
    pool made with `--gpu-driver none` lacks (plan/strategies.py `platform_command`)."""
    return any(_dig(cp, "spec", "driver", "enabled") is not False for cp in state.of("nvidia.com/ClusterPolicy"))


def _policy_summary(cp: Obj) -> dict[str, Any]:
    spec = cp.get("spec") or {}
    cdi = _dig(spec, "cdi", "enabled")
    dp_enabled = _dig(spec, "devicePlugin", "enabled")
    return {
        "name": _name(cp),
        "driverVersion": _dig(spec, "driver", "version"),
        "driverEnabled": _dig(spec, "driver", "enabled") is not False,
        "useNvidiaDriverCRD": bool(_dig(spec, "driver", "useNvidiaDriverCRD")),
        "devicePlugin": {
            "enabled": dp_enabled is not False,
            "config": _dig(spec, "devicePlugin", "config"),
        },
        "migStrategy": _dig(spec, "mig", "strategy"),
        # CDI defaults to enabled in the chart (gpu-operator deployments/gpu-operator/values.yaml).
        "cdiEnabled": cdi is not False,
        "state": _dig(cp, "status", "state"),
        "namespace": _dig(cp, "status", "namespace"),
    }


def _is_device_plugin(ds: Obj) -> bool:
    name = _name(ds)
    # GPU Feature Discovery ships in the same k8s-device-plugin image; it advertises no resources.
    if "feature-discovery" in name:
        return False
    return "nvidia-device-plugin" in name or any("k8s-device-plugin" in i for i in template_images(ds))


def _is_dra_plugin(ds: Obj) -> bool:
    """A DaemonSet of the NVIDIA GPU DRA kubelet plugin (driver gpu.nvidia.com), by its name or image; never one of
    the driver's ComputeDomain side alone (computedomain.py), which shares the name pattern and the image."""
    name = _name(ds)
    return (
        ("dra-driver" in name and "kubelet-plugin" in name)
        or any("dra-driver-nvidia-gpu" in i or "k8s-dra-driver-gpu" in i for i in template_images(ds))
    ) and not compute_domain_only(ds)


def _ref_of(ds: Obj) -> str:
    return f"{_meta(ds).get('namespace', '')}/{_name(ds)}"


def device_plugin_daemonset_objects(state: ClusterState) -> list[Obj]:
    return sorted((d for d in state.of("apps/DaemonSet") if _is_device_plugin(d)), key=_ref_of)


def dra_plugin_daemonset_objects(state: ClusterState) -> list[Obj]:
    return sorted((d for d in state.of("apps/DaemonSet") if _is_dra_plugin(d)), key=_ref_of)


def device_plugin_daemonsets(state: ClusterState) -> list[str]:
    """DaemonSets that run the NVIDIA device plugin (operator-managed or standalone)."""
    return [_ref_of(d) for d in device_plugin_daemonset_objects(state)]


def dra_plugin_daemonsets(state: ClusterState) -> list[str]:
    """DaemonSets of the NVIDIA DRA kubelet plugin: nvidia-dra-driver-gpu-kubelet-plugin (v25.x),
    dra-driver-nvidia-gpu-kubelet-plugin (v0.4+), nvidia-dra-driver-kubelet-plugin (GPU Operator)."""
    return [_ref_of(d) for d in dra_plugin_daemonset_objects(state)]


# ---------------------------------------------------------------------------------------------------
# Per node: what switching a plugin means, from the DaemonSets as installed

# The GPU Operator's device-plugin DaemonSet selects nvidia.com/gpu.deploy.device-plugin=true and the
# operator keeps a value once set, so "false" keeps it off (gpu-operator
# assets/state-device-plugin/0500_daemonset.yaml; controllers/state_manager.go).
OPERATOR_DEVICE_PLUGIN_OFF = ("nvidia.com/gpu.deploy.device-plugin", "false")
# But for the keys it deletes from every node under a ClusterPolicy (operator_activity.py CLUSTER_POLICY_SWEPT).


@dataclass(frozen=True)
class PluginPlacement:
    """What the plan must do on one node for one plugin, and why.

    mode: "runs" (the plugin already runs there: nothing to switch on), "off" (it does not run there:
    nothing to switch off), "label" (set `label`=`value`), "unknown" (no node label can switch it: a
    blocker), "assumed" (no DaemonSet of it was read: the plan's label parameter is assumed).
    """

    mode: str
    daemonset: str | None
    label: str | None
    value: str | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "daemonSet": self.daemonset,
            "label": self.label,
            "value": self.value,
            "why": self.why,
        }


def _pod_spec(ds: Obj) -> dict[str, Any]:
    spec = _dig(ds, "spec", "template", "spec")
    return spec if isinstance(spec, dict) else {}


def switch_keys(ds: Obj) -> list[str]:
    """The settable node labels a DaemonSet selects on (nodeSelector keys, affinity In/Exists keys)."""
    spec = _pod_spec(ds)
    keys = [str(k) for k in spec.get("nodeSelector") or {}]
    terms = _dig(
        spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"
    )
    for term in terms or []:
        for e in (term.get("matchExpressions") or []) if isinstance(term, dict) else []:
            if e.get("operator") in ("In", "Exists"):
                keys.append(str(e.get("key")))
    return [k for k in dict.fromkeys(keys) if settable_label(k)]


DYNAMIC_MIG_GATE = "DynamicMIG"


def dynamic_mig_enabled(ds: Obj) -> bool:
    """Whether the DRA kubelet plugin runs with the DynamicMIG feature gate on."""
    return dra_feature_gate_on(ds, DYNAMIC_MIG_GATE)


def dra_feature_gate_on(ds: Obj, gate: str) -> bool:
    """Whether the DRA kubelet plugin runs with `gate=true` in a container's args or env (the plugin's
    --feature-gates flag / FEATURE_GATES environment variable, dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/main.go
    and pkg/featuregates)."""
    for c in _dig(ds, "spec", "template", "spec", "containers") or []:
        if not isinstance(c, dict):
            continue
        # A field of another type is read as absent, as the dependents' readers read it (inventory/dependents.py).
        args, command, env = (v if isinstance(v := c.get(k), list) else [] for k in ("args", "command", "env"))
        texts = [str(a) for a in args + command] + [str(e.get("value", "")) for e in env if isinstance(e, dict)]
        if any(f"{gate}=true" in t.replace(" ", "") for t in texts):
            return True
    return False


def _term_text(term: Any) -> str:
    """One nodeSelectorTerm as `(key Op [values] AND ...)`: which labels a DaemonSet's placement rests on."""
    exprs = (term.get("matchExpressions") or []) if isinstance(term, dict) else []
    fields = (term.get("matchFields") or []) if isinstance(term, dict) else []
    text = [
        f"{e.get('key')} {e.get('operator')}" + (f" [{', '.join(map(str, e['values']))}]" if e.get("values") else "")
        for e in [*exprs, *fields]
        if isinstance(e, dict)
    ]
    return "(" + " AND ".join(text) + ")"


def _how_selected(ds: Obj, terms: bool = False) -> str:
    """How a DaemonSet picks its nodes; with `terms`, its affinity's terms spelled out (where a blocker must say
    which labels its placement rests on; a plan's per-node `why` keeps the short form)."""
    spec = _pod_spec(ds)
    parts = []
    if spec.get("nodeSelector"):
        parts.append("nodeSelector " + ", ".join(f"{k}={v}" for k, v in sorted(spec["nodeSelector"].items())))
    required = _dig(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        listed = _dig(required, "nodeSelectorTerms") if terms else None
        parts.append("required node affinity" + (" " + " OR ".join(map(_term_text, listed)) if listed else ""))
    return " and ".join(parts) or "no nodeSelector and no node affinity: every node"


def _gpu_allocatable(node: Obj) -> dict[str, int]:
    alloc = _dig(node, "status", "allocatable") or {}
    out: dict[str, int] = {}
    for k, v in alloc.items() if isinstance(alloc, dict) else []:
        if str(k).startswith(GPU_PREFIX):
            try:
                out[str(k)] = int(str(v))
            except ValueError:
                out[str(k)] = 1  # a quantity we do not parse: treat it as advertised
    return out


def dra_plugin_placement(node: Obj, daemonsets: list[Obj], swept: frozenset[str] = frozenset()) -> PluginPlacement:
    """Whether the DRA kubelet plugin runs on `node`, or which one label makes one of its DaemonSets run
    there (the DaemonSet controller's own test: nodeSelector, required node affinity, taints); never one of
    the `swept` keys, which another controller deletes."""
    if not daemonsets:
        return PluginPlacement(
            "assumed", None, None, None, "no DRA kubelet-plugin DaemonSet was read: the plan's --dra-label is assumed"
        )
    for ds in daemonsets:
        if node_selects(_pod_spec(ds), node, daemon=True):
            return PluginPlacement(
                "runs",
                _ref_of(ds),
                None,
                None,
                f"DaemonSet {_ref_of(ds)} already runs on this node ({_how_selected(ds)})",
            )
    for ds in daemonsets:
        switch = label_to_select(_pod_spec(ds), node, swept)
        if switch is not None:
            return PluginPlacement(
                "label",
                _ref_of(ds),
                switch[0],
                switch[1],
                f"DaemonSet {_ref_of(ds)} runs on nodes labelled {switch[0]}={switch[1]} ({_how_selected(ds)})",
            )
    refs = ", ".join(_ref_of(d) for d in daemonsets)
    return PluginPlacement(
        "unknown",
        refs,
        None,
        None,
        f"no node label that an operator can set makes DaemonSet(s) {refs} run on this node "
        f"({'; '.join(_how_selected(d, terms=True) for d in daemonsets)})"
        + swept_note({k for d in daemonsets for k in node_inputs(_pod_spec(d))[0]} & swept),
    )


class Placements:
    """`dra_plugin_placement` and `device_plugin_placement` of nodes, computed once per placement shape.

    The nodes of a pool differ in name and in labels no DaemonSet selects on (hostname, zone): their
    placements are the same. Both functions read of a node only its labels under the keys the DaemonSets'
    selectors name (`node_inputs`; the device plugin's off-switch label besides), its name where a term
    matches fields, its taints and its GPU allocatable: nodes equal in those share one answer (at 10,000
    nodes the per-node placement was 0.6 s of `plan`). A node with a label key that is not a string (the
    functions do not all read such keys alike) is computed on its own."""

    def __init__(self, dra: list[Obj], dp: list[Obj], swept: frozenset[str] = frozenset()) -> None:
        """`swept`: label keys that do not stay where set (`CLUSTER_POLICY_SWEPT` under a ClusterPolicy)."""
        self._dra, self._dp, self._swept = dra, dp, swept
        keys = {OPERATOR_DEVICE_PLUGIN_OFF[0]}
        self._by_name = False
        for ds in (*dra, *dp):
            more, by_name = node_inputs(_pod_spec(ds))
            keys |= more
            self._by_name = self._by_name or by_name
        self._keys = tuple(sorted(keys))
        self._memo: dict[tuple[Any, ...], tuple[PluginPlacement, PluginPlacement]] = {}

    def _shape(self, node: Obj) -> tuple[Any, ...] | None:
        labels = _meta(node).get("labels") or {}
        if not isinstance(labels, dict) or not all(type(k) is str for k in labels):
            return None
        alloc = _dig(node, "status", "allocatable")
        gpus = [(k, v) for k, v in alloc.items() if str(k).startswith(GPU_PREFIX)] if isinstance(alloc, dict) else None
        return (
            tuple(repr(labels[k]) if k in labels else None for k in self._keys),
            repr(_meta(node).get("name")) if self._by_name else None,
            repr(_dig(node, "spec", "taints")),
            repr(gpus),
        )

    def of(self, node: Obj) -> tuple[PluginPlacement, PluginPlacement]:
        """(the DRA plugin's placement, the device plugin's) on this node, as its labels will be once a pause of
        the GPU Operator's ends (`unpaused_node`)."""
        shape = self._shape(node)
        found = self._memo.get(shape) if shape is not None else None
        if found is None:
            node = unpaused_node(node)
            found = (
                dra_plugin_placement(node, self._dra, self._swept),
                device_plugin_placement(node, self._dp, self._swept),
            )
            if shape is not None:
                self._memo[shape] = found
        return found


def device_plugin_placement(node: Obj, daemonsets: list[Obj], swept: frozenset[str] = frozenset()) -> PluginPlacement:
    """Whether the device plugin runs on `node`, and which one label stops every DaemonSet of it there (never
    one of the `swept` keys)."""
    if not daemonsets:
        return PluginPlacement(
            "assumed",
            None,
            None,
            None,
            "no device-plugin DaemonSet was read: the plan's --device-plugin-label is assumed",
        )
    running = [d for d in daemonsets if node_selects(_pod_spec(d), node, daemon=True)]
    if not running:
        refs = ", ".join(_ref_of(d) for d in daemonsets)
        advertised = sorted(k for k, v in _gpu_allocatable(node).items() if v > 0)
        why = f"DaemonSet(s) {refs} do not run on this node"
        if advertised:
            # The DaemonSet controller deletes a pod whose node no longer matches, so its plugin is
            # leaving; if something else serves these GPUs, wait-dra-ready sees allocatable stay > 0 and
            # the wave rolls back. A snapshot keeps no device-plugin pods, so it cannot tell which.
            why += f" (it still advertises {', '.join(advertised)}: the plugin is leaving, or is not ours)"
        return PluginPlacement("off", refs, None, None, why)
    switches = {label_to_deselect(_pod_spec(d), node, OPERATOR_DEVICE_PLUGIN_OFF, swept) for d in running}
    refs = ", ".join(_ref_of(d) for d in running)
    if len(switches) == 1 and None not in switches:
        key, value = next(iter(s for s in switches if s is not None))
        return PluginPlacement(
            "label",
            refs,
            key,
            value,
            f"DaemonSet {refs} stops on nodes labelled {key}={value} ({_how_selected(running[0])})",
        )
    return PluginPlacement(
        "unknown",
        refs,
        None,
        None,
        f"no one node label that an operator can set stops DaemonSet(s) {refs} on this node "
        f"({'; '.join(_how_selected(d, terms=True) for d in running)})",
    )


def _mig_manager_configmaps(state: ClusterState) -> set[tuple[str | None, str]]:
    """The MIG Manager configs the ClusterPolicies name: kept with the device plugin's, read by migparted."""
    return {mig_manager_configmap(p) for p in state.of("nvidia.com/ClusterPolicy")}


def known_gpu_names_from_configs(state: ClusterState) -> set[str]:
    names: set[str] = set()
    mig_configs = _mig_manager_configmaps(state)
    for cm in state.of("ConfigMap"):
        if is_one_of(cm, mig_configs):
            continue
        for key, text in (cm.get("data") or {}).items():
            if isinstance(text, str):
                try:
                    names |= custom_resource_names(text, f"ConfigMap {_name(cm)} key {key}")
                except InputError:
                    continue
    return names - {DEFAULT_GPU, SHARED_GPU}
