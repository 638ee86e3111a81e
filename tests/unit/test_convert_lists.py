"""`convert` of list documents: a `v1 List` (what `kubectl get ... -o yaml` writes and `kubectl apply -f`
takes back) and a typed list as the API server returns it. Before, a List asking for GPUs was refused
("kind List is not in the pod-template table"). Each item must convert exactly as the same object does as
a document of a stream."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from tests.unit.test_convert import CONVERTIBLE, TABLE, docs

_ARGO = Path(__file__).resolve().parents[2] / "fixtures" / "manifests" / "argo-workflow.yaml"


def _dump(doc: Any) -> str:
    out = io.StringIO()
    YAML(typ="safe").dump(doc, out)
    return out.getvalue()


def _as_list(text: str) -> str:
    return _dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": docs(text)})


def _converted(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    return docs(out), result.problems


@pytest.mark.parametrize("fixture", [*CONVERTIBLE, _ARGO], ids=[p.stem for p in [*CONVERTIBLE, _ARGO]])
def test_a_list_converts_item_by_item_as_the_stream_of_its_items_does(fixture: Path) -> None:
    stream, stream_problems = _converted(_dump_all(docs(fixture.read_text())))
    (listed,), list_problems = _converted(_as_list(fixture.read_text()))
    assert listed["kind"] == "List"
    assert listed["items"] == stream
    # The same problems, each named by its item instead of its document's line.
    assert [p.split(": ", 1)[1].split(": ", 1)[1] for p in list_problems] == [
        p.split(": ", 1)[1] for p in stream_problems
    ]


def _dump_all(objs: list[Any]) -> str:
    out = io.StringIO()
    YAML(typ="safe").dump_all(objs, out)
    return out.getvalue()


def test_an_item_with_a_problem_is_left_as_it_was_and_the_others_convert() -> None:
    ok, shared = (
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {res: 1}}}]}}},
        }
        for name, res in (("ok", "nvidia.com/gpu"), ("shared", "nvidia.com/gpu.shared"))
    )
    (listed,), problems = _converted(_dump({"apiVersion": "v1", "kind": "List", "items": [shared, ok]}))
    assert [i["kind"] for i in listed["items"]] == ["Deployment", "ResourceClaimTemplate", "Deployment"]
    assert listed["items"][0] == shared
    assert len(problems) == 1 and problems[0].startswith("t.yaml:1: items[0]: Deployment/shared: "), problems
    assert "nvidia.com/gpu.shared is a time-slicing/MPS shared name" in problems[0]


def test_a_typed_lists_items_convert_as_its_kind_and_are_written_back_without_one() -> None:
    (dep,) = docs((CONVERTIBLE[0].parent / "deployment.yaml").read_text())[-1:]
    bare = {k: v for k, v in dep.items() if k not in ("apiVersion", "kind")}
    (listed,), problems = _converted(_dump({"apiVersion": "apps/v1", "kind": "DeploymentList", "items": [bare]}))
    alone, _ = _converted(_dump(dep))
    assert problems == []
    *templates, workload = listed["items"]
    assert templates == alone[:-1] and all(t["kind"] == "ResourceClaimTemplate" for t in templates)
    assert workload == {k: v for k, v in alone[-1].items() if k not in ("apiVersion", "kind")}


def test_an_item_whose_apiversion_and_kind_are_empty_takes_the_lists_and_keeps_its_empty_ones() -> None:
    # apimachinery's decodeToList asks len(GetKind()) == 0, so an empty kind is no kind; the snapshot
    # reader took it so and convert did not (the item was "kind  is not in the pod-template table").
    (dep,) = docs((CONVERTIBLE[0].parent / "deployment.yaml").read_text())[-1:]
    empty = {**dep, "apiVersion": "", "kind": ""}
    (listed,), problems = _converted(_dump({"apiVersion": "apps/v1", "kind": "DeploymentList", "items": [empty]}))
    alone, _ = _converted(_dump(dep))
    assert problems == []
    assert listed["items"][-1] == {**alone[-1], "apiVersion": "", "kind": ""}


def test_one_module_says_which_documents_are_lists() -> None:
    # The list rule was written three times with small differences; a reader that asks a kind whether it
    # ends in `List` on its own is a fourth.
    package = Path(__file__).resolve().parents[2] / "dra_migrate"
    writers = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if 'endswith("List")' in p.read_text())
    assert writers == ["cluster/lists.py"]


def test_a_template_a_list_already_holds_keeps_its_name_to_itself() -> None:
    deployment = docs((CONVERTIBLE[0].parent / "deployment.yaml").read_text())[-1]
    first, _ = _converted(_dump(deployment))
    taken = first[0]["metadata"]["name"]
    existing = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": taken, **({"namespace": ns} if (ns := deployment["metadata"].get("namespace")) else {})},
        "spec": {"spec": {"devices": {"requests": []}}},
    }
    (listed,), _ = _converted(_dump({"apiVersion": "v1", "kind": "List", "items": [existing, deployment]}))
    names = [i["metadata"]["name"] for i in listed["items"] if i["kind"] == "ResourceClaimTemplate"]
    assert names[0] == taken and taken not in names[1:], names
