"""Safe YAML reading: line-numbered errors and no alias bombs.

ruamel.yaml's safe loader shares aliased nodes instead of copying them, so a "billion laughs" document
loads in little memory, but anything that walks it afterwards (JSON output, hashing) would expand it.
We measure the expanded size once, in time linear in the distinct nodes, and refuse documents that
expand far beyond what they hold. Kubernetes never writes anchors, so a real snapshot is never refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor, SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.representer import SafeRepresenter
from ruamel.yaml.tag import Tag

from dra_migrate.errors import InputError

# A document may expand to at most this many nodes more than it holds distinct ones.
MAX_ALIAS_EXPANSION = 100_000


def _expanded_size(root: Any) -> tuple[int, int]:
    """(nodes after expanding aliases, nodes as written), iteratively and memoised by identity. A node is a
    map, a list or a scalar: a map or list written once and aliased N times counts once as written and N + 1
    times expanded, with all it holds. Scalars count on both sides, so a document without aliases expands
    to exactly what it holds, however large (a cluster's export holds millions of values)."""
    sizes: dict[int, int] = {}
    written = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, dict | list):
            continue
        nid = id(node)
        if done:
            children = node.values() if isinstance(node, dict) else node
            scalars = expanded = 0
            for c in children:
                if isinstance(c, dict | list):
                    expanded += sizes.get(id(c), 1)
                else:
                    scalars += 1
            sizes[nid] = 1 + scalars + expanded
            written += 1 + scalars
            continue
        if nid in sizes:
            continue
        sizes[nid] = 1  # placeholder breaks cycles (recursive anchors)
        stack.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, False) for c in children if isinstance(c, dict | list) and id(c) not in sizes)
    if not isinstance(root, dict | list):
        return 1, 1
    return sizes[id(root)], written


_REEXPORT = "refusing a possible alias bomb; export the cluster again with kubectl or dra-migrate snapshot"


def check_aliases(doc: Any, name: str, hint: str = _REEXPORT) -> None:
    """Refuse a document whose aliases expand it far beyond what it holds: every walk after this one (the
    tool's checks, convert's rewrite) would pay for the expansion, exponentially in a billion-laughs text."""
    expanded, written = _expanded_size(doc)
    if expanded - written > MAX_ALIAS_EXPANSION:
        raise InputError(f"{name}: YAML aliases expand this document to {expanded:,} nodes ({written:,} written)", hint)


# Deeper nesting is refused before the document is built: a Kubernetes object is a few dozen levels deep,
# and both the C parser's callers and any recursive walk after it have stack limits (60,000 levels crashed).
MAX_DEPTH = 200


def nesting_bound(text: str) -> int:
    """An upper bound on how deep the YAML text nests, in one pass over its lines, without parsing.

    Each block level is at least one column of indentation or one `- `/`? ` marker on its line; flow
    levels are brackets, which may span lines. Brackets inside quotes count too, so the bound is loose,
    and only a text over the limit is measured exactly (`nesting_exceeds`).
    """
    worst = flow = 0
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        markers = stripped.count("- ") + stripped.count("? ") + stripped.count(": ")
        flow += stripped.count("[") + stripped.count("{")
        worst = max(worst, 2 * indent + markers + flow + 1)
        flow = max(0, flow - stripped.count("]") - stripped.count("}"))
    return worst


def nesting_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether the YAML text nests collections deeper than `limit`: read from the parser's event stream
    (a state machine with a heap stack, not recursion), stopping as soon as the limit is passed.

    Text that is not YAML before it gets that deep answers False: the caller's loader then stops at the
    same error, with its line, before building anything (a caller that checked this outside its own
    error handling turned such text into an internal error: found by fuzzing `convert`)."""
    from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent

    if nesting_bound(text) <= limit:
        return False
    depth = 0
    try:
        for event in YAML(typ="safe", pure=True).parse(text):
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > limit:
                    return True
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
    except YAMLError:
        return False
    return False


def parser_stopped(e: Exception) -> str:
    """What to say when ruamel's round-trip parser stops on text with an exception of its own internals
    rather than a YAMLError: an AssertionError gathering comments (ruamel/yaml/scanner.py
    `_gather_comments`), a TypeError hashing a tagged map used as a key. Both were found by fuzzing
    (tools/fuzz): the text is still text it could not read, refused with one line, the type named so that
    a failure of ours would still show."""
    detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"the YAML parser stopped on it ({type(e).__name__}{': ' + detail if detail else ''})"


def _flat(text: str) -> str:
    """ruamel's messages span lines (the mark, a snippet); an error is one line."""
    return " ".join(text.split())


def _timestamps_checked(base: type[SafeConstructor]) -> type[SafeConstructor]:
    """`base` whose timestamps that are no date (`2027-13-45`, `0000-01-01`) are a YAML error at their line.

    YAML 1.1 resolves any scalar shaped like a date to a timestamp, and ruamel then builds a datetime from
    it, raising ValueError (not a YAMLError) for a month 13 or a year 0: an internal error in every
    reader of YAML (snapshot, convert, ignore and template files; found by fuzzing with atheris)."""

    class Checked(base):  # type: ignore[valid-type,misc]
        def construct_yaml_timestamp(self, node: Any, values: Any = None) -> Any:
            # A UTC offset of a day or more (`+99:00`) is no timezone: ruamel.yaml 0.19 builds one and Python
            # raises ValueError; 0.18.0 subtracts it from the time instead (ruamel/yaml/constructor.py and
            # util.py create_timestamp at 0.18.0), silently reading another date. Refused on both.
            match = self.timestamp_regexp.match(node.value) if isinstance(node.value, str) else None
            if match is not None and match.group("tz_hour"):
                offset = int(match.group("tz_hour")) * 60 + int(match.group("tz_minute") or 0)
                if offset >= 24 * 60:
                    raise ConstructorError(
                        None,
                        None,
                        f"{node.value!r} has the form of a timestamp but is no date (a UTC offset of a day or"
                        " more); quote it",
                        node.start_mark,
                    )
            try:
                return super().construct_yaml_timestamp(node, values)
            except (ValueError, OverflowError) as e:
                raise ConstructorError(
                    None,
                    None,
                    f"{node.value!r} has the form of a timestamp but is no date ({e}); quote it",
                    node.start_mark,
                ) from e

    Checked.add_constructor("tag:yaml.org,2002:timestamp", Checked.construct_yaml_timestamp)
    return Checked


SAFE_CONSTRUCTOR = _timestamps_checked(SafeConstructor)
ROUND_TRIP_CONSTRUCTOR = _timestamps_checked(RoundTripConstructor)


def safe_yaml(*, pure: bool = False) -> YAML:
    """ruamel's safe loader with timestamps checked (every reader of user YAML loads with this)."""
    yaml = YAML(typ="safe", pure=pure)
    yaml.Constructor = SAFE_CONSTRUCTOR
    return yaml


def load_yaml_documents(text: str, name: str) -> Iterator[Any]:
    """Every document of a YAML stream, as plain dicts/lists. Errors name the file and line."""
    yaml = safe_yaml()
    try:
        if nesting_exceeds(text):
            raise InputError(
                f"{name}: nested deeper than {MAX_DEPTH} levels", "no Kubernetes object nests so deep; fix the file"
            )
        for doc in yaml.load_all(text):
            if doc is None:
                continue
            check_aliases(doc, name)
            yield doc
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = _flat(e.problem or e.context or "invalid YAML")
        raise InputError(f"{where}: {problem}", "fix the file or export it again") from e
    except YAMLError as e:
        raise InputError(f"{name}: invalid YAML ({_flat(str(e))})", "fix the file or export it again") from e
    except RecursionError as e:
        raise InputError(f"{name}: YAML nested too deeply", "fix the file or export it again") from e


class _CachedTagRepresenter(SafeRepresenter):
    """SafeRepresenter that reuses one Tag per tag string.

    ruamel.yaml builds a new Tag for every scalar, mapping and sequence and URI-decodes its suffix
    character by character on first use: a third of the time of dumping a 2,000-node plan.
    """

    _tags: ClassVar[dict[str, Tag]] = {}

    def _tag(self, tag: Any) -> Any:
        if isinstance(tag, str):
            cached = self._tags.get(tag)
            if cached is None:
                cached = self._tags[tag] = Tag(suffix=tag)
            return cached
        return tag

    def represent_scalar(self, tag: Any, value: Any, style: Any = None, anchor: Any = None) -> Any:
        return super().represent_scalar(self._tag(tag), value, style, anchor)

    def represent_sequence(self, tag: Any, sequence: Any, flow_style: Any = None) -> Any:
        return super().represent_sequence(self._tag(tag), sequence, flow_style)

    def represent_mapping(self, tag: Any, mapping: Any, flow_style: Any = None) -> Any:
        return super().represent_mapping(self._tag(tag), mapping, flow_style)


class _UnaliasedRepresenter(_CachedTagRepresenter):
    """Writes an object met twice twice: pieces of one document dumped apart must not each define the
    same anchor (`&id001`), which PyYAML refuses as a duplicate."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dumper(*, keep_order: bool = True, width: int = 4096, aliases: bool = True) -> YAML:
    """A safe YAML dumper (C emitter when ruamel.yaml.clib is installed), in block style, keeping the
    mapping order we built (deterministic output) and long lines whole (stable, greppable diffs)."""
    yaml = YAML(typ="safe", pure=False)
    yaml.Representer = _CachedTagRepresenter if aliases else _UnaliasedRepresenter
    yaml.default_flow_style = False
    yaml.width = width
    if keep_order:
        yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    return yaml


def dump_yaml(
    doc: Any, *, keep_order: bool = True, explicit_start: bool = False, width: int = 4096, aliases: bool = True
) -> str:
    """One document as block-style YAML text (`dumper`); `keep_order=False` sorts mapping keys."""
    import io

    yaml = dumper(keep_order=keep_order, width=width, aliases=aliases)
    yaml.explicit_start = explicit_start
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()
