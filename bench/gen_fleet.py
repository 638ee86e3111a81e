#!/usr/bin/env python3
"""Generate a synthetic fleet as a streamed ClusterSnapshot (JSON Lines), deterministically from a seed.

    python bench/gen_fleet.py --nodes 2000 --pods 100000 --workloads 10000 -o fleet.jsonl [--seed 1]

Line 1 is the ClusterSnapshot header without `items`; every further line is one object, as `dra-migrate
snapshot --format jsonl` writes. Exactly --nodes Nodes and --pods Pods are written; --workloads counts the
top-level workloads (Deployments, StatefulSets, Jobs, CronJobs, DaemonSets, bare Pods, PyTorchJobs, JobSets),
not the ReplicaSets under Deployments.

Why it is built this way:
  * Streaming. Only the plan (one small record per workload) and per-node ledgers live in memory; pods are
    made, written and dropped one at a time, so 100,000 pods need a few tens of MB and a few seconds.
  * Consistency. Owners are written before what they own and every ownerReference carries the owner's uid;
    every pod is bound to an existing node of its pool, and node allocatable (GPUs, cpu, memory, pods) is
    sized from the plan so that the pods placed on a node always fit it. A snapshot that could not exist on
    a real API server would make benchmark numbers meaningless and break the live-cluster replay.
  * Realistic bulk. Pods carry what real pods carry (labels, annotations, env, several containers, volume
    mounts, defaulted fields, conditions, container statuses): 2-5 KB of JSON each, so parse and prune costs
    are measured on representative input.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's dra_migrate (bench/ runs from a clone, not installed)

from dra_migrate.cluster.sealed import write_sealed  # noqa: E402

Obj = dict[str, Any]

TAKEN_AT = "2026-11-20T10:00:00Z"
CREATED = "2026-10-01T08:00:00Z"
STARTED = "2026-10-01T08:00:31Z"
K8S_VERSION = "v1.37.2"
POOL_LABEL = "karpenter.sh/nodepool"
# `--pool-size K`: each GPU pool is cut into node pools of K nodes (POOL_LABEL `<pool>-0000`, ...), as a
# fleet of many node groups is (one per zone, instance type, team); workloads then select the GPU product
# they were planned for by this label, which every node of the cut pool keeps.
GROUP_LABEL = "bench.dra-migrate.io/gpu-pool"
_SELECT = [POOL_LABEL]  # the label a GPU workload's nodeSelector names (GROUP_LABEL with --pool-size)
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generated-name alphabet

# Pools: (name, GPU product label, GPUs per node, share of the GPU nodes). CPU nodes form pool "general".
GPU_POOLS = (
    ("gpu-h100", "NVIDIA-H100-80GB-HBM3", 8, 0.4),
    ("gpu-a100", "NVIDIA-A100-SXM4-80GB", 8, 0.3),
    ("gpu-l4", "NVIDIA-L4", 4, 0.3),
)
GPU_POD_SHARE = 0.25  # the target share of pods that request GPUs (the brief's 20-30%)

# Kind mix of top-level workloads: (kind, weight). DaemonSets are few and sized by their pools.
KIND_WEIGHTS = (
    ("Deployment", 40),
    ("StatefulSet", 9),
    ("Job", 12),
    ("CronJob", 7),
    ("Pod", 15),
    ("PyTorchJob", 9),
    ("JobSet", 8),
)
ALWAYS_GPU = {"PyTorchJob", "JobSet"}


@dataclass
class Workload:
    kind: str
    name: str
    namespace: str
    uid: str
    pool: str
    replicas: int = 0  # pods that exist (CronJobs: 0; DaemonSets: nodes of the pool)
    gpus_per_pod: int = 0
    gpu_resource: str = "nvidia.com/gpu"
    cpu_m: int = 100
    mem_mi: int = 256
    image: str = ""
    team: str = ""
    sidecar: bool = False  # a metrics-exporter container beside the app
    init: bool = False  # an init container that waits for config


@dataclass
class NodeLedger:
    name: str
    uid: str
    pool: str
    gpu: int = 0
    cpu_m: int = 0
    mem_mi: int = 0
    pods: int = 0


@dataclass
class Pool:
    name: str
    product: str | None
    gpus_per_node: int
    nodes: list[NodeLedger] = field(default_factory=list)
    replicas: int = 1  # time-slicing replicas (sized from the plan)
    cursor: int = 0


class Gen:
    def __init__(self, seed: int, pool_size: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.pool_size = pool_size
        self._taken: set[str] = set()

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def sfx(self, n: int = 5) -> str:
        return "".join(self.rng.choice(_ALPHABET) for _ in range(n))

    def unique(self, prefix: str) -> str:
        """`prefix-xxxxx`, never given before: a DaemonSet on 15,000 nodes draws its 5-letter suffixes
        often enough to repeat one (the birthday bound), and a snapshot holds each pod once. A draw that
        repeats is drawn again, so a fleet with no repeat is the same as before this was added."""
        while (name := f"{prefix}-{self.sfx()}") in self._taken:
            pass
        self._taken.add(name)
        return name

    def hexid(self, n: int = 64) -> str:
        return f"{self.rng.getrandbits(n * 4):0{n}x}"


# ----------------------------------------------------------------------------------------------------------
# Plan


def plan(g: Gen, n_gpu: int, n_cpu: int, n_pods: int, n_workloads: int) -> tuple[list[Pool], list[Workload]]:
    if n_gpu < len(GPU_POOLS) or n_cpu < 1 or n_workloads < 1 or n_pods < n_workloads:
        raise SystemExit(f"need --nodes >= {len(GPU_POOLS)}, --cpu-nodes >= 1 and --pods >= --workloads >= 1")
    pools = [Pool("general", None, 0)]
    left = n_gpu
    for i, (name, product, per_node, share) in enumerate(GPU_POOLS):
        k = left if i == len(GPU_POOLS) - 1 else max(1, min(left - (len(GPU_POOLS) - 1 - i), round(n_gpu * share)))
        left -= k
        pools.append(Pool(name, product, per_node, [NodeLedger("", "", name) for _ in range(k)]))
    pools[0].nodes = [NodeLedger("", "", "general") for _ in range(n_cpu)]
    for p in pools:
        for i, node in enumerate(p.nodes):
            node.name = f"{p.name}-{i:05d}"
            node.uid = g.uid()

    teams = [f"team-{i:02d}" for i in range(max(3, min(60, n_workloads // 150)))]
    workloads: list[Workload] = []
    # DaemonSets: a log agent on every node, a GPU health probe on the H100 pool, taking at most 1/8 of pods.
    ds_budget = n_pods // 8
    for name, pool, gpu in (("node-log-agent", None, 0), ("gpu-health-probe", "gpu-h100", 1)):
        size = n_gpu + n_cpu if pool is None else len(pools[1].nodes)
        if size <= ds_budget and len(workloads) < n_workloads - 1:
            w = Workload(
                "DaemonSet",
                name,
                "kube-system" if gpu == 0 else "gpu-monitoring",
                g.uid(),
                pool or "*",
                replicas=size,
                gpus_per_pod=gpu,
                cpu_m=50,
                mem_mi=128,
                image="fluent/fluent-bit:3.2.4" if gpu == 0 else "nvcr.io/nvidia/cloud-native/dcgm:4.4.1",
            )
            workloads.append(w)
            ds_budget -= size
    kinds, weights = zip(*KIND_WEIGHTS, strict=True)
    for i in range(n_workloads - len(workloads)):
        kind = g.rng.choices(kinds, weights)[0]
        team = g.rng.choice(teams)
        workloads.append(
            Workload(
                kind,
                f"{kind.lower()}-{i:05d}-{g.sfx(4)}",
                team,
                g.uid(),
                "general",
                team=team,
                sidecar=g.rng.random() < 0.5,
                init=g.rng.random() < 0.4,
            )
        )

    # Pods per workload: 1 for bare pods, 0 for CronJobs (between runs), a skewed share for the rest,
    # adjusted so the total is exactly n_pods.
    ds_pods = sum(w.replicas for w in workloads if w.kind == "DaemonSet")
    scalable = [w for w in workloads if w.kind not in ("DaemonSet", "Pod", "CronJob")]
    fixed = sum(1 for w in workloads if w.kind == "Pod")
    remaining = n_pods - ds_pods - fixed
    if not scalable:
        raise SystemExit("--workloads too small for --pods (no scalable workload drew)")
    if remaining < len(scalable):
        # Too few pods for one each: turn the surplus into CronJobs, which have no pods between runs.
        for w in scalable[remaining:]:
            w.kind = "CronJob"
        scalable = scalable[:remaining]
    weights_w = [g.rng.lognormvariate(0, 1.0) for _ in scalable]
    total_w = sum(weights_w)
    for w, wt in zip(scalable, weights_w, strict=True):
        w.replicas = max(1, int(remaining * wt / total_w))
    diff = remaining - sum(w.replicas for w in scalable)
    order = sorted(scalable, key=lambda w: -w.replicas)
    i = 0
    while diff != 0:
        w = order[i % len(order)]
        step = 1 if diff > 0 else -1
        if w.replicas + step >= 1:
            w.replicas += step
            diff -= step
        i += 1
    for w in workloads:
        if w.kind == "Pod":
            w.replicas = 1

    # GPUs: always for training CRDs, then other kinds until about GPU_POD_SHARE of the pods ask for GPUs.
    gpu_pools = pools[1:]
    target = int(n_pods * GPU_POD_SHARE)
    gpu_pods = sum(w.replicas for w in workloads if w.gpus_per_pod)
    shuffled = list(workloads)
    g.rng.shuffle(shuffled)
    shuffled.sort(key=lambda w: w.kind not in ALWAYS_GPU)  # stable: training CRDs first
    for w in shuffled:
        if w.kind == "DaemonSet":
            continue
        if (
            w.kind in ALWAYS_GPU
            or (gpu_pods + w.replicas <= target * 1.02 and w.kind != "CronJob")
            or (w.kind == "CronJob" and g.rng.random() < 0.3)
        ):
            gpu_pool = g.rng.choice(gpu_pools)
            w.pool = gpu_pool.name
            big = w.kind in ALWAYS_GPU and gpu_pool.gpus_per_node == 8
            w.gpus_per_pod = 8 if big and g.rng.random() < 0.5 else g.rng.choice((1, 1, 1, 2, 4))
            w.gpus_per_pod = min(w.gpus_per_pod, gpu_pool.gpus_per_node)
            w.cpu_m = 1000 * w.gpus_per_pod
            w.mem_mi = 8192 * w.gpus_per_pod
            w.image = g.rng.choice(
                (
                    "nvcr.io/nvidia/pytorch:25.10-py3",
                    "vllm/vllm-openai:v0.11.0",
                    "nvcr.io/nvidia/tritonserver:25.10-py3",
                )
            )
            if w.kind != "CronJob":
                gpu_pods += w.replicas
        else:
            w.cpu_m = g.rng.choice((50, 100, 250, 500))
            w.mem_mi = g.rng.choice((128, 256, 512, 1024))
            w.image = g.rng.choice(
                (
                    "ghcr.io/acme/api:1.42.0",
                    "nginx:1.27.3",
                    "redis:7.4.1",
                    "python:3.12-slim",
                    "ghcr.io/acme/worker:3.1.7",
                )
            )
    for w in workloads:
        if not w.image:
            w.image = "python:3.12-slim"
    return pools, workloads


def size_nodes(pools: list[Pool], workloads: list[Workload]) -> None:
    """Give each node enough allocatable for its share of the plan, with headroom. GPU pools that need more
    GPU slots than they have physical GPUs are time-sliced (replicas), as a real operator would do."""
    by_pool = {p.name: p for p in pools}
    demand: dict[str, list[int]] = {p.name: [0, 0, 0, 0] for p in pools}  # gpu, cpu_m, mem_mi, pods
    for w in workloads:
        if w.kind == "DaemonSet" or (w.kind == "CronJob" and not w.gpus_per_pod):
            continue
        n = max(w.replicas, 1) if w.kind == "CronJob" else w.replicas  # CronJobs: room for one run
        d = demand[w.pool]
        d[0] += n * w.gpus_per_pod
        d[1] += n * w.cpu_m
        d[2] += n * w.mem_mi
        d[3] += n
    for ds in (w for w in workloads if w.kind == "DaemonSet"):
        for p in pools:
            if ds.pool in ("*", p.name):
                d = demand[p.name]
                d[0] += len(p.nodes) * ds.gpus_per_pod
                d[1] += len(p.nodes) * ds.cpu_m
                d[2] += len(p.nodes) * ds.mem_mi
                d[3] += len(p.nodes)
    for name, (gpu, cpu_m, mem_mi, pods) in demand.items():
        p = by_pool[name]
        n = len(p.nodes)
        # Placement is greedy, so leave room for the largest single pod on top of the average share.
        big = max((w.gpus_per_pod for w in workloads if w.pool == name), default=0)
        if p.gpus_per_node:
            need = math.ceil(gpu * 1.3 / n) + big
            p.replicas = max(1, math.ceil(need / p.gpus_per_node))
        cpu = max(32, math.ceil((cpu_m * 1.3 / n + 8000) / 16000) * 16)
        mem = max(128, math.ceil((mem_mi * 1.3 / n + 65536) / 1024 / 64) * 64)
        max_pods = max(110, math.ceil(pods * 1.3 / n) + 10)
        for node in p.nodes:
            node.gpu = p.gpus_per_node * p.replicas
            node.cpu_m = cpu * 1000
            node.mem_mi = mem * 1024
            node.pods = max_pods


def place(pool: Pool, gpu: int, cpu_m: int, mem_mi: int) -> NodeLedger:
    """Next node (round robin from a cursor) with room; spreads pods like the default scheduler roughly does."""
    n = len(pool.nodes)
    for k in range(n):
        node = pool.nodes[(pool.cursor + k) % n]
        if node.gpu >= gpu and node.cpu_m >= cpu_m and node.mem_mi >= mem_mi and node.pods >= 1:
            pool.cursor = (pool.cursor + k + 1) % n
            node.gpu -= gpu
            node.cpu_m -= cpu_m
            node.mem_mi -= mem_mi
            node.pods -= 1
            return node
    raise RuntimeError(f"pool {pool.name} is full; size_nodes() headroom is too small")


# ----------------------------------------------------------------------------------------------------------
# Objects


def node_obj(g: Gen, pool: Pool, node: NodeLedger, index: int, within: int = 0) -> Obj:
    """The node; `within`: its place in its pool (which cut of the pool it is in, with `--pool-size`)."""
    cut = g.pool_size is not None and pool.product is not None
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": node.name,
        "node.kubernetes.io/instance-type": "p5.48xlarge" if pool.name == "gpu-h100" else "m7i.8xlarge",
        "topology.kubernetes.io/region": "us-west-2",
        "topology.kubernetes.io/zone": f"us-west-2{'abc'[index % 3]}",
        POOL_LABEL: f"{pool.name}-{within // (g.pool_size or 1):04d}" if cut else pool.name,
        **({GROUP_LABEL: pool.name} if cut else {}),
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/initialized": "true",
    }
    capacity: Obj = {
        "cpu": str(node.cpu_m // 1000),
        "memory": f"{node.mem_mi * 1024}Ki",
        "ephemeral-storage": "507944552Ki",
        "pods": str(node.pods),
    }
    taints: list[Obj] = []
    if pool.product:
        capacity["nvidia.com/gpu"] = str(node.gpu)
        labels |= {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": pool.product + ("-SHARED" if pool.replicas > 1 else ""),
            "nvidia.com/gpu.count": str(pool.gpus_per_node),
            "nvidia.com/gpu.replicas": str(pool.replicas),
            "nvidia.com/gpu.sharing-strategy": "time-slicing" if pool.replicas > 1 else "none",
            "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
            "nvidia.com/cuda.driver-version.full": "580.95.05",
            "nvidia.com/mig.capable": "false",
        }
        if pool.replicas > 1:
            labels["nvidia.com/device-plugin.config"] = f"{pool.name}-ts{pool.replicas}"
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    ip = f"10.{20 + index // 65000}.{(index // 250) % 256}.{10 + index % 250}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": node.uid,
            "resourceVersion": str(1000 + index),
            "creationTimestamp": CREATED,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"providerID": f"aws:///us-west-2a/i-0{g.hexid(16)}", **({"taints": taints} if taints else {})},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": node.name}],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": TAKEN_AT,
                    "lastTransitionTime": CREATED,
                }
            ],
            "nodeInfo": {
                "kubeletVersion": K8S_VERSION,
                "containerRuntimeVersion": "containerd://2.1.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Ubuntu 24.04.3 LTS",
                "kernelVersion": "6.8.0-1031-aws",
            },
        },
    }


def containers(w: Workload, gpu: bool) -> tuple[list[Obj], list[Obj]]:
    """App containers (+ a metrics sidecar) and one init container, as users write them."""
    res_l: Obj = {"cpu": f"{w.cpu_m * 2}m", "memory": f"{w.mem_mi}Mi"}
    res_r: Obj = {"cpu": f"{w.cpu_m}m", "memory": f"{w.mem_mi}Mi"}
    if gpu and w.gpus_per_pod:
        res_l[w.gpu_resource] = str(w.gpus_per_pod)
        res_r[w.gpu_resource] = str(w.gpus_per_pod)
    env: list[Obj] = [
        {"name": k, "value": v}
        for k, v in (
            ("APP_NAME", w.name),
            ("TEAM", w.team or "platform"),
            ("LOG_LEVEL", "info"),
            ("LOG_FORMAT", "json"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability:4317"),
        )
    ]
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}})
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}})
    app = {
        "name": "app",
        "image": w.image,
        "imagePullPolicy": "IfNotPresent",
        "env": env,
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "resources": {"limits": res_l, "requests": res_r},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}, {"name": "tmp", "mountPath": "/tmp"}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if w.kind in ("Deployment", "StatefulSet"):  # only long-running services get probes
        app["readinessProbe"] = {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "timeoutSeconds": 1,
            "successThreshold": 1,
            "failureThreshold": 3,
        }
    side = {
        "name": "metrics-exporter",
        "image": "prom/statsd-exporter:v0.28.0",
        "imagePullPolicy": "IfNotPresent",
        "args": ["--statsd.listen-udp=:9125", "--web.listen-address=:9102"],
        "ports": [{"containerPort": 9102, "name": "metrics", "protocol": "TCP"}],
        "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "10m", "memory": "64Mi"}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    init = {
        "name": "wait-for-config",
        "image": "busybox:1.37",
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", "until [ -f /etc/app/ready ]; do sleep 1; done"],
        "resources": {"limits": {"memory": "32Mi"}, "requests": {"cpu": "10m", "memory": "32Mi"}},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    return [app, side] if w.sidecar else [app], [init] if w.init else []


def pod_template(w: Workload, labels: Obj) -> Obj:
    gpu = bool(w.gpus_per_pod)
    cs, ics = containers(w, gpu)
    spec: Obj = {
        "containers": cs,
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "securityContext": {"runAsNonRoot": True},
        "terminationGracePeriodSeconds": 30,
        "serviceAccountName": "default",
        "volumes": [
            {"name": "config", "configMap": {"name": f"{w.name}-config", "defaultMode": 420}},
            {"name": "tmp", "emptyDir": {}},
        ],
    }
    if ics:
        spec["initContainers"] = ics
    if w.pool != "*":
        spec["nodeSelector"] = {_SELECT[0] if w.pool != "general" else POOL_LABEL: w.pool}
    if gpu or w.pool.startswith("gpu-") or w.pool == "*":
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    if w.kind in ("Job", "CronJob", "PyTorchJob", "JobSet"):
        spec["restartPolicy"] = "Never" if w.kind != "PyTorchJob" else "OnFailure"
    return {"metadata": {"creationTimestamp": None, "labels": labels}, "spec": spec}


def meta(g: Gen, name: str, ns: str | None, uid: str, labels: Obj, owner: Obj | None = None) -> Obj:
    m: Obj = {"name": name}
    if ns:
        m["namespace"] = ns
    m |= {
        "uid": uid,
        "resourceVersion": str(g.rng.randrange(10**6, 10**8)),
        "creationTimestamp": CREATED,
        "labels": labels,
    }
    if owner:
        m["ownerReferences"] = [owner]
    return m


def oref(api_version: str, kind: str, name: str, uid: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod(g: Gen, w: Workload, name: str, tmpl: Obj, node: NodeLedger, owner: Obj | None, extra_labels: Obj) -> Obj:
    spec = dict(tmpl["spec"])
    spec["nodeName"] = node.name
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec["priority"] = 0
    spec["enableServiceLinks"] = True
    spec["preemptionPolicy"] = "PreemptLowerPriority"
    spec["tolerations"] = [
        *spec.get("tolerations", []),
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    ip = f"10.{128 + g.rng.randrange(64)}.{g.rng.randrange(256)}.{g.rng.randrange(2, 254)}"
    cstat = [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": f"{c['image'].split(':')[0]}@sha256:{g.hexid()}",
            "containerID": f"containerd://{g.hexid()}",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "lastState": {},
            "state": {"running": {"startedAt": STARTED}},
        }
        for c in spec["containers"]
    ]
    istat = [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": f"{c['image'].split(':')[0]}@sha256:{g.hexid()}",
            "containerID": f"containerd://{g.hexid()}",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "lastState": {},
            "state": {
                "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": CREATED, "finishedAt": STARTED}
            },
        }
        for c in spec.get("initContainers", [])
    ]
    md = meta(g, name, w.namespace, g.uid(), {**tmpl["metadata"]["labels"], **extra_labels}, owner)
    md["annotations"] = {
        "kubectl.kubernetes.io/default-container": "app",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9102",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": spec,
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "qosClass": "Burstable",
            "startTime": CREATED,
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STARTED}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": cstat,
            **({"initContainerStatuses": istat} if istat else {}),
        },
    }


def emit_workload(g: Gen, w: Workload, pools: dict[str, Pool]) -> Iterator[Obj]:
    """The workload object, its intermediate owners, and its pods (owners first)."""
    base = {
        "app.kubernetes.io/name": w.name,
        "app.kubernetes.io/part-of": w.team or "platform",
        "app.kubernetes.io/managed-by": "Helm",
        "team": w.team or "platform",
    }
    sel = {"app.kubernetes.io/name": w.name}

    def pods_of(tmpl: Obj, owner: Obj | None, names: list[str], extra: list[Obj] | None = None) -> Iterator[Obj]:
        pool = pools[w.pool]
        for i, n in enumerate(names):
            node = place(pool, w.gpus_per_pod, w.cpu_m + 10, w.mem_mi + 64)
            yield pod(g, w, n, tmpl, node, owner, extra[i] if extra else {})

    if w.kind == "Deployment":
        t = pod_template(w, dict(base))
        yield {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta(g, w.name, w.namespace, w.uid, base),
            "spec": {
                "replicas": w.replicas,
                "selector": {"matchLabels": sel},
                "template": t,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            },
            "status": {"replicas": w.replicas, "readyReplicas": w.replicas, "availableReplicas": w.replicas},
        }
        owner = oref("apps/v1", "Deployment", w.name, w.uid)
        if g.rng.random() < 0.3:  # an old revision kept at 0 replicas
            h = g.sfx(10)
            yield {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": meta(g, f"{w.name}-{h}", w.namespace, g.uid(), {**sel, "pod-template-hash": h}, owner),
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {**sel, "pod-template-hash": h}},
                    "template": pod_template(w, {**base, "pod-template-hash": h}),
                },
                "status": {"replicas": 0},
            }
        h = g.sfx(10)
        rs_name, rs_uid = f"{w.name}-{h}", g.uid()
        rt = pod_template(w, {**base, "pod-template-hash": h})
        yield {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": meta(g, rs_name, w.namespace, rs_uid, {**sel, "pod-template-hash": h}, owner),
            "spec": {
                "replicas": w.replicas,
                "selector": {"matchLabels": {**sel, "pod-template-hash": h}},
                "template": rt,
            },
            "status": {"replicas": w.replicas, "readyReplicas": w.replicas},
        }
        yield from pods_of(
            rt, oref("apps/v1", "ReplicaSet", rs_name, rs_uid), [g.unique(rs_name) for _ in range(w.replicas)]
        )
    elif w.kind == "StatefulSet":
        t = pod_template(w, dict(base))
        yield {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": meta(g, w.name, w.namespace, w.uid, base),
            "spec": {
                "replicas": w.replicas,
                "serviceName": w.name,
                "selector": {"matchLabels": sel},
                "template": t,
                "podManagementPolicy": "Parallel",
            },
            "status": {"replicas": w.replicas, "readyReplicas": w.replicas},
        }
        rev = f"{w.name}-{g.sfx(10)}"
        yield from pods_of(
            t,
            oref("apps/v1", "StatefulSet", w.name, w.uid),
            [f"{w.name}-{i}" for i in range(w.replicas)],
            [
                {
                    "statefulset.kubernetes.io/pod-name": f"{w.name}-{i}",
                    "controller-revision-hash": rev,
                    "apps.kubernetes.io/pod-index": str(i),
                }
                for i in range(w.replicas)
            ],
        )
    elif w.kind == "DaemonSet":
        t = pod_template(w, dict(base))
        targets = [p for p in pools.values() if w.pool in ("*", p.name)]
        n = sum(len(p.nodes) for p in targets)
        yield {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta(g, w.name, w.namespace, w.uid, base),
            "spec": {"selector": {"matchLabels": sel}, "template": t},
            "status": {"desiredNumberScheduled": n, "currentNumberScheduled": n, "numberReady": n},
        }
        owner = oref("apps/v1", "DaemonSet", w.name, w.uid)
        for p in targets:
            for node in p.nodes:
                node.gpu -= w.gpus_per_pod
                node.cpu_m -= w.cpu_m + 10
                node.mem_mi -= w.mem_mi + 64
                node.pods -= 1
                yield pod(g, w, g.unique(w.name), t, node, owner, {"controller-revision-hash": g.sfx(10)})
    elif w.kind == "Job":
        ctrl = {"batch.kubernetes.io/controller-uid": w.uid, "batch.kubernetes.io/job-name": w.name}
        t = pod_template(w, {**base, **ctrl})
        yield {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta(g, w.name, w.namespace, w.uid, {**base, **ctrl}),
            "spec": {
                "parallelism": w.replicas,
                "completions": w.replicas,
                "backoffLimit": 6,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": w.uid}},
                "template": t,
            },
            "status": {"active": w.replicas, "startTime": CREATED},
        }
        yield from pods_of(t, oref("batch/v1", "Job", w.name, w.uid), [g.unique(w.name) for _ in range(w.replicas)])
    elif w.kind == "CronJob":
        if w.gpus_per_pod:
            place(pools[w.pool], w.gpus_per_pod, w.cpu_m + 10, w.mem_mi + 64)  # room for its next run
        yield {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": meta(g, w.name, w.namespace, w.uid, base),
            "spec": {
                "schedule": f"{g.rng.randrange(60)} {g.rng.randrange(24)} * * *",
                "concurrencyPolicy": "Forbid",
                "jobTemplate": {
                    "metadata": {"creationTimestamp": None},
                    "spec": {"template": pod_template(w, dict(base))},
                },
            },
            "status": {"lastScheduleTime": CREATED},
        }
    elif w.kind == "Pod":
        t = pod_template(w, dict(base))
        yield from pods_of(t, None, [w.name])
    elif w.kind == "PyTorchJob":
        t = pod_template(w, dict(base))
        workers = w.replicas - 1
        specs: Obj = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": t}}
        if workers:
            specs["Worker"] = {"replicas": workers, "restartPolicy": "OnFailure", "template": t}
        yield {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": meta(g, w.name, w.namespace, w.uid, base),
            "spec": {"pytorchReplicaSpecs": specs, "runPolicy": {"cleanPodPolicy": "None"}},
            "status": {"conditions": [{"type": "Running", "status": "True", "reason": "PyTorchJobRunning"}]},
        }
        kf = {"training.kubeflow.org/job-name": w.name, "training.kubeflow.org/operator-name": "pytorchjob-controller"}
        names = [f"{w.name}-master-0"] + [f"{w.name}-worker-{i}" for i in range(workers)]
        extra = [{**kf, "training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"}] + [
            {**kf, "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": str(i)}
            for i in range(workers)
        ]
        yield from pods_of(t, oref("kubeflow.org/v1", "PyTorchJob", w.name, w.uid), names, extra)
    elif w.kind == "JobSet":
        t = pod_template(w, dict(base))
        yield {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": meta(g, w.name, w.namespace, w.uid, base),
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "parallelism": w.replicas,
                                "completions": w.replicas,
                                "completionMode": "Indexed",
                                "template": t,
                            }
                        },
                    }
                ]
            },
            "status": {"replicatedJobsStatus": [{"name": "workers", "active": 1, "ready": 1}]},
        }
        js = {"jobset.sigs.k8s.io/jobset-name": w.name, "jobset.sigs.k8s.io/replicatedjob-name": "workers"}
        yield from pods_of(
            t,
            oref("jobset.x-k8s.io/v1alpha2", "JobSet", w.name, w.uid),
            [g.unique(f"{w.name}-workers-0-{i}") for i in range(w.replicas)],
            [{**js, "batch.kubernetes.io/job-completion-index": str(i)} for i in range(w.replicas)],
        )
    else:  # pragma: no cover - KIND_WEIGHTS and this function move together
        raise AssertionError(w.kind)


def generate(
    out: BinaryIO,
    n_nodes: int,
    n_pods: int,
    n_workloads: int,
    seed: int,
    n_cpu: int | None = None,
    pool_size: int | None = None,
) -> dict[str, int]:
    """`n_nodes` GPU nodes (the brief's 2,000), plus `n_cpu` CPU nodes (default half as many) for the
    pods that request no GPU; `pool_size`: GPU node pools of that many nodes (default: one per product)."""
    g = Gen(seed, pool_size)
    _SELECT[0] = GROUP_LABEL if pool_size else POOL_LABEL
    pools, workloads = plan(g, n_nodes, n_nodes // 2 if n_cpu is None else n_cpu, n_pods, n_workloads)
    size_nodes(pools, workloads)
    header = {
        "apiVersion": "dra-migrate.io/v1alpha1",
        "kind": "ClusterSnapshot",
        "metadata": {
            "kubernetesVersion": K8S_VERSION,
            "server": "https://bench.invalid:6443",
            "context": f"bench-seed-{seed}",
            "takenAt": TAKEN_AT,
            "toolVersion": "0.1.0",
            "servedAPIs": [
                "v1",
                "apps/v1",
                "batch/v1",
                "policy/v1",
                "resource.k8s.io/v1",
                "nvidia.com/v1",
                "kubeflow.org/v1",
                "jobset.x-k8s.io/v1alpha2",
            ],
        },
    }
    counts: dict[str, int] = {}

    def counted(objs: Iterator[Obj]) -> Iterator[Obj]:
        for obj in objs:
            counts[obj["kind"]] = counts.get(obj["kind"], 0) + 1
            yield obj

    # As `dra-migrate snapshot` writes it: the header announces a closing line, which seals the file.
    write_sealed(out, header, counted(_objects(g, pools, workloads)))
    return counts


def _objects(g: Gen, pools: list[Any], workloads: list[Any]) -> Iterator[Obj]:
    by_name = {p.name: p for p in pools}
    i = 0
    for p in pools:
        for within, node in enumerate(p.nodes):
            yield node_obj(g, p, node, i, within)
            i += 1
    shared = [p for p in pools if p.replicas > 1]
    if shared:
        yield (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "time-slicing-config",
                    "namespace": "gpu-operator",
                    "uid": g.uid(),
                    "resourceVersion": "100",
                    "creationTimestamp": CREATED,
                },
                "data": {
                    f"{p.name}-ts{p.replicas}": "version: v1\nflags:\n  migStrategy: none\nsharing:\n"
                    f"  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: {p.replicas}\n"
                    for p in shared
                },
            }
        )
    for w in workloads:
        yield from emit_workload(g, w, by_name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate a synthetic fleet snapshot (ClusterSnapshot JSON Lines).")
    ap.add_argument("--nodes", type=int, default=2000, help="GPU nodes")
    ap.add_argument("--cpu-nodes", type=int, default=None, help="CPU nodes (default: half the GPU nodes)")
    ap.add_argument("--pods", type=int, default=100_000)
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pool-size", type=int, default=None, help="GPU nodes per node pool (default: a pool per GPU)")
    ap.add_argument("-o", "--output", type=Path, required=True, help="the .jsonl file to write ('-' for stdout)")
    args = ap.parse_args(argv)
    if str(args.output) == "-":
        counts = generate(
            sys.stdout.buffer, args.nodes, args.pods, args.workloads, args.seed, args.cpu_nodes, args.pool_size
        )
    else:
        with args.output.open("wb", buffering=1 << 20) as fh:
            counts = generate(fh, args.nodes, args.pods, args.workloads, args.seed, args.cpu_nodes, args.pool_size)
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
