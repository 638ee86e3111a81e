"""Finding objects (issue 18): one type, `ObjectRef`, owns their text form (tables, markdown, the plan file)
and their JSON form (`{kind, namespace, name}`); every rule's objects parse back to what they were."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dra_migrate.checks.model import ObjectRef, finding_json, objects_json, objects_text
from dra_migrate.checks.run import assess
from dra_migrate.cluster.snapshot import load_snapshot
from tests.unit.cli import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "clusters").glob("*.yaml"))

_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
_name = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,30}[a-z0-9])?", fullmatch=True)
_kind = st.from_regex(r"[A-Z][A-Za-z0-9]{0,20}", fullmatch=True)
_group = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,20}[a-z0-9])?", fullmatch=True)
refs = st.builds(
    ObjectRef,
    kind=st.one_of(_kind, st.builds(lambda g, k: f"{g}/{k}", _group, _kind)),  # group-qualified too
    name=_name,
    namespace=st.one_of(st.none(), _label),
)


@given(refs)
def test_text_round_trips(ref: ObjectRef) -> None:
    assert ObjectRef.parse(str(ref)) == ref
    assert str(ObjectRef.parse(str(ref))) == str(ref)
    assert ObjectRef.from_value(ref.to_dict()) == ref
    assert ObjectRef.from_value(json.loads(json.dumps(ref.to_dict()))) == ref


@given(st.text())
def test_parse_is_total_and_stable(text: str) -> None:
    ref = ObjectRef.parse(text)
    assert set(ref.to_dict()) == {"kind", "namespace", "name"}
    assert str(ref) == text or text.startswith(" ") or "/" in text  # only spacing or an empty namespace is lost
    assert not ref.kind or ObjectRef.parse(str(ref)) == ref  # what it read, it reads back


def test_the_forms() -> None:
    job = ObjectRef.parse("PyTorchJob ml-training/llama3-finetune")
    assert job == ObjectRef("PyTorchJob", "llama3-finetune", "ml-training")
    assert job.to_dict() == {"kind": "PyTorchJob", "namespace": "ml-training", "name": "llama3-finetune"}
    assert ObjectRef.parse("Pool a100-shared-pool").to_dict() == {
        "kind": "Pool",
        "namespace": None,
        "name": "a100-shared-pool",
    }
    assert ObjectRef.parse("nvidia.com/ClusterPolicy cluster-policy").kind == "nvidia.com/ClusterPolicy"
    assert ObjectRef.parse("Kind /x") == ObjectRef("Kind", "x")  # an empty namespace is none
    assert ObjectRef.parse("lonely") == ObjectRef("", "lonely") and str(ObjectRef("", "lonely")) == "lonely"
    assert ObjectRef.of("Pod", {"metadata": {"namespace": "ml", "name": "p"}}) == ObjectRef("Pod", "p", "ml")
    # Refs order as their text does (the order findings always had).
    texts = ["Node b", "Node a", "ClusterPolicy x", "Pod ml/p"]
    assert [str(r) for r in sorted(ObjectRef.parse(t) for t in texts)] == sorted(texts)


def test_either_form_converts() -> None:
    mixed = ["Node a", {"kind": "Pod", "namespace": "ml", "name": "p"}]
    assert objects_text(mixed) == ["Node a", "Pod ml/p"]
    assert objects_json(mixed) == [
        {"kind": "Node", "namespace": None, "name": "a"},
        {"kind": "Pod", "namespace": "ml", "name": "p"},
    ]
    recorded = {"id": "x", "objects": ["Node a"], "scope": "pool"}
    once = finding_json(recorded)
    assert once == {"id": "x", "objects": [{"kind": "Node", "namespace": None, "name": "a"}], "scope": "pool"}
    assert finding_json(once) == once and recorded["objects"] == ["Node a"]  # idempotent, input untouched


def test_every_rule_on_every_fixture_names_objects_that_round_trip() -> None:
    seen = 0
    for path in FIXTURES:
        for f in assess(load_snapshot(path, kubernetes_version="v1.37.2")).findings:
            for ref in f.objects:
                assert ref.kind and ref.name and " " not in ref.kind, (f.id, ref)
                assert ObjectRef.parse(str(ref)) == ref, (f.id, ref)
                assert f.to_record()["objects"] == [str(o) for o in f.objects]
                seen += 1
    assert seen > 20


def test_check_json_and_yaml_objects_are_structured_and_the_table_keeps_text() -> None:
    demo = str(ROOT / "fixtures" / "clusters" / "demo.yaml")
    data = json.loads(run("check", "--snapshot", demo, "-o", "json").stdout)
    objects = [o for f in data["findings"] for o in f["objects"]]
    assert objects and all(set(o) == {"kind", "namespace", "name"} for o in objects)
    assert {"kind": "Pool", "namespace": None, "name": "a100-shared-pool"} in objects
    table = run("check", "--snapshot", demo, "-o", "wide").stdout
    assert "objects: Pool a100-shared-pool" in table and "'kind'" not in table
    assert "Pool a100-shared-pool" in run("check", "--snapshot", demo, "-o", "markdown").stdout
