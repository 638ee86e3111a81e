"""The inventory: one pure function of a ClusterState, and its JSON contract (README "JSON contract")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_migrate.cluster.state import ClusterState, source_cluster
from dra_migrate.gcpause import paused_gc
from dra_migrate.inventory.consumers import Consumer, OwnerIndex, PodRequests, find_consumers
from dra_migrate.inventory.dra import NVIDIA_DRA_DRIVER, nodes_with_counters, slice_devices_by_node, summarize_dra
from dra_migrate.inventory.fleet import (
    GpuNode,
    Pool,
    build_gpu_nodes,
    build_pools,
    node_pool,
    vm_workload_nodes,
)
from dra_migrate.inventory.gangs import Gang, find_gangs
from dra_migrate.inventory.operator import (
    cluster_policies,
    device_plugin_daemonset_objects,
    dra_plugin_daemonset_objects,
    dra_plugin_daemonsets,
    known_gpu_names_from_configs,
    node_config_replicas,
    sharing_configs,
    summarize_operator,
)
from dra_migrate.inventory.operator_activity import CLUSTER_POLICY_SWEPT
from dra_migrate.inventory.platform import pool_platforms
from dra_migrate.inventory.resources import GpuNames
from dra_migrate.inventory.topology import MultiGpuConsumer, partial_node_consumers, slice_topology

# Bumped on any incompatible change to the JSON below; additions keep it.
FORMAT_VERSION = 1


@dataclass
class Inventory:
    state: ClusterState
    gpu_names: GpuNames
    consumers: list[Consumer]
    nodes: list[GpuNode]
    pools: list[Pool]
    operator: dict[str, Any]
    dra: dict[str, Any]
    gangs: list[Gang] = field(default_factory=list)  # inventory/gangs.py
    topology: list[MultiGpuConsumer] = field(default_factory=list)  # inventory/topology.py
    # Every pod's node and GPU requests, read once for the checks that need them per pod (not in the JSON).
    pod_requests: PodRequests = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "formatVersion": FORMAT_VERSION,
            "cluster": self.cluster_dict(),
            "consumers": [c.to_dict() for c in self.consumers],
            "nodes": [n.to_dict() for n in self.nodes],
            "pools": [p.to_dict() for p in self.pools],
            "operator": self.operator,
            "dra": self.dra,
            "gangs": [g.to_dict() for g in self.gangs],
            "topology": [t.to_dict() for t in self.topology],
        }

    def cluster_dict(self) -> dict[str, Any]:
        """The `cluster` object every command's JSON carries (inventory, check, match)."""
        src = self.state.source
        return source_cluster(
            src,
            servedAPIs=list(src.served_apis) if src.served_apis is not None else None,
            objects={k: len(v) for k, v in sorted(self.state.objects.items())},
            skipped=dict(sorted(self.state.skipped.items())),
            # Pods that use no devices: read and counted, not kept (ClusterState.other_pods).
            podsWithoutDevices=self.state.other_pods_read,
        )


def build_inventory(
    state: ClusterState, pool_labels: tuple[str, ...] = (), dra_driver: str = NVIDIA_DRA_DRIVER
) -> Inventory:
    """`dra_driver`: the DRA driver that serves the GPUs (`--dra-driver`); another driver's slices (a NIC driver's,
    another vendor's, the NVIDIA driver's ComputeDomain plugin's) are reported, never taken for GPUs."""
    with paused_gc():
        return _build(state, pool_labels, dra_driver)


def gpu_names(state: ClusterState) -> GpuNames:
    """The NVIDIA device plugin's names in this cluster, not every nvidia.com/* a node advertises
    (resources.py `GpuNames`)."""
    return GpuNames(known_gpu_names_from_configs(state))


def _build(state: ClusterState, pool_labels: tuple[str, ...], dra_driver: str) -> Inventory:
    policies = cluster_policies(state)
    vms = vm_workload_nodes(state.of("Node"), policies[0] if policies else None)
    # Nodes whose GPUs go to virtual machines are no GPU nodes here: neither plugin serves them (fleet.py).
    nodes_raw = [n for n in state.of("Node") if str((n.get("metadata") or {}).get("name")) not in vms]
    names = gpu_names(state)
    node_pools = {str((n.get("metadata") or {}).get("name")): node_pool(n, pool_labels) for n in state.of("Node")}
    owners = OwnerIndex(state)  # one walk to each object's top owner, for consumers and gangs alike
    consumers, node_requests, pod_requests = find_consumers(state, names, node_pools, owners)
    gpu_nodes = build_gpu_nodes(
        nodes_raw,
        names,
        pool_labels,
        slice_devices_by_node(state),
        dra_plugin_daemonset_objects(state),
        device_plugin_daemonset_objects(state),
        nodes_with_counters(state, dra_driver),
        CLUSTER_POLICY_SWEPT if policies else frozenset(),
        dra_driver,
    )
    configured = node_config_replicas(state)
    for g in gpu_nodes:
        g.requested = dict(sorted(node_requests.get(g.name, {}).items()))
        g.config_replicas = configured.get(g.name, {})
    configs = sharing_configs(state, [(g.name, g.labels) for g in gpu_nodes])
    pools = build_pools(gpu_nodes)
    platforms = pool_platforms(state, {p.name: p.nodes for p in pools}, {g.name: _dp_daemonset(g) for g in gpu_nodes})
    for p in pools:
        p.platform = platforms.get(p.name)
    return Inventory(
        state=state,
        gpu_names=names,
        consumers=consumers,
        nodes=gpu_nodes,
        pools=pools,
        operator=summarize_operator(state, configs),
        dra=summarize_dra(state, dra_plugin_daemonsets(state)),
        gangs=find_gangs(state, pod_requests, consumers, node_pools, owners),
        topology=partial_node_consumers(consumers, gpu_nodes, slice_topology(state, dra_driver)),
        pod_requests=pod_requests,
    )


def _dp_daemonset(node: GpuNode) -> str | None:
    """The device-plugin DaemonSet ("ns/name") that runs on the node, None when none of the cluster's does."""
    p = node.dp_placement
    if p is None or p.daemonset is None or p.mode not in ("label", "unknown"):
        return None
    return p.daemonset.split(", ")[0]
