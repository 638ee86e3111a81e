"""The canary that proves use: a pod whose container checks the devices it was given.

Scheduling alone proves little: the kubelet still has to admit the pod, the DRA plugin to prepare the
device (`NodePrepareResources`), the runtime to inject it (CDI) and the container to start and see it. So
the canary container runs a check command (`sh -c CMD`) that exits 0 only when it sees exactly what it
asked for, and what it printed becomes its termination message (`terminationMessagePath`, read back from
`status.containerStatuses[].state.terminated.message`; core/v1 Container docs). The step passes only when
the pod `Succeeded`, the container exited 0 and the message names every allocated device — by its `uuid`
attribute from the ResourceSlice, or its device name when it publishes none. Anything else fails with the
kubelet's own words: admission errors (pod `status.reason`/`message`), `FailedPrepareDynamicResources`
events (k8s.io/kubernetes v1.37.2 pkg/kubelet/events/event.go, emitted by kuberuntime_manager.go), image
and container-creation errors (container `waiting.reason`), a non-zero exit.

This module is pure (pod spec in, verdict out); `ops.LiveOps.canary` and `probe` do the API calls.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.inventory.resources import quantity_int
from dra_migrate.plan.params import CANARY_COMMAND, CANARY_IMAGE

# The defaults live with the plan's parameters (they are recorded in every plan).
DEFAULT_IMAGE = CANARY_IMAGE
DEFAULT_COMMAND = CANARY_COMMAND
CONTAINER = "canary"
TERMINATION_LOG = "/dev/termination-log"
HOSTNAME_LABEL = "kubernetes.io/hostname"
MESSAGE_LIMIT = 4096  # the kubelet keeps at most 4096 bytes of a termination message (core/v1 Container)

# The wrapper: run the user's command line, keep what it printed (stdout and stderr) as the termination
# message and in the log, and exit with its status. The command comes in through the environment, so no
# quoting of it into the wrapper is needed.
_WRAPPER = (
    'out=$(sh -c "$DRA_MIGRATE_CANARY_COMMAND" 2>&1); rc=$?; '
    f"printf '%s\\n' \"$out\" | tail -c {MESSAGE_LIMIT} >{TERMINATION_LOG}; "
    "printf '%s\\n' \"$out\"; exit $rc"
)

# Waiting reasons after which the kubelet will not get the container running without a change by someone
# (pkg/kubelet/images/types.go, pkg/kubelet/kuberuntime: ErrImageNeverPull, CreateContainerConfigError, ...).
TERMINAL_WAITING = frozenset(
    {
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)
# A failed pull the kubelet retries, on a backoff of 10 s doubling (k8s.io/kubernetes@v1.37.2
# pkg/kubelet/images/image_manager.go EnsureImageExists; pkg/kubelet/kubelet.go imageBackOffPeriod): a wave's
# nodes pull the canary image at once, and a registry throttling that burst (429: Docker Hub's anonymous limit
# is per IP address, nodes behind one NAT share it) or a blip of its network is not a node that fails. The
# canary fails when REPEATS_TO_FAIL pulls failed (each one a `Failed` "Failed to pull image" warning), or at
# the step's timeout, with the kubelet's last pull error (the container's waiting message).
PULL_RETRIED = frozenset({"ErrImagePull", "ImagePullBackOff"})
PULL_FAILED_PREFIX = "Failed to pull image"
# What the kubelet records at each pod sync while a pull fails (kuberuntime_container.go startContainer,
# "Error: %v" of EnsureImageExists): a restatement of the pull's failure, not another warning.
PULL_RESTATED = frozenset(f"Error: {r}" for r in PULL_RETRIED)
PREPARE_FAILED = "FailedPrepareDynamicResources"
# A failed prepare fails the canary at once: the kubelet retries it with its pod-sync backoff (measured on the
# real node of tests/integration/test_realnode.py: one event in the first 40 s), so waiting for a repeat
# would only run out the step's timeout, and a plugin that failed a prepare is reason enough to roll back.
# Any other warning the kubelet has repeated this often is not a blip either.
REPEATS_TO_FAIL = 3
# One failed prepare is the control plane's race, not the plugin's: the node authorizer lets a kubelet read
# a claim only once its graph links the claim to a pod bound to that node, and that graph is fed by the API
# server's own informer (k8s.io/kubernetes@v1.37.2 plugin/pkg/auth/authorizer/node/graph_populator.go,
# updatePod, which reads status.extendedResourceClaimStatus too). A kubelet that sees its pod bound before
# the graph does is refused ("no relationship found between node ... and this object") and retries at its
# next pod sync (the same race for PVCs: kubernetes/kubernetes#113429). Caught by the real-node tier: a
# canary failed, and its wave rolled back, on a claim the kubelet was about to read. Such a refusal fails
# the canary only when the kubelet has met it REPEATS_TO_FAIL times, or at the step's timeout.
AUTHORIZER_LAG = "no relationship found between node"
# A service mesh injecting its proxy into every pod of the canary's namespace (both Istio's and Linkerd's
# guides start by labelling `default`) adds an init container that needs NET_ADMIN and a proxy that never
# exits, its image pulled on a node just drained: the canary opts out as each mesh documents (Istio: the pod
# label `sidecar.istio.io/inject: "false"`, istio.io docs/setup/additional-setup/sidecar-injection; Linkerd:
# the annotation `linkerd.io/inject: disabled`, linkerd.io/2/features/proxy-injection "Overriding injection").
# A mesh that injects anyway is met by `verdict` (its proxy does not hold the canary's end).
NO_MESH_LABELS = {"sidecar.istio.io/inject": "false"}
NO_MESH_ANNOTATIONS = {"linkerd.io/inject": "disabled"}

# The canary meets Pod Security `restricted` (k8s.io/pod-security-admission@v0.37.2 policy/check_runAsNonRoot.go,
# check_runAsUser.go, check_allowPrivilegeEscalation.go, check_capabilities_restricted.go,
# check_seccompProfile_restricted.go), so a namespace or cluster default enforcing it admits it. Non-root costs the
# check nothing: the runtime creates a CDI device node in the container owned by the process's uid and gid when
# the spec names none (tags.cncf.io/container-device-interface@v1.1.1 pkg/cdi/container-edits.go, Apply), with the
# host node's mode (container-edits_unix.go fillMissingInfo), and NVIDIA's CDI spec adds the device nodes' groups
# to the process (NVIDIA/nvidia-container-toolkit@v1.19.1 pkg/nvcdi/api.go, additional GIDs for device nodes);
# nvidia-smi is mounted world-executable. The uid is explicit: the kubelet checks runAsNonRoot against the image's
# user otherwise, and the default image's is root (k8s.io/kubernetes@v1.37.2 pkg/kubelet/kuberuntime/
# security_context_others.go verifyRunAsNonRoot). NOBODY, or the first uid of an OpenShift namespace's range,
# the only uids its `restricted-v2` SCC accepts there (tests/unit/test_openshift.py).
NOBODY = 65534
OPENSHIFT_UID_RANGE = "openshift.io/sa.scc.uid-range"  # "<first>/<size>", written on every OpenShift namespace
# cpu and memory requested and limited (equal): a ResourceQuota on any of them refuses a pod whose containers
# leave it unset (k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/pods.go, Constraints). Enough for sh,
# awk and nvidia-smi, small enough for a drained node; a LimitRange's defaults do not apply to what is set.
RESOURCES = {"cpu": "250m", "memory": "256Mi"}


def run_as(namespace: Mapping[str, Any] | None) -> int:
    """The canary's uid in `namespace` (its object, None when unread): the first of its OpenShift range, else NOBODY."""
    annotations = ((namespace or {}).get("metadata") or {}).get("annotations") or {}
    first = str(annotations.get(OPENSHIFT_UID_RANGE, "")).partition("/")[0].strip()
    return int(first) if first.isdecimal() and int(first) > 0 else NOBODY


def pod_security(uid: int) -> dict[str, Any]:
    """The canary pod's securityContext (the container's is CONTAINER_SECURITY)."""
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "seccompProfile": {"type": "RuntimeDefault"}}


CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

# What a ResourceQuota charges the claim the scheduler creates for the canary's extended resource (KEP-5004):
# one object, and its devices per DeviceClass (k8s.io/kubernetes@v1.37.2 pkg/quota/v1/evaluator/core/
# resource_claims.go Usage, addExtendedResourceQuota; k8s.io/api@v0.37.2 core/v1 types.go
# ResourceImplicitExtendedClaimsPerClass). That create is the scheduler's, after the pod was admitted: a dry run
# of the pod does not meet it, and a quota without room leaves every canary unscheduled to its timeout.
CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"
CLASS_DEVICES = ".deviceclass.resource.k8s.io/devices"
CLASS_REQUESTS = "requests.deviceclass.resource.kubernetes.io/"
IMPLICIT_CLASS = "deviceclass.resource.kubernetes.io/"


def claim_quota_refusals(
    quotas: Iterable[Mapping[str, Any]], classes: Iterable[Mapping[str, Any]], resource: str, devices: int = 1
) -> list[str]:
    """Why the namespace's ResourceQuotas (`quotas`) would refuse the canary's claim for `devices` of `resource`,
    served by the DeviceClasses mapping it (`classes`, all of them) or named by it ([] when none would)."""
    names = {str((c.get("metadata") or {}).get("name")) for c in classes
             if (c.get("spec") or {}).get("extendedResourceName") == resource}  # fmt: skip
    if resource.startswith(IMPLICIT_CLASS):
        names.add(resource[len(IMPLICIT_CLASS) :])
    charged = {CLAIM_COUNT: 1} | {f"{n}{CLASS_DEVICES}": devices for n in names}
    charged |= {f"{CLASS_REQUESTS}{n}": devices for n in names}
    out: list[str] = []
    for q in quotas:
        meta, status = q.get("metadata") or {}, q.get("status") or {}
        hard = status.get("hard") or (q.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        for key, need in sorted(charged.items()):
            if key in hard and quantity_int(hard[key]) - quantity_int(used.get(key, "0")) < need:
                out.append(
                    f"ResourceQuota {meta.get('namespace')}/{meta.get('name')} has {key} hard {hard[key]}, "
                    f"used {used.get(key, '0')}: no room for the claim of the canary's {resource}"
                )
    return out


def on_node(node: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The affinity that places a pod on `node` through the scheduler, which must allocate its devices
    through DRA (`spec.nodeName` would bypass it): one required term on the node's `kubernetes.io/hostname`
    label (what the plan records as the placement: `plan/steps.py`) and on its name. The name, a
    `metadata.name` field requirement as the DaemonSet controller places its pods (k8s.io/kubernetes@v1.37.2
    pkg/controller/daemon/util/daemonset_util.go, ReplaceDaemonSetPodNodeNameNodeAffinity), is what the
    scheduler's NodeAffinity PreFilter narrows a cycle to (pkg/scheduler/framework/plugins/nodeaffinity/
    node_affinity.go, PreFilter): the other filters, DRA's allocator among them, then look at one node
    instead of the whole fleet. With the label alone, a 2,000-node rehearsal's canaries took 1.5 s (median)
    from creation to binding, 1.2 s with the name (issue 25). Both hold on the same node: `labels` are its
    own (a node without the label is taken at its name)."""
    hostname = labels.get(HOSTNAME_LABEL, node)
    term = {
        "matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}],
    }
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def command_line(argv: Sequence[str] | None) -> str:
    """The shell command line the canary runs, from a step's `command` (an argv list; the plan records
    `["sh", "-c", CMD]`): CMD itself for that form, any other argv quoted for sh, the NVIDIA default for none."""
    if not argv:
        return DEFAULT_COMMAND
    args = [str(a) for a in argv]
    if len(args) == 3 and args[:2] == ["sh", "-c"]:
        return args[2]
    return shlex.join(args)


def container(image: str, command: str, devices: int) -> dict[str, Any]:
    """The checking container (without its resource request, which the caller adds)."""
    return {
        "name": CONTAINER,
        "image": image,
        "command": ["sh", "-c", _WRAPPER],
        "env": [
            {"name": "DRA_MIGRATE_CANARY_COMMAND", "value": command},
            {"name": "DRA_MIGRATE_CANARY_DEVICES", "value": str(devices)},
        ],
        "securityContext": dict(CONTAINER_SECURITY),
        "terminationMessagePath": TERMINATION_LOG,
        # If the wrapper could not write the file (a read-only /dev, no shell), the log tail is the message.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def seen_published(saw: str, slices: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The devices of `slices` (the newest generation of each pool) that the canary's message names, by
    their `uuid` attribute or their name when they publish none: what the canary was given, when its claim
    was deleted before it could be read (a finished pod's generated claim goes at once)."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = (str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", "")))
        newest[key] = max(newest.get(key, 0), int((spec.get("pool") or {}).get("generation", 0)))
    found: list[dict[str, str]] = []
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        if int((spec.get("pool") or {}).get("generation", 0)) != newest[(driver, pool)]:
            continue
        for d in spec.get("devices") or []:
            ident = str(((d.get("attributes") or {}).get("uuid") or {}).get("string") or d.get("name", ""))
            if ident and ident in saw:
                found.append({"driver": driver, "pool": pool, "device": str(d.get("name", "")), "id": ident})
    return found


@dataclass(frozen=True)
class Verdict:
    """`state` is "pending" (keep waiting), "ok" or "failed"; `reason` says why in the kubelet's words
    when it failed; `saw` is the container's termination message."""

    state: str
    reason: str = ""
    saw: str = ""
    exit_code: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


def expected_ids(results: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]) -> list[str]:
    """For each allocated device (claim `status.allocation.devices.results[]`: driver, pool, device), its
    `uuid` attribute as published in the newest generation of its pool, or its name when it has none."""
    published: dict[tuple[str, str, str], tuple[int, Mapping[str, Any]]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        gen = int(pool.get("generation", 0))
        for d in spec.get("devices") or []:
            key = (str(spec.get("driver", "")), str(pool.get("name", "")), str(d.get("name", "")))
            if key not in published or published[key][0] < gen:
                published[key] = (gen, d)
    out = []
    for r in results:
        key = (str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
        device = published.get(key, (0, {}))[1]
        uuid = ((device.get("attributes") or {}).get("uuid") or {}).get("string")
        out.append(str(uuid) if uuid else key[2])
    return out


def judged_by_node(v: Verdict, slices: Iterable[Mapping[str, Any]], node: str) -> tuple[Verdict, list[dict[str, str]]]:
    """An ok verdict of a canary whose claim was gone before it was read stays ok only if the container
    named one of the node's published devices (`slices`); with the devices it named."""
    seen = seen_published(v.saw, slices)
    if seen:
        return v, seen
    reason = (
        f"its claim was gone before it could be read, and the container named none of node {node}'s "
        f"published devices: {v.saw.strip() or 'no output'}"
    )
    return Verdict("failed", reason, v.saw, v.exit_code), []


def verdict(pod: Mapping[str, Any], ids: list[str], events: Iterable[Mapping[str, Any]] = ()) -> Verdict:
    """Judge the canary pod now: ok only on Succeeded + exit 0 + a message naming every id in `ids`."""
    status = pod.get("status") or {}
    phase = status.get("phase", "")
    cs = _container_status(status)
    state = cs.get("state") or {}
    term = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
    if term:
        saw = str(term.get("message") or "").strip()
        code = int(term.get("exitCode", -1))
        if code != 0:
            reason = str(term.get("reason") or "Error")
            return Verdict("failed", f"the canary container exited {code} ({reason}): {_one_line(saw) or 'no output'}",
                           saw, code)  # fmt: skip
        missing = [i for i in ids if i not in saw]
        if missing:
            return Verdict(
                "failed",
                f"the canary container exited 0 but did not see {', '.join(missing)}: {_one_line(saw) or 'no output'}",
                saw,
                code,
                {"missing": missing},
            )
        if phase == "Succeeded" or (state.get("terminated") and _others_run_on(status)):
            return Verdict("ok", "", saw, code)
        return Verdict("pending", saw=saw, exit_code=code)
    if phase == "Failed":
        # Admission rejections set the pod's own reason and message (pkg/kubelet/lifecycle, e.g.
        # UnexpectedAdmissionError, OutOf<resource>).
        reason = str(status.get("reason") or "Failed")
        message = str(status.get("message") or "")
        return Verdict("failed", f"the kubelet rejected the canary pod ({reason}): {message}".strip())
    waiting = state.get("waiting") or {}
    if waiting.get("reason") in TERMINAL_WAITING:
        message = str(waiting.get("message") or "")
        return Verdict("failed", f"the canary container cannot start ({waiting['reason']}): {message}".strip())
    events = list(events)
    warning = last_warning(e for e in events if not _about_the_pull(e))
    if warning and (_fails_at_once(warning) or int(warning.get("count") or 1) >= REPEATS_TO_FAIL):
        return Verdict("failed", _event_text(warning), details={"event": warning.get("reason")})
    pulls = sum(int(e.get("count") or 1) for e in events if _pull_failed(e))
    if waiting.get("reason") in PULL_RETRIED and pulls >= REPEATS_TO_FAIL:
        return Verdict("failed", f"the kubelet failed to pull the canary image {pulls} times ({_pull_error(waiting)})",
                       details={"event": "Failed", "pulls": pulls})  # fmt: skip
    return Verdict("pending")


def _pull_failed(event: Mapping[str, Any]) -> bool:
    return event.get("type") == "Warning" and str(event.get("message") or "").startswith(PULL_FAILED_PREFIX)


def _about_the_pull(event: Mapping[str, Any]) -> bool:
    """A warning the PULL_RETRIED rule judges (a failed pull, or its restatement at a pod sync)."""
    return _pull_failed(event) or str(event.get("message") or "").strip() in PULL_RESTATED


def _pull_error(waiting: Mapping[str, Any]) -> str:
    return f"{waiting.get('reason', '')}: {_one_line(str(waiting.get('message') or ''))}"


def _others_run_on(status: Mapping[str, Any]) -> bool:
    """Whether a container the tool did not put in the canary (a mesh's proxy, injected by the namespace's
    webhook) keeps the pod from ending: a pod is Running while any regular container runs, and only a native
    sidecar (an init container with restartPolicy Always, KEP-753) is stopped by the kubelet when the
    regular ones end. The canary's own container has ended for good (restartPolicy Never): it is judged."""
    return any(c.get("name") != CONTAINER for c in status.get("containerStatuses") or [])


def _fails_at_once(warning: Mapping[str, Any]) -> bool:
    """A failed prepare, unless it is the node authorizer's lag (AUTHORIZER_LAG), which the kubelet retries."""
    return warning.get("reason") == PREPARE_FAILED and AUTHORIZER_LAG not in str(warning.get("message") or "")


def last_warning(events: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most recent Warning event of the pod, preferring a failed DRA prepare."""
    warnings = [e for e in events if e.get("type") == "Warning"]
    warnings.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    prepare = [e for e in warnings if e.get("reason") == PREPARE_FAILED]
    chosen = prepare or warnings
    return chosen[-1] if chosen else None


def timed_out(pod: Mapping[str, Any], events: Iterable[Mapping[str, Any]], timeout_s: float) -> str:
    """Why the canary did not finish in time, from the kubelet's side: its last warning, the container's
    waiting reason, or the pod's phase."""
    status = pod.get("status") or {}
    cs = _container_status(status)
    waiting = (cs.get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in PULL_RETRIED:
        return f"the kubelet could not pull the canary image in {timeout_s:g}s ({_pull_error(waiting)})"
    warning = last_warning(events)
    if warning:
        return _event_text(warning)
    if waiting:
        return f"the canary container is still waiting after {timeout_s:g}s ({waiting.get('reason', '')})"
    return f"the canary pod is still {status.get('phase') or 'Pending'} after {timeout_s:g}s"


def _container_status(status: Mapping[str, Any]) -> Mapping[str, Any]:
    found: Mapping[str, Any] = next(
        (c for c in status.get("containerStatuses") or [] if c.get("name") == CONTAINER), {}
    )
    return found


def _event_text(event: Mapping[str, Any]) -> str:
    return f"{event.get('reason', '')}: {_one_line(str(event.get('message') or ''))}"


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())
