"""`--debug` prints a failure's traceback: scrubbed as the one-line error is.

The traceback ends with the exception's message (and each chained exception's), which quotes the API server or
whatever answered for it: an authenticating proxy's 401 that echoes the bearer token, a kubeconfig's `--token`.
The `error:` line was scrubbed (`secrets.scrub`); the traceback above it printed the same text raw.
"""

from __future__ import annotations

from typing import Any

import pytest

from dra_migrate.errors import ClusterError
from tests.unit.cli import run

JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"


def _boom(*_args: Any, **_kwargs: Any) -> Any:
    try:
        raise ValueError(f"proxy said: Authorization: Bearer {JWT}")
    except ValueError as e:  # chained: the traceback prints the cause's message too
        raise ClusterError(f"GET /api: 401 Unauthorized 'bad token {JWT}'", "check the kubeconfig") from e


def _internal(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError(f"bug while reading token={JWT}")


@pytest.mark.parametrize("boom", [_boom, _internal], ids=["known", "internal"])
def test_debug_traceback_is_scrubbed(monkeypatch: Any, boom: Any) -> None:
    import dra_migrate.cli.inventory as inventory

    monkeypatch.setattr(inventory, "load_state", boom)
    r = run("--debug", "inventory", "--snapshot", "fixtures/clusters/demo.yaml")
    assert r.code == 1
    assert "Traceback" in r.stderr and "<redacted>" in r.stderr  # still printed, minus the credential
    assert JWT not in r.stderr
