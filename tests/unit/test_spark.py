"""The Kubeflow Spark operator's SparkApplication and ScheduledSparkApplication (sparkoperator.k8s.io/v1beta2).

They ask for GPUs with a field of their own, `spec.driver.gpu` / `spec.executor.gpu` = {name, quantity}
(kubeflow/spark-operator v2.3.0 api/v1beta2/sparkapplication_types.go GPUSpec), which the operator's webhook
writes into the Spark container's limits when the pod is made (internal/webhook/sparkpod_defaulter.go addGPU).
The driver pod's controller is the SparkApplication (addOwnerReference, pkg/util GetOwnerReference); each
executor's is the driver pod (Spark's BasicExecutorFeatureStep). Before, the kinds were not read: an application
with no pod running was no consumer at all, and its executors were counted under a bare Pod, the driver.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dra_migrate.cluster.kinds import KINDS_BY_KEY
from dra_migrate.cluster.redact import for_snapshot
from dra_migrate.cluster.templates import TemplateTable
from dra_migrate.convert.files import convert_text
from dra_migrate.convert.rewrite import ConvertOptions
from dra_migrate.errors import InputError
from tests.unit.helpers import container, obj, pod, pod_spec, readonly_role_lists, state, template
from tests.unit.test_consumers import GPU, consumers, gpu_node

ROOT = Path(__file__).resolve().parents[2]
SPARK = "sparkoperator.k8s.io/v1beta2"


def app(name: str = "etl", driver_gpus: int | None = 1, executor_gpus: int | None = 1, **executor: Any) -> Any:
    spec: dict[str, Any] = {"type": "Scala", "mode": "cluster", "driver": {"cores": 1}, "executor": dict(executor)}
    if driver_gpus is not None:
        spec["driver"]["gpu"] = {"name": GPU, "quantity": driver_gpus}
    if executor_gpus is not None:
        spec["executor"]["gpu"] = {"name": GPU, "quantity": executor_gpus}
    return obj(SPARK, "SparkApplication", name, spec)


def spark_pods(a: dict[str, Any], executors: int, gpus: int = 1) -> list[dict[str, Any]]:
    driver = pod(f"{a['metadata']['name']}-driver", pod_spec(container(limits={GPU: gpus})), owner=a)
    out = [driver]
    for i in range(executors):
        out.append(pod(f"{a['metadata']['name']}-exec-{i + 1}", pod_spec(container(limits={GPU: gpus})), owner=driver))
    return out


def test_a_spark_application_counts_its_driver_and_executors_gpus_and_owns_every_pod() -> None:
    a = app(instances=4)
    got = consumers(gpu_node("gpu-1"), a, *spark_pods(a, executors=4))
    assert list(got) == ["SparkApplication/etl"], "the executors (owned by the driver pod) are the application's"
    c = got["SparkApplication/etl"]
    assert c["source"] == "template"
    assert c["totals"] == {GPU: 5}
    assert c["templates"] == [
        {"path": "spec.driver", "replicas": 1, "resources": {GPU: 1}},
        {"path": "spec.executor", "replicas": 4, "resources": {GPU: 1}},
    ]
    assert c["pods"] == 5 and c["pools"] == ["h100"]


def test_a_spark_application_with_no_pod_yet_is_a_consumer_and_executors_default_to_one() -> None:
    # api/v1beta2/defaults.go setExecutorSpecDefaults: instances 1 when dynamic allocation is off.
    got = consumers(gpu_node("gpu-1"), app(driver_gpus=None, executor_gpus=2))
    assert got["SparkApplication/etl"]["totals"] == {GPU: 2}


def test_gpus_set_through_spark_conf_are_counted_from_the_pods_at_the_application() -> None:
    a = app(driver_gpus=None, executor_gpus=None, instances=2)
    got = consumers(gpu_node("gpu-1"), a, *spark_pods(a, executors=2))
    assert list(got) == ["SparkApplication/etl"]
    assert got["SparkApplication/etl"]["source"] == "pods"
    assert got["SparkApplication/etl"]["totals"] == {GPU: 3}


def test_a_pod_templates_own_gpu_limits_count_where_no_gpu_field_overrides_them() -> None:
    # SparkPodSpec.Template (Spark >= 3.0 pod templates): the executors' come from spec.executor.template.
    a = app(driver_gpus=1, executor_gpus=None, instances=3)
    a["spec"]["executor"]["template"] = template(pod_spec(container(limits={GPU: 2})))
    a["spec"]["driver"]["template"] = template(pod_spec(container(limits={GPU: 8})))  # `gpu` wins: not counted
    c = consumers(gpu_node("gpu-1"), a)["SparkApplication/etl"]
    assert c["totals"] == {GPU: 7}
    assert [t["path"] for t in c["templates"]] == ["spec.driver", "spec.executor.template"]


def test_a_gpu_spec_without_a_positive_quantity_asks_for_nothing() -> None:
    # addGPU skips a GPUSpec with no name or a quantity <= 0.
    a = app(driver_gpus=0, executor_gpus=None)
    assert consumers(gpu_node("gpu-1"), a) == {}


def test_a_scheduled_spark_application_is_a_consumer_between_runs_and_owns_its_runs() -> None:
    template = {"type": "Python", "driver": {}, "executor": {"instances": 3, "gpu": {"name": GPU, "quantity": 2}}}
    sched = obj(SPARK, "ScheduledSparkApplication", "nightly", {"schedule": "@daily", "template": template})
    assert consumers(gpu_node("gpu-1"), sched)["ScheduledSparkApplication/nightly"]["totals"] == {GPU: 6}
    run = obj(SPARK, "SparkApplication", "nightly-1733", template, owner=sched)
    # internal/controller/scheduledsparkapplication/controller.go: the run's owner reference is not `controller`
    run["metadata"]["ownerReferences"][0]["controller"] = None
    got = consumers(gpu_node("gpu-1"), sched, run, *spark_pods(run, executors=3, gpus=2))
    assert list(got) == ["ScheduledSparkApplication/nightly"]


def test_the_spark_kinds_are_read_and_the_read_only_role_lists_them() -> None:
    kinds = (("SparkApplication", "sparkapplications"), ("ScheduledSparkApplication", "scheduledsparkapplications"))
    for kind, plural in kinds:
        k = KINDS_BY_KEY[f"sparkoperator.k8s.io/{kind}"]
        assert (k.api_version, k.plural, k.optional) == (SPARK, plural, True)
    listed = readonly_role_lists()
    assert ("sparkoperator.k8s.io", "sparkapplications") in listed
    assert ("sparkoperator.k8s.io", "scheduledsparkapplications") in listed


def test_convert_refuses_a_spark_gpu_field_saying_where_a_claim_goes() -> None:
    text = (ROOT / "fixtures" / "manifests" / "refused" / "sparkapplication.yaml").read_text()
    out, result = convert_text(text, "t.yaml", TemplateTable.builtin(), ConvertOptions())
    assert out == text
    said = " ".join(result.problems)
    assert "spec.driver.gpu" in said and "spec.executor.gpu" in said
    assert "spec.executor.template" in said, "where the pods' claim can be written"
    assert "--templates" not in said, "a template-table entry cannot make this convertible"


def test_a_snapshot_whose_gpu_count_is_not_an_integer_is_refused_naming_the_field() -> None:
    # The CRD types quantity as int64 (GPUSpec): the API server never holds "1"; counting it as none would hide it.
    a = app()
    a["spec"]["executor"]["gpu"]["quantity"] = "2"
    with pytest.raises(InputError, match=r"spec\.executor\.gpu\.quantity"):
        state(gpu_node("gpu-1"), a)


def test_a_snapshot_keeps_no_spark_conf_argument_env_or_java_option_values() -> None:
    """sparkConf / hadoopConf (`spark.hadoop.fs.s3a.secret.key`), the application's arguments, envVars maps and
    javaOptions (api/v1beta2 SparkApplicationSpec, SparkPodSpec.EnvVars, DriverSpec/ExecutorSpec.JavaOptions) carry
    credentials as often as a container's env; reading the kinds must not copy them into a snapshot."""
    secret = "AKIA-SECRET-123"
    spec = {
        "arguments": [f"--token={secret}"],
        "sparkConf": {"spark.hadoop.fs.s3a.secret.key": secret},
        "hadoopConf": {"fs.s3a.access.key": secret},
        "driver": {"envVars": {"DB_PASSWORD": secret}, "javaOptions": f"-Dpassword={secret}", "cores": 1},
        "executor": {"instances": 2, "env": [{"name": "TOKEN", "value": secret}], "gpu": {"name": GPU, "quantity": 1}},
    }
    a = obj(SPARK, "SparkApplication", "etl", spec)
    sched = obj(SPARK, "ScheduledSparkApplication", "nightly", {"schedule": "@daily", "template": spec})
    for o in (a, sched):
        kept = for_snapshot(copy.deepcopy(o), keep_env=False)
        assert kept is not None and secret not in str(kept), kept
        assert "spark.hadoop.fs.s3a.secret.key" in str(kept), "keys stay: only values are redacted"
    assert consumers(gpu_node("gpu-1"), for_snapshot(a, keep_env=False))["SparkApplication/etl"]["totals"] == {GPU: 2}


def test_the_read_only_role_lists_every_kind_the_tool_reads() -> None:
    """Every kind of cluster/kinds.py, not only Spark's and Tekton's: a kind added without its role entry is a
    403 on a live read under the read-only role (the real-cluster test_rbac_used shows it; this, in the unit
    tier, names the kind)."""
    from dra_migrate.cluster.kinds import ALL_KINDS

    listed = readonly_role_lists()
    assert sorted(k.key for k in ALL_KINDS if (k.group, k.plural) not in listed) == []
