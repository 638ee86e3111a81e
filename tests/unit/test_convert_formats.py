"""`convert` of manifests written other than as LF-ended YAML.

In JSON (jsonnet and Tanka output, `kubectl get -o json` backups), they were written back as YAML flow
style: a `.json` file that jq and JSON-only tools no longer read, every line of it changed, and not readable
by convert itself once templates were added. Each fixture manifest, written as JSON in each layout, must
convert to the objects its YAML converts to, written as JSON in that layout (so a line changes only where
its content does), and converting the result again changes nothing. A file of CRLF lines keeps them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.convert.files import convert_text
from dra_migrate.convert.jsondoc import split_json_values
from dra_migrate.convert.rewrite import ConvertOptions
from tests.unit.test_convert import CONVERTIBLE, TABLE, docs

LAYOUTS = {"kubectl": 4, "jsonnet": 3, "two": 2, "tab": "\t", "one line": None}


def _json(objs: list[Any], indent: int | str | None) -> str:
    seps = (",", ": ") if indent is not None else (", ", ": ")
    return "".join(json.dumps(o, indent=indent, separators=seps, ensure_ascii=False) + "\n" for o in objs)


def _convert(text: str, name: str = "m.json") -> tuple[str, list[str]]:
    out, result = convert_text(text, name, TABLE, ConvertOptions())
    return out, result.problems


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fixture", CONVERTIBLE, ids=[p.stem for p in CONVERTIBLE])
def test_a_json_manifest_converts_to_its_yaml_conversion_written_in_its_own_layout(fixture: Path, layout: str) -> None:
    objs = docs(fixture.read_text())
    yaml_out, yaml_problems = _convert(fixture.read_text(), "m.yaml")
    out, problems = _convert(_json(objs, LAYOUTS[layout]))
    assert [p.split(": ", 1)[1] for p in problems] == [p.split(": ", 1)[1] for p in yaml_problems]
    assert out == _json(docs(yaml_out), LAYOUTS[layout])
    again, _ = _convert(out)
    assert again == out


def test_every_json_document_of_the_output_parses_as_json() -> None:
    deployment = next(p for p in CONVERTIBLE if p.stem == "deployment")
    out, _ = _convert(_json(docs(deployment.read_text()), 2))
    pieces = split_json_values(out)
    assert pieces is not None and "".join(pieces) == out
    assert [json.loads(p)["kind"] for p in pieces][-2:] == ["ResourceClaimTemplate", "Deployment"]


def test_json_values_are_cut_only_where_each_ends() -> None:
    assert split_json_values('{"a": "}{"}\n\n {"b": [1, {"c": 2}]}\n') == ['{"a": "}{"}\n\n ', '{"b": [1, {"c": 2}]}\n']
    assert split_json_values('{"a": 1}{"b": 2}') == ['{"a": 1}', '{"b": 2}']
    assert split_json_values('{"a": 1}\nb: 2\n') is None  # YAML after JSON: the YAML reader judges it
    assert split_json_values("{a: 1}\n") is None  # a YAML flow map


@pytest.mark.parametrize("fixture", CONVERTIBLE, ids=[p.stem for p in CONVERTIBLE])
def test_a_file_of_crlf_lines_converts_to_crlf_lines_only(fixture: Path) -> None:
    """A Windows checkout: every line the conversion writes ends as the file's do (they came out LF among CRLF)."""
    lf = fixture.read_text()
    out, problems = _convert(lf.replace("\n", "\r\n"), "m.yaml")
    expected, expected_problems = _convert(lf, "m.yaml")
    assert (out, problems) == (expected.replace("\n", "\r\n"), expected_problems)


def test_a_yaml_flow_map_document_is_not_taken_for_json() -> None:
    text = "{apiVersion: apps/v1, kind: Deployment, metadata: {name: d},\n spec: {template: {spec: {containers: [\n"
    text += "  {name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}}}}\n"
    out, problems = _convert(text, "m.yaml")
    assert problems == [] and "resourceClaimTemplateName: d-gpu" in out and '"kind"' not in out
