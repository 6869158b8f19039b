"""What every cluster has (apiserver/kubernetesservice.py, kubelet/heartbeats.py): the `kubernetes` Service and Endpoints in default, put back when
deleted; a Lease per node in kube-node-lease, renewed; node conditions with heartbeat times."""
from __future__ import annotations

import pytest
from kubernetes.client import CoordinationV1Api, CoreV1Api

from kubesim import KubeSim
from kubesim.cluster import Timing
from kubesim.testing import wait_until


@pytest.fixture(scope="module")
def fast_leases():
    sim = KubeSim(timing=Timing(lease_renew=0.2)).start()
    yield sim
    sim.stop()


def test_kubernetes_service_and_endpoints(kubesim):
    core = CoreV1Api(kubesim.api_client())
    svc = wait_until(lambda: next((s for s in core.list_namespaced_service("default").items
                                   if s.metadata.name == "kubernetes"), None), what="the kubernetes Service")
    assert svc.spec.cluster_ip == "10.96.0.1" and [(p.name, p.port, p.target_port) for p in svc.spec.ports] == [
        ("https", 443, 6443)]
    assert svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
    ep = core.read_namespaced_endpoints("kubernetes", "default")
    assert [(p.name, p.port) for p in ep.subsets[0].ports] == [("https", 6443)]
    core.delete_namespaced_service("kubernetes", "default")
    wait_until(lambda: "kubernetes" in [s.metadata.name for s in core.list_namespaced_service("default").items],
               what="the kubernetes Service put back")


def test_node_leases_are_renewed_and_heartbeats_set(fast_leases):
    sim = fast_leases
    core, coord = CoreV1Api(sim.api_client()), CoordinationV1Api(sim.api_client())
    nodes = [n.metadata.name for n in core.list_node().items]

    def leases():
        return {lease.metadata.name: lease for lease in coord.list_namespaced_lease("kube-node-lease").items}
    first = wait_until(lambda: (lambda ls: ls if set(ls) == set(nodes) else None)(leases()), what="a Lease per node")
    lease = first[nodes[0]]
    assert lease.spec.holder_identity == nodes[0] and lease.spec.lease_duration_seconds == 40
    assert lease.metadata.owner_references[0].kind == "Node"
    wait_until(lambda: leases()[nodes[0]].spec.renew_time > lease.spec.renew_time, what="the lease renewed")
    ready = next(c for c in core.read_node(nodes[0]).status.conditions if c.type == "Ready")
    assert ready.last_heartbeat_time is not None and ready.last_heartbeat_time.year >= 2025
    assert ready.last_transition_time is not None
