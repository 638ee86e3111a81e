"""String and bytes literals read as cel-go reads them.

cel-go's grammar (github.com/google/cel-go v0.29.2 parser/gen/CEL.g4, ESCAPE_SEQUENCE) and its decoder
(parser/unescape.go) accept exactly: \\a \\b \\f \\n \\r \\t \\v \\\\ \\' \\" \\` \\?, \\x or \\X with two hex
digits, \\u with four, \\U with eight, and three octal digits \\[0-3][0-7][0-7]. Anything else after a
backslash (`\\.`, `\\d`, `\\s`...) is a syntax error, which is why kube-apiserver v1.37.2 rejects
`matches('^NVIDIA\\.H100')`: a regex escape in a CEL string must be written `\\\\.` or in a raw string
(r'^NVIDIA\\.H100'). Raw strings (r/R prefix) take backslashes literally; only triple-quoted strings may
span lines. In a string, \\x and octal escapes are code points; in bytes they are byte values and \\u, \\U
are UTF-8 encoded.

celpy's lexer is more lenient and its decoder differs (no \\?, \\X, \\`, \\U), so every literal token is
decoded here, refused when cel-go would refuse it, and replaced by a canonical spelling celpy decodes to
the same value.
"""

from __future__ import annotations

_SIMPLE = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34, "`": 96, "?": 63}
_HEX = set("0123456789abcdefABCDEF")


class LiteralError(ValueError):
    """The literal is not valid CEL; the message is cel-go's words where it has them."""


def _split(text: str) -> tuple[bool, bool, str, bool]:
    """(is bytes, is raw, body, triple-quoted) of a literal token."""
    i = 0
    is_bytes = is_raw = False
    while text[i] in "bBrR":
        if text[i] in "bB":
            is_bytes = True
        else:
            is_raw = True
        i += 1
    quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else text[i]
    body = text[i + len(quote) : len(text) - len(quote)]
    return is_bytes, is_raw, body, len(quote) == 3


def decode(text: str) -> str | bytes:
    """The value of a CEL string or bytes literal token; LiteralError where cel-go rejects it."""
    is_bytes, is_raw, body, triple = _split(text)
    if not triple and ("\n" in body or "\r" in body):
        raise LiteralError("newline in a single-quoted string literal")
    if is_raw:
        return body.encode() if is_bytes else body
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogatepass")
            i += 1
            continue
        i = _escape(body, i, is_bytes, out)
    if is_bytes:
        return bytes(out)
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as e:  # pragma: no cover - only code points are appended for strings
        raise LiteralError(f"invalid UTF-8 in string literal: {e}") from e


def _escape(body: str, i: int, is_bytes: bool, out: bytearray) -> int:
    """Decode the escape at body[i] ('\\') into out; the index after it."""
    e = body[i + 1 : i + 2]
    if e in _SIMPLE:
        out.append(_SIMPLE[e])
        return i + 2
    if e in ("x", "X", "u", "U"):
        n = {"x": 2, "X": 2, "u": 4, "U": 8}[e]
        digits = body[i + 2 : i + 2 + n]
        if len(digits) != n or not set(digits) <= _HEX:
            raise LiteralError(f"invalid escape sequence \\{e}{digits}")
        value = int(digits, 16)
        if e in "xX" and is_bytes:
            out.append(value)
        else:
            _code_point(value, out)
        return i + 2 + n
    if e in "0123":
        digits = body[i + 1 : i + 4]
        if len(digits) != 3 or not set(digits) <= set("01234567"):
            raise LiteralError(f"invalid octal escape sequence \\{digits}")
        value = int(digits, 8)
        if is_bytes:
            out.append(value)
        else:
            _code_point(value, out)
        return i + 4
    raise LiteralError(f"invalid escape sequence \\{e}" if e else "string literal ends in a backslash")


def _code_point(value: int, out: bytearray) -> None:
    if 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:
        raise LiteralError(f"invalid unicode code point {value:#x}")
    out += chr(value).encode("utf-8")


def canonical(value: str | bytes) -> str:
    """A literal token celpy decodes to exactly `value`: octal escapes (which celpy reads as cel-go does)
    for bytes, quotes, backslashes and control characters; everything else as itself."""
    if isinstance(value, bytes):
        return 'b"' + "".join(f"\\{b:03o}" for b in value) + '"'
    return '"' + "".join(f"\\{ord(c):03o}" if c in '"\\' or ord(c) < 32 or ord(c) == 127 else c for c in value) + '"'


def cel_string(value: str) -> str:
    """A CEL string literal (double-quoted) for `value`, valid for cel-go: for writing selectors."""
    out = []
    for c in value:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'
