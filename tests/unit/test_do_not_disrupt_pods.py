"""`pods-marked-do-not-disrupt`: pods whose owners asked, by Karpenter's or the cluster autoscaler's annotation,
that they not be interrupted, which the drain evicts anyway (an eviction reads neither annotation).

Before this rule `check` and `plan` said nothing of them, and a pod's annotations were not kept in the state at
all (cluster/state.py kept none), so no rule could have read them.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.checks.run import assess
from dra_migrate.cluster import snapshot
from dra_migrate.cluster.redact import for_snapshot
from dra_migrate.cluster.snapshot import load_snapshot, write_snapshot
from dra_migrate.errors import InputError
from tests.unit.helpers import container, pod, pod_spec
from tests.unit.test_checks import GPU, findings, gpu_node, make

RULE = "pods-marked-do-not-disrupt"
KARPENTER = "karpenter.sh/do-not-disrupt"
AUTOSCALER = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SPEC = pod_spec(container(limits={GPU: "1"}))  # a string, as the API writes it: the sealed fast path takes it
HEADER = {"apiVersion": "dra-migrate.io/v1alpha1", "kind": "ClusterSnapshot", "metadata": {"context": "c"}}


def marked(name: str, annotations: dict[str, Any] | None, node: str = "gpu-1", owner: str = "ReplicaSet") -> Any:
    p = pod(name, SPEC, node=node)
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": f"u-{name}", "controller": True}
    ]
    if annotations is not None:
        p["metadata"]["annotations"] = annotations
    return p


def flagged(*objects: dict[str, Any]) -> dict[str, list[str]]:
    """Each finding's pool and the pods it names."""
    out = {}
    for f in findings(make(*objects), RULE):
        assert f.severity.value == "warning" and len(f.pools) == 1
        out[f.pools[0]] = [str(o) for o in f.objects]
    return out


def test_both_annotations_are_flagged_per_pool_with_what_to_do() -> None:
    state = make(
        gpu_node("gpu-1", pool="h100"),
        gpu_node("gpu-2", pool="a100"),
        marked("karp", {KARPENTER: "true"}),
        marked("ca", {AUTOSCALER: "false"}, node="gpu-2"),
        marked("ca-wait", {AUTOSCALER: "on-completion"}, node="gpu-2"),
    )
    found = {f.pools[0]: f for f in findings(state, RULE)}
    assert sorted(found) == ["a100", "h100"]
    assert [str(o) for o in found["h100"].objects] == ["Pod ml/karp"]
    assert [str(o) for o in found["a100"].objects] == ["Pod ml/ca", "Pod ml/ca-wait"]
    h100 = found["h100"]
    assert "pool h100: 1 pod(s)" in h100.message and 'ml/karp (karpenter.sh/do-not-disrupt: "true")' in h100.message
    assert "evicts them anyway" in h100.message
    assert "--exclude-pools" in h100.remediation and "remove the annotation" in h100.remediation
    assert assess(state).scope_of(h100) == {"scope": "pool", "pools": ["h100"]}


@pytest.mark.parametrize(
    ("case", "annotations"),
    [
        ("absent", None),
        ("other annotations only", {"a": "b"}),
        ("karpenter false", {KARPENTER: "false"}),
        ("karpenter not exactly true (HasDoNotDisrupt compares the string)", {KARPENTER: "True"}),
        ("autoscaler true: safe to evict", {AUTOSCALER: "true"}),
    ],
)
def test_a_pod_not_marked_is_not_flagged(case: str, annotations: dict[str, Any] | None) -> None:
    assert flagged(gpu_node("gpu-1"), marked("p", annotations)) == {}, case


def test_pods_the_drain_does_not_evict_are_not_flagged() -> None:
    ds = marked("ds", {KARPENTER: "true"}, owner="DaemonSet")
    done = marked("done", {KARPENTER: "true"})
    done["status"]["phase"] = "Succeeded"
    going = marked("going", {AUTOSCALER: "false"})
    going["metadata"]["deletionTimestamp"] = "2026-12-06T10:00:00Z"
    mirror = marked("static", {KARPENTER: "true"}, owner="Node")
    mirror["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "x"
    kept = marked("kept", {KARPENTER: "true"})
    assert flagged(gpu_node("gpu-1"), ds, done, going, mirror, kept) == {"p": ["Pod ml/kept"]}


def test_a_pod_on_a_node_already_migrated_is_not_flagged() -> None:
    migrated = gpu_node(
        "gpu-1", **{"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-kubelet-plugin": "true"}
    )
    migrated["status"]["allocatable"].pop(GPU)
    assert flagged(migrated, marked("p", {KARPENTER: "true"})) == {}


def test_the_message_names_three_and_counts_the_rest() -> None:
    pods = [marked(f"p{i}", {KARPENTER: "true"}) for i in range(5)]
    (f,) = findings(make(gpu_node("gpu-1"), *pods), RULE)
    assert "5 pod(s)" in f.message and "and 2 more" in f.message and len(f.objects) == 5


def _snapshot_state(tmp_path: Path, objects: list[dict[str, Any]], sealed: bool) -> Any:
    kept = [for_snapshot(copy.deepcopy(o), keep_env=False) for o in objects]
    out = io.BytesIO()
    write_snapshot(out, HEADER, [o for o in kept if o is not None], "jsonl")
    path = tmp_path / f"s-{sealed}.jsonl"
    path.write_bytes(out.getvalue())
    if not sealed:  # the full path: every line parsed whole and checked
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(lines[0].replace(b'"closedBy"', b'"notClosedBy"') + b"".join(lines[1:]))
    return load_snapshot(path)


@pytest.mark.parametrize("sealed", [True, False])
def test_the_marks_survive_a_snapshot_and_its_reading(
    tmp_path: Path, sealed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redaction drops only annotations that copy an object; the state keeps these two keys of a pod's."""
    taken: list[str] = []
    real_take = snapshot._take
    monkeypatch.setattr(
        snapshot, "_take", lambda line, obj, *a, **k: taken.append(obj["kind"]) or real_take(line, obj, *a, **k)
    )
    p = marked("karp", {KARPENTER: "true", "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}'})
    state = _snapshot_state(tmp_path, [gpu_node("gpu-1"), p], sealed)
    (kept,) = state.of("Pod")
    assert taken == ["Node"] if sealed else "Pod" in taken  # the sealed file's pod was read by the fast path
    assert kept["metadata"]["annotations"] == {KARPENTER: "true"}
    assert [str(o) for f in findings(state, RULE) for o in f.objects] == ["Pod ml/karp"]


@pytest.mark.parametrize("sealed", [True, False])
@pytest.mark.parametrize("value", [True, 1, None, ["true"]])
def test_a_mark_that_is_not_a_string_is_refused_with_one_error(tmp_path: Path, sealed: bool, value: Any) -> None:
    p = marked("karp", {KARPENTER: value})
    with pytest.raises(InputError) as e:
        _snapshot_state(tmp_path, [gpu_node("gpu-1"), p], sealed)
    assert "metadata.annotations.karpenter.sh/do-not-disrupt" in str(e.value) and "must be a string" in str(e.value)
    assert str(e.value).count("must be") == 1


def test_annotations_that_are_not_a_map_are_refused() -> None:
    p = marked("karp", None)
    p["metadata"]["annotations"] = ["karpenter.sh/do-not-disrupt"]
    with pytest.raises(InputError, match=r"metadata\.annotations.*must be a map"):
        make(gpu_node("gpu-1"), p)
