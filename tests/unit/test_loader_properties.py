"""Property tests for the input loaders: any input gives a result or a one-line InputError, never a crash.

Inputs are drawn two ways: arbitrary JSON-like values shaped loosely like Kubernetes objects (the fields
the tool reads, holding values of any type), and arbitrary text and bytes. The snapshot loaders (YAML,
JSON, JSONL, directories) and convert's manifest loader must each either succeed or raise InputError
whose message is one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.cluster.snapshot import load_snapshot
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.errors import InputError
from dra_migrate.inventory.model import build_inventory

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "1", "8", "-2", "1.5", "500m", "2Gi", "abc", "1e9", "nvidia.com/gpu", "Always"]),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "name", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)
GPU_NAMES = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpucores", "cpu"])
resources = st.one_of(values, st.fixed_dictionaries({"limits": st.dictionaries(GPU_NAMES, scalars, max_size=2)}))
container = st.one_of(
    values,
    st.fixed_dictionaries(
        {"name": st.one_of(st.text(max_size=5), values), "resources": resources},
        optional={"restartPolicy": st.one_of(st.just("Always"), values)},
    ),
)
containers = st.one_of(values, st.lists(container, max_size=3))
pod_spec = st.fixed_dictionaries(
    {"containers": containers},
    optional={"initContainers": containers, "nodeName": st.one_of(st.text(max_size=5), values)},
)
metadata = st.one_of(
    values,
    st.fixed_dictionaries(
        {"name": st.one_of(st.sampled_from(["a", "b"]), values)},
        optional={"namespace": st.one_of(st.just("ns"), values), "uid": st.one_of(st.just("u"), values)},
    ),
)


def _object(kind: tuple[str, str], meta: Any, spec: Any, status: Any) -> dict[str, Any]:
    return {"apiVersion": kind[0], "kind": kind[1], "metadata": meta, "spec": spec, "status": status}


KINDS = st.sampled_from(
    [
        ("v1", "Pod"),
        ("v1", "Node"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "Job"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("v1", "ConfigMap"),
        ("example.com/v1", "Gizmo"),
    ]
)
spec = st.one_of(
    values,
    pod_spec,
    st.fixed_dictionaries(
        {"replicas": scalars, "template": st.one_of(values, st.fixed_dictionaries({"spec": pod_spec}))}
    ),
    st.fixed_dictionaries(
        {"pytorchReplicaSpecs": st.dictionaries(st.just("Worker"), st.fixed_dictionaries({"replicas": scalars}))}
    ),
    st.fixed_dictionaries({"trainer": st.fixed_dictionaries({"numNodes": scalars, "resourcesPerNode": resources})}),
)
status = st.one_of(
    values,
    st.fixed_dictionaries(
        {"capacity": st.dictionaries(GPU_NAMES, scalars, max_size=2), "phase": st.one_of(st.just("Running"), values)}
    ),
)
objects = st.builds(_object, KINDS, metadata, spec, status)


def _one_line(e: InputError) -> None:
    assert "\n" not in str(e), str(e)


def _load(path: Path) -> None:
    try:
        state = load_snapshot(path)
    except InputError as e:
        _one_line(e)
        return
    try:
        build_inventory(state)
    except InputError as e:
        _one_line(e)


@SETTINGS
@given(st.lists(objects, max_size=4))
def test_snapshot_json_gives_a_result_or_one_line(tmp_path: Path, items: list[dict[str, Any]]) -> None:
    f = tmp_path / "s.json"
    f.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    _load(f)


@SETTINGS
@given(st.lists(objects, max_size=4))
def test_snapshot_yaml_gives_a_result_or_one_line(tmp_path: Path, items: list[dict[str, Any]]) -> None:
    from ruamel.yaml import YAML

    f = tmp_path / "s.yaml"
    with f.open("w") as fh:
        YAML(typ="safe", pure=True).dump_all(items or [None], fh)
    _load(f)


@SETTINGS
@given(st.lists(st.one_of(objects, values), max_size=4))
def test_snapshot_jsonl_and_directories_give_a_result_or_one_line(tmp_path: Path, items: list[Any]) -> None:
    d = tmp_path / "dir"
    d.mkdir(exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    (d / "a.jsonl").write_bytes(b"".join(orjson.dumps(i) + b"\n" for i in items))
    (d / "b.json").write_text(json.dumps(items[:1] and items[0]))
    _load(d / "a.jsonl")
    _load(d)


@SETTINGS
@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_snapshot_of_any_bytes_gives_a_result_or_one_line(tmp_path: Path, data: bytes) -> None:
    for suffix in (".yaml", ".json", ".jsonl"):
        f = tmp_path / f"s{suffix}"
        f.write_bytes(data)
        _load(f)


YAML_PIECES = st.sampled_from(
    [
        "---\n",
        "--- !!map\n",
        "kind: Pod\n",
        "apiVersion: v1\n",
        "metadata: {name: p}\n",
        "spec:\n",
        "  containers:\n",
        "  - name: c\n",
        "    resources: {limits: {nvidia.com/gpu: 2}}\n",
        "    resources: {limits: {nvidia.com/gpu: -1}}\n",
        "  initContainers: [{name: i}]\n",
        "# c\n",
        "  - [\n",
        "{\n",
        "&a x\n",
        "*a\n",
        "...\n",
        "kind: Job\n",
        "apiVersion: batch/v1\n",
        "  template: {spec: {containers: [{resources: {limits: {nvidia.com/gpu: '1'}}}]}}\n",
    ]
)


@SETTINGS
@given(st.one_of(st.lists(YAML_PIECES, max_size=12).map("".join), st.text(max_size=120)))
def test_manifest_loader_gives_a_result_or_one_line(text: str) -> None:
    try:
        out, result = convert_text(text, "m.yaml", TemplateTable.builtin(), ConvertOptions())
    except InputError as e:
        _one_line(e)
        return
    if result.changed:  # what convert writes parses again
        convert_text(out, "m.yaml", TemplateTable.builtin(), ConvertOptions())


@SETTINGS
@given(st.lists(objects, min_size=1, max_size=3))
def test_manifest_objects_give_a_result_or_one_line(items: list[dict[str, Any]]) -> None:
    from io import StringIO

    from ruamel.yaml import YAML

    buf = StringIO()
    YAML(typ="safe", pure=True).dump_all(items, buf)
    try:
        convert_text(buf.getvalue(), "m.yaml", TemplateTable.builtin(), ConvertOptions())
    except InputError as e:
        _one_line(e)


@pytest.mark.parametrize("depth", [250, 5_000, 60_000])
def test_deep_manifests_are_one_line(depth: int) -> None:
    with pytest.raises(InputError) as e:
        convert_text("a: " + "[" * depth + "]" * depth + "\n", "m.yaml", TemplateTable.builtin(), ConvertOptions())
    _one_line(e.value)


def test_an_error_quoting_control_characters_is_still_one_line() -> None:
    """Found by the property test above: a node named "\\n" in a hand-made snapshot split the error in two."""
    from dra_migrate.errors import InputError

    e = InputError("a.jsonl:1: Node \n\r: x\u2028y\x85z", "fix\tit")
    assert str(e) == "a.jsonl:1: Node \\n\\r: x\\u2028y\\x85z: fix\\tit"
    assert len(str(e).splitlines()) == 1
