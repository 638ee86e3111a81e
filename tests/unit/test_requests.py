"""The per-pod request rule and GPU resource names."""

from dra_migrate.inventory.resources import GpuNames, parse_quantity, pod_requests, quantity_int
from tests.unit.helpers import container

GPU = "nvidia.com/gpu"
NAMES = GpuNames()


def test_sum_of_app_containers() -> None:
    assert pod_requests([container("a", {GPU: 1}), container("b", {GPU: "2"})], [], NAMES) == {GPU: 3}


def test_limit_alone_implies_request() -> None:
    assert pod_requests([container(limits={GPU: 4})], [], NAMES) == {GPU: 4}


def test_request_wins_over_limit() -> None:
    # The API server rejects requests != limits for extended resources; if a file has both, requests count.
    assert pod_requests([container(requests={GPU: 2}, limits={GPU: 2})], [], NAMES) == {GPU: 2}


def test_init_container_larger_than_app_sum_wins() -> None:
    init = [container("warmup", {GPU: 4})]
    assert pod_requests([container("a", {GPU: 1}), container("b", {GPU: 1})], init, NAMES) == {GPU: 4}


def test_init_container_smaller_than_app_sum_does_not_add() -> None:
    init = [container("setup", {GPU: 1})]
    assert pod_requests([container("a", {GPU: 2})], init, NAMES) == {GPU: 2}


def test_sidecar_counts_with_app_containers() -> None:
    init = [container("sidecar", {GPU: 1}, restartPolicy="Always")]
    assert pod_requests([container("a", {GPU: 2})], init, NAMES) == {GPU: 3}


def test_init_after_sidecar_adds_the_sidecar() -> None:
    # Kubernetes: a regular init container runs beside the sidecars started before it.
    init = [container("sidecar", {GPU: 1}, restartPolicy="Always"), container("setup", {GPU: 3})]
    assert pod_requests([container("a", {GPU: 1})], init, NAMES) == {GPU: 4}


def test_init_before_sidecar_does_not_add_it() -> None:
    init = [container("setup", {GPU: 3}), container("sidecar", {GPU: 1}, restartPolicy="Always")]
    assert pod_requests([container("a", {GPU: 1})], init, NAMES) == {GPU: 3}


def test_gpu_names_defaults_and_extras() -> None:
    names = GpuNames({"nvidia.com/a100"})
    for n in (
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/mig-3g.40gb",
        "nvidia.com/mig-1g.10gb.me",
        "nvidia.com/a100",
    ):
        assert n in names
    for n in ("cpu", "nvidia.com/hostdev", "amd.com/gpu", "example.com/gpu"):
        assert n not in names


def test_non_gpu_resources_ignored() -> None:
    assert pod_requests([container(requests={"cpu": "2", "memory": "1Gi"})], [], NAMES) == {}


def test_quantities() -> None:
    assert parse_quantity("1Ki") == 1024
    assert parse_quantity("500m") == parse_quantity("0.5")
    assert quantity_int("2") == 2
    assert quantity_int(3) == 3
    assert quantity_int("1k") == 1000
    assert quantity_int("bogus") == 0
