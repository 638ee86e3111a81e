"""Rules about the DeviceClasses already in the cluster, which other DRA drivers may have brought.

Facts each rule rests on are cited beside it (primary sources); docs/rules.md is generated from the docstrings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.dra.devices import node_devices
from dra_migrate.inventory.draversion import (
    LEGACY_PCI_BUS_ID,
    PCI_BUS_ID,
    DriverRelease,
    installed_releases,
    unknown_nvidia_releases,
)

BLOCKER = Severity.BLOCKER
WARNING = Severity.WARNING


@rule(
    "existing-class-matches-no-gpu",
    BLOCKER,
    summary="an existing DeviceClass maps a GPU name in use but matches none of the DRA driver's devices",
)
def existing_class_matches_no_gpu(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: blocker. When: a DeviceClass already in the cluster declares the `extendedResourceName` of a GPU name
    a pool serves today (so no class is generated for it) and its selectors match none of the devices that the
    `--dra-driver` publishes, or would publish, on the pool's nodes: a class of another driver (`gpu.amd.com`,
    `dra.net`, `compute-domain.nvidia.com`) or one whose CEL excludes the GPUs. Rests on: kube-scheduler serves an
    extended resource from the DeviceClass that declares it, whatever devices it selects (KEP-5004,
    kubernetes/enhancements `keps/sig-scheduling/5004-dra-extended-resource/README.md`; k8s.io/api resource/v1
    `DeviceClassSpec.ExtendedResourceName`): once the device plugin is off no device satisfies the name.
    """
    generated = {p.name for p in ctx.generation.proposals}
    devices = node_devices(ctx.state, ctx.dra_driver)
    nodes = {p.name: p.nodes for p in ctx.inventory.pools}
    pools: dict[tuple[str, str], list[str]] = {}
    for cap in ctx.capacity:
        if cap.device_class is None or cap.device_class in generated or cap.after != 0 or cap.before <= 0:
            continue
        if cap.after_source == "excluded":
            continue  # no node of the pool can serve DRA yet (kubelet-version-unsupported says why)
        if not any(devices.get(n) is not None and devices[n].devices for n in nodes.get(cap.pool, [])):
            continue  # nothing known of the pool's devices: no verdict on the class
        pools.setdefault((cap.device_class, cap.resource), []).append(cap.pool)
    for (cls, resource), names in sorted(pools.items()):
        yield Finding(
            "existing-class-matches-no-gpu",
            BLOCKER,
            f"DeviceClass {cls} maps {resource} but matches none of the {ctx.dra_driver} devices of pool(s) "
            f"{', '.join(sorted(names))}: after the switch every pod requesting {resource} there stays Pending",
            f"make DeviceClass {cls} select {ctx.dra_driver} devices (device.driver == '{ctx.dra_driver}'), or clear "
            f"its extendedResourceName so that dra-migrate generates one, then plan again",
            (ObjectRef("DeviceClass", cls),),
            pools=tuple(sorted(names)),
        )


# The attributes NVIDIA DRA driver releases disagree on (inventory/draversion.py): selectors or matchAttribute
# constraints on them match nothing under a release that does not publish them.
_CEL_ATTR = re.compile(
    r"device\.attributes\[\s*['\"](?P<domain>[a-z0-9.-]+)['\"]\s*\]"
    r"(?:\.(?P<dot>[A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"](?P<key>[A-Za-z0-9_./-]+)['\"]\s*\])"
)
_SENSITIVE = ("index", "minor", "parentIndex", LEGACY_PCI_BUS_ID, PCI_BUS_ID)


def _published(release: DriverRelease, attr: str) -> bool:
    if attr in ("index", "minor", "parentIndex"):
        return release.index_attributes
    return attr == release.pci_bus_id_attribute


def _named_attributes(requests: list[Any], constraints: list[Any], driver: str) -> set[str]:
    """The release-sensitive attributes a claim's (or class's) CEL selectors and matchAttribute constraints name:
    `index` for `device.attributes['gpu.nvidia.com'].index`, `resource.kubernetes.io/pciBusID` for
    `device.attributes['resource.kubernetes.io'].pciBusID` or `matchAttribute: resource.kubernetes.io/pciBusID`."""
    out: set[str] = set()
    exprs: list[str] = []
    for r in requests:
        if not isinstance(r, dict):
            continue
        subs = [r.get("exactly") or r, *[s for s in (r.get("firstAvailable") or []) if isinstance(s, dict)]]
        for s in subs:
            exprs += [
                str((sel.get("cel") or {}).get("expression", ""))
                for sel in s.get("selectors") or []
                if isinstance(sel, dict)
            ]
    for m in (_CEL_ATTR.finditer(e) for e in exprs):
        for hit in m:
            name = hit["dot"] or hit["key"]
            out.add(name if hit["domain"] == driver else f"{hit['domain']}/{name}")
    for c in constraints:
        a = str((c or {}).get("matchAttribute", "")) if isinstance(c, dict) else ""
        out.add(a.removeprefix(f"{driver}/"))
    return {a for a in out if a in _SENSITIVE}


@rule(
    "dra-driver-release-attribute",
    WARNING,
    summary="a DeviceClass or claim selects on a GPU attribute the installed DRA driver release does not publish",
)
def dra_driver_release_attribute(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a DeviceClass, ResourceClaim or ResourceClaimTemplate names, in a CEL selector or a
    `matchAttribute` constraint, a GPU attribute that the NVIDIA DRA driver release its kubelet-plugin DaemonSet runs
    (the image tag, else its chart's labels) does not publish: `index`, `minor`, `parentIndex` (NVIDIA's v25.3.x
    only), `pcieBusID` (before v25.12.0), `resource.kubernetes.io/pciBusID` (v25.12.0 on, dra-driver-nvidia-gpu
    v0.4). Rests on: each
    release's `cmd/gpu-kubelet-plugin/deviceinfo.go` (NVIDIA/k8s-dra-driver-gpu v25.3.2, v25.8.1; v25.12.0 with
    `partitions.go`; dra-driver-nvidia-gpu v0.4.1); a selector on an attribute a device lacks fails for it, and a
    `matchAttribute` a device lacks excludes it (KEP-4381 structured parameters): the claims stay Pending.
    """
    releases = installed_releases(ctx.state)
    if not releases:
        return
    hits: dict[str, list[ObjectRef]] = {}
    for kind in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate"):
        for o in ctx.state.of(f"resource.k8s.io/{kind}"):
            spec = o.get("spec") or {}
            if kind == "ResourceClaimTemplate":
                spec = (spec.get("spec") or {}) if isinstance(spec, dict) else {}
            devices = (spec.get("devices") or {}) if kind != "DeviceClass" else {}
            requests = [spec] if kind == "DeviceClass" else list(devices.get("requests") or [])
            attrs = _named_attributes(requests, list(devices.get("constraints") or []), ctx.dra_driver)
            meta = o.get("metadata") or {}
            ref = ObjectRef(kind, str(meta.get("name", "")), meta.get("namespace"))
            for a in sorted(attrs):
                without = sorted(f"{ds} ({r.text})" for ds, r in releases.items() if not _published(r, a))
                if without:
                    hits.setdefault(f"{a}|{', '.join(without)}", []).append(ref)
    for key, refs in sorted(hits.items()):
        attr, lacking = key.split("|", 1)
        yield Finding(
            "dra-driver-release-attribute",
            WARNING,
            f"{len(refs)} object(s) select GPUs on the attribute {attr}, which the DRA kubelet plugin {lacking} does "
            "not publish: their claims match no device there and stay Pending",
            "select on what every release publishes (type, productName, profile, uuid, "
            "resource.kubernetes.io/pcieRoot), or run a release that publishes it (index/minor/parentIndex: only "
            "NVIDIA's v25.3.x; pcieBusID: before v25.12.0; resource.kubernetes.io/pciBusID: v25.12.0 on and "
            "dra-driver-nvidia-gpu v0.4), then check again",
            tuple(sorted(refs)),
        )


@rule(
    "dra-driver-release-unknown",
    WARNING,
    summary="NVIDIA's DRA kubelet plugin runs an image whose release neither its tag nor its chart labels name",
)
def dra_driver_release_unknown(ctx: CheckContext) -> Iterator[Finding]:
    """Severity: warning. When: a DRA kubelet-plugin DaemonSet runs NVIDIA's image (`k8s-dra-driver-gpu`) pinned by
    digest only or by a tag that is no version (`latest`), without the chart's labels that name its release
    (`app.kubernetes.io/version`, `helm.sh/chart`): dra-migrate then predicts devices, matches classes and advises
    on sharing as v25.12.0 and dra-driver-nvidia-gpu v0.4.1 publish them. Rests on: NVIDIA/k8s-dra-driver-gpu
    v25.3.2 and v25.8.1 `cmd/gpu-kubelet-plugin/deviceinfo.go` publish `pcieBusID` (v25.3.x also `index`, `minor`,
    `parentIndex`) and the MIG names `gpu-<minor>-mig-<giProfileId>-<start>-<size>`; v25.12.0 (`mig.go`
    `ToCanonicalName`) publishes `resource.kubernetes.io/pciBusID` and
    `gpu-<minor>-mig-<profile>-<giProfileId>-<start>`; the chart's labels:
    `deployments/helm/nvidia-dra-driver-gpu/templates/_helpers.tpl` at each tag.
    """
    for ref, image in sorted(unknown_nvidia_releases(ctx.state).items()):
        namespace, _, name = ref.partition("/")
        yield Finding(
            "dra-driver-release-unknown",
            WARNING,
            f"DRA kubelet plugin DaemonSet {ref} runs {image}, whose tag names no release, and no chart label "
            "(app.kubernetes.io/version, helm.sh/chart) names one: devices, class matches and sharing advice assume "
            "the shape of v25.12.0 (and dra-driver-nvidia-gpu v0.4.1); under v25.3.x or v25.8.x the GPUs publish "
            "pcieBusID (v25.3.x also index, minor, parentIndex) and MIG devices other names",
            f"pin DaemonSet {ref}'s image to its version tag (the chart's image.tag, e.g. v25.8.1, or "
            "v25.8.1@sha256:... to keep the digest), or keep the chart's labels on it, then check again",
            (ObjectRef("DaemonSet", name, namespace or None),),
        )
