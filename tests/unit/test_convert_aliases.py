"""`convert` of manifests that share a GPU request through YAML aliases or merge keys.

The rewrite changes a container's `resources` in place; when a second container reached the same node
through `*gpu` or `<<: *defaults`, it silently took the first's claim (both `request: a`: two containers on
one GPU, the template's second device idle). A manifest with aliases must convert to exactly the objects the
same manifest written out in full converts to."""

from __future__ import annotations

import io
import json

import pytest
from ruamel.yaml import YAML

from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.errors import InputError
from tests.unit.test_convert import TABLE, docs

ALIASED_RESOURCES = """apiVersion: apps/v1
kind: Deployment
metadata: {name: two}
spec:
  template:
    spec:
      containers:
      - name: a
        image: x
        resources: &gpu
          limits:
            nvidia.com/gpu: 1
      - name: b
        image: y
        resources: *gpu
"""

MERGED_DEFAULTS = """apiVersion: batch/v1
kind: Job
metadata: {name: merged}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
      - &warm
        name: warm
        image: x
        resources:
          limits:
            nvidia.com/gpu: 2
      containers:
      - <<: *warm
        name: main
      - <<: *warm
        name: side
        image: y
"""

SHARED_TEMPLATE = """apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: blue}
  spec:
    template: &tpl
      spec:
        containers:
        - name: c
          image: x
          resources: {limits: {nvidia.com/mig-1g.10gb: 1}}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: green}
  spec:
    template: *tpl
"""

# `limits: &l` converted (its GPU key deleted) while another map merges it: ruamel.yaml's back-reference
# update raised KeyError, an internal error (found by tests/unit/test_convert_fuzz.py)
MERGED_LIMITS = """apiVersion: apps/v1
kind: Deployment
metadata: {name: lim}
spec:
  template:
    spec:
      containers:
      - name: c
        image: x
        resources:
          limits: &l
            nvidia.com/gpu: 2
      - name: d
        image: x
        resources:
          limits:
            <<: *l
            cpu: 1
"""

# a merge whose anchor is defined inside it, the anchored map aliased by a second container
MERGED_INLINE_ANCHOR = """apiVersion: apps/v1
kind: Deployment
metadata: {name: inl}
spec:
  template:
    spec:
      containers:
      - name: c
        image: x
        resources:
          <<: &r
            limits:
              nvidia.com/gpu: 2
      - name: d
        image: x
        resources: *r
"""


def _written_out(text: str) -> str:
    """The same documents with every alias and merge key written out (no node shared)."""
    plain = json.loads(json.dumps(list(YAML(typ="safe").load_all(text))))
    out = io.StringIO()
    YAML(typ="safe").dump_all(plain, out)
    return out.getvalue()


def _convert(text: str) -> tuple[str, list[str], list[str]]:
    out, result = convert_text(text, "m.yaml", TABLE, ConvertOptions())
    return out, result.problems, result.warnings


@pytest.mark.parametrize(
    "text",
    [ALIASED_RESOURCES, MERGED_DEFAULTS, SHARED_TEMPLATE, MERGED_LIMITS, MERGED_INLINE_ANCHOR],
    ids=["alias", "merge", "list", "merged-limits", "merge-inline-anchor"],
)
def test_a_manifest_with_aliases_converts_as_it_does_written_out(text: str) -> None:
    out, problems, warnings = _convert(text)
    expected, expected_problems, _ = _convert(_written_out(text))
    assert problems == expected_problems == []
    assert docs(out) == docs(expected)
    assert warnings and all("took a GPU request through a YAML alias or merge key" in w for w in warnings)


def test_each_container_claims_its_own_request() -> None:
    out, _, warnings = _convert(ALIASED_RESOURCES)
    workload = docs(out)[-1]
    containers = workload["spec"]["template"]["spec"]["containers"]  # type: ignore[index]
    assert [c["resources"]["claims"] for c in containers] == [
        [{"name": "gpu", "request": "a"}],
        [{"name": "gpu", "request": "b"}],
    ]
    assert warnings == [
        "m.yaml:1: spec.template.spec.containers[1].resources took a GPU request through a YAML "
        "alias or merge key: written out, converted on its own"
    ]


def test_an_alias_that_asks_for_no_gpu_is_kept() -> None:
    text = (
        ALIASED_RESOURCES.replace("nvidia.com/gpu: 1", "memory: 1Gi", 1) + "        env: &env [{name: A, value: b}]\n"
    )
    out, _, warnings = _convert(text)
    assert (out, warnings) == (text, [])


def test_an_alias_bomb_is_refused_before_any_walk_expands_it() -> None:
    """Nine levels of nine aliases: 490 million nodes from 24 written. convert hung on it (every walk of the
    rewrite expands aliases); it is refused as the snapshot readers refuse it (cluster/yamlio.check_aliases)."""
    levels = ["  a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"  {cur}: &{cur} [{', '.join([f'*{prev}'] * 9)}]")
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + "\n".join(levels) + "\n"
    with pytest.raises(InputError, match=r"m\.yaml:1: YAML aliases expand this document to 490,329,060 nodes"):
        convert_text(text, "m.yaml", TABLE, ConvertOptions())
