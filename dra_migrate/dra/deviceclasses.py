"""DeviceClasses that let unchanged device-plugin requests be served by the NVIDIA DRA driver.

A DeviceClass whose `spec.extendedResourceName` is `nvidia.com/gpu` makes kube-scheduler serve a pod's
`nvidia.com/gpu: N` from N devices of that class on nodes where the device plugin advertises nothing
(KEP-5004, kubernetes/enhancements keps/sig-scheduling/5004-dra-extended-resource; field in
k8s.io/api resource/v1 types.go `DeviceClassSpec.ExtendedResourceName`). One class per device-plugin
name in use or advertised:

  nvidia.com/gpu               full GPUs: type == 'gpu' (the selector of the NVIDIA chart's
                               gpu.nvidia.com class, kubernetes-sigs/dra-driver-nvidia-gpu
                               deployments/helm/.../templates/deviceclass-gpu.yaml); under MIG `single`
                               strategy the same name means the MIG devices of the node's one profile,
                               so those profiles are added as alternatives
  nvidia.com/mig-<profile>     type == 'mig' && profile == '<profile>' (NVIDIA's extended-resources
                               demo, demo/specs/extended-resources/mig-1g-12gb.yaml)
  nvidia.com/<custom>          a device-plugin `resources.gpus[]`/`mig[]` rename: the device plugin
                               matched `pattern` against the device's product name, so does the class

Names that cannot be expressed (time-slicing/MPS `.shared` and `rename` names: DRA has no replicas) are
reported, not generated. A name some existing DeviceClass already maps is reported too: a second class
would silently win or lose by creation time (`betterDeviceClass` in kubernetes
staging/src/k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState
from dra_migrate.errors import InputError
from dra_migrate.inventory.dra import extended_resource_classes
from dra_migrate.inventory.model import Inventory
from dra_migrate.inventory.resources import DEFAULT_GPU, GPU_PREFIX, SHARED_GPU, SHARED_SUFFIX

DRIVER = "gpu.nvidia.com"
MANAGED_BY = {"app.kubernetes.io/managed-by": "dra-migrate"}
SOURCE_ANNOTATION = "dra-migrate.io/device-plugin-resource"
SHARED_NAME_REASON = "a time-slicing/MPS shared name: DRA has no replicas, each request needs whole devices"
_MIG_RE = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb(?:[.-][a-z0-9.]+)?)$")


def _base(driver: str) -> str:
    return f"device.driver == '{driver}'"


def _attr(name: str, driver: str = DRIVER) -> str:
    return f"device.attributes['{driver}'].{name}"


@dataclass(frozen=True)
class DeviceClassProposal:
    name: str
    extended_resource_name: str
    selector: str
    reason: str  # why this selector, one line

    def manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {
                "name": self.name,
                "labels": dict(MANAGED_BY),
                "annotations": {SOURCE_ANNOTATION: self.extended_resource_name},
            },
            "spec": {
                "selectors": [{"cel": {"expression": self.selector}}],
                "extendedResourceName": self.extended_resource_name,
            },
        }


@dataclass(frozen=True)
class NotGenerated:
    extended_resource_name: str
    reason: str
    existing_class: str | None = None


@dataclass
class Generation:
    proposals: list[DeviceClassProposal] = field(default_factory=list)
    not_generated: list[NotGenerated] = field(default_factory=list)


def mig_profile_of(name: str) -> str | None:
    """nvidia.com/mig-1g.10gb -> 1g.10gb; the device plugin writes `+` as `.` (`+me` -> `.me`, Blackwell's
    `+me.all` -> `.me.all`, `+gfx` -> `.gfx`), the DRA driver keeps `+`; `-me` is written as it is.

    None for a time-sliced or MPS-shared profile under `renameByDefault` (`nvidia.com/mig-1g.10gb.shared`:
    k8s-device-plugin v0.18.0 api/config/v1 resources.go `DefaultSharedRename`): replicas, not a profile."""
    m = _MIG_RE.match(name)
    if not m or name.endswith(SHARED_SUFFIX):
        return None
    base, _, suffix = m.group(1).partition("gb.")
    return f"{base}gb+{suffix}" if suffix else m.group(1)


def class_name_for(resource: str) -> str:
    """A DNS-subdomain name, short enough that `deviceclass.resource.kubernetes.io/<name>` is valid too."""
    profile = mig_profile_of(resource)
    if resource == DEFAULT_GPU:
        return "gpu-extended.nvidia.com"
    if profile:
        # Blackwell's `-me` (no media engines) must not collide with `+me`.
        return f"mig-{profile.replace('-me', '-no-me').replace('.', '-').replace('+', '-')}.gpu.nvidia.com"
    return f"{resource[len(GPU_PREFIX) :].replace('.', '-')}.extended.nvidia.com"


def single_strategy_nodes(inv: Inventory) -> dict[str, list[str]]:
    """MIG profile -> the nodes under the `single` strategy that advertise its instances as nvidia.com/gpu (GFD's
    product then ends in `-MIG-<profile>`: k8s-device-plugin internal/lm/resource.go)."""
    out: dict[str, list[str]] = {}
    for n in inv.nodes:
        product = n.gfd.get("product", "")
        if n.gfd.get("migStrategy") == "single" and "-MIG-" in product:
            out.setdefault(product.split("-MIG-", 1)[1], []).append(n.name)
    return dict(sorted(out.items()))


def _single_strategy_profiles(inv: Inventory) -> list[str]:
    """MIG profiles that nodes under the `single` strategy advertise as nvidia.com/gpu."""
    return list(single_strategy_nodes(inv))


def _full_gpu_selector(inv: Inventory, driver: str) -> tuple[str, str]:
    profiles = _single_strategy_profiles(inv)
    t, p = _attr("type", driver), _attr("profile", driver)
    if not profiles:
        return f"{_base(driver)} && {t} == 'gpu'", "full GPUs, as the NVIDIA chart's gpu.nvidia.com class"
    alternatives = " || ".join(f"{p} == '{x}'" for x in profiles)
    return (
        f"{_base(driver)} && ({t} == 'gpu' || ({t} == 'mig' && ({alternatives})))",
        f"full GPUs, and MIG {', '.join(profiles)} where the `single` strategy advertises them as nvidia.com/gpu",
    )


def _glob_to_regex(pattern: str) -> str:
    # The device plugin's own translation (k8s-device-plugin v0.12.0-v0.18.0 api/config/v1/resources.go
    # wildCardToRegexp): `*` is `.*`, every other character literal (regexp.QuoteMeta: `?` too), and
    # ResourcePattern.Matches is regexp.MatchString, a search, not anchored; CEL's `matches` searches as well.
    # QuoteMeta's set is escaped, nothing else: Go's regexp rejects escapes of anything but punctuation
    # (`\ ` for a space is an error), and Python's re.escape escapes spaces.
    return "".join(".*" if ch == "*" else _RE2_META.get(ch, ch) for ch in pattern)


_RE2_META = {ch: "\\" + ch for ch in "\\.+*?()|[]{}^$"}


def _custom_patterns(state: ClusterState) -> dict[str, tuple[str, str]]:
    """Custom names from device-plugin configs: name -> (group "gpus"|"mig", pattern)."""
    from dra_migrate.cluster.yamlio import load_yaml_documents

    out: dict[str, tuple[str, str]] = {}
    for cm in state.of("ConfigMap"):
        for key, text in (cm.get("data") or {}).items():
            if not isinstance(text, str):
                continue
            try:
                docs = list(load_yaml_documents(text, f"ConfigMap key {key}"))
            except InputError:
                continue  # the inventory reports unreadable configs
            cfg = docs[0] if docs and isinstance(docs[0], dict) else {}
            for group in ("gpus", "mig"):
                for r in (cfg.get("resources") or {}).get(group) or []:
                    if isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("pattern"), str):
                        name = r["name"] if r["name"].startswith(GPU_PREFIX) else GPU_PREFIX + r["name"]
                        out.setdefault(name, (group, r["pattern"]))
    return out


def names_in_use(inv: Inventory) -> list[str]:
    """Device-plugin GPU names requested by a consumer or advertised by a node."""
    names: set[str] = set()
    for c in inv.consumers:
        names.update(c.totals)
    for n in inv.nodes:
        names.update(k for k, v in n.capacity.items())
    return sorted(names)


def existing_mappings(state: ClusterState) -> dict[str, list[str]]:
    """extendedResourceName -> the DeviceClasses that already declare it, the one the scheduler uses first
    (`extended_resource_classes`: the newest; it was the name sorted first, which the scheduler picks only on a
    tie)."""
    return extended_resource_classes(state)


def generate(state: ClusterState, inv: Inventory, driver: str = DRIVER) -> Generation:
    """DeviceClass proposals for the names in use, selecting devices of `driver` (`--dra-driver`)."""
    gen = Generation()
    existing = existing_mappings(state)
    custom = _custom_patterns(state)
    unexpressible = _shared_names(state)
    for name in names_in_use(inv):
        if name in existing:
            gen.not_generated.append(
                NotGenerated(name, f"already mapped by DeviceClass {', '.join(existing[name])}", existing[name][0])
            )
            continue
        proposal = _propose(name, inv, custom, driver)
        if proposal is not None:
            gen.proposals.append(proposal)
        elif name in unexpressible or name == SHARED_GPU or name.endswith(SHARED_SUFFIX):
            gen.not_generated.append(NotGenerated(name, SHARED_NAME_REASON))
        else:
            gen.not_generated.append(NotGenerated(name, "no device-plugin config says which devices this name means"))
    return gen


def _propose(
    name: str, inv: Inventory, custom: dict[str, tuple[str, str]], driver: str = DRIVER
) -> DeviceClassProposal | None:
    base, t = _base(driver), _attr("type", driver)
    if name == DEFAULT_GPU:
        selector, reason = _full_gpu_selector(inv, driver)
        return DeviceClassProposal(class_name_for(name), name, selector, reason)
    profile = mig_profile_of(name)
    if profile:
        selector = f"{base} && {t} == 'mig' && {_attr('profile', driver)} == '{profile}'"
        return DeviceClassProposal(class_name_for(name), name, selector, f"MIG devices of profile {profile}")
    if name in custom:
        group, pattern = custom[name]
        dtype = "gpu" if group == "gpus" else "mig"
        field_name = "productName" if group == "gpus" else "profile"
        # cel_string: a CEL literal cel-go accepts (the regex's backslashes doubled, quotes escaped); a bare
        # '\.' inside a CEL string is an invalid escape and kube-apiserver v1.37.2 rejects the class (422).
        from dra_migrate.dra.cel.literals import cel_string  # the cel package loads the CEL engine: only here

        regex = cel_string(_glob_to_regex(pattern))
        selector = f"{base} && {t} == '{dtype}' && {_attr(field_name, driver)}.matches({regex})"
        return DeviceClassProposal(class_name_for(name), name, selector, f"device-plugin pattern {pattern!r}")
    return None


def _shared_names(state: ClusterState) -> set[str]:
    """Names that only exist as time-slicing/MPS renames (`<name>.shared`, `rename`)."""
    from dra_migrate.inventory.sharing_config import parse_sharing

    out: set[str] = set()
    for cm in state.of("ConfigMap"):
        for key, text in (cm.get("data") or {}).items():
            if not isinstance(text, str):
                continue
            try:
                _, shared, _, _ = parse_sharing(text, f"ConfigMap key {key}")
            except InputError:
                continue
            out.update(s.advertised_as for s in shared if s.advertised_as != s.name)
    return out
