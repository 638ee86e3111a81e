"""A container's probes and lifecycle hooks run commands and send HTTP headers: credentials live there too.

core/v1 `Container` (k8s.io/api@v0.37.2 core/v1/types.go) has `livenessProbe`, `readinessProbe` and
`startupProbe` (`Probe` embeds `ProbeHandler`: `exec.command`, `httpGet.httpHeaders[].value`) and
`lifecycle.postStart`/`preStop` (`LifecycleHandler`: the same `exec` and `httpGet`). A probe such as
`mysqladmin ping -u root -pPASSWORD` or an `Authorization: Bearer ...` header was written into the snapshot
while `args` and `command` beside it were redacted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dra_migrate.cluster.redact import REDACTED, for_snapshot
from tests.unit.helpers import container, obj, pod_spec, template

SECRET = "hunter2-db-password"
TOKEN = "opaque-probe-token-7f3a"


def _handler() -> dict[str, Any]:
    return {
        "exec": {"command": ["sh", "-c", f"mysqladmin ping -u root -p{SECRET}"]},
    }


def _http() -> dict[str, Any]:
    return {
        "httpGet": {
            "path": "/healthz",
            "port": 8080,
            "httpHeaders": [{"name": "Authorization", "value": TOKEN}, {"name": "X-Team", "value": "vision"}],
        }
    }


def _hooked() -> dict[str, Any]:
    return container(
        requests={"nvidia.com/gpu": 1},
        livenessProbe={**_handler(), "periodSeconds": 10},
        readinessProbe=_http(),
        startupProbe=_handler(),
        lifecycle={"postStart": _handler(), "preStop": _http()},
    )


def _workloads() -> list[dict[str, Any]]:
    dep = obj("apps/v1", "Deployment", "db", {"template": template(pod_spec(_hooked(), init=[_hooked()]))})
    pod = obj("v1", "Pod", "db-0", pod_spec(_hooked()))
    # A CRD the template table does not know: only the second net (container-like maps) sees it.
    crd = obj("example.com/v1", "Trainer", "t", {"workers": {"main": {"image": "x", **_hooked()}}})
    return [dep, pod, crd]


@pytest.mark.parametrize("workload", _workloads(), ids=lambda o: str(o["kind"]))
def test_probe_and_hook_commands_and_header_values_are_redacted(workload: dict[str, Any]) -> None:
    kept = for_snapshot(workload, keep_env=False)
    assert kept is not None
    text = json.dumps(kept)
    assert SECRET not in text
    assert TOKEN not in text
    # What the checks may read stays: the probe's kind, path, port, timing and header names.
    assert '"periodSeconds": 10' in text and '"/healthz"' in text and '"Authorization"' in text
    assert REDACTED in text


def test_keep_env_keeps_probe_commands() -> None:
    kept = for_snapshot(obj("v1", "Pod", "db-0", pod_spec(_hooked())), keep_env=True)
    assert kept is not None and SECRET in json.dumps(kept)
