"""discovery.k8s.io/v1 EndpointSlices (workloads/endpointslice.py) as kube-controller-manager's
endpointslice-controller writes them (staging/src/k8s.io/endpointslice/reconciler.go and utils.go), and the
API server's own `kubernetes` slice (apiserver/kubernetesservice.py; pkg/controlplane/reconcilers/endpointsadapter.go),
observed through the `kubernetes` client."""
from __future__ import annotations

import re

from kubernetes.client import AppsV1Api, CoreV1Api, DiscoveryV1Api

from kubesim.testing import wait_until

MANAGED = "endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io"


def web_deployment(replicas: int = 2) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:1.25",
                                                           "ports": [{"name": "http", "containerPort": 8080}]}]}}}}


def web_service(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "web", "port": 80, "targetPort": "http"}],
                     **spec}}


def slices(disc, service: str = "web") -> list:
    return disc.list_namespaced_endpoint_slice("default", label_selector=f"kubernetes.io/service-name={service}").items


def running(core) -> list:
    return [p for p in core.list_namespaced_pod("default", label_selector="app=web").items
            if p.status.phase == "Running" and p.status.pod_ip]


def test_slice_lists_the_selected_pods(k8s):
    """One slice `web-<5 random>` owned by the Service (controller ref), labelled with the Service's labels
    plus service-name and managed-by, IPv4, the named targetPort resolved from the pods' container port,
    one endpoint per running pod: its IP, ready/serving/not terminating, targetRef and nodeName. It follows
    the pods, and goes with the Service (garbage collector)."""
    apps, core, disc = AppsV1Api(k8s), CoreV1Api(k8s), DiscoveryV1Api(k8s)
    svc = core.create_namespaced_service("default", web_service())
    apps.create_namespaced_deployment("default", web_deployment())
    pods = wait_until(lambda: (lambda ps: ps if len(ps) == 2 else None)(running(core)), what="two pods running")

    def endpoint_ips():
        return sorted(a for s in slices(disc) for e in s.endpoints or [] for a in e.addresses)
    wait_until(lambda: endpoint_ips() == sorted(p.status.pod_ip for p in pods), what="both pods in the slice")
    (es,) = slices(disc)
    assert re.fullmatch(r"web-[a-z0-9]{5}", es.metadata.name) and es.metadata.generate_name == "web-"
    assert es.metadata.labels == {"tier": "front", "kubernetes.io/service-name": "web",
                                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    (owner,) = es.metadata.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "v1", "Service", "web", svc.metadata.uid, True, True)
    assert es.address_type == "IPv4"
    assert [(p.name, p.port, p.protocol) for p in es.ports] == [("web", 8080, "TCP")]
    by_pod = {e.target_ref.name: e for e in es.endpoints}
    assert set(by_pod) == {p.metadata.name for p in pods}
    for p in pods:
        e = by_pod[p.metadata.name]
        assert e.addresses == [p.status.pod_ip] and e.node_name == p.spec.node_name
        assert (e.target_ref.kind, e.target_ref.namespace, e.target_ref.uid) == ("Pod", "default", p.metadata.uid)
        assert (e.conditions.ready, e.conditions.serving, e.conditions.terminating) == (True, True, False)
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    wait_until(lambda: len(endpoint_ips()) == 1, what="the slice down to one endpoint")
    assert slices(disc)[0].metadata.name == es.metadata.name            # updated in place
    core.delete_namespaced_service("web", "default")
    wait_until(lambda: not slices(disc), what="the slice gone with its Service")


def test_no_pods_make_a_placeholder_slice(k8s):
    """A Service selecting nothing gets one placeholder slice (no endpoints, no ports); the first pod
    replaces it with a slice of its ports. A Service without a selector gets none from the controller."""
    apps, core, disc = AppsV1Api(k8s), CoreV1Api(k8s), DiscoveryV1Api(k8s)
    core.create_namespaced_service("default", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "manual"},
                                               "spec": {"ports": [{"port": 80}]}})
    core.create_namespaced_service("default", web_service())
    (placeholder,) = wait_until(lambda: slices(disc), what="the placeholder slice")
    assert (placeholder.endpoints, placeholder.ports, placeholder.address_type) == (None, None, "IPv4")
    apps.create_namespaced_deployment("default", web_deployment(replicas=1))
    (es,) = wait_until(lambda: [s for s in slices(disc) if s.endpoints], what="a slice with the pod")
    wait_until(lambda: len(slices(disc)) == 1, what="the placeholder deleted")
    assert es.metadata.name != placeholder.metadata.name and es.ports[0].port == 8080
    assert not slices(disc, "manual")
    assert {s.metadata.labels["kubernetes.io/service-name"] for s in
            disc.list_namespaced_endpoint_slice("default", label_selector=MANAGED).items} == {"web"}


def test_a_pod_not_ready_is_listed_not_ready(k8s):
    """A pod with an IP whose container is not ready (image pull failing) is an endpoint with ready and serving
    false (podToEndpoint); publishNotReadyAddresses makes it ready."""
    core, disc = CoreV1Api(k8s), DiscoveryV1Api(k8s)
    core.create_namespaced_service("default", web_service())
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stuck", "labels": {"app": "web"}, "annotations": {"kubesim.io/reason": "ErrImagePull"}},
        "spec": {"containers": [{"name": "web", "image": "nope", "ports": [{"name": "http", "containerPort": 8080}]}]}})
    (ep,) = wait_until(lambda: [e for s in slices(disc) for e in s.endpoints or []], what="the pod's endpoint")
    assert ep.target_ref.name == "stuck" and (ep.conditions.ready, ep.conditions.serving) == (False, False)
    core.patch_namespaced_service("web", "default", {"spec": {"publishNotReadyAddresses": True}})
    wait_until(lambda: [e.conditions.ready for s in slices(disc) for e in s.endpoints or []] == [True],
               what="ready once not-ready addresses are published")


def test_kubernetes_service_has_its_slice(kubesim):
    """The API server writes slice `kubernetes` (no owner, no managed-by, its address ready, port https 6443)
    and puts it back when deleted."""
    disc = DiscoveryV1Api(kubesim.api_client())
    es = wait_until(lambda: next(iter(slices(disc, "kubernetes")), None), what="the kubernetes slice")
    assert es.metadata.name == "kubernetes" and es.metadata.labels == {"kubernetes.io/service-name": "kubernetes"}
    assert not es.metadata.owner_references
    assert [(e.addresses, e.conditions.ready) for e in es.endpoints] == [(["127.0.0.1"], True)]
    assert [(p.name, p.port, p.protocol) for p in es.ports] == [("https", 6443, "TCP")]
    disc.delete_namespaced_endpoint_slice("kubernetes", "default")
    again = wait_until(lambda: next(iter(slices(disc, "kubernetes")), None), what="the kubernetes slice put back")
    assert again.metadata.uid != es.metadata.uid
