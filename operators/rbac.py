"""Skiff's RBAC: the ServiceAccount its Airflow components run as and, per feature, exactly the permissions
that feature's code uses (``k8s_templates/rbac/``; each rule there names its caller).

``install_manifests`` renders it (a cluster admin applies it once, like the CRDs: ``apply_manifests`` with an
admin client, or ``kubectl apply`` on the rendered YAML).
"""

from __future__ import annotations

import re
from typing import Any

from operators.templating import render

FEATURES = ("training", "sedna", "platform", "devinstances", "ui")
DEFAULT_NAMESPACE = "airflow"
DEFAULT_SERVICE_ACCOUNT = "skiff"
DEFAULT_TCP_SERVICES = "kube-system/tcp-services"
FIELD_MANAGER = "skiff"
APPLY = "application/apply-patch+yaml"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# where each kind these templates hold is served: (path prefix, plural, namespaced)
_PATHS = {
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
}


def _dns_label(field: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(f"{field}: {value!r} is not a valid name (DNS-1123 label, at most 63 characters)")
    return value


def install_manifests(namespace: str = DEFAULT_NAMESPACE, service_account: str = DEFAULT_SERVICE_ACCOUNT,
                      features: tuple[str, ...] | list[str] = FEATURES,
                      tcp_services: str = DEFAULT_TCP_SERVICES) -> list[dict]:
    """The ServiceAccount and the ClusterRoles/bindings of ``features`` (default: all of Skiff)."""
    _dns_label("namespace", namespace)
    _dns_label("service_account", service_account)
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"features: {unknown!r} are not Skiff features (known: {', '.join(FEATURES)})")
    tcp_ns, _, tcp_name = tcp_services.partition("/")
    _dns_label("tcp_services namespace", tcp_ns)
    _dns_label("tcp_services name", tcp_name)
    values = dict(namespace=namespace, service_account=service_account, tcp_services_namespace=tcp_ns,
                  tcp_services_name=tcp_name)
    docs = _as_list(render("rbac/serviceaccount.yaml.j2", **values))
    for feature in features:
        docs += _as_list(render(f"rbac/{feature}.yaml.j2", **values))
    return docs


def apply_manifests(api_client, docs: list[dict]) -> list[str]:
    """Server-side apply (field manager ``skiff``) of RBAC manifests; returns ``Kind/ns/name`` applied."""
    done = []
    for doc in docs:
        prefix, plural, namespaced = _PATHS[doc["kind"]]
        meta = doc["metadata"]
        path = f"{prefix}/namespaces/{meta['namespace']}/{plural}" if namespaced else f"{prefix}/{plural}"
        api_client.call_api(
            f"{path}/{meta['name']}", "PATCH", query_params=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            header_params={"Content-Type": APPLY, "Accept": "application/json"}, body=doc,
            auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True)
        done.append(f"{doc['kind']}/{meta.get('namespace', '')}/{meta['name']}".replace("//", "/"))
    return done


def _as_list(docs) -> list[dict]:
    return docs if isinstance(docs, list) else [docs]
