"""The ServiceAccount admission plugin's image pull secrets, as kube-apiserver applies them to new pods.

kube-apiserver's `ServiceAccount` admission sets `spec.serviceAccountName` (default `default`, done in
kubesim's defaulting) and, when the pod names no `imagePullSecrets` of its own, copies the ServiceAccount's
`imagePullSecrets` into the pod, so every pod of a namespace pulls with the secrets its ServiceAccount lists.
Not simulated: the real plugin refuses a pod whose ServiceAccount does not exist (kubesim has no
ServiceAccount controller creating `default` in each namespace, so it admits such pods unchanged).
"""
from __future__ import annotations

from kubesim.errors import ApiError


class ServiceAccountAdmission:
    def __init__(self, store):
        self.store = store
        self._sa = store.registry.lookup("", "v1", "serviceaccounts")

    def __call__(self, req) -> None:
        if (req.operation != "CREATE" or req.subresource or (req.rt.group, req.rt.plural) != ("", "pods")
                or not req.namespace):
            return
        spec = req.obj.setdefault("spec", {})
        if spec.get("imagePullSecrets"):
            return
        try:
            account = self.store.get(self._sa, req.namespace, spec.get("serviceAccountName") or "default")
        except ApiError as e:
            if e.code == 404:
                return
            raise
        secrets = [{"name": s["name"]} for s in account.get("imagePullSecrets") or [] if s.get("name")]
        if secrets:
            spec["imagePullSecrets"] = secrets
