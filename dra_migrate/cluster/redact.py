"""What a snapshot leaves out: managedFields, container env values, args and command, probe and lifecycle-hook
commands and HTTP header values, ConfigMaps not read.

Env values, args and commands often carry credentials (so do a SparkApplication's sparkConf, arguments, envVars
and javaOptions, and a Tekton run's params, results and step scripts); a snapshot is handed to other people
(change review, bug reports), so they are redacted unless the user asks to keep them. Secrets are never read.

Redaction goes by structure, not by shape: every container of every pod template the template table
knows for the object's kind (KServe's `predictor.model` has no `image` key, Argo's `script` has `source`),
plus, as a second net, any map anywhere in the object's spec that holds `env`, `args`, `command`, a probe or
hooks beside a container's other keys. Operator CRs (ClusterPolicy, NVIDIADriver, GPUCluster) keep their env values,
which configure the operator and are read by checks, but with credentials scrubbed from them.

A ConfigMap is kept only when a ClusterPolicy (`spec.devicePlugin.config.name`) or a device-plugin
DaemonSet (a configMap volume) uses it (cluster/configrefs.py), whatever its text looks like. A live read
lists ConfigMaps last; objects from anywhere else may come in any order, so a ConfigMap nobody has named
yet is held back and written at the end, once every reference has been seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from dra_migrate.cluster.configrefs import ConfigMapsInUse, is_configmap
from dra_migrate.cluster.kinds import NVIDIA_KINDS, kind_key
from dra_migrate.cluster.templates import TemplateTable, get_path
from dra_migrate.secrets import scrub

REDACTED = "<redacted>"
_OPERATOR_KEYS = frozenset(k.key for k in NVIDIA_KINDS)
# Keys beside which `args`/`command`/`env` are a container's (core/v1 Container), so the second net
# never touches a CRD's own `args` that is not a process's.
_CONTAINER_KEYS = frozenset({"image", "name", "env", "resources", "volumeMounts", "imagePullPolicy", "ports"})
_PROCESS_KEYS = ("env", "args", "command", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle")


# The settings the checks read from a container, configuration and no credential, kept (scrubbed all the same),
# so `check --snapshot` of a snapshot says what `check --kubeconfig` says: the Grafana dashboard sidecar's env
# (which ConfigMaps it loads: cluster/dashboards.py), dcgm-exporter's KUBERNETES_ENABLE_DRA (NVIDIA/dcgm-exporter
# PR #501), the DRA kubelet plugin's FEATURE_GATES (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/main.go), the
# device plugin config-manager's DEFAULT_CONFIG (inventory/operator.py); and the flags `--feature-gates=` (Kueue,
# the DRA plugin) and `--kubernetes-enable-dra` (dcgm-exporter), whose values are gate names and booleans only.
_SETTINGS_ENV = frozenset(
    {"LABEL", "LABEL_VALUE", "FOLDER", "RESOURCE", "KUBERNETES_ENABLE_DRA", "FEATURE_GATES", "DEFAULT_CONFIG"}
)
_SETTING_ARG = re.compile(
    r"--feature-gates=(?:\w+=(?:true|false),?)*|--kubernetes-enable-dra(?:=(?:true|false))?", re.I
)


def _redact_env(env: Any, *, keep: bool = False) -> None:
    for e in env if isinstance(env, list) else ():
        if isinstance(e, dict) and "value" in e:
            kept = keep or e.get("name") in _SETTINGS_ENV
            e["value"] = scrub(str(e["value"])) if kept else REDACTED


def _redact_args(args: list[Any]) -> list[Any]:
    return [a if isinstance(a, str) and _SETTING_ARG.fullmatch(a) else REDACTED for a in args]


# A container's probes and lifecycle hooks run commands and send headers (core/v1 `Probe` embeds `ProbeHandler`,
# `Lifecycle` holds `LifecycleHandler`s: `exec.command`, `httpGet.httpHeaders[].value`; k8s.io/api@v0.37.2
# core/v1/types.go): `mysqladmin ping -pPASSWORD`, an `Authorization` header. The rest (path, port, timing) stays.
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HOOKS = ("postStart", "preStop")


def _redact_handler(handler: Any) -> None:
    if not isinstance(handler, dict):
        return
    action = handler.get("exec")
    if isinstance(action, dict) and "command" in action:
        command = action["command"]
        action["command"] = [REDACTED for _ in command] if isinstance(command, list) else REDACTED
    get = handler.get("httpGet")
    headers = get.get("httpHeaders") if isinstance(get, dict) else None
    for h in headers if isinstance(headers, list) else ():
        if isinstance(h, dict) and "value" in h:
            h["value"] = REDACTED


def _redact_container(c: dict[str, Any]) -> None:
    _redact_env(c.get("env"))
    for key in _PROBES:
        _redact_handler(c.get(key))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        for key in _HOOKS:
            _redact_handler(lifecycle.get(key))
    for key in ("args", "command"):
        value = c.get(key)
        if isinstance(value, list):
            c[key] = _redact_args(value)
        elif isinstance(value, str):
            c[key] = REDACTED
    if isinstance(c.get("source"), str):  # Argo `script` templates: the script itself
        c["source"] = REDACTED


def _structural(key: str, obj: dict[str, Any], templates: TemplateTable) -> None:
    """Every container of every pod template of the object, by the template table."""
    for t in templates.resolve(key, obj):
        containers = t.containers() + t.init_containers()
        ephemeral = get_path(t.pod_spec(), "ephemeralContainers")
        if isinstance(ephemeral, list):
            containers += [c for c in ephemeral if isinstance(c, dict)]
        for c in containers:
            _redact_container(c)


# The Spark operator's own free text (kubeflow/spark-operator v2.3.0 api/v1beta2/sparkapplication_types.go):
# sparkConf / hadoopConf values (`spark.hadoop.fs.s3a.secret.key`), the application's `arguments`, and each pod's
# `envVars` map and `javaOptions` (`-Dpassword=...`); the driver and executor are container-like (env, lifecycle).
# A ScheduledSparkApplication holds the same spec under `spec.template`. Keys stay: only the values go.
_SPARK_SPEC = {
    "sparkoperator.k8s.io/SparkApplication": "spec",
    "sparkoperator.k8s.io/ScheduledSparkApplication": "spec.template",
}


# sparkConf keys that hold the executor counts, each with the field of the spec that wins over it
# (kubeflow/spark-operator v2.3.0 internal/controller/sparkapplication/submission.go `buildSparkSubmitArgs` passes
# sparkConf to spark-submit before its typed options, and a later --conf wins; pkg/util/sparkapplication.go
# `IsDynamicAllocationEnabled`: "DynamicAllocation configs will take precedence over SparkConf configs"). Counts and
# a boolean, never a credential: kept in a snapshot when they read as such (inventory/fanout.py counts them).
_SPARK_INT = re.compile(r"[+-]?[0-9]{1,10}")  # a Scala Int
SPARK_COUNT_CONF = {
    "spark.executor.instances": "instances",
    "spark.dynamicAllocation.enabled": "enabled",
    "spark.dynamicAllocation.initialExecutors": "initialExecutors",
    "spark.dynamicAllocation.minExecutors": "minExecutors",
    "spark.dynamicAllocation.maxExecutors": "maxExecutors",
}


def spark_conf_value(key: str, value: Any) -> bool | int | None:
    """A sparkConf count or switch as Spark reads it (apache/spark ConfigBuilder intConf / booleanConf: the
    trimmed text as a Scala Int or Boolean, `true`/`false` in any case), None when it is no such value."""
    if not isinstance(value, str) or len(value) > 24:
        return None
    text = value.strip()
    if key == "spark.dynamicAllocation.enabled":
        return {"true": True, "false": False}.get(text.lower())
    return int(text) if _SPARK_INT.fullmatch(text) else None


def _spark(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    if isinstance(spec.get("arguments"), list):
        spec["arguments"] = [REDACTED for _ in spec["arguments"]]
    for name in ("sparkConf", "hadoopConf"):
        conf = spec.get(name)
        if isinstance(conf, dict):
            # sparkConf's executor counts (numbers and a switch, which the inventory counts) stay
            counts = {k: v for k, v in conf.items() if k in SPARK_COUNT_CONF and spark_conf_value(k, v) is not None}
            conf.update(dict.fromkeys(conf, REDACTED))
            conf.update(counts if name == "sparkConf" else {})
    for role in (spec.get("driver"), spec.get("executor")):
        if not isinstance(role, dict):
            continue
        _redact_container(role)
        env_vars = role.get("envVars")
        if isinstance(env_vars, dict):
            env_vars.update(dict.fromkeys(env_vars, REDACTED))
        if isinstance(role.get("javaOptions"), str):
            role["javaOptions"] = REDACTED


# Tekton runs' free text (tektoncd/pipeline v1.15.0 pkg/apis/pipeline/v1): `params[].value` (a token passed as a
# param is common) and a param spec's `default`; `results[].value`; a Step's `script`; the `env`, `args` and
# `command` of steps, sidecars and the `stepTemplate` (no `image` beside them there); and a step's termination
# `message`, in which Tekton's entrypoint writes the step's results (pkg/pod/status.go). They sit in the spec,
# in the status (`taskSpec`/`pipelineSpec` resolved, params substituted) and in each retry's archived status
# (`retriesStatus`): the whole object is walked. Names, conditions and counts stay.
_TEKTON_KEYS = frozenset({"tekton.dev/TaskRun", "tekton.dev/PipelineRun"})


def _tekton(obj: Any) -> None:
    stack = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, list):
            stack.extend(v for v in cur if isinstance(v, dict | list))
            continue
        if not isinstance(cur, dict):
            continue
        for key in ("params", "results"):
            items = cur.get(key)
            for item in items if isinstance(items, list) else ():
                if isinstance(item, dict):
                    item.update({k: REDACTED for k in ("value", "default") if k in item})
        if isinstance(cur.get("script"), str):
            cur["script"] = REDACTED
        if any(k in cur for k in _PROCESS_KEYS):
            _redact_container(cur)
        terminated = cur.get("terminated")
        if isinstance(terminated, dict) and "message" in terminated:
            terminated["message"] = REDACTED
        stack.extend(v for v in cur.values() if isinstance(v, dict | list))


def _walk(node: Any, *, keep_env: bool) -> None:
    """The second net: any container-like map (env, args or command beside container keys) anywhere."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            has_process = any(k in cur for k in _PROCESS_KEYS)
            if has_process and (cur.keys() & _CONTAINER_KEYS):
                if keep_env:
                    _redact_env(cur.get("env"), keep=True)
                else:
                    _redact_container(cur)
            stack.extend(v for v in cur.values() if isinstance(v, dict | list))
        elif isinstance(cur, list):
            stack.extend(v for v in cur if isinstance(v, dict | list))


def _strip_metadata(obj: dict[str, Any]) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            for key in [k for k, v in annotations.items() if k in _OBJECT_COPIES or _copies_an_object(v)]:
                del annotations[key]


# Annotations in which an applier keeps the whole object it applied, env values included: kubectl's client-side
# apply; k3s/RKE2 addons, Rancher and Fleet (wrangler's apply: the object gzipped and base64-encoded,
# github.com/rancher/wrangler pkg/apply `LabelApplied`); kapp (its original config).
_OBJECT_COPIES = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        "objectset.rio.cattle.io/applied",
        "kapp.k14s.io/original",
    }
)
_GZIP_BASE64 = "H4sI"  # base64 of gzip's magic bytes and deflate method (RFC 1952)


def _copies_an_object(value: Any) -> bool:
    """Whether an annotation's value is a copy of an object (any tool's): JSON naming an apiVersion and kind, or
    holding a spec; or a gzipped, base64-encoded blob (what it holds cannot be told, so it is not kept)."""
    if not isinstance(value, str):
        return False
    text = value.lstrip()
    if text.startswith(_GZIP_BASE64) and len(text) > 64:
        return True
    if not text.startswith("{") or ("spec" not in text and "apiVersion" not in text):
        return False
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return isinstance(doc, dict) and ("spec" in doc or ("apiVersion" in doc and "kind" in doc))


def for_snapshot(
    obj: dict[str, Any], *, keep_env: bool, templates: TemplateTable | None = None
) -> dict[str, Any] | None:
    """The object as a snapshot stores it (redacted), or None when it is not stored at all.

    ConfigMaps are not decided here: whether one is kept depends on the other objects (`SnapshotFilter`)."""
    key = kind_key(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    _strip_metadata(obj)
    if key in _OPERATOR_KEYS:
        _walk(obj.get("spec"), keep_env=True)
        return obj
    if not keep_env:
        _structural(key, obj, templates or TemplateTable.builtin())
        _walk(obj.get("spec"), keep_env=False)
        if key in _SPARK_SPEC:
            _spark(get_path(obj, _SPARK_SPEC[key]))
        if key in _TEKTON_KEYS:
            _tekton(obj)
    return obj


class SnapshotFilter:
    """Redacts a stream of objects for a snapshot; ConfigMaps are kept only when a device plugin uses them."""

    def __init__(self, *, keep_env: bool, templates: TemplateTable | None = None) -> None:
        self.keep_env = keep_env
        self.templates = templates or TemplateTable.builtin()
        self.configmaps = ConfigMapsInUse()

    def stream(self, objects: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for obj in objects:
            self.configmaps.note(obj)
            if is_configmap(obj) and not self.configmaps.offer(obj):
                continue  # held: an object later in the stream may still name it
            kept = for_snapshot(obj, keep_env=self.keep_env, templates=self.templates)
            if kept is not None:
                yield kept
        for cm in self.configmaps.release():
            kept = for_snapshot(cm, keep_env=self.keep_env, templates=self.templates)
            if kept is not None:
                yield kept
