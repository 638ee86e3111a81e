"""Credentials never leave the tool: every message that may quote an API error or a URL passes through
`scrub` before it is printed, journaled into a report, or logged.

Kept at the bottom of the layers (it imports nothing of ours) so the cluster readers, the executor,
`status` and the reports all use the one list of patterns.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

# Bearer tokens and JWTs (service-account tokens are JWTs), HTTP Basic credentials, and key=value
# secrets: never copied from an error message.
_SECRETS = (
    re.compile(r"(?i)(bearer\s+)\S+"),
    re.compile(r"(?i)(basic\s+)[A-Za-z0-9+/=]{4,}"),
    re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
    re.compile(r"(?i)((?:token|password|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
    re.compile(r"(?i)(\w+://[^/\s:@]+:)[^@\s/]+(?=@)"),  # user:password@ in a URL
)


def scrub(text: str | None) -> str | None:
    """The text with every credential replaced by <redacted> (None stays None)."""
    if text is None:
        return None
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text
