"""Manifest files in and out of conversion: reading streams, the unified diff, writing atomically.

Only documents that change are re-serialised; every other document of a stream keeps its exact text, so
a file with one GPU workload among twenty objects shows a diff of that workload only. A changed
document goes through ruamel.yaml's round-trip dumper with the indentation guessed from its own text,
which keeps its comments, key order and quoting (`preserve_quotes`).
"""

from __future__ import annotations

import difflib
import io
import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.events import ScalarEvent

from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.cluster.yamlio import safe_yaml
from dra_migrate.convert.aliases import unshare_gpu_requests
from dra_migrate.convert.detect import GPU_STRING_RE
from dra_migrate.convert.jsondoc import dump_json, json_style
from dra_migrate.convert.kustomize import (
    gpu_requests,
    inline_patch_problems,
    is_kustomization,
    patch_files,
    patch_problem,
)
from dra_migrate.convert.lists import convert_list, objects_of
from dra_migrate.convert.rewrite import ClaimNames, ConvertOptions, DocResult, convert_document
from dra_migrate.convert.stream import RENDER, Doc, GoTemplate, marker_content, parse_stream, split_documents
from dra_migrate.convert.unidiff import diff_pieces, unified_diff
from dra_migrate.errors import InputError
from dra_migrate.fileio import mark_of, sync_to_media, write_text_atomic

SUFFIXES = (".yaml", ".yml")


@dataclass
class FileResult:
    path: Path  # as given (or found under a given directory)
    relative: Path  # where it goes under `-o DIR`
    original: str
    converted: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    # (namespace, kind, name) -> the object's content, for every claim or template the output holds
    claims: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # (a document's text, what it became), in order: the diff compares them one by one (unidiff.py)
    pieces: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.converted != self.original

    def diff(self) -> str:
        pieces = diff_pieces(self.pieces, self.original, self.converted)
        return unified_diff(pieces, fromfile=f"a/{self.path}", tofile=f"b/{self.path}")


def find_files(paths: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(file, path relative to what was given) for each file, or each YAML file under each directory.

    A file reached twice (given twice, inside a given directory too, through a symlink or a hard link, or by
    two spellings on a case-insensitive filesystem: `Deploy.yaml` and `deploy.yaml` on macOS's APFS, whose
    realpath(3) keeps the case given) is taken once, known by its device and inode: converting it twice would
    name its ResourceClaimTemplates twice."""
    out: list[tuple[Path, Path]] = []
    seen: set[object] = set()
    for p in paths:
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SUFFIXES)
            pairs = [(f, f.relative_to(p)) for f in found]
        elif p.exists():  # a file, or a pipe: `convert <(helm template x chart/)` hands over /dev/fd/63
            pairs = [(p, Path(p.name))]
        else:
            raise InputError(f"{p}: no such file or directory", "give manifest files or directories")
        for f, rel in pairs:
            real = _file_identity(f)
            if real not in seen:
                seen.add(real)
                out.append((f, rel))
    return out


def _file_identity(f: Path) -> object:
    try:
        st = f.stat()
    except OSError:
        return f.resolve()
    return (st.st_dev, st.st_ino)


def check_output_paths(pairs: list[tuple[Path, Path]], output_dir: Path) -> None:
    """Refuse two inputs that would be written to one output file (two `a.yaml` from two directories), or to
    two names that differ only in case (`Job.yaml`, `job.yaml`): one file on macOS's case-insensitive APFS,
    where the second replaced the first, and in a checkout of the directory there; refused on every platform."""
    first: dict[str, tuple[Path, Path]] = {}
    for f, rel in pairs:
        target = output_dir / rel
        key = str(target).casefold()
        if key in first:
            other, other_target = first[key]
            raise InputError(
                f"{other} and {f} would both be written to {target}"
                + ("" if other_target == target else f" ({other_target} on a case-insensitive filesystem)"),
                "give their common parent directory instead, or convert them in separate runs",
            )
        first[key] = (f, target)


def _dump(yaml: YAML, doc: Any) -> str:
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


# ruamel.yaml writes the continuation lines of a quoted string that spans lines at the document's indentation;
# in a document written as one flow map (`{apiVersion: v1, ...}`) that is column 0, where a line `---` or `...`
# ends the document: its text no longer read as YAML (found by tests/unit/test_convert_fuzz.py).
UNWRITABLE = (
    "cannot be written back as YAML that reads the same (ruamel.yaml would start a line of a string that spans"
    " lines at column 0, where `---` ends a document): write the document in block style, or that string on one line"
)


def _reads_back(text: str) -> bool:
    """Whether a dumped document reads back as one YAML document."""
    if len(split_documents(text)) != 1:
        return False
    try:
        _safe_load(text)
    except YAMLError:
        return False
    return True


def _named(doc: Any) -> str:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return f"{doc.get('kind') if isinstance(doc, dict) else '?'}/{meta.get('name') if isinstance(meta, dict) else '?'}"


_CLAIM_KINDS = ("ResourceClaimTemplate", "ResourceClaim")


def _claim_key(doc: Any) -> tuple[str, str, str] | None:
    if not isinstance(doc, dict) or doc.get("kind") not in _CLAIM_KINDS:
        return None
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        return None
    return str(meta.get("namespace") or ""), str(doc["kind"]), str(meta["name"])


def _content(doc: Any) -> str:
    """What makes two claim objects the same object: everything but comments and key order."""
    return json.dumps(doc.get("spec"), sort_keys=True, default=str)


def take_existing_names(docs: list[Doc], names: ClaimNames) -> None:
    """Claim and template names the inputs already hold are taken: a new template never replaces one."""
    for d in docs:
        for obj in objects_of(d.doc):
            key = _claim_key(obj)
            if key is not None:
                names.take(key[0], key[2])


def convert_text(
    text: str, name: str, table: TemplateTable, opts: ConvertOptions, names: ClaimNames | None = None
) -> tuple[str, FileResult]:
    """Convert a YAML stream; a document with a problem is kept as it was (its problems are reported)."""
    if "\r\n" in text and "\n" not in text.replace("\r\n", ""):
        return _with_line_ends(convert_text(text.replace("\r\n", "\n"), name, table, opts, names)[1], "\r\n")
    docs = parse_stream(text, name)
    if names is None:
        names = ClaimNames()
        take_existing_names(docs, names)
    return _convert_docs(docs, text, name, table, opts, names)


def _with_line_ends(result: FileResult, end: str) -> tuple[str, FileResult]:
    """A file whose every line ends in CRLF (a Windows checkout) keeps them: the lines conversion writes
    end as the file's do, not in a mix of the two."""
    result.original, result.converted = (t.replace("\n", end) for t in (result.original, result.converted))
    result.pieces = [(a.replace("\n", end), b.replace("\n", end)) for a, b in result.pieces]
    return result.converted, result


def _convert_docs(
    docs: list[Doc], text: str, name: str, table: TemplateTable, opts: ConvertOptions, names: ClaimNames
) -> tuple[str, FileResult]:
    result = FileResult(Path(name), Path(name), text, text)
    out: list[str] = []
    for d in docs:
        if d.doc is None or d.yaml is None:
            out.append(d.marker + d.body)
            result.pieces.append((out[-1], out[-1]))
            continue
        unshared = unshare_gpu_requests(d.doc)  # before any change: a node reached from two places becomes two
        if is_kustomization(d.doc):  # an overlay's own text: never converted, its GPU patches a problem
            r = DocResult(problems=inline_patch_problems(d.doc, Path(name)))
        else:
            r = convert_list(d.doc, table, opts, names) or convert_document(d.doc, table, opts, names)
        where = f"{name}:{d.start}"
        style = json_style(d.body) if not marker_content(d.marker) else None
        dumped = _dump(d.yaml, d.doc) if r.changed and style is None else ""
        refused = r.changed and style is None and not _reads_back(dumped)
        if refused:  # left as it is: nothing of it converted, none of its new templates defined
            r.problems.append(f"{_named(d.doc)}: {UNWRITABLE}")
            r.changed, r.summary, unshared = False, [], []
        for obj in () if refused else objects_of(d.doc):  # a list's templates, new and old, are its items
            key = _claim_key(obj)
            if key is not None:
                result.claims[key] = _content(obj)
        result.problems.extend(f"{where}: {p}" for p in r.problems)
        result.warnings.extend(f"{where}: {w}" for w in r.warnings)
        result.warnings.extend(
            f"{where}: {path} took a GPU request through a YAML alias or merge key: written out, converted on its own"
            for path in unshared
            if r.changed
        )
        result.summary.extend(f"{where}: {s}" for s in r.summary)
        if not r.changed:
            out.append(d.marker + d.body)
            result.pieces.append((out[-1], out[-1]))
            continue
        for new_doc in r.new_documents:
            new_key = _claim_key(new_doc)
            if new_key is not None:
                result.claims[new_key] = _content(new_doc)
        if style is not None:  # written in JSON: written back in JSON (convert/jsondoc.py)
            ending = d.body[len(d.body.rstrip()) :]
            out.append(d.marker + "\n".join(dump_json(x, style) for x in [*r.new_documents, d.doc]) + ending)
        else:
            pieces = [_dump(d.yaml, x) for x in r.new_documents]
            pieces.append(dumped if marker_content(d.marker) else keep_original_lines(d.body, dumped))
            marker = "---\n" if marker_content(d.marker) else d.marker
            out.append(marker + "---\n".join(pieces))
        result.pieces.append((d.marker + d.body, out[-1]))
    result.converted = "".join(out)
    return result.converted, result


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_item(line: str) -> bool:
    return line.lstrip(" ").startswith("- ") or line.strip() == "-"


def keep_original_lines(original: str, dumped: str) -> str:
    """The dumped document with every line whose content did not change taken verbatim from `original`.

    ruamel.yaml writes one list style for a whole document, and drops comments inside a map it empties; so
    the lines are matched by content (difflib), matched lines keep their original text, new lines are
    shifted by the indentation change of their nearest sibling or parent, and full-line comments among
    removed lines stay where they were. Content is compared as YAML reads it: runs of blanks are one
    (`mountPath:  /config`, as vLLM production-stack's gpu-deployment.yaml writes it, is ruamel's
    `mountPath: /config`), and a plain or quoted scalar written over several lines (a `command` of LWS's
    vllm/GPU/lws.yaml), which ruamel writes on one, is one unit of the lines it spans. The result is used only
    when it parses to exactly what ruamel wrote; otherwise ruamel's text is kept as it is.
    """
    old = _units(original)
    new = dumped.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, [_key("".join(u)) for u in old], [_key(x) for x in new], autojunk=False)
    out: list[str] = []
    # (indent in `dumped`, a list item?, shift to the original) per line of `dumped`
    placed: list[tuple[int, bool, int]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for oi, nj in zip(range(i1, i2), range(j1, j2), strict=True):
                out.extend(old[oi])
                if old[oi][0].strip():
                    placed.append((_indent(new[nj]), _is_item(new[nj]), _indent(old[oi][0]) - _indent(new[nj])))
            continue
        out.extend(u[0] for u in old[i1:i2] if len(u) == 1 and u[0].lstrip().startswith("#"))
        for line in new[j1:j2]:
            if not line.strip():
                out.append(line)
                continue
            ind, item = _indent(line), _is_item(line)
            # The nearest parent (less indented) or sibling (as indented, and of the same sort: a key
            # beside `- x` at one column is the list's sibling, not the item's) says the shift.
            shift = next((sh for i, it, sh in reversed(placed) if i < ind or (i == ind and it == item)), 0)
            out.append(" " * max(0, ind + shift) + line.lstrip(" "))
            placed.append((ind, item, shift))
    merged = "".join(out)
    if merged.endswith("\n") != dumped.endswith("\n"):
        merged = merged.rstrip("\n") + ("\n" if dumped.endswith("\n") else "")
    try:
        same = _safe_load(merged) == _safe_load(dumped)
    except YAMLError:
        same = False
    return merged if same else dumped


def _key(text: str) -> str:
    """A line's (or unit's) content for matching: its words, one blank between each."""
    return " ".join(text.split())


def _units(text: str) -> list[list[str]]:
    """The lines of `text`, those a multi-line plain or quoted scalar spans grouped as one unit (block scalars,
    `|` and `>`, ruamel writes back line for line)."""
    lines = text.splitlines(keepends=True)
    spans: dict[int, int] = {}
    try:
        for event in safe_yaml(pure=True).parse(text):
            start, end = getattr(event, "start_mark", None), getattr(event, "end_mark", None)
            style = getattr(event, "style", "|")
            if isinstance(event, ScalarEvent) and style not in ("|", ">") and start and end and end.line > start.line:
                spans[start.line] = max(spans.get(start.line, start.line), end.line)
    except YAMLError:
        spans = {}
    units: list[list[str]] = []
    i = 0
    while i < len(lines):
        last, j = spans.get(i, i), i
        while j < last:  # a scalar that starts on the last line of another (a flow map's) joins its unit
            j += 1
            last = max(last, spans.get(j, j))
        last = min(last, len(lines) - 1)
        units.append(lines[i : last + 1])
        i = last + 1
    return units


def _safe_load(text: str) -> Any:
    return safe_yaml(pure=True).load(text)


def convert_files(pairs: list[tuple[Path, Path]], table: TemplateTable, opts: ConvertOptions) -> list[FileResult]:
    """Convert every file of one run, each exactly as it would be converted alone.

    Names are chosen within a file only (a file's output never depends on which other files sit beside
    it); two files that define one claim or template name differently are refused instead, naming both:
    applied together, the second would silently replace the first's devices."""
    results = []
    patches = patch_files(
        (path for path, _ in pairs), lambda k: [d.doc for d in parse_stream(read_manifest(k)[0], str(k))]
    )
    for path, relative in pairs:
        text, mark = read_manifest(path)
        try:
            _, result = convert_text(text, str(path), table, opts)
        except GoTemplate as e:
            result = FileResult(path, relative, text, text, pieces=[(text, text)])
            if GPU_STRING_RE.search(text):
                result.problems.append(
                    f"{e.where}: a Go template (a Helm chart's templates/) that names a GPU: {RENDER}"
                )
            else:  # nothing of it to convert: the run goes on without --skip-unconvertible
                result.warnings.append(f"{e.where}: a Go template (a Helm chart's templates/), left as it is")
        result.path, result.relative = path, relative
        kustomization = patches.get(path.resolve())
        if kustomization is not None:
            refuse_gpu_patches(result, text, kustomization)
        results.append(_with_mark(result, mark) if mark else result)
    refuse_name_clashes(results)
    return results


def refuse_gpu_patches(result: FileResult, text: str, kustomization: Path) -> None:
    """A kustomize patch that asks for GPUs is left as it was, and a problem (convert/kustomize.py)."""
    asks = [
        patch_problem(f"{result.path}:{d.start}", kustomization, found)
        for d in parse_stream(text, str(result.path))
        if (found := gpu_requests(d.doc))
    ]
    if asks:
        result.problems[:] = asks
        result.converted, result.pieces = result.original, [(result.original, result.original)]
        result.summary.clear()
        result.claims.clear()


def refuse_name_clashes(results: list[FileResult]) -> None:
    """A claim or template name defined with different content by two files is a problem of the later
    file, which is then left unconverted as a whole (so --skip-unconvertible never writes the clash)."""
    first: dict[tuple[str, str, str], tuple[Path, str]] = {}
    for r in results:
        clashes = []
        for key, content in r.claims.items():
            seen = first.setdefault(key, (r.path, content))
            if seen[0] != r.path and seen[1] != content:
                ns, kind, name = key
                clashes.append(
                    f"{r.path}: {kind} {ns + '/' if ns else ''}{name} is also defined, differently, by {seen[0]}: "
                    "applied together one would replace the other; rename a workload (or the existing object), "
                    "or convert the files in separate runs"
                )
        if clashes:
            r.problems.extend(clashes)
            r.converted = r.original
            r.summary.clear()


def _with_mark(result: FileResult, mark: str) -> FileResult:
    """A file that began with a byte order mark keeps it: conversion changes only what it converts."""
    result.original, result.converted = mark + result.original, mark + result.converted
    if result.pieces:
        old, new = result.pieces[0]
        result.pieces[0] = (mark + old, mark + new)
    return result


def read_manifest(path: Path) -> tuple[str, str]:
    """A manifest's text, and the UTF-8 byte order mark it began with ("" without one; Windows editors
    write one). UTF-16 and 32 are refused: convert writes the file back, as UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}", "check the path") from e
    marked = mark_of(data)
    if marked and marked[1] != "utf-8-sig":
        raise InputError(f"{path}: {marked[1].upper()} text", "save it as UTF-8, as kubectl and git expect")
    text = decode_manifest(data[len(marked[0]) :] if marked else data, str(path))
    return text, (marked[0].decode("utf-8") if marked else "")


def decode_manifest(data: bytes, name: str) -> str:
    """UTF-8 text, or a refusal naming the line of the first byte that is not (a Latin-1 comment, `# café`, in
    one line of a repository's manifests). stdin is read as bytes and decoded here too: Python's text stdin
    (surrogateescape in a C or C.UTF-8 locale) let such a byte through as a lone surrogate, which the YAML
    parser refused as "unacceptable character #xdce9" at the document's first line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise InputError(
            f"{name}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x})", "save it as UTF-8 (iconv -t UTF-8)"
        ) from e


def convert_file(path: Path, relative: Path, table: TemplateTable, opts: ConvertOptions) -> FileResult:
    (result,) = convert_files([(path, relative)], table, opts)
    return result


def write_all(files: list[tuple[Path, str]], *, sources: list[Path] | None = None) -> None:
    """Write every file or none: each goes to a temporary file beside its target first, and only when all
    are written are they renamed over their targets. If a rename fails, the targets already replaced get
    their old text back. A symlink stays a symlink (its target is rewritten).

    `sources` (one per file, `--output-dir`): the manifest each is a copy of. A copy is never readable by more
    than its source is: a new one gets the source's permissions less the umask (as `cp` gives them), one that
    exists keeps its own narrowed to the source's. A manifest kept 0600 (a Secret beside the workload, a
    password in an `env` value) used to be copied 0644."""
    limits = [_permissions(p) for p in sources] if sources is not None else [0o7777] * len(files)
    targets = [(path.resolve() if path.is_symlink() else path, text) for path, text in files]
    originals: dict[Path, str | None] = {}
    temps: list[tuple[Path, Path]] = []
    # Ctrl-C and SIGTERM (KeyboardInterrupt, cli/interrupts.py) undo as a failed write does: they left the
    # temporary files written so far beside their targets, or, between two renames, half of the files
    # converted and the rest not.
    try:
        for (target, text), limit in zip(targets, limits, strict=True):
            originals[target] = target.read_text(encoding="utf-8") if target.exists() else None
            temps.append((_write_temp(target, text, limit), target))
    except BaseException as e:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
        raise InputError(
            f"cannot write {getattr(e, 'filename', '') or 'a file'}: {e.strerror}; nothing written",
            "check the paths and their permissions",
        ) from e
    done: list[Path] = []
    try:
        for tmp, target in temps:
            os.replace(tmp, target)
            done.append(target)
    except BaseException as e:
        for target in done:
            old = originals[target]
            if old is None:
                target.unlink(missing_ok=True)
            else:
                write_text_atomic(target, old)
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        if not isinstance(e, OSError):
            raise
        raise InputError(
            f"cannot replace {e.filename}: {e.strerror}; nothing changed", "check the paths and their permissions"
        ) from e


def _permissions(source: Path) -> int:
    try:
        return source.stat().st_mode & 0o777
    except OSError:
        return 0o600  # cannot tell (it went away since it was read): owner only


def _write_temp(target: Path, text: str, limit: int = 0o7777) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = (target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask()) & limit
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            sync_to_media(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
