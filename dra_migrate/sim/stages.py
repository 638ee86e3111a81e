"""KWOK Stages that play a GPU node's kubelet, NVIDIA device plugin and NVIDIA DRA kubelet plugin.

KWOK (sigs.k8s.io/kwok v0.8.0) drives the status of the Nodes and Pods it manages from Stage objects: a
selector on the object, a delay (with jitter), and steps that patch the object, delete it, or apply another
object (`StageStep.apply`, pkg/apis/v1alpha1/stage_types.go). Everything the cutover depends on is one of
those, with the delays of the measured profile (`dra_migrate.sim.timing`, sources there):

* node-initialize: a registered node becomes Ready (its Lease is renewed by KWOK itself,
  `--node-lease-duration-seconds`);
* device-plugin-stop / -gone / -start: capacity and allocatable of the device plugin's resources follow its
  DaemonSets' placement (`sim.placement`; the toggle label `nvidia.com/gpu.deploy.device-plugin` when the
  snapshot has none) as kubelet's devicemanager posts them: allocatable 0 at the next status sync after
  the plugin's exit, capacity 0 once endpointStopGracePeriod (5 min) has passed, both back at the next
  sync after it registers again;
* dra-plugin-start / -stop and slice-wipe: where its DaemonSets place it, the DRA kubelet plugin
  publishes the ResourceSlice of the devices predicted from the node's labels (`dra_migrate.dra.devices`)
  after its start-up, and kubelet wipes it 30 s after the plugin left;
* pod-start / pod-delete: a bound pod runs after its containers' start-up; a deleted one is gone once its
  grace period (time-scaled) has passed.

What a Stage cannot express stays in `dra_migrate.sim.kwok`: the canary's run, whose output names the
UUIDs of the devices allocated to it — a Stage's template sees only its own object, and those UUIDs are
joined from the pod's ResourceClaim and the node's ResourceSlice.

The node's own figures travel in annotations written at registration (`node_annotations`): which device
plugin resources it has, the DRA devices the driver would publish, and the state each plugin is in. A
Stage reads them from the Node it plays. KWOK plays one Stage at a time per object and restarts the
pending one's delay on every change to the object (pkg/kwok/controllers/node_controller.go
preprocess/addStageJob): two plugin switches in one patch play one after the other, not together.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dra_migrate.sim.placement import LABEL_RULES, PluginRules
from dra_migrate.sim.pods import CANARY_LABEL
from dra_migrate.sim.spec import DRA_DRIVER
from dra_migrate.sim.timing import TimingProfile

ANNOTATION = "twin.dra-migrate.io/"
A_DP = ANNOTATION + "device-plugin"  # running | stopped | gone
A_DP_RESOURCES = ANNOTATION + "device-plugin-resources"  # {"nvidia.com/gpu": "8"}
A_DRA = ANNOTATION + "dra-plugin"  # running | stopped
A_DEVICES = ANNOTATION + "devices"  # the DRA devices, as published (JSON)
A_GENERATION = ANNOTATION + "slice-generation"
A_WIPE = ANNOTATION + "wipe"
# "down": the snapshot showed the node not Ready (its kubelet not posting Ready). It registers so, and no Stage
# plays it: node-initialize would make it Ready, and the node lifecycle controller would then lift the taints
# that keep pods off it. kwok still renews its Lease, so the controller leaves its conditions as registered.
A_KUBELET = ANNOTATION + "kubelet"
# KWOK manages the nodes that carry this annotation (kwok --manage-nodes-with-annotation-selector), the
# convention of KWOK's own documentation.
KWOK_NODE = "kwok.x-k8s.io/node"
MAX_DEVICES_PER_SLICE = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices
KUBELET_VERSION = "v1.37.2"

Stage = dict[str, Any]


def node_annotations(
    device_plugin_resources: Mapping[str, int],
    devices: Sequence[Mapping[str, Any]],
    dp_on: bool,
    fleet: str = "fake",
) -> dict[str, str]:
    """The annotations a twin node is registered with (the stages read and advance them); `fleet` is the
    value of the annotation its kwok selects (two fleets on one control plane keep their nodes apart)."""
    if len(devices) > MAX_DEVICES_PER_SLICE:
        raise ValueError(f"{len(devices)} devices do not fit one ResourceSlice (at most {MAX_DEVICES_PER_SLICE})")
    return {
        KWOK_NODE: fleet,
        A_DP: "running" if dp_on else "gone",
        A_DP_RESOURCES: json.dumps({k: str(v) for k, v in sorted(device_plugin_resources.items())}),
        # Stopped at registration: a plugin the labels want starts as at boot (dra-plugin-start publishes).
        A_DRA: "stopped",
        A_DEVICES: json.dumps(list(devices), separators=(",", ":")),
        A_GENERATION: "1",
    }


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _jq(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"jq": {"key": key, "operator": operator, **({"values": list(values)} if values else {})}}


def _label(key: str) -> str:
    return f'.metadata.labels["{key}"]'


def _annotation(key: str) -> str:
    return f'.metadata.annotations["{key}"]'


def _stage(
    name: str, kind: str, match: list[dict[str, Any]], delay_s: float, jitter_s: float, steps: list[dict[str, Any]]
) -> Stage:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "resource.k8s.io/v1" if kind == "ResourceSlice" else "v1", "kind": kind},
        "selector": {"matchExpressions": match},
        "next": {},
        "steps": steps,
    }
    if delay_s > 0 or jitter_s > 0:
        spec["delay"] = {"durationMilliseconds": _ms(delay_s), "jitterDurationMilliseconds": _ms(delay_s + jitter_s)}
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


def _patch(template: str, subresource: str = "", type_: str = "merge") -> dict[str, Any]:
    patch: dict[str, Any] = {"template": template, "type": type_}
    if subresource:
        patch["subresource"] = subresource
    return {"patch": patch}


def _annotate(key: str, value: str) -> dict[str, Any]:
    return _patch(json.dumps({"metadata": {"annotations": {key: value}}}))


def _dp_resources(value: str, state: str) -> str:
    """A status patch template setting every device-plugin resource of the node in `value`'s fields
    ("capacity", "allocatable"), each to its count (`count`) or 0, and the plugin's `state` annotation.

    One PATCH of the status subresource carries both: the API server keeps a status update's metadata and
    resets only the spec (k8s.io/kubernetes@v1.37.2 pkg/registry/core/node/strategy.go,
    nodeStatusStrategy.PrepareForUpdate and GetResetFields). Two patches per transition were about a third
    of the twin's node writes on a 2,000-node rehearsal."""
    out = [
        '{{ $r := index .metadata.annotations "' + A_DP_RESOURCES + '" | fromJson }}',
        f'metadata:\n  annotations:\n    "{A_DP}": {state}',
        "status:",
    ]
    for field in value.split(","):
        name, _, what = field.partition("=")
        out.append(f"  {name}:")
        count = "{{ $v | quote }}" if what == "count" else '"0"'
        out.append("  {{ range $k, $v := $r }}")
        out.append(f"    {{{{ $k | quote }}}}: {count}")
        out.append("  {{ end }}")
    return "\n".join(out)


_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status (KWOK twin)"),
)
_NODE_INFO = {
    "architecture": "amd64",
    "bootID": "",
    "containerRuntimeVersion": "containerd://2.1.0",
    "kernelVersion": "6.8.0-kwok",
    "kubeletVersion": KUBELET_VERSION,
    "kubeProxyVersion": "",
    "machineID": "",
    "operatingSystem": "linux",
    "osImage": "dra-migrate twin (KWOK)",
    "systemUUID": "",
}
# What a Ready node's status holds beside its conditions: node-initialize posts it (NODE_READY, each value
# as JSON, which YAML reads as itself) and a steady node registers with it (`ready_status`).
_READY_REST = {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}, "nodeInfo": _NODE_INFO, "phase": "Running"}
_TIMES = "lastHeartbeatTime: {{ $now | Quote }}, lastTransitionTime: {{ $since | Quote }}"
NODE_READY = (
    "{{ $now := Now }}\n{{ $since := or .metadata.creationTimestamp $now }}\nstatus:\n  conditions:\n"
    + "".join(
        f'  - {{type: {t}, status: "{st}", reason: {r}, message: {m}, {_TIMES}}}\n' for t, st, r, m in _CONDITIONS
    )
    + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in _READY_REST.items())
)


def ready_status(now: str, ready: str = "True") -> dict[str, Any]:
    """NODE_READY's status as data, stamped `now`: what a node of a cluster in steady state already shows when
    the twin registers it (`sim.kwok.node_manifest`, steady), so node-initialize has nothing left to play.
    `ready` other than "True": a node the snapshot showed not Ready, its Ready condition as the kubelet
    ("False") or the node lifecycle controller ("Unknown": its kubelet stopped posting) leaves it."""
    conditions = [
        {"type": t, "status": st, "reason": r, "message": m, "lastHeartbeatTime": now, "lastTransitionTime": now}
        for t, st, r, m in _CONDITIONS
    ]
    if ready != "True":
        why = ("NodeStatusUnknown", "Kubelet stopped posting node status.") if ready == "Unknown" else None
        reason, message = why or ("KubeletNotReady", "the snapshot showed this node not Ready (KWOK twin)")
        conditions[-1].update(status=ready, reason=reason, message=message)
    return {"conditions": conditions, **_READY_REST}


# The slice the DRA kubelet plugin publishes: one pool per node, named after it, owned by the Node as the
# kubelet plugin helper makes it (k8s.io/dynamic-resource-allocation resourceslice controller).
SLICE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: {{ printf "%s-DRIVER" .metadata.name | Quote }}
  annotations: ANNOTATIONS
  ownerReferences:
  - {apiVersion: v1, kind: Node, name: {{ .metadata.name | Quote }}, uid: {{ .metadata.uid | Quote }}, controller: true}
spec:
  driver: DRIVER
  nodeName: {{ .metadata.name | Quote }}
  pool: {name: {{ .metadata.name | Quote }}, generation: GENERATION, resourceSliceCount: 1}
  devices: {{ index .metadata.annotations "A_DEVICES" }}
""".replace("DRIVER", DRA_DRIVER).replace("A_DEVICES", A_DEVICES)
# The pool's generation: one above the last published (kept on the Node), so a consumer that sees an old
# and a new slice at once knows which to use.
_GENERATION = 'index .metadata.annotations "' + A_GENERATION + '"'
GENERATION_NOW = "{{ " + _GENERATION + " | atoi | add1 }}"
GENERATION_KEPT = "{{ " + _GENERATION + " }}"

POD_RUNNING = """\
{{ $now := Now }}
status:
  conditions:
  - {type: PodReadyToStartContainers, status: "True", lastTransitionTime: {{ $now | Quote }}}
  - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
  - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
  - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
  - {type: PodScheduled, status: "True", lastTransitionTime: {{ $now | Quote }}}
  {{ if .spec.initContainers }}
  initContainerStatuses:
  {{ range .spec.initContainers }}
  - name: {{ .name | Quote }}
    image: {{ .image | Quote }}
    restartCount: 0
    ready: true
    {{ if eq (or .restartPolicy "") "Always" }}
    started: true
    state: {running: {startedAt: {{ $now | Quote }}}}
    {{ else }}
    started: false
    state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}
    {{ end }}
  {{ end }}
  {{ end }}
  containerStatuses:
  {{ range .spec.containers }}
  - name: {{ .name | Quote }}
    image: {{ .image | Quote }}
    restartCount: 0
    ready: true
    started: true
    state: {running: {startedAt: {{ $now | Quote }}}}
  {{ end }}
  hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
  hostIPs: [{ip: {{ NodeIPWith .spec.nodeName | Quote }}}]
  podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" )
    ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
  phase: Running
  startTime: {{ $now | Quote }}
"""


# Conditions on a Node, as jq booleans.
READY = 'any(.status.conditions[]?; .type == "Ready" and .status == "True")'


def _is(annotation: str, *values: str) -> str:
    return "(" + " or ".join(f'{_annotation(annotation)} == "{v}"' for v in values) + ")"


def _exclusive(conditions: Sequence[tuple[str, str]]) -> list[tuple[str, dict[str, Any]]]:
    """Each (name, jq condition) as a selector that matches only where no earlier one does.

    KWOK picks at random among the Stages that match an object (lifecycle.Match, by weight) and plays one
    at a time: a 5-minute capacity grace drawn before a DRA plugin's start would hold the slice back by
    five minutes. In this order, the short transitions go first and the long grace last."""
    out: list[tuple[str, dict[str, Any]]] = []
    for i, (name, cond) in enumerate(conditions):
        earlier = "".join(f" and (({c}) | not)" for _, c in conditions[:i])
        out.append((name, _jq(f'if ({cond}){earlier} then "yes" else "no" end', "In", "yes")))
    return out


def node_conditions(rules: PluginRules = LABEL_RULES) -> list[tuple[str, str]]:
    """The node stages' own conditions, in priority order (see _exclusive). Where a plugin runs is the
    placement rule of its DaemonSets (`sim.placement`), as the DaemonSet controller applies it."""
    dra_on, dp_off = rules.dra_on_jq(), f"({rules.device_plugin_on_jq()} | not)"
    return [
        ("node-initialize", f'(({READY}) | not) and {_annotation(A_KUBELET)} != "down"'),
        ("dra-plugin-start", f"{READY} and {dra_on} and {_is(A_DRA, 'stopped')}"),
        ("dra-plugin-stop", f"{READY} and ({dra_on} | not) and {_is(A_DRA, 'running')}"),
        ("device-plugin-stop", f"{READY} and {dp_off} and {_is(A_DP, 'running')}"),
        ("device-plugin-start", f"{READY} and ({dp_off} | not) and {_is(A_DP, 'stopped', 'gone')}"),
        ("device-plugin-gone", f"{READY} and {dp_off} and {_is(A_DP, 'stopped')}"),
    ]


NODE_CONDITIONS = node_conditions()


def stages(timing: TimingProfile, rules: PluginRules = LABEL_RULES) -> list[Stage]:
    """The Stages of a twin whose components take `timing`'s durations (already time-scaled), its plugins
    placed by `rules`."""
    t = timing
    sync = t.node_status_sync_s
    match = dict(_exclusive(node_conditions(rules)))
    out = [
        _stage("node-initialize", "Node", [match["node-initialize"]], 0, 0, [_patch(NODE_READY, "status")]),
        # The DRA plugin's pod starts, registers and publishes its slice (a new pool generation).
        _stage(
            "dra-plugin-start",
            "Node",
            [match["dra-plugin-start"]],
            t.dra_plugin_start_s,
            0,
            [
                {"apply": {"template": _slice(GENERATION_NOW, {}), "type": "merge"}},
                _patch(
                    "metadata:\n  annotations:\n"
                    f'    "{A_DRA}": running\n'
                    f'    "{A_GENERATION}": {{{{ {_GENERATION} | atoi | add1 | quote }}}}\n'
                ),
            ],
        ),
        # The plugin exits; kubelet wipes its slices defaultWipingDelay later. A Stage can delete only the
        # object it plays, so the node's stage marks the slice and the slice's own stage deletes it.
        _stage(
            "dra-plugin-stop",
            "Node",
            [match["dra-plugin-stop"]],
            t.plugin_exit_s + t.slice_wipe_delay_s,
            0,
            [
                {"apply": {"template": _slice(GENERATION_KEPT, {A_WIPE: "true"}), "type": "merge"}},
                _annotate(A_DRA, "stopped"),
            ],
        ),
        # The plugin's pod exits, kubelet marks its devices unhealthy and posts allocatable 0 at its next
        # status sync (somewhere in the next sync period: the jitter).
        _stage(
            "device-plugin-stop",
            "Node",
            [match["device-plugin-stop"]],
            t.plugin_exit_s,
            sync,
            [_patch(_dp_resources("allocatable=0", "stopped"), "status")],
        ),
        _stage(
            "device-plugin-start",
            "Node",
            [match["device-plugin-start"]],
            t.device_plugin_start_s,
            sync,
            [_patch(_dp_resources("capacity=count,allocatable=count", "running"), "status")],
        ),
        # endpointStopGracePeriod later, capacity reads 0 too (the keys stay).
        _stage(
            "device-plugin-gone",
            "Node",
            [match["device-plugin-gone"]],
            t.capacity_grace_s,
            sync,
            [_patch(_dp_resources("capacity=0,allocatable=0", "gone"), "status")],
        ),
        _stage("slice-wipe", "ResourceSlice", [_jq(_annotation(A_WIPE), "In", "true")], 0, 0, [{"delete": True}]),
        _stage(
            "pod-start",
            "Pod",
            [
                _jq(".metadata.deletionTimestamp", "DoesNotExist"),
                _jq(".status.phase", "In", "Pending"),
                _jq(".spec.nodeName", "Exists"),
                # The canary runs to its end in sim.kwok (its output names its devices' UUIDs).
                _jq(_label(CANARY_LABEL), "DoesNotExist"),
            ],
            t.container_start_s,
            0,
            [_patch(POD_RUNNING, "status")],
        ),
        *_pod_deletes(t),
    ]
    return out


def _slice(generation: str, annotations: Mapping[str, str]) -> str:
    return SLICE.replace("GENERATION", generation).replace("ANNOTATIONS", json.dumps(dict(annotations)))


POD_TERMINATED = """\
{{ $now := Now }}
status:
  phase: Failed
  conditions:
  - {type: Ready, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
  - {type: ContainersReady, status: "False", reason: PodCompleted, lastTransitionTime: {{ $now | Quote }}}
  containerStatuses:
  {{ range .spec.containers }}
  - name: {{ .name | Quote }}
    image: {{ .image | Quote }}
    restartCount: 0
    ready: false
    started: false
    state: {terminated: {exitCode: 143, reason: Error, startedAt: {{ $now | Quote }}, finishedAt: {{ $now | Quote }}}}
  {{ end }}
"""


def _pod_deletes(t: TimingProfile) -> list[Stage]:
    """A deleted pod that runs is killed at the end of its grace period (times the profile's grace factor:
    kubelet sends SIGTERM and kills at the grace's end; the twin's workloads use all of it), ends Failed
    (exit 143), and is then deleted; a pod already finished is deleted at once.

    Ending it before the final delete is what kubelet does (pkg/kubelet/status, terminal phase on
    deletion) and what lets the Job controller lift its tracking finalizer
    (batch.kubernetes.io/job-tracking): a pod deleted while it still ran would keep it forever."""
    factor = t.grace_factor
    expr = f'((.metadata.deletionGracePeriodSeconds // 30) * {factor * 1000:.6g} | floor | tostring) + "ms"'
    running = _jq(".status.phase", "NotIn", "Succeeded", "Failed")
    kill = _stage(
        "pod-kill",
        "Pod",
        [_jq(".metadata.deletionTimestamp", "Exists"), running],
        0,
        0,
        [_patch(POD_TERMINATED, "status"), {"delete": True}],
    )
    kill["spec"]["delay"] = {"durationMilliseconds": 0, "durationFrom": {"jq": {"expression": expr}}}
    gone = _stage(
        "pod-delete",
        "Pod",
        [_jq(".metadata.deletionTimestamp", "Exists"), _jq(".status.phase", "In", "Succeeded", "Failed")],
        0,
        0,
        [{"delete": True}],
    )
    return [kill, gone]


# Stages played at once (kwok's default is 4 each; kwok v0.8.0 pkg/kwok/controllers/node_controller.go runs
# one goroutine per unit, each playing one object's Stage to its end). A play is one or two writes, and
# nearly all of it is waiting on the API server (0.15-0.7 s a write on a loaded 2,000-node twin). The
# executor switches a whole wave's plugins in one step: at 16, a wave of 80 nodes played in five rounds
# of that latency, one after another, and 80 device-plugin stops were still unplayed 35 s after the
# switch. More units than a wave has nodes (bench/rehearse.py's 2,000-node plan: waves of 60 and 80) let a
# wave's plays wait on the server together; pods: a wave evicts and restarts a few per node. The workers
# are goroutines parked on HTTP/2 streams: idle ones cost nothing.
NODE_PLAY_PARALLELISM = 128
POD_PLAY_PARALLELISM = 128


def config_documents(timing: TimingProfile, rules: PluginRules = LABEL_RULES) -> list[dict[str, Any]]:
    """The documents of kwok's --config file: its options and the Stages."""
    # kwok v0.8.0 defaults a KwokConfiguration only when none is given (pkg/config/vars.go
    # GetKwokConfiguration): one from a file must carry every default itself (those of
    # pkg/apis/config/v1alpha1 SetObjectDefaults_KwokConfiguration) — without nodeLeaseParallelism kwok exits.
    options = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "cidr": "10.0.0.0/24",
            "manageAllNodes": False,
            "enableDebuggingHandlers": True,
            "enableContentionProfiling": False,
            "enableProfilingHandler": True,
            "nodePlayStageParallelism": NODE_PLAY_PARALLELISM,
            "podPlayStageParallelism": POD_PLAY_PARALLELISM,
            # Leases: a 2,000-node twin renews about 10 a second (rehearse.run.twin_heartbeat_s), one PUT each.
            "nodeLeaseParallelism": 8,
            # Each node kwok takes over lists its pods once (kwok's default 1: 2,000 lists in a row at start).
            "podsOnNodeSyncParallelism": 4,
            "enablePodsOnNodeSyncListPager": True,
            "enablePodsOnNodeSyncStreamWatch": False,
        },
    }
    return [options, *stages(timing, rules)]
