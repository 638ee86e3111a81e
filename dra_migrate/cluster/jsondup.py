"""Duplicate keys in JSON are refused as they are in YAML (ruamel refuses them there).

orjson, like every fast JSON parser, keeps the last of two equal keys in one object, silently: a snapshot
whose Pod says `"nodeName": "a", "nodeName": "b"` would be read as on node b, while the YAML of the same
object is refused. A repeated key is found without slowing the common case: the parsed document,
serialised again, is the text itself (as orjson wrote it), or has exactly one `":` per key; the text has
more only when a key was dropped (or when it writes keys or escapes differently — `"k" :` or a `\\u`
escape — and then Python's C scanner, which hands every pair to a hook, decides).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def as_written(data: bytes, doc: Any) -> bool:
    """Whether `data` is `doc` as orjson writes it (what `dra-migrate snapshot` writes), but for
    whitespace after it. Such text lost no key to a repeat, and escapes nothing but `"`, `\\` and control
    characters (the escapes RFC 8259 §7 requires; orjson writes UTF-8, never `\\u` for other characters:
    tests/unit/test_snapshot_io.py holds this), so any other character stands in it as itself."""
    try:
        again = orjson.dumps(doc)
    except orjson.JSONEncodeError:
        return False  # nested past orjson's limit
    return data.startswith(again) and not data[len(again) :].strip()


def duplicate_key(data: bytes, doc: Any) -> str | None:
    """The first key `data` (the JSON text `doc` was parsed from) repeats within one object, or None."""
    try:
        again = orjson.dumps(doc)
        # Text that is its own document serialised again (`as_written`) lost no key: one comparison at
        # memory speed instead of two counts (issue 29).
        if data.startswith(again) and not data[len(again) :].strip():
            return None
        if b"\\u" not in data and data.count(b'":') == again.count(b'":'):
            return None
    except orjson.JSONEncodeError:
        pass  # nested past orjson's limit: the exact check decides (depth is refused on its own)
    found: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs) and not found:
            seen: set[str] = set()
            found.append(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
        return out

    try:
        json.loads(data, object_pairs_hook=pairs_hook)
    except RecursionError:
        return None  # too deep to look into: the depth checks refuse it with their own line
    return found[0] if found else None
