"""Counting rules: owners, replicas, totals, pools."""

from typing import Any

from dra_migrate.inventory.model import build_inventory
from tests.unit.helpers import container, node, obj, pod, pod_spec, state, template

GPU = "nvidia.com/gpu"
POOL = "cloud.google.com/gke-nodepool"


def gpu_node(name: str, pool: str = "h100", n: int = 8, **labels: str) -> dict[str, Any]:
    return node(name, {POOL: pool, "nvidia.com/gpu.present": "true", **labels}, {GPU: str(n)})


def consumers(*objects: dict[str, Any]) -> dict[str, dict[str, Any]]:
    inv = build_inventory(state(*objects)).to_dict()
    return {f"{c['kind']}/{c['name']}": c for c in inv["consumers"]}


def test_deployment_counted_once_at_the_top_owner() -> None:
    spec = pod_spec(container(requests={GPU: 2}))
    dep = obj("apps/v1", "Deployment", "llm", {"replicas": 3, "template": template(spec)})
    rs = obj("apps/v1", "ReplicaSet", "llm-abc", {"replicas": 3, "template": template(spec)}, owner=dep)
    pods = [pod(f"llm-abc-{i}", spec, owner=rs) for i in range(3)]
    got = consumers(gpu_node("gpu-1"), dep, rs, *pods)
    assert list(got) == ["Deployment/llm"]
    c = got["Deployment/llm"]
    assert c["totals"] == {GPU: 6}
    assert c["templates"] == [{"path": "spec.template", "replicas": 3, "resources": {GPU: 2}}]
    assert c["pods"] == 3
    assert c["pools"] == ["h100"]


def test_cronjob_counts_its_job_template_and_owns_jobs() -> None:
    spec = pod_spec(container(limits={GPU: 1}))
    cj = obj(
        "batch/v1", "CronJob", "nightly", {"jobTemplate": {"spec": {"parallelism": 2, "template": template(spec)}}}
    )
    job = obj("batch/v1", "Job", "nightly-1", {"parallelism": 2, "template": template(spec)}, owner=cj)
    p = pod("nightly-1-x", spec, owner=job)
    got = consumers(gpu_node("gpu-1"), cj, job, p)
    assert list(got) == ["CronJob/nightly"]
    assert got["CronJob/nightly"]["totals"] == {GPU: 2}
    assert got["CronJob/nightly"]["pods"] == 1


def test_scaled_to_zero_is_listed_with_zero_totals() -> None:
    dep = obj(
        "apps/v1", "Deployment", "idle", {"replicas": 0, "template": template(pod_spec(container(requests={GPU: 1})))}
    )
    got = consumers(gpu_node("gpu-1"), dep)
    assert got["Deployment/idle"]["totals"] == {GPU: 0}
    assert got["Deployment/idle"]["pools"] == []


def test_replicas_default_to_one() -> None:
    dep = obj("apps/v1", "StatefulSet", "db", {"template": template(pod_spec(container(requests={GPU: 1})))})
    assert consumers(gpu_node("gpu-1"), dep)["StatefulSet/db"]["totals"] == {GPU: 1}


def test_job_parallelism() -> None:
    job = obj(
        "batch/v1", "Job", "train", {"parallelism": 4, "template": template(pod_spec(container(requests={GPU: 8})))}
    )
    assert consumers(gpu_node("gpu-1"), job)["Job/train"]["totals"] == {GPU: 32}


def test_bare_pod_is_a_consumer() -> None:
    p = pod("debug", pod_spec(container(requests={GPU: 1})))
    got = consumers(gpu_node("gpu-1"), p)
    assert got["Pod/debug"]["totals"] == {GPU: 1}
    assert got["Pod/debug"]["pools"] == ["h100"]


def test_non_gpu_workloads_are_not_consumers() -> None:
    dep = obj("apps/v1", "Deployment", "web", {"template": template(pod_spec(container(requests={"cpu": "1"})))})
    assert consumers(gpu_node("gpu-1"), dep) == {}


def test_daemonset_counts_the_nodes_it_selects() -> None:
    spec = pod_spec(
        container(requests={GPU: 1}),
        nodeSelector={POOL: "h100"},
        tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    )
    ds = obj("apps/v1", "DaemonSet", "probe", {"template": template(spec)})
    taint = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    other = [{"key": "dedicated", "value": "x", "effect": "NoExecute"}]
    nodes = [
        gpu_node("a"),
        node("b", {POOL: "h100"}, {GPU: "8"}, taints=taint),
        gpu_node("c", pool="a100"),
        node("d", {POOL: "h100"}, {GPU: "8"}, taints=other),
    ]
    assert consumers(*nodes, ds)["DaemonSet/probe"]["totals"] == {GPU: 2}


def test_pytorchjob_roles() -> None:
    spec = pod_spec(container(requests={GPU: 8}))
    pj = obj(
        "kubeflow.org/v1",
        "PyTorchJob",
        "llama",
        {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template(spec)},
                "Worker": {"replicas": 3, "template": template(spec)},
            }
        },
    )
    c = consumers(gpu_node("gpu-1"), pj)["PyTorchJob/llama"]
    assert c["totals"] == {GPU: 32}
    assert [t["path"] for t in c["templates"]] == [
        "spec.pytorchReplicaSpecs.Master.template",
        "spec.pytorchReplicaSpecs.Worker.template",
    ]


def test_jobset_replicas_times_parallelism() -> None:
    spec = pod_spec(container(requests={GPU: 4}))
    js = obj(
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "js",
        {
            "replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 3, "template": template(spec)}}}
            ]
        },
    )
    assert consumers(gpu_node("gpu-1"), js)["JobSet/js"]["totals"] == {GPU: 24}


def test_leaderworkerset_replicas_times_size() -> None:
    spec = pod_spec(container(requests={GPU: 8}))
    lws = obj(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": template(spec)}},
    )
    assert consumers(gpu_node("gpu-1"), lws)["LeaderWorkerSet/vllm"]["totals"] == {GPU: 64}


def test_leaderworkerset_with_leader_template() -> None:
    lws = obj(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        "vllm",
        {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 4,
                "leaderTemplate": template(pod_spec(container(requests={GPU: 1}))),
                "workerTemplate": template(pod_spec(container(requests={GPU: 8}))),
            },
        },
    )
    # Each of 2 groups: 1 leader (1 GPU) + 3 workers (8 GPUs each).
    assert consumers(gpu_node("gpu-1"), lws)["LeaderWorkerSet/vllm"]["totals"] == {GPU: 2 * 1 + 2 * 3 * 8}


def test_raycluster_head_plus_workers() -> None:
    rc = obj(
        "ray.io/v1",
        "RayCluster",
        "ray",
        {
            "headGroupSpec": {"template": template(pod_spec(container(requests={GPU: 1})))},
            "workerGroupSpecs": [
                {"groupName": "g", "replicas": 3, "template": template(pod_spec(container(requests={GPU: 2})))},
                {"groupName": "cpu", "replicas": 5, "template": template(pod_spec(container()))},
            ],
        },
    )
    c = consumers(gpu_node("gpu-1"), rc)["RayCluster/ray"]
    assert c["totals"] == {GPU: 7}
    assert len(c["templates"]) == 2  # the CPU-only group is not listed


def test_inferenceservice_model_container() -> None:
    isvc = obj(
        "serving.kserve.io/v1beta1",
        "InferenceService",
        "llm",
        {"predictor": {"minReplicas": 2, "model": {"name": "kserve-container", "resources": {"limits": {GPU: "1"}}}}},
    )
    assert consumers(gpu_node("gpu-1"), isvc)["InferenceService/llm"]["totals"] == {GPU: 2}


def test_mig_resources_are_counted_by_name() -> None:
    mig = "nvidia.com/mig-1g.10gb"
    dep = obj(
        "apps/v1", "Deployment", "small", {"replicas": 7, "template": template(pod_spec(container(requests={mig: 1})))}
    )
    assert consumers(gpu_node("gpu-1"), dep)["Deployment/small"]["totals"] == {mig: 7}


def test_other_plugins_nvidia_names_are_no_gpus() -> None:
    """The NVIDIA Network Operator's SR-IOV devices (`resourcePrefix: nvidia.com`) and GPUs passed to VMs are
    nvidia.com/* names no release of the GPU device plugin advertises. Counted as GPUs, a training job's RDMA
    NICs made it a consumer of `nvidia.com/hostdev` and every node's switch waited for that resource to leave
    the node, which the SR-IOV plugin never lets it do: each wave timed out and rolled back."""
    gpu = {GPU: "8", "nvidia.com/hostdev": "8", "nvidia.com/sriov_rdma_vf": "16"}
    n = node("gpu-1", {POOL: "p"}, gpu)
    vm = node("vm-1", {POOL: "vms"}, {"nvidia.com/GA100_A100_PCIE_40GB": "4"})
    train = obj(
        "apps/v1", "Deployment", "train",
        {"template": template(pod_spec(container(requests={GPU: 8, "nvidia.com/hostdev": 8})))},
    )  # fmt: skip
    net = obj(
        "apps/v1", "Deployment", "net", {"template": template(pod_spec(container(requests={"nvidia.com/hostdev": 1})))}
    )
    inv = build_inventory(state(n, vm, train, net)).to_dict()
    assert {c["name"]: c["totals"] for c in inv["consumers"]} == {"train": {GPU: 8}}
    assert [(x["name"], x["capacity"]) for x in inv["nodes"]] == [("gpu-1", {GPU: 8})]


def test_pods_of_unknown_owner_kind_make_one_consumer() -> None:
    ghost = {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t", "uid": "ghost"}}
    spec = pod_spec(container(requests={GPU: 2}))
    pods = [pod(f"t-{i}", spec, owner=ghost) for i in range(2)]
    got = consumers(gpu_node("gpu-1"), *pods)
    assert list(got) == ["Trainer/t"]
    assert got["Trainer/t"]["totals"] == {GPU: 4}
    assert got["Trainer/t"]["source"] == "pods"


def test_terminated_pods_do_not_count_for_placement() -> None:
    spec = pod_spec(container(requests={GPU: 1}))
    job = obj("batch/v1", "Job", "done", {"template": template(spec)})
    p = pod("done-x", spec, owner=job, phase="Succeeded")
    c = consumers(gpu_node("gpu-1"), job, p)["Job/done"]
    assert c["pods"] == 0 and c["pools"] == []


def test_pool_totals_and_node_requests() -> None:
    spec = pod_spec(container(requests={GPU: 3}))
    p1, p2 = pod("a", spec, node="gpu-1"), pod("b", spec, node="gpu-2")
    inv = build_inventory(state(gpu_node("gpu-1"), gpu_node("gpu-2"), gpu_node("gpu-3", pool="a100"), p1, p2)).to_dict()
    pools = {p["name"]: p for p in inv["pools"]}
    assert pools["h100"]["nodes"] == ["gpu-1", "gpu-2"]
    assert pools["h100"]["allocatable"] == {GPU: 16}
    assert pools["h100"]["requested"] == {GPU: 6}
    assert pools["a100"]["requested"] == {}


def test_pool_label_order() -> None:
    n = gpu_node("gpu-1", **{"team": "research", "karpenter.sh/nodepool": "kp"})
    assert build_inventory(state(n)).to_dict()["nodes"][0]["pool"] == "h100"  # GKE label before Karpenter
    assert build_inventory(state(n), ("team",)).to_dict()["nodes"][0]["pool"] == "research"
    bare = node("gpu-2", {"nvidia.com/gpu.present": "true"})
    assert build_inventory(state(bare)).to_dict()["nodes"][0]["pool"] == "(unpooled)"


def _fixture_objects(name: str) -> list[dict[str, Any]]:
    from pathlib import Path

    from ruamel.yaml import YAML

    path = Path(__file__).resolve().parents[2] / "fixtures" / "manifests" / "refused" / name
    out = [d for d in YAML(typ="safe").load_all(path.read_text()) if d]
    for i, d in enumerate(out):
        d["metadata"].setdefault("uid", f"{name}-{i}")
    return out


def test_trainjob_counts_resources_per_node_times_nodes_and_its_runtime_is_no_consumer() -> None:
    # Kubeflow Trainer v2: 2 GPUs per node on 4 nodes; the ClusterTrainingRuntime is a blueprint.
    trainjob, runtime = _fixture_objects("trainjob.yaml")
    gpu_runtime = dict(runtime)
    jobs = gpu_runtime["spec"]["template"]["spec"]["replicatedJobs"]
    jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {GPU: 8}}
    got = consumers(gpu_node("gpu-1"), trainjob, gpu_runtime)
    assert list(got) == ["TrainJob/pytorch-mnist"]
    c = got["TrainJob/pytorch-mnist"]
    assert c["totals"] == {GPU: 8}
    assert c["templates"] == [{"path": "spec.trainer", "replicas": 4, "resources": {GPU: 2}}]


def test_trainjob_without_resources_per_node_is_counted_from_its_pods() -> None:
    trainjob, _ = _fixture_objects("trainjob.yaml")
    del trainjob["spec"]["trainer"]["resourcesPerNode"]
    js = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "pytorch-mnist", {"replicatedJobs": []}, owner=trainjob)
    p = pod("pytorch-mnist-node-0", pod_spec(container(limits={GPU: 1})), owner=js)
    got = consumers(gpu_node("gpu-1"), trainjob, js, p)
    assert list(got) == ["TrainJob/pytorch-mnist"]
    assert got["TrainJob/pytorch-mnist"]["totals"] == {GPU: 1}
    assert got["TrainJob/pytorch-mnist"]["source"] == "pods"


def test_an_argo_rollout_is_the_consumer_of_its_replicasets_pods() -> None:
    """argo-rollouts v1.8.3 RolloutSpec: replicas and a PodTemplateSpec, as a Deployment; it owns ReplicaSets."""
    ro = obj(
        "argoproj.io/v1alpha1",
        "Rollout",
        "embeddings",
        {"replicas": 4, "template": template(pod_spec(container(limits={GPU: 1})))},
    )
    rs = obj("apps/v1", "ReplicaSet", "embeddings-7d9f", {"replicas": 4}, owner=ro)
    running = pod("embeddings-7d9f-a", pod_spec(container(limits={GPU: 1})), owner=rs)
    got = consumers(gpu_node("gpu-1"), ro, rs, running)
    assert list(got) == ["Rollout/embeddings"]
    assert got["Rollout/embeddings"]["totals"] == {GPU: 4}
    by_ref = obj("argoproj.io/v1alpha1", "Rollout", "by-ref", {"workloadRef": {"kind": "Deployment", "name": "x"}})
    assert list(consumers(gpu_node("gpu-1"), by_ref)) == []  # its template is the Deployment's, counted there


def test_a_keda_scaledjob_is_the_consumer_of_its_jobs_pods() -> None:
    """kedacore/keda v2.18.0 ScaledJobSpec.jobTargetRef is a batch/v1 JobSpec; KEDA's Jobs have the ScaledJob as
    their controller. Before, its pods were counted under Jobs of generated names, and convert refused it."""
    job_spec = {"parallelism": 2, "template": template(pod_spec(container(limits={GPU: 1})))}
    sj = obj("keda.sh/v1alpha1", "ScaledJob", "embed", {"jobTargetRef": job_spec, "maxReplicaCount": 10})
    job = obj("batch/v1", "Job", "embed-x7k2p", job_spec, owner=sj)
    running = pod("embed-x7k2p-a", pod_spec(container(limits={GPU: 1})), owner=job)
    got = consumers(gpu_node("gpu-1"), sj, job, running)
    assert list(got) == ["ScaledJob/embed"]
    assert got["ScaledJob/embed"]["totals"] == {GPU: 2}  # one Job's pods, as a CronJob's


def test_argo_workflow_templates_are_blueprints_their_workflows_are_consumers() -> None:
    steps = [{"name": "train", "container": container(limits={GPU: 2})}]
    wt = obj("argoproj.io/v1alpha1", "WorkflowTemplate", "train", {"templates": steps})
    cwt = obj("argoproj.io/v1alpha1", "ClusterWorkflowTemplate", "train-all", {"templates": steps}, namespace=None)
    wf = obj("argoproj.io/v1alpha1", "Workflow", "train-x1", {"templates": steps})
    assert list(consumers(gpu_node("gpu-1"), wt, cwt, wf)) == ["Workflow/train-x1"]


def test_check_says_which_nvidia_names_it_leaves_alone() -> None:
    from tests.unit.test_checks import findings, make

    gpu_node = node("gpu-1", {POOL: "p"}, {GPU: "8", "nvidia.com/hostdev": "8", "nvidia.com/gpumem": "80"})
    vm = node("vm-1", {POOL: "vms"}, {"nvidia.com/GA100_A100_PCIE_40GB": "4"})
    found = findings(make(gpu_node, vm), "other-nvidia-resource")
    named = {f.message.split()[0]: [o.name for o in f.objects] for f in found}
    # HAMi's fractional names are `fractional-gpu-request`'s; the plugin's own names are GPUs.
    assert named == {"nvidia.com/GA100_A100_PCIE_40GB": ["vm-1"], "nvidia.com/hostdev": ["gpu-1"]}
    assert all(f.severity.value == "info" for f in found)
