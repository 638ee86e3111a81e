"""Structurally malformed snapshots through the real commands: a result, or one `error:` line; never a crash.

The seed (tests/unit/data/fuzz/snapshot.yaml) holds an object of every kind the tool reads (cluster/kinds.py;
a test below keeps it so): Nodes (whole GPUs, MIG, DRA), Pods and their controllers, workload CRDs, DaemonSets,
DeviceClasses, a ResourceSlice, ResourceClaim(Template)s, device-plugin and mig-parted ConfigMaps, the GPU
Operator's objects, quotas, Kueue and Volcano queues, alerting rules, dashboards, autoscalers, admission
policies and platform objects. Each example sets one field anywhere in one object to a value of another type
(or removes it) and runs `inventory`, `check`, `plan`, `generate` and `match` in-process. Each must exit 0, 1
or 2; on 1 with exactly one `error:` line; never "internal error", never a traceback.

CI runs a bounded, derandomized set; to hunt, raise it: `FUZZ_EXAMPLES=3000 pytest tests/unit/test_fuzz_snapshot.py`.
"""

from __future__ import annotations

import copy
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.cli import run

SEED = Path(__file__).parent / "data" / "fuzz" / "snapshot.yaml"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 25,  # CI: the same examples every run; a hunt draws new ones
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Values of every type a field can wrongly hold, and the quantities the API server would refuse.
HOSTILE: list[Any] = [
    None,
    "",
    "8x",
    "1e400",
    "-2",
    "0.5",
    "nvidia.com/gpu",
    "\n",
    0,
    -1,
    1.5,
    2**70,
    10**400,
    True,
    [],
    [1],
    [None],
    ["a"],
    {},
    {"a": 1},
    {"": None},
    [{"a": []}],
]
DELETE = object()


@cache
def _seed() -> dict[str, Any]:
    with SEED.open() as f:
        doc: dict[str, Any] = yaml.safe_load(f)
    return doc


def _paths(v: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `v` (maps by key, lists by index), parents before children."""
    out = [at] if at else []
    if isinstance(v, dict):
        for k, x in v.items():
            out += _paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _paths(x, (*at, i))
    return out


@cache
def _object_paths(index: int) -> list[tuple[Any, ...]]:
    return _paths(_seed()["items"][index])


def _set(root: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        root = root[p]
    if value is DELETE:
        del root[path[-1]]
    else:
        root[path[-1]] = value


@cache
def _embedded() -> list[tuple[int, str, list[tuple[Any, ...]]]]:
    """The YAML documents inside ConfigMaps (device-plugin and mig-parted configs): (item, data key, paths)."""
    out = []
    for i, o in enumerate(_seed()["items"]):
        for key, text in (o.get("data") or {}).items() if o["kind"] == "ConfigMap" else ():
            out.append((i, key, _paths(yaml.safe_load(text))))
    return out


Mutation = tuple[int, tuple[Any, ...], Any, str | None]


@st.composite
def _mutations(draw: st.DrawFn) -> Mutation:
    """(item, path, value, the ConfigMap data key whose YAML text the path is in, or None)."""
    value = draw(st.sampled_from([*HOSTILE, DELETE]))
    if draw(st.integers(0, 5)) == 0:
        index, key, paths = draw(st.sampled_from(_embedded()))
        return index, paths[draw(st.integers(0, len(paths) - 1))], value, key
    index = draw(st.integers(0, len(_seed()["items"]) - 1))
    paths = _object_paths(index)
    return index, paths[draw(st.integers(0, len(paths) - 1))], value, None


def _mutated(index: int, path: tuple[Any, ...], value: Any, embedded: str | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(_seed())
    if embedded is None:
        _set(doc["items"][index], path, value)
    else:
        data = doc["items"][index]["data"]
        inner = yaml.safe_load(data[embedded])
        _set(inner, path, value)
        data[embedded] = json.dumps(inner)  # JSON is YAML, and holds any int
    return doc


COMMANDS: list[list[str]] = [
    ["inventory", "-o", "json"],
    ["check"],
    ["plan", "--force"],
    ["generate", "deviceclasses"],
    ["generate", "dependents"],
    ["match"],
]


def _runs_cleanly(snapshot: Path, plan: Path, what: str) -> list[int]:
    """Each command's exit code, after asserting it is a result or one error line."""
    codes = []
    for cmd in COMMANDS:
        args = [*cmd, "--snapshot", str(snapshot)] + (["--out", str(plan)] if cmd[0] == "plan" else [])
        r = run(*args)
        said = f"{' '.join(cmd)} with {what}: exit {r.code}\n{r.stderr}"
        assert r.code in (0, 1, 2), said
        assert "Traceback" not in r.stderr + r.stdout, said
        assert "internal error" not in r.stderr, said
        if r.code == 1:
            errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
            assert len(errors) == 1, said
        codes.append(r.code)
    return codes


@SETTINGS
@given(_mutations())
def test_one_malformed_field_anywhere_gives_a_result_or_one_error_line(tmp_path: Path, mutation: Mutation) -> None:
    index, path, value, embedded = mutation
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps(_mutated(index, path, value, embedded)))
    obj = _seed()["items"][index]
    at = ".".join(map(str, path if embedded is None else ("data", embedded, "(yaml)", *path)))
    what = f"{obj['kind']} {obj['metadata']['name']} {at} = {'(deleted)' if value is DELETE else repr(value)[:40]}"
    _runs_cleanly(snapshot, tmp_path / "plan.yaml", what)


def test_the_seed_itself_runs_cleanly(tmp_path: Path) -> None:
    """The seed is a snapshot the tool reads (a result, no error line): a seed the loader refused would make
    every example an input error and fuzz nothing past the loader."""
    codes = _runs_cleanly(SEED, tmp_path / "plan.yaml", "the seed")
    assert 1 not in codes, dict(zip((" ".join(c) for c in COMMANDS), codes, strict=True))


def _item(kind: str, name: str) -> int:
    return next(i for i, o in enumerate(_seed()["items"]) if o["kind"] == kind and o["metadata"]["name"] == name)


# Found by the property test above, each an internal error before: (kind, name, path, value, field named).
FOUND = [
    ("Node", "gke-demo-h100-pool-hwjlhdgm-swrp", ("metadata", "annotations"), "8x", "metadata.annotations"),
    ("Node", "gke-demo-h100-pool-hwjlhdgm-swrp", ("spec", "taints", 0), 1.5, "spec.taints[0]"),
    ("Node", "gke-demo-h100-pool-hwjlhdgm-swrp", ("spec", "taints", 0, "key"), {}, "spec.taints[0].key"),
    ("DeviceClass", "gpu.nvidia.com", ("spec", "selectors"), 1.5, "spec.selectors"),
    ("DeviceClass", "mig.nvidia.com", ("spec", "selectors", 0, "cel"), -1, "spec.selectors[0].cel"),
    ("DeviceClass", "mig.nvidia.com", ("spec", "selectors", 0, "cel", "expression"), ["a"], "cel.expression"),
    ("ResourceClaim", "qwen-32b-t5wblgvc6r-k584z-extended-resources-fznxh", ("status", "allocation"), -1, "allocation"),
    ("ResourceClaim", "qwen-32b-t5wblgvc6r-k584z-extended-resources-fznxh", ("metadata", "annotations"), "x", "annot"),
    ("Node", "gke-demo-h100-pool-hwjlhdgm-swrp", ("status", "nodeInfo", "kubeletVersion"), ["a"], "kubeletVersion"),
    ("ClusterPolicy", "cluster-policy", ("spec", "driver", "manager"), [None], "spec.driver.manager"),
    ("ClusterPolicy", "cluster-policy", ("spec", "devicePlugin"), "x", "spec.devicePlugin"),
    # Found by the hunt after the DRA driver release rule (checks/rules_classes.py) began reading claims' requests.
    (
        "ResourceClaimTemplate",
        "mig-3g-40gb",
        ("spec", "spec", "devices", "requests", 0, "exactly", "selectors"),
        -1,
        "exactly.selectors",
    ),
    ("ResourceClaimTemplate", "mig-3g-40gb", ("spec", "spec", "devices", "requests", 0, "exactly"), "x", "exactly"),
    ("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin", ("spec", "template"), "8x", "spec.template"),
    ("Workflow", "churn-model-7xq2p", ("spec", "templates", 1, "nodeSelector"), "8x", "templates[1].nodeSelector"),
    ("Pod", "embeddings-0", ("metadata", "ownerReferences", 0, "kind"), [], "ownerReferences[0].kind"),
    ("Deployment", "chat-api", ("metadata", "ownerReferences"), [{"uid": 5}], "ownerReferences[0].uid"),
    ("Workflow", "churn-model-7xq2p", ("spec", "templates", 1, "tolerations"), {}, "templates[1].tolerations"),
    ("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin", ("spec", "template", "spec", "containers"), 7, "containers"),
    # Found by the hunt once the seed held every kind in cluster/kinds.py.
    ("NVIDIADriver", "default", ("spec",), "1e400", "spec"),
    ("NVIDIADriver", "default", ("spec", "version"), 1.5, "spec.version"),
    ("PodDisruptionBudget", "embeddings", ("spec",), "0.5", "spec"),
    ("PodDisruptionBudget", "embeddings", ("spec", "selector", "matchLabels"), "0.5", "selector.matchLabels"),
    ("PodDisruptionBudget", "embeddings", ("status", "disruptionsAllowed"), "8x", "status.disruptionsAllowed"),
    ("Subscription", "gpu-operator-certified", ("spec",), "0.5", "spec"),
]


@pytest.mark.parametrize(("kind", "name", "path", "value", "field"), FOUND, ids=lambda v: str(v)[:30])
def test_a_malformed_field_the_tool_reads_is_one_error_naming_it(
    tmp_path: Path, kind: str, name: str, path: tuple[Any, ...], value: Any, field: str
) -> None:
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps(_mutated(_item(kind, name), path, value)))
    for cmd in (["inventory"], ["check"], ["plan", "--out", str(tmp_path / "p.yaml")]):
        r = run(*cmd, "--snapshot", str(snapshot))
        assert r.code == 1, r.stderr
        (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
        assert f"{kind} " in line and name in line and field in line, line
        assert "internal error" not in line, line


SHARING = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("sharing",), 2**70, "sharing"),
        (("flags",), [], "flags"),
        (("sharing", "timeSlicing", "resources"), 1.5, "resources"),
        (("sharing", "timeSlicing", "resources", 0), "x", "resources[0]"),
        (("sharing", "timeSlicing", "resources", 0, "name"), 7, "name"),
        (("sharing", "timeSlicing", "resources", 0, "replicas"), 10**30, "replicas"),
        (("sharing", "timeSlicing", "renameByDefault"), "false", "renameByDefault"),
    ],
    ids=str,
)
def test_a_device_plugin_config_the_plugin_would_not_load_is_an_input_error(
    path: tuple[Any, ...], value: Any, said: str
) -> None:
    """Found by the property test: these were internal errors (or, for a huge replica count, a crash writing
    JSON). The plugin unmarshals the config into typed Go structs (k8s-device-plugin v0.18.0 api/config/v1
    config.go, sharing.go, replicas.go: `Replicas int`, `RenameByDefault bool`) and refuses it otherwise."""
    from dra_migrate.errors import InputError
    from dra_migrate.inventory.sharing_config import parse_sharing

    cfg = copy.deepcopy(SHARING)
    _set(cfg, path, value)
    with pytest.raises(InputError) as e:
        parse_sharing(json.dumps(cfg), "ConfigMap ns/c key k")
    assert said in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("key", "value"), [("context", -1), ("kubernetesVersion", -1), ("server", {}), ("servedAPIs", [{}])], ids=str
)
def test_a_snapshot_header_of_the_wrong_type_is_one_error_naming_it(tmp_path: Path, key: str, value: Any) -> None:
    """Found by mutating the ClusterSnapshot header: a number as its context or kubernetesVersion was an
    internal error in inventory, check, plan and match."""
    doc = copy.deepcopy(_seed())
    doc["metadata"][key] = value
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps(doc))
    for cmd in (["inventory"], ["check"], ["plan", "--out", str(tmp_path / "p.yaml")], ["match"]):
        r = run(*cmd, "--snapshot", str(snapshot))
        assert r.code == 1, r.stderr
        (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
        assert f"ClusterSnapshot metadata.{key}" in line and "internal error" not in line, line


@pytest.mark.parametrize(("key", "value"), [("command", "-2"), ("args", {"a": 1}), ("env", 7)], ids=str)
def test_a_dra_plugin_container_of_the_wrong_shape_is_read_as_absent(tmp_path: Path, key: str, value: Any) -> None:
    """Found by the property test: a DaemonSet container's command "-2" or env 7 was an internal error where the
    DRA kubelet plugin's feature gates are read; such fields are read as absent, as the dependents' readers read
    them (tests/unit/test_dependents.py `test_malformed_dependents_are_read_as_absent`)."""
    path = ("spec", "template", "spec", "containers", 0, key)
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps(_mutated(_item("DaemonSet", "nvidia-dra-driver-gpu-kubelet-plugin"), path, value)))
    for cmd in (["inventory"], ["check"], ["plan", "--out", str(tmp_path / "p.yaml")]):
        r = run(*cmd, "--snapshot", str(snapshot))
        assert r.code in (0, 2) and "error" not in r.stderr, r.stderr


def test_the_seed_holds_an_object_of_every_kind_the_tool_reads() -> None:
    """A kind added to cluster/kinds.py without an object in the seed would never be fuzzed: its reader's
    wrong-typed fields would reach the commands unseen. Each apiVersion is in the header's servedAPIs too."""
    from dra_migrate.cluster.kinds import ALL_KINDS, kind_key

    seed = _seed()
    held = {kind_key(o["apiVersion"], o["kind"]) for o in seed["items"]}
    assert sorted(k.key for k in ALL_KINDS if k.key not in held) == []
    served = set(seed["metadata"]["servedAPIs"])
    assert sorted({o["apiVersion"] for o in seed["items"]} - served) == []
