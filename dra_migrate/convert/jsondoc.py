"""Writing a converted JSON manifest back as JSON.

A manifest written in JSON (jsonnet and Tanka output, `kubectl get -o json` backups) is read by the same
round-trip YAML reader as any other (JSON is YAML), which would write it back as YAML flow style: valid for
kubectl, but a `.json` file that jq, JSON linters and JSON-only pipelines no longer read, and every line of
it changed. Such a document is written as JSON instead, in the indentation and separators it was written
in, so only what the conversion changed differs; its new ResourceClaimTemplates are JSON documents written
before it, one after another, as kubectl reads a JSON stream (k8s.io/apimachinery
pkg/util/yaml/decoder.go, YAMLOrJSONDecoder: value after value). JSON holds no comments: the templates say
what they replace in their `dra-migrate.io/device-plugin-resource` annotation alone.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from ruamel.yaml.scalarbool import ScalarBoolean


@dataclass(frozen=True)
class JsonStyle:
    indent: int | str | None  # None: the document is on one line
    separators: tuple[str, str]


def json_style(body: str) -> JsonStyle | None:
    """How a document written in JSON is laid out; None for a document written in YAML."""
    text = body.strip()
    if not text.startswith("{") or not text.endswith("}"):
        return None
    try:
        json.loads(text)
    except ValueError:
        return None  # a YAML flow map (`{a: 1}`): ruamel writes it back as it reads it
    lines = text.splitlines()
    if len(lines) == 1:
        return JsonStyle(None, (", ", ": ") if '": ' in text else (",", ":"))
    second = lines[1]
    width = len(second) - len(second.lstrip(" \t"))
    indent: int | str = second[:width] if "\t" in second[:width] else width
    return JsonStyle(indent, (",", ": "))


_SPACE = re.compile(r"\s*")


def split_json_values(body: str) -> list[str] | None:
    """A text of JSON values one after another, cut into one text per value (each with the blank after it;
    joined, they are `body`); None when it is not only JSON values, which the YAML reader then judges."""
    decoder, starts = json.JSONDecoder(), []
    at = _SPACE.match(body).end()  # type: ignore[union-attr]  # \s* always matches
    while at < len(body):
        try:
            _, end = decoder.raw_decode(body, at)
        except ValueError:
            return None
        starts.append(at)
        at = _SPACE.match(body, end).end()  # type: ignore[union-attr]
    if not starts:
        return None
    cuts = [0, *starts[1:], len(body)]
    return [body[a:b] for a, b in itertools.pairwise(cuts)]


def dump_json(doc: Any, style: JsonStyle) -> str:
    return json.dumps(_plain(doc), indent=style.indent, separators=style.separators, ensure_ascii=False)


def _plain(value: Any) -> Any:
    """ruamel's round-trip values as JSON's: a ScalarBoolean is an int to json.dumps, and would be written 1."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, ScalarBoolean):
        return bool(value)
    return value
