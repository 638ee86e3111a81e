"""Keeping a manifest's comments where its author put them while keys are deleted and inserted.

ruamel.yaml stores the full-line comments that follow a value with the key before them, so deleting or
inserting a key would move or drop them; these helpers carry them to the key they belong to.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken


def delete_key(m: dict[str, Any], key: str, carried: str = "") -> str:
    """Delete `key`, keeping the full-line comments ruamel attached to it (they belong to what follows).

    ruamel stores the comment lines after a value with the key before them; the first line of that token
    is the key's own end-of-line comment, which goes with it. Returns lines that found no new home.
    """
    ca = getattr(m, "ca", None)
    if ca is not None:
        keys = list(m)
        token = (ca.items.pop(key, None) or [None, None, None, None])[2]
        if isinstance(token, CommentToken) and "\n" in token.value:
            carried += token.value.split("\n", 1)[1]
        del m[key]
        i = keys.index(key)
        if carried and i > 0:
            append_comment(m, keys[i - 1], carried)
            carried = ""
        elif carried and i + 1 < len(keys):
            comment_before(m, keys[i + 1], carried)
            carried = ""
        return carried
    del m[key]
    return carried


def append_comment(m: Any, key: str, text: str) -> None:
    value = m[key]
    if isinstance(value, CommentedMap) and value:
        append_comment(value, list(value)[-1], text)
        return
    if isinstance(value, CommentedSeq) and value:
        last = value[-1]
        if isinstance(last, CommentedMap) and last:
            append_comment(last, list(last)[-1], text)
            return
    item = m.ca.items.setdefault(key, [None, None, None, None])
    token = item[2]
    if isinstance(token, CommentToken):
        token.value += text
    else:
        item[2] = CommentToken("\n" + text, CommentMark(0), None)


def comment_before(m: Any, key: str, text: str) -> None:
    item = m.ca.items.setdefault(key, [None, None, None, None])
    lines = [ln for ln in text.split("\n") if ln.strip()]
    tokens = [CommentToken(ln.strip() + "\n", CommentMark(len(ln) - len(ln.lstrip())), None) for ln in lines]
    item[1] = (item[1] or []) + tokens


def attach_after_last(m: CommentedMap, text: str) -> None:
    keys = list(m)
    if keys:
        append_comment(m, keys[-1], text)


def insert_after(m: Any, after: str | None, key: str, value: Any) -> None:
    """Insert `key` right after `after`, and carry the full-line comments that followed `after`'s value.

    Those comments were written above the next key (ruamel keeps them with the previous value's last
    scalar), so they must move below the inserted value to stay where the author put them.
    """
    keys = list(m)
    pos = keys.index(after) + 1 if after in keys else len(keys)
    if isinstance(m, CommentedMap):
        m.insert(pos, key, value)
    else:
        m[key] = value
    if after is None or not isinstance(m, CommentedMap):
        return
    holder, slot = last_leaf(m, after)
    if holder is None:
        return
    token = holder.ca.items.get(slot, [None, None, None, None])
    idx = 0 if isinstance(holder, CommentedSeq) else 2
    tok = token[idx] if len(token) > idx else None
    if isinstance(tok, CommentToken) and "\n" in tok.value:
        own, rest = tok.value.split("\n", 1)
        if rest.strip():
            tok.value = own + "\n"
            _PENDING[id(value)] = _PENDING.get(id(value), "") + rest


# Comment text waiting for an inserted collection to get its content (keyed by the collection's id).
_PENDING: dict[int, str] = {}


def move_trailing_comments(value: Any) -> None:
    text = _PENDING.pop(id(value), "")
    if not text or not value:
        return
    if isinstance(value, CommentedSeq):
        last = value[-1]
        if isinstance(last, CommentedMap) and last:
            append_comment(last, list(last)[-1], text)


def last_leaf(m: Any, key: Any) -> tuple[Any, Any]:
    """The collection and key/index whose comment slot holds what follows `m[key]`'s whole value."""
    holder, slot = m, key
    value = m[key]
    while True:
        if isinstance(value, CommentedMap) and value:
            holder, slot = value, list(value)[-1]
        elif isinstance(value, CommentedSeq) and value:
            holder, slot = value, len(value) - 1
        else:
            return holder, slot
        value = holder[slot]
