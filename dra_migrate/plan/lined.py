"""The strict plan reader: ruamel's round-trip parser, which knows every key's line.

Imported by `io` only when the fast reader (`fastyaml`) leaves a file to it (a refusal's line comes from
`fastyaml.load_lined` where the fast reader read the file): `show` and `diff` never load ruamel (about
2 MB of `show`'s memory at any size; issue 29 holds `show` to 5x the file). `status` and `apply` read the
cluster too, whose YAML reader (`cluster/yamlio.py`) is ruamel's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.composer import Composer, ComposerError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from ruamel.yaml.nodes import ScalarNode

from dra_migrate.cluster.yamlio import ROUND_TRIP_CONSTRUCTOR, parser_stopped
from dra_migrate.errors import InputError
from dra_migrate.plan.wire import INT_MAX, INT_MIN, REGENERATE, line_of

Lined = CommentedMap  # a plan document as this reader gives it: values with their lines (`wire.line_of`)
_MERGE_TAG = "tag:yaml.org,2002:merge"
# Deepest nesting a plan has is about 12 (a DeviceClass manifest inside a step); far deeper is hostile.
_MAX_DEPTH = 64


class _StrictComposer(Composer):
    """Refuses what the tool never writes and a digest could not see: anchors and aliases (one edit that
    changes many places, or an alias bomb), explicit tags (`!!binary`, `!!set`, `!!python/...`) and
    merge keys (`<<`, whose merged values hide behind the keys they fill)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.parser.peek_event()
        if isinstance(event, AliasEvent):
            raise ComposerError(None, None, "YAML aliases are not allowed in a plan", event.start_mark)
        if isinstance(event, ScalarEvent | CollectionStartEvent):
            if event.anchor is not None:
                raise ComposerError(None, None, "YAML anchors are not allowed in a plan", event.start_mark)
            tag = event.ctag
            if tag is not None and str(tag) != "!":
                raise ComposerError(None, None, f"explicit YAML tags ({tag}) are not allowed", event.start_mark)
        node = super().compose_node(parent, index)
        if isinstance(node, ScalarNode) and str(node.tag) == _MERGE_TAG:
            raise ComposerError(None, None, "YAML merge keys (<<) are not allowed in a plan", node.start_mark)
        return node


def strict(text: str, path: Path) -> CommentedMap:
    """The round-trip reading: refuses with the line of the first problem."""
    doc = parse(text, path)
    check_values(doc, path)
    return doc


def parse(text: str, path: Path) -> CommentedMap:
    yaml = YAML(typ="rt")
    yaml.Composer = _StrictComposer
    yaml.Constructor = ROUND_TRIP_CONSTRUCTOR  # a timestamp that is no date is a YAML error at its line
    yaml.max_depth = _MAX_DEPTH
    try:
        doc = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = str(e.problem or e.context or "invalid YAML").splitlines()[0]
        raise InputError(f"{where}: not a valid plan file ({problem})", REGENERATE) from e
    except YAMLError as e:  # reader errors (control characters) and the like
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise InputError(f"{path}: not a valid plan file ({first})", REGENERATE) from e
    except RecursionError as e:
        raise InputError(f"{path}: not a valid plan file (nested too deeply)", REGENERATE) from e
    except TypeError as e:  # ruamel on a collection as a mapping key (`? [a]`): unhashable
        raise InputError(f"{path}: not a valid plan file (a mapping key that is not a string)", REGENERATE) from e
    except Exception as e:  # only ruamel runs here: its internals stopped on this text
        raise InputError(f"{path}: not a valid plan file ({parser_stopped(e)})", REGENERATE) from e
    if not isinstance(doc, CommentedMap):
        raise InputError(f"{path}: not a plan (expected a mapping)", REGENERATE)
    return doc


def check_values(doc: CommentedMap, path: Path) -> None:
    """Only what the tool writes: string keys; strings, integers, finite floats, booleans and nulls."""
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(node, dict) and not isinstance(key, str):
                raise InputError(f"{_at(path, node, key)}: a mapping key that is not a string ({key!r})", REGENERATE)
            if isinstance(value, dict | list):
                if type(value) not in (CommentedMap, CommentedSeq):  # !!omap, !!set and other constructed types
                    raise InputError(f"{_at(path, node, key)}: a {type(value).__name__} value", REGENERATE)
                stack.append(value)
            elif isinstance(value, float):
                if not math.isfinite(value):
                    raise InputError(
                        f"{_at(path, node, key)}: {value!r} is not a value a plan can hold (NaN or infinity)",
                        REGENERATE,
                    )
            elif isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
                raise InputError(f"{_at(path, node, key)}: the integer {value} is out of range", REGENERATE)
            elif not (value is None or isinstance(value, str | int | bool)):
                raise InputError(
                    f"{_at(path, node, key)}: a {type(value).__name__} value; plans hold strings, numbers, "
                    "booleans and nulls (quote it)",
                    REGENERATE,
                )


def _at(path: Path, node: Any, key: Any) -> str:
    return f"{path}:{line_of(node, key)}"
