"""Snapshot objects mean what they say: every value the tool reads is checked for its type on the way in.

A malformed value is refused with one line naming the file and the object, rather than read as a default
(a GPU count of "-2" is not "no GPUs"; `replicas: "2"` is not 1). Only what the tool reads is checked, by
the types of the Kubernetes API (k8s.io/api core/v1 Node, Pod, Container, ResourceRequirements; apps/v1
`replicas` is an int32): anything the API server would not store is refused; anything it would store and
the tool does not read is left alone.
"""

from __future__ import annotations

from typing import Any

from dra_migrate.cluster.podmeta import KEPT_POD_ANNOTATIONS
from dra_migrate.cluster.quantity import parse_quantity
from dra_migrate.cluster.templates import ResolvedTemplate, TemplateTable, get_path
from dra_migrate.errors import InputError

Obj = dict[str, Any]
GPU_PREFIX = "nvidia.com/"
HINT = "fix the snapshot, or export it again with kubectl or dra-migrate snapshot"

# Nesting deeper than this is refused before any recursive walk (and before a C parser sees it): a
# Kubernetes object is a few dozen levels deep, and orjson serialises at most 254 levels.
MAX_DEPTH = 200
# A device count beyond this is a typo or an attack, not a node (and would make Python build a huge int).
MAX_COUNT = 1 << 31

# Container lists by their field name; any other container path (KServe `model`, Argo `container`)
# holds one container.
_LIST_FIELDS = ("containers", "initContainers", "sidecars", "ephemeralContainers")


class Malformed(Exception):
    """A value of the wrong type, with the field it sits at."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field} {problem}")


def describe(obj: Obj) -> str:
    """`Kind namespace/name` for messages, whatever the object holds."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name, ns = meta.get("name"), meta.get("namespace")
    ident = f"{ns}/{name}" if isinstance(ns, str) and ns else str(name) if isinstance(name, str) else "(no name)"
    return f"{obj.get('kind', '?')} {ident}"


def refuse(where: str, obj: Obj, problem: str) -> InputError:
    return InputError(f"{where}: {describe(obj)}: {problem}", HINT)


def _dict(v: Any, field: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise Malformed(field, f"must be a map, not {type_name(v)}")
    return v


def _list(v: Any, field: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise Malformed(field, f"must be a list, not {type_name(v)}")
    return v


def _str(v: Any, field: str) -> None:
    if v is not None and not isinstance(v, str):
        raise Malformed(field, f"must be a string, not {type_name(v)}")


def type_name(v: Any) -> str:
    """What a value is, as an error says it: "a map", "a list", ... (ruamel's CommentedMap is a map)."""
    for t, name in ((bool, "a boolean"), (str, "a string"), (dict, "a map"), (list, "a list")):
        if isinstance(v, t):
            return name
    return type(v).__name__


def _string_map(v: Any, field: str) -> None:
    if v is None or (type(v) is dict and all(type(k) is str and type(x) is str for k, x in v.items())):
        return
    for k, val in _dict(v, field).items():
        if not isinstance(k, str) or not isinstance(val, str):
            raise Malformed(f"{field}.{k}", f"must be a string, not {type_name(val)}")


def _pod_annotations(v: Any) -> None:
    """A pod's annotations: a map, whose keys a check reads (`KEPT_POD_ANNOTATIONS`) hold strings."""
    annotations = _dict(v, "metadata.annotations")
    for k in KEPT_POD_ANNOTATIONS:
        val = annotations.get(k, "")
        if not isinstance(val, str):
            raise Malformed(f"metadata.annotations.{k}", f"must be a string, not {type_name(val)}")


def check_count(v: Any, field: str) -> None:
    """An nvidia.com/ quantity: a whole, non-negative number of devices (extended resources are integers)."""
    if type(v) is str and v.isascii() and v.isdigit() and len(v) < 10:  # the common "8", at C speed
        return
    q = parse_quantity(v)
    if q is None:
        raise Malformed(field, f"is {v!r}, not a quantity")
    if q < 0:
        raise Malformed(field, f"is {v!r}: a device count cannot be negative")
    if q > MAX_COUNT:
        raise Malformed(field, f"is {v!r}: more devices than any node has")
    if q != q.to_integral_value():
        raise Malformed(field, f"is {v!r}: extended resources are whole numbers of devices")


def _metadata(obj: Obj) -> None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise Malformed("metadata", "is missing" if meta is None else f"must be a map, not {type_name(meta)}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise Malformed("metadata.name", "is missing" if name is None else "must be a non-empty string")
    for key in ("namespace", "uid", "resourceVersion"):
        _str(meta.get(key), f"metadata.{key}")
    _string_map(meta.get("labels"), "metadata.labels")
    for i, ref in enumerate(_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = _dict(ref, f"metadata.ownerReferences[{i}]")
        for key in _OWNER_KEYS:  # what the owner chains and the drain's job rules key on
            _str(ref.get(key), f"metadata.ownerReferences[{i}].{key}")


_OWNER_KEYS = ("apiVersion", "kind", "name", "uid")  # k8s.io/apimachinery@v0.37.2 meta/v1 OwnerReference: strings


def _owner_ok(ref: Any) -> bool:
    return type(ref) is dict and all(type(ref.get(k, "")) is str for k in _OWNER_KEYS)


def _resources(c: Obj, field: str) -> None:
    res = _dict(c.get("resources"), f"{field}.resources")
    for part in ("limits", "requests"):
        for k, v in _dict(res.get(part), f"{field}.resources.{part}").items():
            if not isinstance(k, str):  # YAML `1: 2`: the API server stores resource names only
                raise Malformed(f"{field}.resources.{part}", f"has the key {k!r}: a resource name must be a string")
            if k.startswith(GPU_PREFIX):
                check_count(v, f"{field}.resources.{part}.{k}")
    _list(res.get("claims"), f"{field}.resources.claims")


def _container_ok(c: Any) -> bool:
    """The well-typed common container, at a glance (the hot path); False sends it to the field-by-field check."""
    if type(c) is not dict or type(c.get("name", "")) is not str or type(c.get("restartPolicy", "")) is not str:
        return False
    res = c.get("resources")
    if res is None:
        return True
    if type(res) is not dict or type(res.get("claims", [])) is not list:
        return False
    for part in (res.get("limits"), res.get("requests")):
        if part is None:
            continue
        if type(part) is not dict:
            return False
        for k, v in part.items():
            if type(k) is not str or (
                k.startswith(GPU_PREFIX) and not (type(v) is str and v.isascii() and v.isdigit() and len(v) < 10)
            ):
                return False
    return True


def _container(c: Any, field: str) -> None:
    if _container_ok(c):
        return
    if not isinstance(c, dict):
        raise Malformed(field, f"must be a container (a map), not {type_name(c) if c is not None else 'null'}")
    _str(c.get("name"), f"{field}.name")
    _str(c.get("restartPolicy"), f"{field}.restartPolicy")
    _resources(c, field)


def _containers_at(base: Obj, path: str, field: str) -> None:
    value = get_path(base, path)
    if value is None:
        return
    where = f"{field}.{path}" if field else path
    if path.rsplit(".", 1)[-1] in _LIST_FIELDS:
        for i, c in enumerate(_list(value, where)):
            _container(c, f"{where}[{i}]")
    else:
        _container(value, where)


def _pod_spec(spec: Any, field: str) -> None:
    spec = _dict(spec, field)
    for path in ("containers", "initContainers"):
        _containers_at(spec, path, field)
    _str(spec.get("nodeName"), f"{field}.nodeName")
    _placement(spec, field)
    _list(spec.get("resourceClaims"), f"{field}.resourceClaims")


def _placement(spec: Obj, field: str) -> None:
    """Where a template's pods may run, as inventory/placement.py reads it of any template's pod spec."""
    _string_map(spec.get("nodeSelector"), f"{field}.nodeSelector")
    _dict(spec.get("affinity"), f"{field}.affinity")
    _list(spec.get("tolerations"), f"{field}.tolerations")


def _template(t: ResolvedTemplate) -> None:
    role = t.role
    if role.form == "podTemplate":
        _pod_spec(t.template.get("spec"), f"{t.path}.spec")
    elif role.form == "podSpec":
        _pod_spec(t.template, t.path)
    elif role.form == "resources":
        where = f"{t.path}.{role.resources}"
        raw = get_path(t.template, role.resources or "resources")
        if raw is not None:
            _resources({"resources": _dict(raw, where)}, where.rpartition(".")[0])
    elif role.form == "named":  # the Spark operator's GPUSpec {name string, quantity int64}, as its CRD types it
        where = f"{t.path}.{role.resources}"
        named = _dict(get_path(t.template, role.resources or "gpu"), where)
        _str(named.get("name"), f"{where}.name")
        quantity = named.get("quantity")
        if quantity is not None and (isinstance(quantity, bool) or not isinstance(quantity, int)):
            raise Malformed(f"{where}.quantity", f"is {quantity!r}: a GPU count here is an integer")
    if role.form not in ("podTemplate", "podSpec"):  # a template of containers is its pods' spec (an Argo template)
        _placement(t.pod_spec(), t.path)
    for path in role.containers + role.init_containers:
        _containers_at(t.template, path, t.path)
    for f in role.replicas:
        if not f.path:
            continue
        raw = get_path(t.root, f.path[2:]) if f.path.startswith("$.") else get_path(t.item, f.path)
        if f.counter == "sparkExecutors":  # the executor counts it reads (api/v1beta2 ExecutorSpec, DynamicAllocation)
            _executor_counts(raw, f.path)
        if f.counter:
            continue  # an Argo fan-out's fields are IntOrStrings, often set when the workflow runs
        if raw is None:
            continue
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
            where = f.path[2:] if f.path.startswith("$.") else _join(t.path, role.template, f.path)
            raise Malformed(where, f"is {raw!r}: a replica count is a non-negative integer")


def _executor_counts(spec: Any, path: str) -> None:
    for rel in ("executor.instances", *(f"dynamicAllocation.{k}Executors" for k in ("initial", "min", "max"))):
        raw = get_path(spec, rel)
        if raw is not None and (not isinstance(raw, int) or isinstance(raw, bool) or raw < 0):
            raise Malformed(f"{path}.{rel}", f"is {raw!r}: an executor count is a non-negative integer")


def _join(path: str, template: str, rel: str) -> str:
    """The replica field's path in the object: the role item's path (the template path without the
    template's own part) joined with the factor's relative path."""
    if template in (".", ""):
        return f"{path}.{rel}" if path else rel
    head = path[: -len(template)].rstrip(".") if path.endswith(template) else ""
    return f"{head}.{rel}" if head else rel


def _node(obj: Obj) -> None:
    spec = _dict(obj.get("spec"), "spec")
    if "unschedulable" in spec and not isinstance(spec["unschedulable"], bool):
        raise Malformed("spec.unschedulable", "must be a boolean")
    _list(spec.get("taints"), "spec.taints")
    status = _dict(obj.get("status"), "status")
    for part in ("capacity", "allocatable"):
        for k, v in _dict(status.get(part), f"status.{part}").items():
            if isinstance(k, str) and k.startswith(GPU_PREFIX):
                check_count(v, f"status.{part}.{k}")
    _list(status.get("conditions"), "status.conditions")
    _dict(status.get("nodeInfo"), "status.nodeInfo")


def _claim_devices(at: str) -> tuple[tuple[str, str], ...]:
    """A claim's requests as resource/v1 `DeviceClaim` has them (`exactly`, `firstAvailable` sub-requests) and
    as v1beta1 did (the request's own `deviceClassName` and `selectors`), and its `matchAttribute` constraints:
    what the checks read of them (checks/rules_classes.py)."""
    requests = f"{at}.requests[]"
    shapes = [(requests, "map"), (f"{requests}.exactly", "map"), (f"{at}.constraints[].matchAttribute", "str")]
    for request in (requests, f"{requests}.exactly", f"{requests}.firstAvailable[]"):
        shapes += [(f"{request}.deviceClassName", "str"), (f"{request}.selectors[].cel.expression", "str")]
    return tuple(shapes)


# What the tool reads of other kinds, by the types of the Kubernetes API (k8s.io/api@v0.37.2 core/v1 types.go
# `Taint`, `NodeSystemInfo`; apimachinery meta/v1 `ObjectMeta.Annotations`; resource/v1 types.go
# `DeviceClassSpec`, `DeviceSelector`, `CELDeviceSelector`, `ResourceClaimStatus`, `AllocationResult`,
# `DeviceRequestAllocationResult`, `ResourceSliceSpec`, `ResourcePool`, `Device`) and of the GPU Operator
# (gpu-operator@v1.11.1 api/v1/clusterpolicy_types.go: every field of `ClusterPolicySpec` is a struct;
# `DriverManagerSpec.Env []EnvVar`, `DevicePluginConfig.Name/Default string`). A path is dotted keys; `x[]` is
# each item of the list at x, `x{}` each value of the map at x. Each map and list on the way is checked too. A leaf
# is "str", "list", "map" or "int" (a JSON integer: not a boolean, not a string of digits).
SHAPES: dict[str, tuple[tuple[str, str], ...]] = {
    "Node": (
        ("status.nodeInfo.kubeletVersion", "str"),
        ("status.nodeInfo.osImage", "str"),
        ("status.nodeInfo.containerRuntimeVersion", "str"),
        ("status.nodeInfo.kernelVersion", "str"),
        ("spec.taints[]", "map"),
        ("spec.taints[].key", "str"),
        ("spec.taints[].value", "str"),
        ("spec.taints[].effect", "str"),
    ),
    # The pod template every DaemonSet reader walks (inventory/placement.py, inventory/draversion.py, the
    # dependents): k8s.io/api@v0.37.2 apps/v1 `DaemonSetSpec.Template`, core/v1 `PodSpec`. What is read inside a
    # container is taken as absent when malformed (tests/unit/test_dependents.py), not refused.
    "apps/DaemonSet": (
        ("spec.template.spec", "map"),
        ("spec.template.spec.containers", "list"),
        ("spec.template.spec.initContainers", "list"),
    ),
    "nvidia.com/ClusterPolicy": (
        ("spec{}", "map"),
        ("spec.driver.manager.env[]", "map"),
        ("spec.driver.version", "str"),
        ("spec.devicePlugin.config.name", "str"),
        ("spec.devicePlugin.config.default", "str"),
        ("spec.migManager.config.name", "str"),
        ("status.namespace", "str"),
        ("status.state", "str"),
    ),
    # NVIDIA/gpu-operator@06faaf0c api/nvidia/v1alpha1/nvidiadriver_types.go: `NVIDIADriverSpec.Version string`,
    # `DriverType` a string type, `NVIDIADriverStatus.State` a string type; read by the driver-version rule and
    # the inventory (inventory/operator.py).
    "nvidia.com/NVIDIADriver": (
        ("spec.version", "str"),
        ("spec.driverType", "str"),
        ("status.state", "str"),
    ),
    # k8s.io/api@v0.37.2 policy/v1 types.go `PodDisruptionBudgetSpec.Selector *metav1.LabelSelector`
    # (`MatchLabels map[string]string`, `MatchExpressions []LabelSelectorRequirement{Key, Operator string,
    # Values []string}`), `PodDisruptionBudgetStatus.DisruptionsAllowed int32`: what `check` and the drain's
    # budget arithmetic read (inventory/placement.py `pdb_selects`, plan/estimate.py `disruptions_allowed`).
    "policy/PodDisruptionBudget": (
        ("spec.selector.matchLabels{}", "str"),
        ("spec.selector.matchExpressions[]", "map"),
        ("spec.selector.matchExpressions[].key", "str"),
        ("spec.selector.matchExpressions[].operator", "str"),
        ("spec.selector.matchExpressions[].values[]", "str"),
        ("status.disruptionsAllowed", "int"),
    ),
    # operator-framework/api v0.31.0 pkg/operators/v1alpha1/subscription_types.go `SubscriptionSpec.Package
    # string` (json `name`): how the platform reader finds the GPU Operator's OLM install.
    "operators.coreos.com/Subscription": (("spec.name", "str"),),
    "resource.k8s.io/DeviceClass": (
        ("spec.selectors[].cel.expression", "str"),
        ("spec.extendedResourceName", "str"),
    ),
    "resource.k8s.io/ResourceClaim": (
        *_claim_devices("spec.devices"),
        ("status.allocation.devices.results[]", "map"),
        ("status.allocation.devices.results[].driver", "str"),
        ("status.allocation.devices.results[].pool", "str"),
        ("status.allocation.devices.results[].device", "str"),
        ("status.reservedFor[]", "map"),
    ),
    "resource.k8s.io/ResourceClaimTemplate": _claim_devices("spec.spec.devices"),
    # What checks/rules_jobs.py reads of a TaskRun (tektoncd/pipeline v1.15.0 pkg/apis/pipeline/v1
    # taskrun_types.go: `TaskRunSpec.Retries int`, `TaskRunStatusFields.RetriesStatus []TaskRunStatus`; knative.dev
    # `apis.Condition` Type/Status/Reason strings). A TaskRun's controller is named by its ownerReferences.
    "tekton.dev/TaskRun": (
        ("spec.retries", "int"),
        ("status.conditions[]", "map"),
        ("status.conditions[].type", "str"),
        ("status.conditions[].status", "str"),
        ("status.conditions[].reason", "str"),
        ("status.retriesStatus[]", "map"),
    ),
    "resource.k8s.io/ResourceSlice": (
        ("spec.driver", "str"),
        ("spec.nodeName", "str"),
        ("spec.pool.name", "str"),
        ("spec.devices[]", "map"),
        ("spec.devices[].name", "str"),
        ("spec.sharedCounters", "list"),
        ("spec.devices[].consumesCounters", "list"),
    ),
}


_Segments = tuple[tuple[str, str], ...]


def _split(path: str) -> _Segments:
    return tuple((seg[:-2], seg[-2:]) if seg.endswith(("[]", "{}")) else (seg, "") for seg in path.split("."))


# SHAPES' paths split once: (path, leaf, ((key, "" | "[]" | "{}"), ...), whether the leaf is a list's item).
_COMPILED: dict[str, tuple[tuple[str, str, _Segments, bool], ...]] = {
    kind: tuple((path, leaf, _split(path), path.endswith("[]")) for path, leaf in shapes)
    for kind, shapes in SHAPES.items()
}


_PLAIN = frozenset(s for shapes in _COMPILED.values() for _, _, s, _ in shapes if all(not form for _, form in s))


def _shapes(obj: Obj, key: str) -> None:
    """Every shape of SHAPES[key] on `obj`: a walk that builds nothing while each value fits (a fleet's 10,000
    Nodes each pass eight paths; the describing walk, `_shape`, spent a fifth of load_snapshot there), the
    describing walk only for a path that does not fit, to name the field."""
    for path, leaf, segments, item in _COMPILED.get(key, ()):
        if not _fits(obj, segments, 0, leaf, item):
            _shape(obj, path, leaf)


def _fits(value: Any, segments: _Segments, i: int, leaf: str, item: bool) -> bool:
    """Whether `_shape` would pass the value(s) below `value` at segments[i:] (None anywhere is absent)."""
    if i == 0 and segments in _PLAIN:  # no list or map of values on the way: a loop, no recursion
        for key, _ in segments:
            if value is None:
                return True
            if not isinstance(value, dict):
                return False
            value = value.get(key)
        i = len(segments)
    if i == len(segments):
        if value is None:
            return not (item and leaf == "map")
        if leaf == "str":
            return isinstance(value, str)
        if leaf == "int":
            return isinstance(value, int) and type(value) is not bool
        return isinstance(value, list if leaf == "list" else dict)
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    key, form = segments[i]
    child = value.get(key)
    if form == "[]":
        return child is None or (isinstance(child, list) and all(_fits(x, segments, i + 1, leaf, item) for x in child))
    if form == "{}":
        return child is None or (
            isinstance(child, dict) and all(_fits(x, segments, i + 1, leaf, item) for x in child.values())
        )
    return _fits(child, segments, i + 1, leaf, item)


def _shape(obj: Obj, path: str, leaf: str) -> None:
    """Check the value(s) at `path` are of type `leaf` (None is absent), and every map and list on the way."""
    at: list[tuple[Any, str]] = [(obj, "")]
    for seg in path.split("."):
        key = seg.removesuffix("[]").removesuffix("{}")
        step: list[tuple[Any, str]] = []
        for value, field in at:
            here = f"{field}.{key}" if field else key
            child = _dict(value, field).get(key)
            if seg.endswith("[]"):
                step += [(item, f"{here}[{i}]") for i, item in enumerate(_list(child, here))]
            elif seg.endswith("{}"):
                step += [(item, f"{here}.{k}") for k, item in _dict(child, here).items()]
            else:
                step.append((child, here))
        at = step
    for value, field in at:
        if leaf == "str":
            _str(value, field)
        elif leaf == "int":
            if value is not None and (type(value) is bool or not isinstance(value, int)):
                raise Malformed(field, f"must be an integer, not {type_name(value)}")
        elif leaf == "list":
            _list(value, field)
        elif value is None and path.endswith("[]"):
            raise Malformed(field, "must be a map, not null")
        else:
            _dict(value, field)


def _pod_status(obj: Obj) -> None:
    status = _dict(obj.get("status"), "status")
    _str(status.get("phase"), "status.phase")


_OPTIONAL_TYPES = (("nodeSelector", dict), ("affinity", dict), ("tolerations", list), ("resourceClaims", list))


def _pod_ok(obj: Obj) -> bool:
    """A well-typed GPU pod at a glance (the hot path); False sends it to the field-by-field check."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
    if type(meta) is not dict or type(spec) is not dict or not meta.get("name") or type(meta["name"]) is not str:
        return False
    if type(meta.get("namespace", "")) is not str or type(meta.get("labels", {})) is not dict:
        return False
    if any(type(v) is not str for v in (meta.get("labels") or {}).values()):
        return False
    if status is not None and (type(status) is not dict or type(status.get("phase", "")) is not str):
        return False
    if type(spec.get("nodeName", "")) is not str:
        return False
    for key, typ in _OPTIONAL_TYPES:
        v = spec.get(key)
        if v is not None and type(v) is not typ:
            return False
    if any(type(v) is not str for v in (spec.get("nodeSelector") or {}).values()):
        return False
    refs = meta.get("ownerReferences")
    if refs is not None and (type(refs) is not list or not all(_owner_ok(r) for r in refs)):
        return False
    if any(type(meta.get(k, "")) is not str for k in ("uid", "resourceVersion")):
        return False
    annotations = meta.get("annotations")
    if annotations is not None and (
        type(annotations) is not dict or any(type(annotations.get(k, "")) is not str for k in KEPT_POD_ANNOTATIONS)
    ):
        return False
    for key in ("containers", "initContainers"):
        cs = spec.get(key)
        if cs is None:
            continue
        if type(cs) is not list or not all(_container_ok(c) for c in cs):
            return False
    return True


class ObjectChecker:
    """Checks objects as a StateBuilder receives them; raises InputError naming `where` and the object."""

    def __init__(self, templates: TemplateTable) -> None:
        self.templates = templates

    def light_pod(self, obj: Obj, where: str) -> None:
        """What is read of a pod that uses no devices (it is only counted per node).

        The hot path of a large fleet: the common well-typed pod passes with a few type tests, and
        only a pod that fails them is looked at field by field for the message."""
        meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
        if (
            type(meta) is dict
            and type(meta.get("name")) is str
            and type(spec) is dict
            and type(spec.get("containers")) is list
            and type(spec.get("nodeName", "")) is str
            and type(spec.get("initContainers", [])) is list
            and (status is None or (type(status) is dict and type(status.get("phase", "")) is str))
            and meta["name"]
        ):
            ns, labels = meta.get("namespace", ""), meta.get("labels")
            if type(ns) is str and (labels is None or type(labels) is dict):
                return
        try:
            _metadata(obj)
            spec = _dict(obj.get("spec"), "spec")
            _str(spec.get("nodeName"), "spec.nodeName")
            for key in ("containers", "initContainers"):  # a map here would hide a GPU request
                _list(spec.get(key), f"spec.{key}")
            _pod_status(obj)
        except Malformed as e:
            raise refuse(where, obj, str(e)) from None

    def check(self, key: str, obj: Obj, where: str) -> None:
        if key == "Pod" and _pod_ok(obj):
            return
        try:
            _metadata(obj)
            if key != "Pod":
                _string_map(obj["metadata"].get("annotations"), "metadata.annotations")
            else:  # of a pod's annotations only those a check reads are kept (cluster/state.py kept_annotations)
                _pod_annotations(obj["metadata"].get("annotations"))
            if key == "Node":
                _node(obj)
            elif key == "Pod":
                _pod_status(obj)
            elif key == "ConfigMap":
                _string_map(obj.get("data"), "data")
            elif key.startswith("resource.k8s.io/"):
                _dict(obj.get("spec"), "spec")
            _shapes(obj, key)
            if self.templates.spec(key) is not None:
                _dict(obj.get("spec"), "spec")
                for t in self.templates.resolve(key, obj):
                    _template(t)
        except Malformed as e:
            raise refuse(where, obj, str(e)) from None
        except RecursionError:
            raise refuse(where, obj, f"nested deeper than {MAX_DEPTH} levels") from None


def depth_exceeds(root: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether maps and lists nest deeper than `limit` (iteratively: never a RecursionError)."""
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return False
