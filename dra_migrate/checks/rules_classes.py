"""Rules about the DeviceClasses already in the cluster, which other DRA drivers may have brought.

Facts each rule rests on are cited beside it (primary sources); docs/rules.md is generated from the docstrings.
"""

from __future__ import annotations

from collections.abc import Iterator

from dra_migrate.checks.context import CheckContext
from dra_migrate.checks.model import Finding, ObjectRef, Severity
from dra_migrate.checks.registry import rule
from dra_migrate.dra.devices import node_devices

BLOCKER = Severity.BLOCKER


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
