"""Rewrites of a parsed selector into what celpy evaluates as cel-go does (the tree is celpy's lark tree)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lark

from dra_migrate.dra.cel.types import _ident_name, _unwrap

_SET_LITERALS = {"INT_LIT", "UINT_LIT", "FLOAT_LIT", "STRING_LIT", "MLSTRING_LIT", "BOOL_LIT"}


def rewrite_set_membership(tree: lark.Tree[Any], call: Callable[[], lark.Tree[Any]]) -> None:
    """`x in [primitive literals]` as `__in_set(x, [...])`: cel-go looks `x` up in a Go map built from such a
    list (interpreter/decorators.go maybeOptimizeSetMembership: non-empty, primitive, not bytes), which errors
    on an unhashable `x` (operators._in_set). `call()`: `__in_set(__p0, __p1)` compiled."""
    for node in list(tree.iter_subtrees()):
        if node.data != "relation" or len(node.children) != 2:
            continue
        op, right = node.children
        if not (isinstance(op, lark.Tree) and op.data == "relation_in" and isinstance(right, lark.Tree)):
            continue
        inner = right
        while inner.data != "list_lit" and len(inner.children) == 1 and isinstance(inner.children[0], lark.Tree):
            inner = inner.children[0]
        exprlist = inner.children[0] if inner.data == "list_lit" and inner.children else None
        items = exprlist.children if isinstance(exprlist, lark.Tree) else []
        literals = [_unwrap(i) for i in items if isinstance(i, lark.Tree)]
        if not items or len(literals) != len(items) or not all(_set_literal(x) for x in literals):
            continue
        template = call()
        while template.data != "relation":
            template = template.children[0]
        splice(template, "__p0", lark.Tree("operand", [op.children[0]]))
        splice(template, "__p1", lark.Tree("operand", [right]))
        node.children = template.children


def _set_literal(node: lark.Tree[Any]) -> bool:
    tok = node.children[0] if node.data == "literal" and node.children else None
    return isinstance(tok, lark.Token) and tok.type in _SET_LITERALS


def splice(tree: lark.Tree[Any], placeholder: str, replacement: Any) -> None:
    for node in tree.iter_subtrees():
        if node.data == "expr" and _ident_name(node) == placeholder:
            node.children = list(replacement.children)
            return
    raise AssertionError(f"placeholder {placeholder} not found")  # pragma: no cover
