"""A converted pod keeps the toleration the API server gave it for its device-plugin request
(convert/tolerations.py): the ExtendedResourceToleration admission plugin adds `{key: <resource>, operator:
Exists, effect: NoSchedule}` to a pod that requests an extended resource, and GKE taints GPU nodes so. A
converted pod requests none, and would stay Pending on the nodes it ran on. The real scheduler's verdict is
tests/integration/test_convert_live.py::test_a_converted_pod_tolerates_the_taint_its_gpu_nodes_carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from dra_migrate.cluster.kinds import kind_key
from dra_migrate.cluster.templates import ResolvedTemplate
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.convert.tolerations import untolerated
from tests.unit.test_convert import CONVERTIBLE, TABLE, docs


def _templates(doc: dict[str, Any]) -> list[ResolvedTemplate]:
    return TABLE.resolve(kind_key(str(doc.get("apiVersion")), str(doc.get("kind"))), doc)


def _plugin_tolerations(r: ResolvedTemplate) -> set[str]:
    """What ExtendedResourceToleration adds for the device-plugin names a template's containers request (a
    limit alone is a request too: the API server defaults requests from limits for extended resources)."""
    out = set()
    for c in r.containers() + r.init_containers():
        res = c.get("resources") or {}
        for section in ("requests", "limits"):
            out |= {k for k in res.get(section) or {} if k.startswith("nvidia.com/")}
    return out


@pytest.mark.parametrize("fixture", CONVERTIBLE, ids=[p.stem for p in CONVERTIBLE])
def test_every_converted_template_tolerates_what_the_admission_plugin_gave_it(fixture: Path) -> None:
    before = [d for d in docs(fixture.read_text()) if d.get("kind") != "ResourceClaimTemplate"]
    out, result = convert_text(fixture.read_text(), "t.yaml", TABLE, ConvertOptions())
    assert result.problems == []
    after = [d for d in docs(out) if d.get("kind") not in ("ResourceClaimTemplate", "ResourceClaim")]
    assert len(before) == len(after)
    checked = 0
    for old, new in zip(before, after, strict=True):
        for r_old, r_new in zip(_templates(old), _templates(new), strict=True):
            wanted = _plugin_tolerations(r_old)
            assert untolerated(r_new.pod_spec(), wanted) == [], (fixture.name, r_old.path)
            checked += len(wanted)
    assert checked  # every convertible fixture asks for a device-plugin name somewhere


POD = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: i
    resources:
      limits: {nvidia.com/gpu: 1}
"""


def _converted_tolerations(tolerations: str | None) -> tuple[list[Any], list[str]]:
    text = POD + (f"  tolerations: {tolerations}\n" if tolerations else "")
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    assert result.problems == []
    (pod,) = [d for d in docs(out) if d["kind"] == "Pod"]
    return pod["spec"].get("tolerations") or [], result.summary


ADDED = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("have", "added"),
    [
        (None, True),
        ("[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]", False),
        ("[{key: nvidia.com/gpu, operator: Exists}]", False),  # every effect
        ("[{operator: Exists}]", False),  # every taint
        ("[{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]", True),  # one value only
        ("[{key: nvidia.com/gpu, value: present}]", True),  # no operator is Equal
        ("[{key: nvidia.com/gpu, operator: Exists, effect: NoExecute}]", True),  # another effect
        ("[{key: dedicated, operator: Exists, effect: NoSchedule}]", True),  # another key: kept, ours added
    ],
    ids=["none", "same", "any-effect", "everything", "one-value", "default-equal", "other-effect", "other-key"],
)
def test_the_toleration_is_added_unless_the_template_already_tolerates_every_such_taint(
    have: str | None, added: bool
) -> None:
    tolerations, summary = _converted_tolerations(have)
    before = YAML(typ="safe").load(have) if have else []
    assert tolerations == before + ([ADDED] if added else [])  # what was there stays, in its order
    assert any("tolerates nvidia.com/gpu:NoSchedule" in s for s in summary) == added


def test_converting_the_output_again_adds_nothing() -> None:
    once, _ = convert_text(POD, "t.yaml", TABLE, ConvertOptions())
    twice, result = convert_text(once, "t.yaml", TABLE, ConvertOptions())
    assert twice == once and not result.changed


def test_an_empty_tolerations_key_is_filled_where_it_stands() -> None:
    text = POD.replace("spec:\n  containers:", "spec:\n  tolerations:\n  containers:")
    out, result = convert_text(text, "t.yaml", TABLE, ConvertOptions())
    (pod,) = [d for d in docs(out) if d["kind"] == "Pod"]
    assert result.problems == [] and pod["spec"]["tolerations"] == [ADDED]
    assert next(iter(pod["spec"])) == "tolerations"  # not moved to the end: the diff shows only what changed
