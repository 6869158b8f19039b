"""The ServiceAccount controller and the ServiceAccount admission plugin, as in a real cluster.

- `ServiceAccountController` (kube-controller-manager's serviceaccount-controller): every active namespace
  has a ServiceAccount `default`; it is created when the namespace appears and again if it is deleted. It
  acts on the namespace event itself (not a later queue pass), so a client that creates a namespace and
  then a pod in it finds the `default` ServiceAccount, as it practically always does on a real cluster.
- `ServiceAccountAdmission` (plugin/pkg/admission/serviceaccount): a new pod runs as
  `spec.serviceAccountName` (default `default`); if that ServiceAccount does not exist the pod is refused
  with 403 `pods "<name>" is forbidden: error looking up service account <ns>/<sa>: serviceaccount "<sa>"
  not found`; a pod without imagePullSecrets gets the ServiceAccount's. (The projected token volume the
  real plugin mounts is not added: no container runs here to read it.)
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller

DEFAULT = "default"


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


class ServiceAccountAdmission:
    """Admission plugin (runs after validation's defaulting has set `serviceAccountName`)."""

    def __init__(self, store):
        self.store = store
        self._sa_rt = store.registry.lookup("", "v1", "serviceaccounts")

    def __call__(self, req) -> None:
        if req.operation != "CREATE" or req.rt.plural != "pods" or req.rt.group or req.subresource:
            return
        pod = req.obj
        spec = pod.setdefault("spec", {})
        annotations = pod["metadata"].get("annotations") or {}
        if "kubernetes.io/config.mirror" in annotations:
            return
        name = spec.get("serviceAccountName") or DEFAULT
        spec["serviceAccountName"] = name
        try:
            sa = self.store.get(self._sa_rt, req.namespace, name)
        except ApiError as e:
            if e.code != 404:
                raise
            pod_name = pod["metadata"].get("name") or pod["metadata"].get("generateName") or ""
            raise ApiError(403, f'pods "{pod_name}" is forbidden: error looking up service account '
                                f'{req.namespace}/{name}: serviceaccount "{name}" not found', "Forbidden",
                           name=pod_name, kind="pods") from None
        if not spec.get("imagePullSecrets") and sa.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [dict(s) for s in sa["imagePullSecrets"]]
