"""Pods a workload fans out to beyond its templates' replica fields.

Argo Workflows (argoproj/argo-workflows v3.7.18 workflow/controller/steps.go expandStep, dag.go expandTask,
operator.go expandSequence): a step or DAG task with `withItems` / `withParam` / `withSequence` runs its template
once per item. The Spark operator (kubeflow/spark-operator v2.3.0 api/v1beta2 DynamicAllocation): with dynamic
allocation an application may grow its executors to `maxExecutors`. Before, both counted one pod per template /
`executor.instances` executors.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest

from dra_migrate.errors import InputError
from tests.unit.helpers import obj, state
from tests.unit.test_consumers import GPU, consumers, gpu_node
from tests.unit.test_spark import SPARK, app

ARGO = "argoproj.io/v1alpha1"


def gpu_tmpl(name: str = "train", gpus: int = 1) -> dict[str, Any]:
    return {"name": name, "container": {"image": "train", "resources": {"limits": {GPU: gpus}}}}


def steps(name: str, *calls: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "steps": [[{"name": f"s{i}", **c}] for i, c in enumerate(calls)], **extra}


def workflow(*templates: dict[str, Any], entry: str = "main", **spec: Any) -> dict[str, Any]:
    return obj(ARGO, "Workflow", "wf", {"entrypoint": entry, "templates": list(templates), **spec})


def train_use(wf: dict[str, Any], kind: str = "Workflow") -> tuple[int, dict[str, int], list[str]]:
    c = consumers(gpu_node("gpu-1"), wf)[f"{kind}/wf"]
    [use] = [t for t in c["templates"] if t["resources"]]
    return use["replicas"], c["totals"], c["notes"]


def test_a_step_with_items_runs_its_template_once_per_item() -> None:
    wf = workflow(steps("main", {"template": "train", "withItems": ["a", "b", "c"]}), gpu_tmpl(gpus=2))
    assert train_use(wf)[:2] == (3, {GPU: 6})


def test_a_dag_task_with_sequence_runs_count_pods_and_start_end_is_inclusive_either_way() -> None:
    def dag(seq: dict[str, Any]) -> dict[str, Any]:
        main = {"name": "main", "dag": {"tasks": [{"name": "t", "template": "train", "withSequence": seq}]}}
        return workflow(main, gpu_tmpl())

    assert train_use(dag({"count": 4}))[0] == 4
    assert train_use(dag({"count": "5"}))[0] == 5, "an IntOrString: a numeral string is a count"
    assert train_use(dag({"start": 2, "end": 5}))[0] == 4
    assert train_use(dag({"start": "5", "end": 2}))[0] == 4, "a descending sequence"
    assert train_use(dag({"end": 3}))[0] == 4, "start defaults to 0"
    assert train_use(dag({"count": 0}))[0] == 0, "count 0 runs no pod"
    assert train_use(dag({"start": 1, "end": 2, "count": 9}))[0] == 2, "end wins over count"


def test_nested_fan_outs_multiply_and_a_template_called_twice_counts_its_largest_fan_out() -> None:
    inner = steps("inner", {"template": "train", "withSequence": {"count": 3}})
    main = steps("main", {"template": "inner", "withItems": [1, 2]}, {"template": "train", "withItems": [1]})
    assert train_use(workflow(main, inner, gpu_tmpl()))[0] == 6


def test_with_param_counts_one_pod_and_says_the_items_are_unknown() -> None:
    wf = workflow(steps("main", {"template": "train", "withParam": "{{steps.list.outputs.result}}"}), gpu_tmpl())
    replicas, _, notes = train_use(wf)
    assert replicas == 1
    assert any("withParam" in n and "train" in n for n in notes), notes
    sub = {"template": "train", "withSequence": {"count": "{{inputs.parameters.n}}"}}
    replicas, _, notes = train_use(workflow(steps("main", sub), gpu_tmpl()))
    assert replicas == 1 and any("withSequence" in n for n in notes), notes


def test_parallelism_caps_the_pods_that_run_at_once() -> None:
    fan = {"template": "train", "withItems": list(range(10))}
    assert train_use(workflow(steps("main", fan), gpu_tmpl(), parallelism=4))[0] == 4
    assert train_use(workflow(steps("main", fan, parallelism=3), gpu_tmpl()))[0] == 3


def test_a_cron_workflow_fans_out_as_its_workflows_do() -> None:
    spec = {"entrypoint": "main", "templates": [steps("main", {"template": "train", "withItems": [1, 2]}), gpu_tmpl()]}
    cron = obj(ARGO, "CronWorkflow", "wf", {"schedule": "0 * * * *", "workflowSpec": spec})
    assert train_use(cron, "CronWorkflow")[0] == 2


def test_a_hostile_sequence_is_counted_without_expanding_it() -> None:
    huge = {"template": "train", "withSequence": {"count": 10**9}}
    tracemalloc.start()
    try:
        began = time.perf_counter()
        assert train_use(workflow(steps("main", huge), gpu_tmpl()))[0] == 10**9
        nested = steps("mid", huge | {"template": "train"})
        replicas, _, notes = train_use(workflow(steps("main", huge | {"template": "mid"}), nested, gpu_tmpl()))
        elapsed = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert replicas == 10**9 and any("at most" in n for n in notes), "10^18 pods are capped, and said so"
    assert peak < 50 * 2**20 and elapsed < 5, (peak, elapsed)


def test_a_deep_or_recursive_call_graph_ends() -> None:
    chain = [steps(f"t{i}", {"template": f"t{i + 1}", "withItems": [1, 2]}) for i in range(3000)]
    chain.append(steps("t3000", {"template": "train"}))
    assert train_use(workflow(*chain, gpu_tmpl(), entry="t0"))[0] == 10**9, "2^3000 pods, capped"
    loop = steps("main", {"template": "train", "withItems": [1, 2]}, {"template": "main", "withItems": [1, 2, 3]})
    assert train_use(workflow(loop, gpu_tmpl()))[0] >= 2


def executors(a: dict[str, Any], kind: str = "SparkApplication") -> tuple[int, dict[str, int], list[str]]:
    c = consumers(gpu_node("gpu-1"), a)[f"{kind}/{a['metadata']['name']}"]
    [use] = [t for t in c["templates"] if ".executor" in t["path"]]
    return use["replicas"], c["totals"], c["notes"]


def test_dynamic_allocation_counts_max_executors() -> None:
    a = app(instances=2)
    a["spec"]["dynamicAllocation"] = {"enabled": True, "minExecutors": 1, "maxExecutors": 10}
    assert executors(a)[:2] == (10, {GPU: 11})
    a["spec"]["dynamicAllocation"]["enabled"] = False
    assert executors(a)[0] == 2, "disabled: executor.instances"


def test_dynamic_allocation_without_max_executors_counts_the_initial_number_and_says_it_is_unbounded() -> None:
    a = app(instances=2)
    a["spec"]["dynamicAllocation"] = {"enabled": True, "initialExecutors": 3, "minExecutors": 1}
    replicas, _, notes = executors(a)
    assert replicas == 3
    assert any("maxExecutors" in n for n in notes), notes


def test_a_scheduled_spark_application_and_an_executor_pod_template_grow_to_max_executors() -> None:
    spec = app(instances=1)["spec"]
    spec["dynamicAllocation"] = {"enabled": True, "maxExecutors": 6}
    sched = obj(SPARK, "ScheduledSparkApplication", "nightly", {"schedule": "@daily", "template": spec})
    assert executors(sched, "ScheduledSparkApplication")[0] == 6
    a = app(executor_gpus=None, instances=1)
    a["spec"]["executor"]["template"] = {"spec": {"containers": [gpu_tmpl()["container"] | {"name": "x"}]}}
    a["spec"]["dynamicAllocation"] = {"enabled": True, "maxExecutors": 5}
    assert executors(a)[0] == 5


def test_a_snapshot_whose_executor_count_is_not_an_integer_is_refused_naming_the_field() -> None:
    a = app(instances=1)
    a["spec"]["dynamicAllocation"] = {"enabled": True, "maxExecutors": "10"}
    with pytest.raises(InputError, match=r"spec\.dynamicAllocation\.maxExecutors"):
        state(gpu_node("gpu-1"), a)


# Argo resolves a step's or task's template: `inline` first, else `templateRef` (a template of the WorkflowTemplate
# it names, or of a ClusterWorkflowTemplate with `clusterScope: true`), else `template` by name; the templates a
# referenced template calls by name are that WorkflowTemplate's (argo-workflows v3.7.18
# workflow/templateresolution/context.go GetTemplate, WithTemplateHolder). Before, these were skipped.


def wtmpl(name: str, *templates: dict[str, Any], cluster: bool = False) -> dict[str, Any]:
    kind = "ClusterWorkflowTemplate" if cluster else "WorkflowTemplate"
    return obj(ARGO, kind, name, {"templates": list(templates)}, namespace=None if cluster else "ml")


def argo_consumer(*objects: dict[str, Any]) -> dict[str, Any]:
    return consumers(gpu_node("gpu-1"), *objects)["Workflow/wf"]


def test_a_step_calling_a_workflow_template_by_template_ref_counts_its_pods_in_the_workflow() -> None:
    shared = wtmpl("shared", gpu_tmpl(gpus=2))
    ref = {"templateRef": {"name": "shared", "template": "train"}, "withItems": ["a", "b", "c"]}
    c = argo_consumer(workflow(steps("main", ref)), shared)
    assert c["totals"] == {GPU: 6}, "three pods of the referenced template, two GPUs each"
    task = {"name": "t", "templateRef": {"name": "everywhere", "template": "train", "clusterScope": True}}
    dag = {"name": "main", "dag": {"tasks": [task | {"withSequence": {"count": 4}}]}}
    namespaced, cluster = wtmpl("everywhere", gpu_tmpl(gpus=8)), wtmpl("everywhere", gpu_tmpl(), cluster=True)
    c = argo_consumer(workflow(dag), namespaced, cluster)
    assert c["totals"] == {GPU: 4}, "clusterScope: the ClusterWorkflowTemplate's template, not the namespaced one"
    elsewhere = obj(ARGO, "WorkflowTemplate", "shared", {"templates": [gpu_tmpl()]}, namespace="other")
    assert "Workflow/wf" not in consumers(gpu_node("gpu-1"), workflow(steps("main", ref)), elsewhere), (
        "a namespaced WorkflowTemplate is the workflow's namespace's"
    )


def test_a_referenced_template_calls_its_own_workflow_templates_templates_and_fan_outs_multiply() -> None:
    inner = steps("fan", {"template": "train", "withItems": [1, 2, 3]})  # `train`: the WorkflowTemplate's
    shared = wtmpl("shared", inner, gpu_tmpl(gpus=1))
    own_train = {"name": "train", "container": {"image": "cpu-only"}}
    ref = {"templateRef": {"name": "shared", "template": "fan"}, "withItems": [1, 2]}
    c = argo_consumer(workflow(steps("main", ref), own_train), shared)
    assert c["totals"] == {GPU: 6}


def test_a_template_ref_not_in_the_state_counts_the_rest_and_says_so() -> None:
    ref = {"templateRef": {"name": "gone", "template": "train"}}
    wf = workflow(steps("main", ref, {"template": "local"}), gpu_tmpl("local"))
    c = argo_consumer(wf)
    assert c["totals"] == {GPU: 1}
    assert any("gone" in n and "not" in n for n in c["notes"]), c["notes"]
    shared = wtmpl("shared", gpu_tmpl())
    wrong = {"templateRef": {"name": "shared", "template": "typo"}}
    c = argo_consumer(workflow(steps("main", wrong, {"template": "local"}), gpu_tmpl("local")), shared)
    assert any("typo" in n for n in c["notes"]), c["notes"]


def test_a_hostile_chain_or_cycle_of_workflow_templates_ends() -> None:
    began = time.perf_counter()
    chain = [
        wtmpl(f"w{i}", steps("t", {"templateRef": {"name": f"w{i + 1}", "template": "t"}, "withItems": [1, 2]}))
        for i in range(1500)
    ]
    chain.append(wtmpl("w1500", gpu_tmpl("t")))
    wf = workflow(steps("main", {"templateRef": {"name": "w0", "template": "t"}}))
    assert argo_consumer(wf, *chain)["totals"] == {GPU: 10**9}, "2^1500 pods, capped"
    a = wtmpl("a", steps("t", {"templateRef": {"name": "b", "template": "t"}}), gpu_tmpl("g"))
    b = wtmpl("b", steps("t", {"templateRef": {"name": "a", "template": "t"}, "withItems": [1, 2]}, {"template": "g"}))
    b["spec"]["templates"].append(gpu_tmpl("g"))
    wf = workflow(steps("main", {"templateRef": {"name": "a", "template": "t"}}))
    assert argo_consumer(wf, a, b)["totals"][GPU] >= 1
    assert time.perf_counter() - began < 10


def test_an_inline_template_of_a_step_or_task_is_counted_with_its_fan_out() -> None:
    inline = {"inline": {"container": gpu_tmpl(gpus=2)["container"]}, "withItems": [1, 2]}
    assert argo_consumer(workflow(steps("main", inline)))["totals"] == {GPU: 4}
    task = {"name": "t", "inline": {"container": gpu_tmpl()["container"]}, "withSequence": {"count": 3}}
    assert argo_consumer(workflow({"name": "main", "dag": {"tasks": [task]}}))["totals"] == {GPU: 3}
    deeper = {"name": "x", "inline": {"container": gpu_tmpl()["container"]}, "withItems": [1, 2]}
    nested = {"inline": {"steps": [[deeper]]}}
    assert argo_consumer(workflow(steps("main", nested | {"withItems": [1, 2, 3]})))["totals"] == {GPU: 6}
    in_ref = wtmpl("shared", steps("t", {"inline": {"container": gpu_tmpl()["container"]}, "withItems": [1, 2]}))
    wf = workflow(steps("main", {"templateRef": {"name": "shared", "template": "t"}}))
    assert argo_consumer(wf, in_ref)["totals"] == {GPU: 2}


# The Spark operator passes sparkConf to spark-submit first and its typed executor.instances / dynamicAllocation
# options after (kubeflow/spark-operator v2.3.0 internal/controller/sparkapplication/submission.go
# buildSparkSubmitArgs): set only in sparkConf, they are what Spark reads; where both are set the typed field wins
# (pkg/util/sparkapplication.go IsDynamicAllocationEnabled). Before, sparkConf was not read.


def conf_app(conf: dict[str, str], **executor: Any) -> dict[str, Any]:
    a = app(**executor)
    a["spec"]["sparkConf"] = conf
    return a


def test_dynamic_allocation_and_instances_set_only_in_spark_conf_are_read() -> None:
    dyn = {"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "12"}
    assert executors(conf_app(dyn))[0] == 12
    assert executors(conf_app(dyn | {"spark.dynamicAllocation.minExecutors": "20"}))[0] == 20, "never below min"
    assert executors(conf_app(dyn | {"spark.dynamicAllocation.enabled": "false"}))[0] == 1, "disabled"
    assert executors(conf_app({"spark.executor.instances": "7"}))[0] == 7
    replicas, _, notes = executors(
        conf_app({"spark.dynamicAllocation.enabled": "TRUE", "spark.executor.instances": "3"})
    )
    assert replicas == 3 and any("maxExecutors" in n for n in notes), notes


def test_typed_fields_win_over_spark_conf() -> None:
    a = conf_app({"spark.executor.instances": "7"}, instances=2)
    assert executors(a)[0] == 2
    a = conf_app({"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.maxExecutors": "50"})
    a["spec"]["dynamicAllocation"] = {"enabled": True, "maxExecutors": 6}
    assert executors(a)[0] == 6
    a["spec"]["dynamicAllocation"] = {"enabled": True}
    assert executors(a)[0] == 50, "a field the typed block leaves unset comes from sparkConf"


def test_a_snapshot_keeps_the_executor_counts_of_spark_conf_and_redacts_every_other_value() -> None:
    import copy

    from dra_migrate.cluster.redact import REDACTED, for_snapshot

    conf = {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.maxExecutors": "12",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.initialExecutors": "2",
        "spark.executor.instances": "2",
        "spark.hadoop.fs.s3a.secret.key": "AKIA-SECRET",
        "spark.dynamicAllocation.executorIdleTimeout": "60s",
        "spark.executor.extraJavaOptions": "-Dpassword=AKIA-SECRET",
    }
    bad = {"spark.dynamicAllocation.maxExecutors": "12 -Dtoken=AKIA-SECRET", "spark.executor.instances": "x"}
    a = conf_app(conf)
    kept = for_snapshot(copy.deepcopy(a), keep_env=False)
    assert kept is not None
    got = kept["spec"]["sparkConf"]
    counts = [k for k in conf if k.startswith("spark.dynamicAllocation.") and "Timeout" not in k]
    assert {k: got[k] for k in [*counts, "spark.executor.instances"]} == {
        k: conf[k] for k in [*counts, "spark.executor.instances"]
    }
    assert all(got[k] == REDACTED for k in conf if k not in counts and k != "spark.executor.instances"), got
    assert executors(kept)[0] == 12
    hostile = for_snapshot(conf_app(bad), keep_env=False)
    assert hostile is not None and set(hostile["spec"]["sparkConf"].values()) == {REDACTED}, "a kept key is a number"
