"""The loop that keeps the API server's own `kubernetes` Service, Endpoints and EndpointSlice (what it keeps, and
the upstream it follows: kubesim/apiserver/kubernetesservice.py), run like every controller on kubesim's loop.
(The kubelets' Leases and node heartbeats: kubesim/kubelet/heartbeats.py.)
"""
from __future__ import annotations

from kubesim.apiserver import kubernetesservice
from kubesim.controllers.framework import Controller


class KubernetesService(Controller):
    name = "kubernetes-service"
    KEY = kubernetesservice.KEY

    def __init__(self, cluster):
        super().__init__(cluster)
        self.svc_rt, self.ep_rt = cluster.rt("services"), cluster.rt("endpoints")
        self.slice_rt = cluster.rt("endpointslices", "discovery.k8s.io")

    def start(self) -> None:
        super().start()
        self.queue.add(self.KEY)

    def on_event(self, event_type, rt, obj, old) -> None:
        if event_type == "DELETED" and rt in (self.svc_rt, self.ep_rt, self.slice_rt) and \
                (obj["metadata"].get("namespace"), obj["metadata"]["name"]) == self.KEY:
            self.queue.add(self.KEY)

    def reconcile(self, key) -> None:
        kubernetesservice.ensure(self.store, self.svc_rt, self.ep_rt, self.slice_rt)
