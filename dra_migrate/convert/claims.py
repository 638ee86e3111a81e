"""The claims a conversion writes: options, request shapes, names, and the ResourceClaimTemplate documents.

What a converted claim looks like (dra-facts.md §1.3-1.4; k8s.io/api resource/v1 `ResourceClaimTemplate`):
one request per shape, `exactly: {deviceClassName, allocationMode: ExactCount, count: N}`, or
`firstAvailable` alternatives when fallback classes are given. With `--topology`, a request for several whole
GPUs also gets a `matchAttribute` constraint on `resource.kubernetes.io/pcieRoot` (see `topology_constraints`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from dra_migrate.convert.sharing import Sharing, config_kinds, opaque_configs, sharing_note
from dra_migrate.dra.deviceclasses import DRIVER, MANAGED_BY, SOURCE_ANNOTATION, mig_profile_of
from dra_migrate.inventory.topology import PCIE_ROOT

# The NVIDIA DRA driver chart's classes (nvidia-facts.md §4.2, dra-driver-nvidia-gpu
# deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig}.yaml).
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
REQUEST_NAME = "gpu"
# The standard PCIe-root attribute the NVIDIA DRA driver publishes where sysfs resolves a GPU (inventory/topology.py).
PCIE_ROOT_ATTRIBUTE = PCIE_ROOT
# firstAvailable takes at most 8 subrequests (k8s.io/api resource/v1 `FirstAvailableDeviceRequestMaxSize`).
MAX_SUBREQUESTS = 8
# The scheduler allocates at most 32 devices to one claim (k8s.io/api resource/v1 `AllocationResultsMaxSize`;
# k8s.io/dynamic-resource-allocation v0.37.2 structured/internal/stable/allocator_stable.go refuses a claim whose
# requests add up to more: "exceeds the claim limit"); ResourceClaimTemplate validation does not check it.
MAX_DEVICES_PER_CLAIM = 32
# Pod claim names and request names are DNS labels; template names are DNS subdomains, but we keep them
# to a label's 63 characters so they read well next to the generated claim names.
DNS_LABEL_MAX = 63


@dataclass(frozen=True)
class ConvertOptions:
    device_class: str | None = None  # overrides the default class for every request
    fallback: tuple[str, ...] = ()  # further classes, tried in order after the first (firstAvailable)
    selector: str | None = None  # a CEL selector added to every alternative (compiled by the caller)
    share_across_pod: bool = False  # GPU containers of one pod reference one claim (they share devices)
    shared_claim: bool = False  # one ResourceClaim shared by every pod of the workload
    gang: bool = False  # a PodGroup with gang.minCount for the workload, its pods wired to it (convert/gang.py)
    topology: bool = False  # requests for several whole GPUs keep them on one PCIe root (matchAttribute)
    sharing: Sharing | None = None  # the driver's opaque sharing config in every claim (convert/sharing.py)


@dataclass(frozen=True)
class Alternative:
    device_class: str
    count: int
    selectors: tuple[str, ...]


@dataclass(frozen=True)
class Request:
    """One request of a claim: `count` devices, tried in the order of `alternatives` (firstAvailable)."""

    name: str
    alternatives: tuple[Alternative, ...]


@dataclass(frozen=True)
class Shape:
    """What one pod's claim for one device-plugin name asks for; equal shapes within a workload share a
    template."""

    resource: str  # the device-plugin name it replaces
    requests: tuple[Request, ...]

    @property
    def count(self) -> int:
        return sum(r.alternatives[0].count for r in self.requests)


class ClaimNames:
    """ResourceClaimTemplate (and ResourceClaim) names taken per namespace, across every document of one
    conversion run, so two workloads named alike (a Deployment and a Job `llm`, in one file or two)
    never get one template name. Names already in the inputs are taken too."""

    def __init__(self) -> None:
        self._taken: dict[str, set[str]] = {}

    def take(self, namespace: str, name: str) -> None:
        self._taken.setdefault(namespace, set()).add(name)

    def free(self, namespace: str, candidates: list[list[str]], salt: str) -> str:
        """The first candidate not taken in `namespace`; else the last one with a short hash of `salt`
        (the workload's kind, name and role: stable across runs)."""
        taken = self._taken.setdefault(namespace, set())
        for parts in candidates:
            name = dns_label("-".join(parts))
            if name not in taken:
                taken.add(name)
                return name
        base = dns_label("-".join(candidates[-1]), DNS_LABEL_MAX - 7)
        i = 0
        while True:
            digest = hashlib.sha256(f"{salt}/{i}".encode()).hexdigest()[:6]
            name = f"{base}-{digest}"
            if name not in taken:
                taken.add(name)
                return name
            i += 1


def mig_selector(profile: str) -> str:
    # The attribute the NVIDIA DRA driver publishes for MIG devices (nvidia-facts.md §4.3, `profile`).
    return f"device.attributes['{DRIVER}'].profile == '{profile}'"


def dns_label(text: str, limit: int = DNS_LABEL_MAX) -> str:
    """A DNS-1123 label made of `text`; a too-long one is cut and keeps a short hash to stay distinct."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    name = re.sub(r"-{2,}", "-", name).strip("-") or "x"
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"{name[: limit - 7].rstrip('-')}-{digest}"


def alternatives_for(resource: str, count: int, opts: ConvertOptions) -> tuple[Alternative, ...]:
    profile = mig_profile_of(resource)
    primary = opts.device_class or (MIG_CLASS if profile else GPU_CLASS)
    alternatives = []
    for cls in (primary, *opts.fallback):
        selectors: list[str] = []
        # mig.nvidia.com matches every MIG device; the profile is what the old name promised.
        if profile and cls == MIG_CLASS:
            selectors.append(mig_selector(profile))
        if opts.selector:
            selectors.append(opts.selector)
        alternatives.append(Alternative(cls, count, tuple(selectors)))
    return tuple(dict.fromkeys(alternatives))


def shape_for(resource: str, count: int, opts: ConvertOptions) -> Shape:
    """A claim of one request for `count` devices."""
    return Shape(resource, (Request(REQUEST_NAME, alternatives_for(resource, count, opts)),))


def free_claim_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    base = dns_label(name, DNS_LABEL_MAX - 4)
    i = 2
    while f"{base}-{i}" in taken:
        i += 1
    return f"{base}-{i}"


def claim_document(name: str, shape: Shape, workload: dict[str, Any], opts: ConvertOptions) -> CommentedMap:
    meta = CommentedMap()
    meta["name"] = name
    ns = (workload.get("metadata") or {}).get("namespace")
    if ns:
        meta["namespace"] = ns
    meta["labels"] = CommentedMap(MANAGED_BY)
    meta["annotations"] = CommentedMap({SOURCE_ANNOTATION: shape.resource})
    requests = CommentedSeq()
    for req in shape.requests:
        request = CommentedMap()
        request["name"] = req.name
        if len(req.alternatives) == 1:
            request["exactly"] = _device_request(req.alternatives[0], None)
        else:
            subs = CommentedSeq()
            used: set[str] = set()
            for alt in req.alternatives:
                sub_name = free_claim_name(dns_label(alt.device_class.split(".")[0]), used)
                used.add(sub_name)
                subs.append(_device_request(alt, sub_name))
            request["firstAvailable"] = subs
        requests.append(request)
    devices = CommentedMap()
    devices["requests"] = requests
    constrained = topology_constraints(shape, opts)
    if constrained:
        constraints = CommentedSeq()
        for req_name in constrained:
            c = CommentedMap()
            c["requests"] = CommentedSeq([req_name])
            c["matchAttribute"] = PCIE_ROOT_ATTRIBUTE
            constraints.append(c)
        devices["constraints"] = constraints
    kinds = config_kinds([a.device_class for r in shape.requests for a in r.alternatives], GPU_CLASS, MIG_CLASS)
    if opts.sharing is not None:
        devices["config"] = opaque_configs(opts.sharing, kinds)
    claim_spec = CommentedMap()
    claim_spec["devices"] = devices
    doc = CommentedMap()
    doc["apiVersion"] = "resource.k8s.io/v1"
    if opts.shared_claim:
        doc["kind"] = "ResourceClaim"
        doc["metadata"] = meta
        doc["spec"] = claim_spec
    else:
        doc["kind"] = "ResourceClaimTemplate"
        doc["metadata"] = meta
        spec = CommentedMap()
        spec["spec"] = claim_spec
        doc["spec"] = spec
    wmeta = workload.get("metadata") or {}
    # a workload named by generateName (KubeRay's RayJob samples) is named so; the note said "of RayJob " before
    wname = wmeta.get("name") or (f"(generateName {wmeta['generateName']})" if wmeta.get("generateName") else "?")
    note = f"dra-migrate: replaces {shape.resource}: {shape.count} per pod of {workload.get('kind')} {wname}"
    if any(len(r.alternatives) > 1 for r in shape.requests):
        note += "\nfirstAvailable: the first class with free devices wins, so replicas may get different devices"
    if constrained:
        note += (
            f"\n{PCIE_ROOT_ATTRIBUTE}: the devices of a request share one PCIe root, as the device plugin's preferred"
            "\nallocation chose; a device without the attribute (no sysfs) is never chosen"
        )
    if opts.sharing is not None:
        note += sharing_note(opts.sharing, kinds)
    doc.yaml_set_start_comment(note)
    return doc


def topology_constraints(shape: Shape, opts: ConvertOptions) -> list[str]:
    """The requests of `shape` that `--topology` constrains to one PCIe root: each asking for 2+ whole GPUs.

    The NVIDIA device plugin answers the kubelet's GetPreferredAllocation for full GPUs with a connected set
    (k8s-device-plugin v0.18.0 internal/rm/nvml_manager.go `getPreferredAllocation` -> `alignedAlloc`,
    go-gpuallocator's best-effort policy over NVLink and PCIe links), per container request. Under DRA the
    scheduler takes any N matching devices unless the claim says otherwise: a `DeviceConstraint` with
    `matchAttribute` makes every device of the named requests carry the same value (KEP-4381; k8s.io/api
    resource/v1 types.go `DeviceConstraint.MatchAttribute`). MIG devices and shared replicas are not
    aligned by the device plugin (`AlignedAllocationSupported` is false for them), so they get nothing.
    """
    if not opts.topology or mig_profile_of(shape.resource):
        return []
    return [r.name for r in shape.requests if r.alternatives[0].count >= 2]


def _device_request(alt: Alternative, name: str | None) -> CommentedMap:
    out = CommentedMap()
    if name:
        out["name"] = name
    out["deviceClassName"] = alt.device_class
    if alt.selectors:
        sels = CommentedSeq()
        for s in alt.selectors:
            cel = CommentedMap()
            cel["expression"] = s
            sel = CommentedMap()
            sel["cel"] = cel
            sels.append(sel)
        out["selectors"] = sels
    out["allocationMode"] = "ExactCount"
    out["count"] = alt.count
    return out
