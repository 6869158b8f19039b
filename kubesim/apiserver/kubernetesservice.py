"""The API server's own Service: kube-apiserver's bootstrap controller (k8s.io/kubernetes/pkg/controlplane/controller/
kubernetesservice/controller.go) keeps Service `default/kubernetes` (ClusterIP 10.96.0.1, the first address of the
service range; port `https` 443 -> 6443; labels component=apiserver, provider=kubernetes) and its Endpoints (the API
server's address) and EndpointSlice `kubernetes` (pkg/controlplane/reconcilers/endpointsadapter.go
`updateEndpointSlice`: named after the Service, label kubernetes.io/service-name only, no owner and no managed-by:
the endpointslice-controller leaves it alone, the Service has no selector), and puts them back if deleted.

What it keeps is here; the loop that runs it on kubesim's one event loop is kubesim/controllers/bootstrap.py.
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError

APISERVER_IP = "10.96.0.1"
APISERVER_ENDPOINT = "127.0.0.1"
KEY = ("default", "kubernetes")


def kubernetes_service() -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": APISERVER_IP, "sessionAffinity": "None",
                     "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}]}}


def kubernetes_endpoints() -> dict:
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": APISERVER_ENDPOINT}],
                         "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]}


def kubernetes_endpointslice() -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [APISERVER_ENDPOINT], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}


def ensure(store, svc_rt, ep_rt, slice_rt) -> None:
    """Create whichever of the three is missing."""
    for rt, desired in ((svc_rt, kubernetes_service()), (ep_rt, kubernetes_endpoints()),
                        (slice_rt, kubernetes_endpointslice())):
        try:
            store.create(rt, "default", desired)
        except ApiError as e:
            if e.code != 409:       # already there (or the namespace is being reset)
                raise
