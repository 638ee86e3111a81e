"""A JSON Lines snapshot the tool wrote is read by cluster/sealed.py's fast reader: the same state, the same
refusals, as the full path (cluster/snapshot.py) reading the same lines; an edited file is read again with
every check; a file cut short is refused."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_migrate.cluster import sealed, snapshot
from dra_migrate.cluster.snapshot import load_snapshot, write_snapshot
from dra_migrate.errors import InputError

HEADER = {"apiVersion": "dra-migrate.io/v1alpha1", "kind": "ClusterSnapshot", "metadata": {"context": "c"}}
NODE = {
    "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n1"},
    "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}},
}  # fmt: skip
GPU_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train", "namespace": "ml", "uid": "u1", "resourceVersion": "7", "labels": {"app": "t"},
                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j1",
                                      "controller": True}],
                 "annotations": {"a": "b"}},
    "spec": {"nodeName": "n1", "schedulerName": "default-scheduler", "priorityClassName": "high",
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
             "containers": [{"name": "c", "image": "i", "resources": {
                 "limits": {"cpu": "1", "nvidia.com/gpu": "2"}, "requests": {"memory": "1Gi"}}}],
             "initContainers": [{"name": "s", "restartPolicy": "Always",
                                 "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
             "volumes": [{"name": "v", "emptyDir": {}}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}  # fmt: skip
CPU_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web", "namespace": "ml", "uid": "u2", "resourceVersion": "8", "labels": {"app": "w"}},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {"phase": "Running"},
}  # fmt: skip
TOLERATING_POD = {  # names nvidia.com/ in its text, uses no devices
    **copy.deepcopy(CPU_POD),
    "metadata": {"name": "tol", "namespace": "ml", "uid": "u3"},
    "spec": {"nodeName": "n1", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
             "containers": [{"name": "c"}]},
}  # fmt: skip
DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml", "uid": "d1"},
    "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {
        "limits": {"nvidia.com/gpu": "1"}}}]}}},
}  # fmt: skip
OBJECTS = [NODE, DEPLOYMENT, GPU_POD, CPU_POD, TOLERATING_POD]


def sealed_file(tmp_path: Path, objects: list[dict[str, Any]], name: str = "s.jsonl") -> Path:
    out = io.BytesIO()
    write_snapshot(out, HEADER, objects, "jsonl")
    path = tmp_path / name
    path.write_bytes(out.getvalue())
    return path


def outcome(read: Any) -> Any:
    """What a read gives: the state's content, or the refusal's words."""
    try:
        state = read()
    except InputError as e:
        return ("refused", str(e))
    return (
        "read", state.objects, dict(state.other_pods), state.other_pods_read, dict(state.skipped),
        state.source.context,
    )  # fmt: skip


def fast_then_full(path: Path) -> tuple[Any, Any]:
    """How the file reads, and how it reads once its first line no longer announces the closing line: the
    full path, every line parsed whole and checked (the same path, so that refusals name the same file)."""
    fast = outcome(lambda: load_snapshot(path))
    lines = path.read_bytes().splitlines(keepends=True)
    head = orjson.loads(lines[0])
    del head["metadata"]["closedBy"]
    path.write_bytes(orjson.dumps(head) + b"\n" + b"".join(lines[1:]))
    return fast, outcome(lambda: load_snapshot(path))


def test_the_writer_announces_and_writes_the_closing_line(tmp_path: Path) -> None:
    lines = sealed_file(tmp_path, OBJECTS).read_bytes().splitlines(keepends=True)
    head, end = orjson.loads(lines[0]), orjson.loads(lines[-1])
    assert head["metadata"]["closedBy"] == "ClusterSnapshotEnd" and head["metadata"]["context"] == "c"
    assert end["kind"] == "ClusterSnapshotEnd" and end["objects"] == len(OBJECTS) == len(lines) - 2
    seal = sealed.Seal(lines[0])
    for line in lines[1:-1]:
        seal.add(line)
    assert seal.matches(lines[-1])


def test_the_fast_reader_decodes_every_key_a_kept_pod_keeps() -> None:
    from msgspec.structs import fields

    from dra_migrate.cluster.state import POD_META_KEYS, POD_SPEC_KEYS, POD_STATUS_KEYS

    for struct, keys in (
        (sealed._Meta, POD_META_KEYS),
        (sealed._Spec, POD_SPEC_KEYS),
        (sealed._Status, POD_STATUS_KEYS),
    ):
        assert set(keys) <= {f.name for f in fields(struct)}, struct
    # and, in the state's order, the annotations it keeps of a pod (cluster/state.py `kept_annotations`)
    from dra_migrate.cluster.podmeta import KEPT_POD_ANNOTATIONS

    assert tuple(key for _, key in sealed._ANNOTATION_FIELDS) == KEPT_POD_ANNOTATIONS
    assert [f.encode_name for f in fields(sealed._Annotations)] == list(KEPT_POD_ANNOTATIONS)


def test_a_sealed_file_reads_as_the_full_path_reads_it_without_parsing_its_pods_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sealed_file(tmp_path, OBJECTS)
    taken: list[str] = []
    real_take = snapshot._take
    monkeypatch.setattr(
        snapshot, "_take", lambda line, obj, *a, **k: taken.append(obj["kind"]) or real_take(line, obj, *a, **k)
    )
    fast, expected = fast_then_full(path)
    assert fast == expected
    assert expected[0] == "read" and [p["metadata"]["name"] for p in expected[1]["Pod"]] == ["train"]
    assert expected[2] == {"n1": 2} and expected[3] == 2
    # The pods were decoded by the fast reader; only the node and the workload were parsed whole.
    assert taken[: taken.index("ClusterSnapshot")] == ["Node", "Deployment"]  # then the full path's read


def test_an_edited_line_is_read_again_with_every_check(tmp_path: Path) -> None:
    path = sealed_file(tmp_path, [NODE, CPU_POD])
    text = path.read_bytes()
    # The hostile case of issue 28, made in a file the tool wrote: a key given twice, the closing line kept.
    edited = text.replace(b'"nodeName":"n1"', b'"nodeName":"n1","nodeName":"n2"', 1)
    assert edited != text
    path.write_bytes(edited)
    with pytest.raises(InputError, match="'nodeName' appears twice"):
        load_snapshot(path)


def test_a_file_cut_short_is_refused(tmp_path: Path) -> None:
    path = sealed_file(tmp_path, OBJECTS)
    lines = path.read_bytes().splitlines(keepends=True)
    for cut in (len(lines) - 1, len(lines) - 2, 1):
        path.write_bytes(b"".join(lines[:cut]))
        with pytest.raises(InputError, match="cut short"):
            load_snapshot(path)


def test_lines_after_the_closing_line_are_read_with_every_check(tmp_path: Path) -> None:
    path = sealed_file(tmp_path, [NODE, CPU_POD])
    other = {**copy.deepcopy(CPU_POD), "metadata": {"name": "late", "namespace": "ml", "uid": "u9"}}
    path.write_bytes(path.read_bytes() + orjson.dumps(other) + b"\n")
    state = load_snapshot(path)
    assert state.other_pods_read == 2 and not state.skipped
    path.write_bytes(path.read_bytes() + b'{"a":1,"a":2}\n')
    with pytest.raises(InputError, match="'a' appears twice"):
        load_snapshot(path)


def test_a_closing_line_in_a_file_that_does_not_announce_it_is_passed_over(tmp_path: Path) -> None:
    path = sealed_file(tmp_path, OBJECTS)
    lines = path.read_bytes().splitlines(keepends=True)
    head = orjson.loads(lines[0])
    del head["metadata"]["closedBy"]
    path.write_bytes(orjson.dumps(head) + b"\n" + b"".join(lines[1:]))
    state = load_snapshot(path)
    assert not state.skipped and state.other_pods_read == 2


# Every field the fast reader decodes, and some it skips, set to values of every JSON type: the fast reader
# must give what the full path gives, the same state or the same refusal, whichever path it takes.
PATHS = [
    ("metadata",), ("metadata", "name"), ("metadata", "namespace"), ("metadata", "uid"),
    ("metadata", "resourceVersion"), ("metadata", "labels"), ("metadata", "ownerReferences"),
    ("metadata", "deletionTimestamp"), ("metadata", "annotations"),
    ("metadata", "annotations", "karpenter.sh/do-not-disrupt"),
    ("metadata", "annotations", "cluster-autoscaler.kubernetes.io/safe-to-evict"), ("spec",), ("spec", "nodeName"),
    ("spec", "nodeSelector"), ("spec", "affinity"), ("spec", "tolerations"), ("spec", "resourceClaims"),
    ("spec", "schedulerName"), ("spec", "terminationGracePeriodSeconds"), ("spec", "containers"),
    ("spec", "initContainers"), ("spec", "containers", 0), ("spec", "containers", 0, "name"),
    ("spec", "containers", 0, "restartPolicy"), ("spec", "containers", 0, "resources"),
    ("spec", "containers", 0, "resources", "limits"), ("spec", "containers", 0, "resources", "requests"),
    ("spec", "containers", 0, "resources", "claims"),
    ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ("spec", "containers", 0, "resources", "requests", "nvidia.com/mig-1g.10gb"), ("status",), ("status", "phase"),
    ("status", "extendedResourceClaimStatus"), ("apiVersion",), ("kind",),
]  # fmt: skip
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", "8", "-1", "1k", "0.5", "x", "Pod", "v1",
                                                                      "Succeeded", "nvidia.com/gpu", "true", "false",
                                                                      "\u00b2", "\u0661"]),  # digits to isdigit
    st.just([]), st.just([{}]), st.just({}), st.just({"nvidia.com/gpu": "1"}), st.just({"a": 1}),
    st.just({"a": "b"}), st.just([{"name": "c"}]), st.just([{"name": "claim"}]),
)  # fmt: skip


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> bool:
    for key in path[:-1]:
        if isinstance(key, int):
            if not isinstance(obj, list) or len(obj) <= key:
                return False
        elif not isinstance(obj, dict):
            return False
        elif key not in obj:
            obj[key] = {}
        obj = obj[key]
    if isinstance(path[-1], int):
        if not isinstance(obj, list) or len(obj) <= path[-1]:
            return False
    elif not isinstance(obj, dict):
        return False
    obj[path[-1]] = value
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.sampled_from([GPU_POD, CPU_POD, TOLERATING_POD]),
    changes=st.lists(st.tuples(st.sampled_from(PATHS), VALUES), min_size=1, max_size=3),
)
def test_any_pod_reads_as_the_full_path_reads_it(
    tmp_path: Path, base: dict[str, Any], changes: list[tuple[tuple[Any, ...], Any]]
) -> None:
    pod = copy.deepcopy(base)
    for path, value in changes:
        _set(pod, path, copy.deepcopy(value))  # st.just gives one object: never share it
    twin = {**copy.deepcopy(pod), "metadata": copy.deepcopy(pod.get("metadata"))}
    if isinstance(twin["metadata"], dict) and isinstance(twin["metadata"].get("name"), str):
        twin["metadata"]["name"] += "-2"  # a second copy that is no repeat of the first
    fast, full = fast_then_full(sealed_file(tmp_path, [NODE, pod, CPU_POD, twin], "h.jsonl"))
    assert fast == full


def test_a_directory_mixes_a_sealed_file_with_an_export_and_a_pod_in_both_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    sealed_file(snap, [NODE, CPU_POD, GPU_POD], "a.jsonl")
    other = {**copy.deepcopy(CPU_POD), "metadata": {**CPU_POD["metadata"], "uid": "another"}}
    (snap / "b.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": [other]}))
    with pytest.raises(InputError) as refused:
        load_snapshot(snap)
    assert f"{snap / 'b.json'}: Pod ml/web is also in {snap / 'a.jsonl'}:3 with another uid" in str(refused.value)
    (snap / "b.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": [CPU_POD]}))
    state = load_snapshot(snap)  # the very same version: read once
    assert state.other_pods_read == 1 and [p["metadata"]["name"] for p in state.of("Pod")] == ["train"]


def test_a_value_shared_between_pods_is_checked_for_each_field_it_stands_in() -> None:
    """Values a workload's pods repeat are parsed once per text and shared (`sealed._Shared`): "[]" is owner
    references, and no node selector. A table shared between fields read the second as the first."""
    pod = copy.deepcopy(GPU_POD)
    pod["metadata"]["ownerReferences"] = []
    pod["spec"]["nodeSelector"] = []
    reader = sealed.PodReader()
    assert reader.read(orjson.dumps(pod)) is None  # the full path refuses it, naming the field
    kept = [reader.read(orjson.dumps({**GPU_POD, "metadata": {**GPU_POD["metadata"], "name": n}})) for n in "ab"]
    assert isinstance(kept[0], dict) and isinstance(kept[1], dict)
    assert kept[0]["spec"]["tolerations"] is kept[1]["spec"]["tolerations"] == GPU_POD["spec"]["tolerations"]
    assert kept[0]["spec"]["containers"] is kept[1]["spec"]["containers"]


def test_the_texts_remembered_are_held_to_a_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pods that all differ (a Spark executor's id in its env) are read each for itself once the texts
    remembered reach the budget: the same values, no sharing, no more memory."""
    monkeypatch.setattr(sealed, "_BUDGET", 400)
    reader = sealed.PodReader()
    pods = []
    for i in range(6):
        pod = copy.deepcopy(GPU_POD)
        pod["metadata"]["name"] = f"p{i}"
        pod["spec"]["containers"][0]["env"] = [{"name": "EXECUTOR_ID", "value": str(i) * 50}]
        pods.append(reader.read(orjson.dumps(pod)))
    assert all(isinstance(p, dict) for p in pods)
    assert [p["spec"]["containers"] for p in pods] == [pods[0]["spec"]["containers"]] * 6  # env is not kept
    assert 0 <= reader._shared.budget < 400 and len(reader._shared._containers) < 6


def test_a_pod_in_two_sealed_files_is_read_once_naming_both_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fast reader hands a pod's line over as an int (`StateBuilder.lines_of`), not its "file:line":
    the warning still names both, line for line."""
    snap = tmp_path / "snap"
    snap.mkdir()
    a = sealed_file(snap, [NODE, CPU_POD, GPU_POD], "a.jsonl")
    b = sealed_file(snap, [DEPLOYMENT, GPU_POD, CPU_POD], "b.jsonl")
    state = load_snapshot(snap)
    assert state.other_pods_read == 1 and [p["metadata"]["name"] for p in state.of("Pod")] == ["train"]
    assert f"{b}:4: Pod ml/web is also in {a}:3 (same uid and version): read once" in caplog.text
    assert f"{b}:3: Pod ml/train is also in {a}:4 (same uid and version): read once" in caplog.text
