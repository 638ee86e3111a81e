"""The status the twin writes for the canary's finished run (sim/kwok.py; KWOK's Stages play every other pod).

Pure functions of the pod, the node's addresses and (for the canary) its claim's allocation and the
node's ResourceSlices; nothing here talks to a cluster.

The canary contract: a pod labelled `dra-migrate.io/canary` runs `nvidia-smi -L` and exits. With
devices allocated (pod `status.extendedResourceClaimStatus` → its ResourceClaim's
`status.allocation.devices.results`) it ends `Succeeded`, its container terminated with exit code 0
and, as message, one line per device as `nvidia-smi -L` prints a GPU:
`GPU <i>: <productName> (UUID: <uuid>)`, the attributes of that device in its ResourceSlice, `i`
counting the pod's devices from 0 (a container sees only its own GPUs, numbered from 0). Without
devices it ends `Failed`, exit code 1, message `no devices`. (For a MIG device the real tool prints
its parent GPU and a `MIG …` line under it; the contract keeps one line per allocated device.)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The executor labels its canary pods with this key (dra_migrate.execute.ops.CANARY_LABEL; a unit test
# keeps the two equal).
CANARY_LABEL = "dra-migrate.io/canary"
NO_DEVICES = "no devices"

Obj = dict[str, Any]


def claim_name(pod: Mapping[str, Any]) -> str | None:
    """The special ResourceClaim the scheduler made for the pod's extended resources (KEP-5004), if any."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    name = status.get("resourceClaimName")
    return str(name) if name else None


def allocated_results(claim: Mapping[str, Any] | None) -> list[Obj]:
    """`status.allocation.devices.results` of a ResourceClaim ([] when not allocated)."""
    if not claim:
        return []
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
    return [dict(r) for r in results or [] if isinstance(r, dict)]


def nvidia_smi_lines(results: Sequence[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]) -> list[str]:
    """What `nvidia-smi -L` prints for these allocated devices: one line per device found in a slice
    of its driver and pool (a device no slice holds was never prepared: the container does not see it)."""
    by_key: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        driver, pool = str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))
        for d in spec.get("devices") or []:
            by_key[(driver, pool, str(d.get("name", "")))] = d
    lines: list[str] = []
    for r in results:
        device = by_key.get((str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", ""))))
        if device is None:
            continue
        attrs = device.get("attributes") or {}
        product = _string(attrs.get("productName")) or "NVIDIA GPU"
        uuid = _string(attrs.get("uuid"))
        lines.append(f"GPU {len(lines)}: {product} (UUID: {uuid})")
    return lines


def _string(attr: Any) -> str:
    return str(attr.get("string", "")) if isinstance(attr, dict) else ""


def canary_status(pod: Mapping[str, Any], lines: Sequence[str], host_ip: str, pod_ip: str, now: str) -> Obj:
    """The status of a finished canary: Succeeded with the lines, or Failed with `no devices`."""
    ok = bool(lines)
    spec = pod.get("spec") or {}
    terminated = {
        "exitCode": 0 if ok else 1,
        "reason": "Completed" if ok else "Error",
        "message": "\n".join(lines) if ok else NO_DEVICES,
        "startedAt": now,
        "finishedAt": now,
    }
    containers = [
        {
            **_container_base(c, host_ip, now),
            "ready": False,
            "started": False,
            "state": {"terminated": {**terminated, "containerID": _container_id(host_ip, c, now)}},
        }
        for c in spec.get("containers") or []
    ]
    reason = "PodCompleted"
    conditions = [
        {"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": now},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now, "reason": reason},
        {"type": "Ready", "status": "False", "lastTransitionTime": now, "reason": reason},
        {"type": "ContainersReady", "status": "False", "lastTransitionTime": now, "reason": reason},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
    ]
    return {
        "phase": "Succeeded" if ok else "Failed",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": containers,
    }


def _container_id(host_ip: str, c: Mapping[str, Any], now: str) -> str:
    return "containerd://" + hashlib.sha256(f"{host_ip}/{c.get('name')}/{now}".encode()).hexdigest()


def _container_base(c: Mapping[str, Any], host_ip: str, now: str) -> Obj:
    image = str(c.get("image", ""))
    return {
        "name": c.get("name"),
        "image": image,
        "imageID": f"{image.split('@')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": _container_id(host_ip, c, now),
        "restartCount": 0,
    }
