"""What a PromQL query reads that the migration changes (inventory/dependents.py `expr_reads`), in the shapes
rules and dashboards are written in: across lines (`expr: |`), with the `exported_` labels Prometheus writes when
a scraped series carries its own `pod` label (prometheus/prometheus v3 config `honor_labels: false`, the default,
renames it; NVIDIA's gpu-operator ServiceMonitor for dcgm-exporter does not honour labels), with regex matchers on
kube-state-metrics' `resource` label (Prometheus anchors a matcher's regex: `^(?:re)$`, model/labels/regexp.go),
and through recording rules."""

from __future__ import annotations

import pytest

from dra_migrate.inventory.dependents import expr_reads, gpu_rule_exprs
from tests.unit.helpers import obj, state


@pytest.mark.parametrize(
    "expr",
    [
        "avg by (namespace, pod) (\n  DCGM_FI_DEV_GPU_UTIL\n) < 10",
        "sum(\n  DCGM_FI_DEV_FB_USED\n)\nby (container)",
        'DCGM_FI_DEV_GPU_UTIL{exported_pod=~"chat-.*"}',
        "sum by (exported_namespace) (DCGM_FI_DEV_GPU_UTIL)",
    ],
)
def test_dcgm_read_by_pod_in_any_layout(expr: str) -> None:
    assert expr_reads(expr)[1] is True


@pytest.mark.parametrize(
    "expr",
    [
        "count by (Hostname) (DCGM_FI_DEV_GPU_UTIL)",
        'DCGM_FI_DEV_GPU_UTIL{Hostname=~"pod-pool-.*"}',  # `pod` inside a value is not a label
        'avg(DCGM_FI_DEV_GPU_UTIL{modelName="H100"})',
    ],
)
def test_dcgm_by_node_is_not_flagged(expr: str) -> None:
    assert expr_reads(expr)[1] is False


@pytest.mark.parametrize(
    "expr",
    [
        'sum(kube_pod_container_resource_requests{resource=~"nvidia.*"})',
        "sum(kube_node_status_allocatable{resource=~'nvidia_com_.*'})",
        'sum by (node) (kube_node_status_allocatable{resource=~".*gpu.*"})',
        'sum(kube_node_status_capacity{resource=~"nvidia_com_mig.*"})',
        'kube_pod_container_resource_limits{resource!~"cpu|memory|ephemeral_storage"}',
    ],
)
def test_regex_matchers_that_select_gpu_resources(expr: str) -> None:
    assert expr_reads(expr)[0], expr


@pytest.mark.parametrize(
    "expr",
    [
        'sum(kube_pod_container_resource_requests{resource=~"cpu|memory"})',
        'kube_node_status_allocatable{resource!~"nvidia.*"}',
        'kube_node_status_allocatable{resource=~"("}',  # not a regex Prometheus would load: ignored
    ],
)
def test_regex_matchers_that_do_not_select_gpu_resources(expr: str) -> None:
    assert expr_reads(expr)[0] == ()


def test_rules_fed_by_a_gpu_recording_rule_are_flagged() -> None:
    rules = {
        "groups": [
            {
                "name": "rec",
                "rules": [
                    {
                        "record": "namespace:gpu_requests:sum",
                        "expr": 'sum by (namespace) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"})',
                    },
                    {"record": "cluster:gpu_requests:sum", "expr": "sum(namespace:gpu_requests:sum)"},
                ],
            }
        ]
    }
    alerts = {
        "groups": [
            {
                "name": "alerts",
                "rules": [
                    {"alert": "TeamOverGpuBudget", "expr": "cluster:gpu_requests:sum > 64"},
                    {"alert": "Unrelated", "expr": "namespace:cpu_requests:sum > 64"},
                ],
            }
        ]
    }
    s = state(
        obj("monitoring.coreos.com/v1", "PrometheusRule", "a-alerts", alerts, namespace="monitoring"),
        obj("monitoring.coreos.com/v1", "PrometheusRule", "z-records", rules, namespace="monitoring"),
    )
    found = {e.rule: e.terms for e in gpu_rule_exprs(s)}
    assert found == {
        "namespace:gpu_requests:sum": ("nvidia_com_gpu",),
        "cluster:gpu_requests:sum": ("nvidia_com_gpu",),
        "TeamOverGpuBudget": ("nvidia_com_gpu",),
    }


def test_dashboards_and_autoscalers_on_a_gpu_recording_rule_are_flagged() -> None:
    import json

    from dra_migrate.inventory.autoscalers import gpu_scalers
    from dra_migrate.inventory.dashboards import dashboards

    rec = {
        "groups": [
            {
                "name": "rec",
                "rules": [{"record": "pod:gpu_util:avg", "expr": "avg by (exported_pod) (DCGM_FI_DEV_GPU_UTIL)"}],
            }
        ]
    }
    model = {"title": "GPU", "panels": [{"title": "util", "targets": [{"expr": 'pod:gpu_util:avg{exported_pod="a"}'}]}]}
    board = obj("v1", "ConfigMap", "gpu-board", namespace="monitoring", labels={"grafana_dashboard": "1"})
    board["data"] = {"gpu.json": json.dumps(model)}
    trigger = {"type": "prometheus", "metadata": {"query": "avg(pod:gpu_util:avg)", "threshold": "50"}}
    scaler = obj(
        "keda.sh/v1alpha1", "ScaledObject", "chat", {"scaleTargetRef": {"name": "chat"}, "triggers": [trigger]}
    )
    s = state(obj("monitoring.coreos.com/v1", "PrometheusRule", "rec", rec, namespace="monitoring"), board, scaler)
    assert [q.expr for d in dashboards(s)[0] for q in d.queries] == ['pod:gpu_util:avg{exported_pod="a"}']
    assert [(g.name, g.per_pod_dcgm) for g in gpu_scalers(s)] == [("chat", True)]
