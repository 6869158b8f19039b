"""kube-controller-manager's serviceaccount-controller: every active namespace has a ServiceAccount `default`; it is
created when the namespace appears and again if it is deleted. It acts on the namespace event itself (not a later
queue pass), so a client that creates a namespace and then a pod in it finds the `default` ServiceAccount, as it
practically always does on a real cluster. (The admission plugin that uses it:
kubesim/apiserver/admission/serviceaccount.py.)"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.admission.serviceaccount import DEFAULT
from kubesim.controllers.framework import Controller


class ServiceAccountController(Controller):
    name = "serviceaccount-controller"

    def on_event(self, event_type: str, rt, obj: dict, old: dict | None) -> None:
        if rt.group:
            return
        md = obj["metadata"]
        if rt.plural == "namespaces" and event_type == "ADDED":
            self.reconcile((None, md["name"]))
        elif rt.plural == "serviceaccounts" and event_type == "DELETED" and md["name"] == DEFAULT:
            self.reconcile((None, md["namespace"]))

    def reconcile(self, key) -> None:
        namespace = key[1]
        ns = self.cluster.cache.get(self.cluster.rt("namespaces"), None, namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        sa_rt = self.cluster.rt("serviceaccounts")
        try:
            self.store.create(sa_rt, namespace, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                 "metadata": {"name": DEFAULT, "namespace": namespace}})
        except ApiError as e:
            if e.code not in (403, 404, 409):    # 409: exists; 403/404: the namespace is going away
                raise
