"""A `--templates` file is user input: whatever it holds, reading it and resolving workloads with it is an
InputError naming the entry, never an internal error (found by fuzzing the table with atheris)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.errors import InputError

WORKLOAD = {
    "apiVersion": "example.com/v1",
    "kind": "MyJob",
    "metadata": {"name": "w", "namespace": "ml"},
    "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}},
}


def _use(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(text)
    table = TemplateTable.builtin().extended(path)
    for resolved in table.resolve("example.com/MyJob", WORKLOAD):
        resolved.containers(), resolved.init_containers(), resolved.pod_spec()


def test_a_table_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not UTF-8"):
        _use(tmp_path, b"- kind: example.com/MyJob\n  roles: [{template: spec.template}]  # \x94\n")


@pytest.mark.parametrize(
    ("role", "key"),
    [
        ("{template: spec.template, each: {a: 1}}", "each"),
        ("{template: spec.template, if: [spec]}", "if"),
        ("{template: spec.template, unless: 3}", "unless"),
        ("{template: spec.template, form: resources, resources: {a: 1}}", "resources"),
        ("{template: spec.template, containers: 7}", "containers"),
        ("{template: spec.template, containers: spec.containers}", "containers"),
        ("{template: spec.template, initContainers: [{a: 1}]}", "initContainers"),
        ("{template: spec.template, replicas: 3}", "replicas"),
        ("{template: spec.template, replicas: [{path: {a: 1}}]}", "path"),
        ("{template: spec.template, replicas: [{path: replicas, default: x}]}", "default"),
        ("{template: spec.template, replicas: [{path: replicas, default: {a: 1}}]}", "default"),
        ("{template: spec.template, replicas: [{path: replicas, add: [1]}]}", "add"),
        ("{template: spec.template, replicas: [{value: 1.5.3}]}", "value"),
        ("{template: spec.template, replicas: [{counter: podsOfMyJob, path: spec}]}", "counter"),
        ("{template: spec.template, replicas: [{counter: argoSteps}]}", "counter"),
        ("{template: spec.template, replicas: [{counter: [argoSteps], path: spec}]}", "counter"),
    ],
)
def test_a_role_field_of_the_wrong_type_is_refused_naming_it(tmp_path: Path, role: str, key: str) -> None:
    with pytest.raises(InputError, match=rf"entry 1 \(example.com/MyJob\).*{key}"):
        _use(tmp_path, f"- kind: example.com/MyJob\n  roles: [{role}]\n".encode())


@pytest.mark.parametrize("field", ["apiVersion: {v: 1}", "plural: [myjobs]"])
def test_an_entry_field_of_the_wrong_type_is_refused(tmp_path: Path, field: str) -> None:
    with pytest.raises(InputError, match="must be a string"):
        _use(tmp_path, f"- kind: example.com/MyJob\n  {field}\n  roles: [{{template: spec.template}}]\n".encode())


def test_well_formed_factors_still_read(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(b"- kind: example.com/MyJob\n  roles: [{template: spec.template, replicas: [{path: spec.replicas,"
                     b" default: '2', add: 1}, {value: 3}]}]\n")  # fmt: skip
    spec = TemplateTable.builtin().extended(path).spec("example.com/MyJob")
    assert spec is not None
    factors = spec.roles[0].replicas
    assert (factors[0].path, factors[0].default, factors[0].add, factors[1].value) == ("spec.replicas", 2, 1, 3)


def test_an_each_map_whose_keys_are_not_all_strings_resolves() -> None:
    # YAML reads `1:` as a number: sorting it with the string keys raised TypeError (convert's internal error).
    job = {"kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {1: {"template": {}}, "Worker": {"template": {}}}}}
    resolved = TemplateTable.builtin().resolve("kubeflow.org/PyTorchJob", job)
    assert [r.path for r in resolved] == [
        "spec.pytorchReplicaSpecs.1.template",
        "spec.pytorchReplicaSpecs.Worker.template",
    ]
