"""Annotations that hold a copy of the whole object, env values included, are not written into a snapshot.

The snapshot redacted container env values, args and commands, and dropped kubectl's last-applied copy, but
other appliers keep their own copy of what they applied in an annotation: k3s/RKE2 addons and Rancher's
wrangler apply, gzipped and base64-encoded (`objectset.rio.cattle.io/applied`); kapp (`kapp.k14s.io/original`);
and any tool's JSON copy of an object. The secret the spec had redacted was written beside it.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest

from dra_migrate.cluster.redact import for_snapshot
from tests.unit.helpers import container, obj, pod_spec, template

SECRET = "s3cret-db-password"


def _deployment(annotations: dict[str, str]) -> dict[str, Any]:
    c = container(requests={"nvidia.com/gpu": 1}, env=[{"name": "DB_PASSWORD", "value": SECRET}])
    dep = obj("apps/v1", "Deployment", "trainer", {"template": template(pod_spec(c))})
    dep["metadata"]["annotations"] = annotations
    return dep


_COPY = json.dumps(_deployment({}))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("objectset.rio.cattle.io/applied", base64.b64encode(gzip.compress(_COPY.encode())).decode()),
        ("kapp.k14s.io/original", _COPY),
        ("example.com/backup-of-spec", _COPY),  # any tool's JSON copy of an object
    ],
)
def test_an_annotation_that_copies_the_object_is_not_kept(key: str, value: str) -> None:
    kept = for_snapshot(_deployment({key: value, "team": "vision", "nvidia.com/gpu.product": "A100"}), keep_env=False)
    assert kept is not None
    assert SECRET not in json.dumps(kept), key
    assert kept["metadata"]["annotations"] == {"team": "vision", "nvidia.com/gpu.product": "A100"}


def test_an_annotation_of_json_that_is_not_an_object_copy_is_kept() -> None:
    notes = {"example.com/ports": '{"http": 8080}', "prometheus.io/scrape": "true"}
    kept = for_snapshot(_deployment(dict(notes)), keep_env=False)
    assert kept is not None and kept["metadata"]["annotations"] == notes
