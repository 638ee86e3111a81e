"""One device-plugin config key's sharing: strategy, shared resources and the names they are advertised as.

What the NVIDIA device plugin accepts and what it makes of it (k8s-device-plugin v0.18.0):
  * format: sharing.timeSlicing|mps.{renameByDefault, failRequestsGreaterThanOne, resources[].{name, rename,
    replicas}}, flags.migStrategy: api/config/v1/{config,sharing,replicas}.go;
  * MPS wins when both are set (sharing.go SharingStrategy);
  * a resource without `replicas`, or with fewer than 2, fails the whole config (replicas.go
    ReplicatedResource.UnmarshalJSON: "no replicas specified", "number of replicas must be >= 2"): the plugin
    does not run it, so the tool reports the key as an error rather than reading it as unshared;
  * MPS under the `mixed` MIG strategy is refused at start (cmd/nvidia-device-plugin/main.go validateFlags);
  * MPS always fails requests greater than one, whatever the config says (config.go NewConfig sets
    failRequestsGreaterThanOne; internal/rm/rm.go ValidateRequest ignores the field for MPS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_migrate.cluster.validate import type_name
from dra_migrate.cluster.yamlio import load_yaml_documents
from dra_migrate.errors import InputError
from dra_migrate.inventory.resources import GPU_PREFIX

# The plugin reads the config into typed Go structs (api/config/v1 config.go Config, Flags; sharing.go Sharing;
# replicas.go TimeSlicing, ReplicatedResources `RenameByDefault bool`, ReplicatedResource `Name string`,
# `Replicas int`; a resource without a name: replicas.go "no resource name specified") and fails to load one
# whose value is of another type: so does the tool, naming the field.
GO_INT_MAX = 2**63 - 1


def _typed(value: Any, typ: type, field: str, where: str, required: bool = False) -> Any:
    """`value` when it is of `typ` (or None, unless required); else the InputError the plugin's refusal to load
    the config is."""
    if (value is None and not required) or isinstance(value, typ):
        return value
    what = {dict: "a map", list: "a list", str: "a string", bool: "a boolean"}[typ]
    got = "null" if value is None else type_name(value)
    raise InputError(
        f"{where}: {field} must be {what}, not {got}: the device plugin refuses the config",
        "fix the ConfigMap key (k8s-device-plugin api/config/v1 format)",
    )


@dataclass
class SharedResource:
    name: str  # the resource shared (nvidia.com/gpu, nvidia.com/mig-1g.10gb)
    advertised_as: str  # the name pods request (renamed to <name>.shared or `rename`)
    replicas: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "advertisedAs": self.advertised_as, "replicas": self.replicas}


def parse_sharing(text: str, where: str) -> tuple[str, list[SharedResource], str | None, bool]:
    """(strategy, shared resources, migStrategy, failRequestsGreaterThanOne) of one config key, as the plugin runs
    it; InputError for a config the plugin refuses to load or to start with."""
    docs = list(load_yaml_documents(text, where))
    cfg = docs[0] if docs else {}
    if not isinstance(cfg, dict):
        raise InputError(f"{where}: not a device-plugin config", "check the ConfigMap")
    sharing = _typed(cfg.get("sharing"), dict, "sharing", where) or {}
    flags = _typed(cfg.get("flags"), dict, "flags", where) or {}
    mig = flags.get("migStrategy")
    mig = mig if isinstance(mig, str) else None
    strategy, block = "none", None
    for s in ("timeSlicing", "mps"):
        b = _typed(sharing.get(s), dict, f"sharing.{s}", where)
        for key in ("renameByDefault", "failRequestsGreaterThanOne"):
            _typed((b or {}).get(key), bool, f"sharing.{s}.{key}", where)
        if b and _typed(b.get("resources"), list, f"sharing.{s}.resources", where):
            strategy, block = s, b
    resources: list[SharedResource] = []
    fail_gt_one = False
    if block is not None:
        rename_default = bool(block.get("renameByDefault"))
        fail_gt_one = strategy == "mps" or bool(block.get("failRequestsGreaterThanOne"))
        if strategy == "mps" and mig == "mixed":
            raise InputError(
                f"{where}: MPS with migStrategy mixed: the device plugin refuses to start with it",
                "use MPS with the none or single MIG strategy, or time-slicing (k8s-device-plugin validateFlags)",
            )
        for i, r in enumerate(block["resources"]):
            field = f"sharing.{strategy}.resources[{i}]"
            _typed(r, dict, field, where, required=True)
            _typed(r.get("name"), str, f"{field}.name", where, required=True)
            replicas = r.get("replicas")
            if type(replicas) is int and replicas > GO_INT_MAX:
                raise InputError(
                    f"{where}: {field}.replicas is {replicas}: more than the plugin's Go int holds",
                    "give a replica count the device plugin can read, or drop it from the config",
                )
            if type(replicas) is not int or replicas < 2:
                raise InputError(
                    f"{where}: sharing.{strategy} resource {r['name']} has replicas {replicas!r}: the device plugin "
                    "refuses the config (number of replicas must be >= 2)",
                    "give every shared resource replicas >= 2, or drop it from the config",
                )
            name = r["name"] if r["name"].startswith(GPU_PREFIX) else GPU_PREFIX + r["name"]
            # A resource's own `rename` is ignored: the plugin clears it, or forces <name>.shared under
            # renameByDefault, on every config it loads (k8s-device-plugin v0.18.0 api/config/v1 config.go
            # DisableResourceNamingInConfig -> replicas.go disableResoureRenaming; cmd/nvidia-device-plugin
            # main.go startPlugins). DefaultSharedResourceNameSuffix: api/config/v1/consts.go.
            adv = name + ".shared" if rename_default else name
            resources.append(SharedResource(name, adv, replicas))
    return strategy, resources, mig, fail_gt_one
