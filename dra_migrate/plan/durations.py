"""Durations as plans write them ("90s", "5m", "1h30m"): read and bounded. Apart from `params.py` (which
re-exports them) so that reading a plan, `show` above all, does not import the planning parameters: a module is
memory, and issue 29 holds `show`'s peak to 5x the plan file.
"""

from __future__ import annotations

import re

from dra_migrate.errors import InputError

# ASCII digits only (`\d` would take "٣m"), whole string only (`$` would take a trailing newline), and
# short: a timeout longer than MAX_DURATION is refused anyway, so no number needs more than 6 digits.
_DURATION_RE = re.compile(r"(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,6})s)?", re.ASCII)
_DURATION_HINT = "write it like 90s, 5m or 1h30m"
# Longest timeout or soak a plan may carry: longer is a typo (`1e9h`, `300h`), not a plan.
MAX_DURATION = 24 * 3600


def parse_duration(text: str) -> int:
    """ "1h30m", "5m", "0s" -> seconds (Go duration subset: h, m, s; no sign, no spaces, no fractions)."""
    m = _DURATION_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None or not any(m.groups()):
        raise InputError(f"bad duration {text!r}", _DURATION_HINT)
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


def checked_duration(name: str, text: object, *, zero_ok: bool = False) -> int:
    """A duration apply can wait for: parsable, positive (or 0 where `zero_ok`), at most MAX_DURATION.
    `name` is what the user wrote it as (an option or a plan field), for the message."""
    try:
        seconds = parse_duration(text)  # type: ignore[arg-type]  # anything but a str is refused inside
    except InputError:
        raise InputError(f"bad {name} {text!r}: not a duration", _DURATION_HINT) from None
    if seconds == 0 and not zero_ok:
        raise InputError(f"bad {name} {text!r}: must be longer than 0s", _DURATION_HINT)
    if seconds > MAX_DURATION:
        raise InputError(f"bad {name} {text!r}: longer than 24h", "give at most 24h")
    return seconds
