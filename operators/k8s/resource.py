"""``Resource``: an API group/version and plural, and the URL paths of its objects.

Skiff's requests go out as plain JSON on these paths (see ``rest``), so objects stay dicts end to end.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    group_version: str  # "v1", "apps/v1", "sedna.io/v1alpha1"
    plural: str

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        path = base + (f"/namespaces/{namespace}" if namespace else "") + f"/{self.plural}"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path


PODS = Resource("v1", "pods")
SERVICES = Resource("v1", "services")
EVENTS = Resource("v1", "events")
PVCS = Resource("v1", "persistentvolumeclaims")
SECRETS = Resource("v1", "secrets")
CONFIGMAPS = Resource("v1", "configmaps")
RESOURCEQUOTAS = Resource("v1", "resourcequotas")
STATEFULSETS = Resource("apps/v1", "statefulsets")
JOBS = Resource("batch/v1", "jobs")
DEPLOYMENTS = Resource("apps/v1", "deployments")
HPAS = Resource("autoscaling/v2", "horizontalpodautoscalers")
