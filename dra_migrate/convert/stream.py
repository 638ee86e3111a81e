"""Reading a manifest stream into documents: where each starts (`---` lines, and JSON documents one after
another), the indentation each is written in, its round-trip parse, and what is refused before any
conversion (nesting, alias bombs, YAML errors as one line) or set aside (a Helm chart's Go templates).

Split out of convert/files.py, which converts the documents and writes the files.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from dra_migrate.cluster.yamlio import MAX_DEPTH, ROUND_TRIP_CONSTRUCTOR, check_aliases, nesting_exceeds, parser_stopped
from dra_migrate.convert.jsondoc import split_json_values
from dra_migrate.errors import InputError

_MARKER_RE = re.compile(r"^---(?:[ \t].*)?$")


def split_documents(text: str) -> list[tuple[str, str]]:
    """(the `---` line that opens it or "", its text) per document; joining them gives `text` back."""
    chunks: list[tuple[str, str]] = []
    marker, body = "", list[str]()
    for line in text.splitlines(keepends=True):
        if _MARKER_RE.match(line.rstrip("\r\n")):
            if marker or body:
                chunks.append((marker, "".join(body)))
            marker, body = line, []
        else:
            body.append(line)
    if marker or body:
        chunks.append((marker, "".join(body)))
    return [piece for marker, body in chunks for piece in _json_documents(marker, body)]


def _json_documents(marker: str, body: str) -> list[tuple[str, str]]:
    """JSON documents one after another with no `---` between them (as convert writes a JSON manifest's new
    templates, and kubectl reads a JSON stream) are documents each."""
    if marker_content(marker) or not body.lstrip().startswith("{"):
        return [(marker, body)]
    pieces = split_json_values(body)
    if pieces is None:
        return [(marker, body)]
    return [(marker if i == 0 else "", piece) for i, piece in enumerate(pieces)]


def guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, dash offset of block sequences) as the document is written; (2, 0) by default.

    ruamel's own guess (`load_yaml_guess_indent`) returns the sequence indent only, and kubectl, Helm and
    hand-written manifests differ in both, so both are read off the first nested key and first list.
    """
    mapping: int | None = None
    offset: int | None = None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for prev, cur in itertools.pairwise(lines):
        if not prev.rstrip().endswith(":"):
            continue
        stripped = prev.lstrip()
        key_col = len(prev) - len(stripped) + (2 if stripped.startswith("- ") else 0)
        col = len(cur) - len(cur.lstrip())
        if cur.lstrip().startswith("- "):
            if offset is None and col >= key_col:
                offset = col - key_col
        elif mapping is None and col > key_col:
            mapping = col - key_col
        if mapping is not None and offset is not None:
            break
    return mapping or 2, offset or 0


def _yaml(indent: int, offset: int) -> YAML:
    yaml = YAML(typ="rt")
    yaml.Constructor = ROUND_TRIP_CONSTRUCTOR  # a timestamp that is no date is a YAML error at its line
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long strings (commands, CEL expressions)
    # ruamel's `sequence` is where an item's content starts, `offset` where its dash sits.
    yaml.indent(mapping=indent, sequence=offset + 2, offset=offset)
    return yaml


@dataclass
class Doc:
    """One document of a stream: its text as written, and its round-trip parse."""

    marker: str  # the `---` line that opens it, or ""
    body: str
    start: int  # the line its content starts on
    doc: Any = None  # parsed (round-trip), None for a document of comments only
    yaml: YAML | None = None


def marker_content(marker: str) -> bool:
    """Whether the `---` line carries content of the document (`--- !!map`, `--- {a: 1}`), not only a comment."""
    rest = marker.rstrip("\r\n")[3:].strip()
    return bool(rest) and not rest.startswith("#")


def _one_line(e: YAMLError) -> str:
    problem = getattr(e, "problem", None) or getattr(e, "context", None) or str(e).splitlines()[0]
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    return f"{problem} (line {mark.line + 1} of the document)" if mark is not None else str(problem)


_GO_TEMPLATE = "{{"


class GoTemplate(InputError):
    """A Helm chart's template is text that makes manifests, not one: it is converted once rendered. In a
    run over files it does not end the run (a GitOps repository holds charts beside manifests): one that
    names a GPU is that file's problem (left as it is with --skip-unconvertible), any other a warning."""

    def __init__(self, where: str) -> None:
        super().__init__(f"{where}: a Go template (a Helm chart's templates/), not YAML", RENDER)
        self.where = where


RENDER = "convert what it renders: helm template RELEASE CHART | dra-migrate convert -"


def _go_template(name: str, start: int) -> GoTemplate:
    return GoTemplate(f"{name}:{start}")


def _has_collection_key(value: Any) -> bool:
    """Whether a map anywhere has a map or a list for a key, as YAML reads a template action `{{ .X }}` (a flow
    map whose one key is a flow map); no Kubernetes object has one."""
    if isinstance(value, dict):
        return any(isinstance(k, (Mapping, tuple)) or _has_collection_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_collection_key(v) for v in value)
    return False


def parse_stream(text: str, name: str) -> list[Doc]:
    """The documents of a YAML stream, parsed with the indentation each is written in."""
    docs: list[Doc] = []
    line = 1
    for marker, body in split_documents(text):
        start = line + (1 if marker and not marker_content(marker) else 0)
        line = line + (1 if marker else 0) + body.count("\n")
        d = Doc(marker, body, start)
        docs.append(d)
        if not body.strip() and not marker_content(marker):
            continue
        if not marker_content(marker) and all(
            ln.lstrip().startswith("#") or not ln.strip() for ln in body.splitlines()
        ):
            continue
        source = marker + body if marker_content(marker) else body
        if nesting_exceeds(source):
            raise InputError(f"{name}:{start}: nested deeper than {MAX_DEPTH} levels", "fix the manifest")
        try:
            indent, offset = guess_indent(body)
            d.yaml = _yaml(indent, offset)
            d.doc = d.yaml.load(source)
        except YAMLError as e:
            if _GO_TEMPLATE in body:
                raise _go_template(name, start) from e
            raise InputError(
                f"{name}: document at line {start}: not valid YAML: {_one_line(e)}", "fix the manifest"
            ) from e
        except RecursionError as e:
            raise InputError(f"{name}:{start}: nested too deeply", "fix the manifest") from e
        except TypeError as e:
            if _GO_TEMPLATE in body:  # `name: {{ .Release.Name }}` reads as a map whose key is a map
                raise _go_template(name, start) from e
            # ruamel's round-trip constructor hashes each key; a key that is itself a tagged map (`? !t a: b`)
            # is not hashable and raises TypeError, not a YAMLError (found by fuzzing convert, atheris).
            raise InputError(
                f"{name}: document at line {start}: a key that is itself a map or a list ({e})",
                "Kubernetes objects have string keys only: fix the manifest",
            ) from e
        except Exception as e:  # only ruamel runs here: its internals stopped on this text
            raise InputError(f"{name}: document at line {start}: {parser_stopped(e)}", "fix the manifest") from e
        check_aliases(d.doc, f"{name}:{start}", "refusing a possible alias bomb; write the manifest without it")
        if _GO_TEMPLATE in body and _has_collection_key(d.doc):  # `name: {{ .Release.Name }}` parses
            raise _go_template(name, start)
    return docs
