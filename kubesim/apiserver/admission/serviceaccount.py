"""The ServiceAccount admission plugin, as in a real cluster (the controller that creates each namespace's `default`
ServiceAccount is kubesim/controllers/serviceaccounts.py).

- `ServiceAccountAdmission` (plugin/pkg/admission/serviceaccount): a new pod runs as
  `spec.serviceAccountName` (default `default`); if that ServiceAccount does not exist the pod is refused
  with 403 `pods "<name>" is forbidden: error looking up service account <ns>/<sa>: serviceaccount "<sa>"
  not found`; a pod without imagePullSecrets gets the ServiceAccount's. (The projected token volume the
  real plugin mounts is not added: no container runs here to read it.)
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError

DEFAULT = "default"


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
