"""Credentials never leave the tool: every message that may quote an API error or a URL passes through
`scrub` before it is printed, journaled into a report, or logged.

Kept at the bottom of the layers (it imports nothing of ours) so the cluster readers, the executor,
`status` and the reports all use the one list of patterns.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"

# Bearer tokens and JWTs (service-account tokens are JWTs), HTTP Basic credentials, and key=value
# secrets: never copied from an error message.
_SECRETS = (
    # An Authorization header of any scheme (RFC 9110 §11.6.2): "Authorization: Negotiate abc", JSON or not.
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?(?:[A-Za-z][\w.-]*\s+)?)[^\s\"',}]+"),
    re.compile(r"(?i)(bearer\s+)[^\s\"',}]+"),
    re.compile(r"(?i)(basic\s+)[A-Za-z0-9+/=_-]{4,}"),
    re.compile(r"(?i)(--(?:token|password|client-secret|api-key)[= ]\s*)\S+"),
    re.compile(r"(?i)((?:api[_-]?key|client[_-]?secret|x-api-key)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
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


def scrub_all(value: Any) -> Any:
    """Every string in a JSON-like value scrubbed (maps and lists copied)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: scrub_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_all(v) for v in value]
    return value


def scrub_failure(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A journal record's fields with its failure's `error` and `details` scrubbed. They quote the API server, a
    proxy or a webhook, and the journal outlives the run (the in-cluster one is read by anyone who can read
    ConfigMaps in its namespace). Nothing else: `before`/`after` are the values a rollback writes back."""
    return {k: scrub_all(v) if k in ("error", "details") else v for k, v in fields.items()}


class ScrubFilter(logging.Filter):
    """A logging filter that scrubs every record's message (its arguments merged in first), so no log line
    on stderr or in a log file carries a credential an API error quoted."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def scrub_logs(*handlers: logging.Handler) -> None:
    """Install the filter on these handlers (the root logger's when none are given)."""
    for handler in handlers or tuple(logging.getLogger().handlers):
        if not any(isinstance(f, ScrubFilter) for f in handler.filters):
            handler.addFilter(ScrubFilter())
