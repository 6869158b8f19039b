"""``Resource``: an API group/version and plural, and the URL paths of its objects.

Skiff's requests go out as plain JSON on these paths (see ``rest``), so objects stay dicts end to end.

Every namespace and name that becomes a path segment is checked here, the one place every request's URL is
built: a value with ``/``, ``..``, ``?``, ``#`` or ``%`` would address another object (``team='x/secrets/y'``
turns "this instance's Secret" into any Secret of the namespace), so it is refused with a ``ValueError``
naming it before any request is made, whichever caller forgot to validate its input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from operators.core.checks import invalid
from operators.core.names import is_dns_label, is_dns_subdomain

# a subresource path Skiff's own code writes ("status", "log", "proxy/metrics"): plain words only
_SUB_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def _check_segments(namespace: str | None, name: str | None, sub: str | None) -> None:
    if namespace is not None and not is_dns_label(namespace):
        raise invalid("namespace", namespace, "not a valid Kubernetes namespace (DNS-1123 label); "
                      "refused before it became part of a request path")
    if name is not None:
        # the service/pod proxy addresses "<name>:<port>" (kube-apiserver's proxy REST, ``SplitSchemeNamePort``)
        base, colon, port = name.partition(":") if sub and sub.startswith("proxy") else (name, "", "")
        if not is_dns_subdomain(base) or (colon and not is_dns_label(port)):
            raise invalid("name", name, "not a valid Kubernetes object name (DNS-1123 subdomain); "
                          "refused before it became part of a request path")
    if sub is not None and not all(_SUB_SEGMENT.fullmatch(s) and s not in (".", "..") for s in sub.split("/")):
        raise invalid("subresource", sub, "not a plain subresource path")


@dataclass(frozen=True)
class Resource:
    group_version: str  # "v1", "apps/v1", "sedna.io/v1alpha1"
    plural: str

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        """``/api[s]/<group/version>[/namespaces/<namespace>]/<plural>[/<name>[/<sub>]]``; ``ValueError``
        if ``namespace`` or ``name`` is not a valid Kubernetes name (``""`` counts as not given)."""
        _check_segments(namespace or None, name or None, sub or None)
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
# Kueue (kubernetes-sigs/kueue, API kueue.x-k8s.io/v1beta2): a queued Job's Workload and the team's LocalQueues
WORKLOADS = Resource("kueue.x-k8s.io/v1beta2", "workloads")
LOCALQUEUES = Resource("kueue.x-k8s.io/v1beta2", "localqueues")
CLUSTERQUEUES = Resource("kueue.x-k8s.io/v1beta2", "clusterqueues")
