"""stdout and stderr whose encoding cannot hold every character the tool writes.

Tables and messages use a few typographic characters (middle dot, multiplication sign, ellipsis,
arrow: `PLAIN`). A terminal or pipe whose encoding lacks them (a legacy `LANG=en_US.ISO-8859-1` locale,
`PYTHONIOENCODING=ascii`, a Windows code page a pipe is given) made every command that printed one end in
"internal error: UnicodeEncodeError" after its work was done. Such a stream now writes each in plain ASCII
(`PLAIN`), and any other character it cannot hold as a `\\uXXXX` escape (valid inside a JSON string, so
`-o json` stays JSON). Files the tool writes (`--out`) are UTF-8 whatever the locale; a UTF-8 stream is left
as it is.
"""

from __future__ import annotations

import codecs
import io
import sys

ERRORS = "dra_migrate_plain"

PLAIN = {
    "·": "-",
    "×": "x",
    "–": "-",
    "—": "-",
    "…": "...",
    "→": "->",
    "←": "<-",
    "≤": "<=",
    "≥": ">=",
    "µ": "u",
    "§": "S",
    "²": "2",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
}


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _plain(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(PLAIN.get(ch) or _escape(ch) for ch in text), error.end


def tolerate_narrow_encodings() -> None:
    """Make stdout and stderr write what their encoding lacks as ASCII instead of raising."""
    codecs.register_error(ERRORS, _plain)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not _holds_everything(stream.encoding):
            stream.reconfigure(errors=ERRORS)


def _holds_everything(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name in ("utf-8", "utf-16", "utf-32", "utf-8-sig")
    except LookupError:
        return False
