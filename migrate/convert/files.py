"""Manifest files in and out of conversion: reading streams, the unified diff, writing atomically.

Only documents that change are re-serialised; every other document of a stream keeps its exact text, so
a file with one GPU workload among twenty objects shows a diff of that workload only. A changed
document goes through ruamel.yaml's round-trip dumper with the indentation guessed from its own text,
which keeps its comments, key order and quoting (`preserve_quotes`).
"""

from __future__ import annotations

import difflib
import io
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from migrate.cluster.templates import TemplateTable
from migrate.convert.rewrite import ConvertOptions, convert_document
from migrate.errors import InputError
from migrate.fileio import write_text_atomic

SUFFIXES = (".yaml", ".yml")
_MARKER_RE = re.compile(r"^---(?:[ \t].*)?$")


@dataclass
class FileResult:
    path: Path  # as given (or found under a given directory)
    relative: Path  # where it goes under `-o DIR`
    original: str
    converted: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.converted != self.original

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.converted.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


def find_files(paths: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(file, path relative to what was given) for each file, or each YAML file under each directory."""
    out: list[tuple[Path, Path]] = []
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SUFFIXES)
            out.extend((f, f.relative_to(p)) for f in found)
        elif p.is_file():
            out.append((p, Path(p.name)))
        else:
            raise InputError(f"{p}: no such file or directory", "give manifest files or directories")
    return out


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
    return chunks


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
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap long strings (commands, CEL expressions)
    # ruamel's `sequence` is where an item's content starts, `offset` where its dash sits.
    yaml.indent(mapping=indent, sequence=offset + 2, offset=offset)
    return yaml


def _dump(yaml: YAML, doc: Any) -> str:
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def convert_text(text: str, name: str, table: TemplateTable, opts: ConvertOptions) -> tuple[str, FileResult]:
    """Convert a YAML stream; a document with a problem is kept as it was (its problems are reported)."""
    result = FileResult(Path(name), Path(name), text, text)
    out: list[str] = []
    line = 1
    for marker, body in split_documents(text):
        start = line + (1 if marker else 0)
        line = start + body.count("\n")
        if not body.strip() or all(ln.lstrip().startswith("#") or not ln.strip() for ln in body.splitlines()):
            out.append(marker + body)
            continue
        try:
            indent, offset = guess_indent(body)
            yaml = _yaml(indent, offset)
            doc = yaml.load(body)
        except YAMLError as e:
            raise InputError(f"{name}: document at line {start}: not valid YAML: {e}", "fix the manifest") from e
        r = convert_document(doc, table, opts)
        where = f"{name}:{start}"
        result.problems.extend(f"{where}: {p}" for p in r.problems)
        result.warnings.extend(f"{where}: {w}" for w in r.warnings)
        result.summary.extend(f"{where}: {s}" for s in r.summary)
        if not r.changed:
            out.append(marker + body)
            continue
        pieces = [_dump(yaml, d) for d in r.new_documents]
        pieces.append(_dump(yaml, doc))
        out.append(marker + "---\n".join(pieces))
    result.converted = "".join(out)
    return result.converted, result


def convert_file(path: Path, relative: Path, table: TemplateTable, opts: ConvertOptions) -> FileResult:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", "check the path") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text", "give YAML manifests") from e
    _, result = convert_text(text, str(path), table, opts)
    result.path, result.relative = path, relative
    return result


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` in one step: a reader sees the old file or the new one, never half of one."""
    write_text_atomic(path, text)
