"""Skiff's RBAC: the ServiceAccount its Airflow components run as and, per feature, exactly the permissions
that feature's code uses (``k8s_templates/rbac/``; each rule there names its caller).

``install_manifests`` renders the cluster-wide part (a cluster admin applies it once, like the CRDs);
``team_manifests`` / ``apply_team_rbac`` the per-team-namespace part (Skiff's own RoleBinding there and the
members' RoleBindings), which Skiff applies itself when it sets a team up: that is why ``skiff-platform``
holds ``bind`` on the ``skiff-team*`` roles and nothing more.
"""

from __future__ import annotations

import re
from typing import Any

from operators.templating import render

FEATURES = ("training", "sedna", "platform", "devinstances")
DEFAULT_NAMESPACE = "airflow"
DEFAULT_SERVICE_ACCOUNT = "skiff"
DEFAULT_TCP_SERVICES = "kube-system/tcp-services"
FIELD_MANAGER = "skiff"
APPLY = "application/apply-patch+yaml"
MEMBER_ROLES = ("member", "admin")
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
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value):
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


def team_manifests(team: str, members: list[dict] | None = None, namespace: str = DEFAULT_NAMESPACE,
                   service_account: str = DEFAULT_SERVICE_ACCOUNT) -> list[dict]:
    """Skiff's RoleBinding in the team namespace and one per member (``{"user": ..., "role": member|admin}``)."""
    _dns_label("team", team)
    rows = []
    for i, m in enumerate(members or []):
        user, role = (m or {}).get("user"), (m or {}).get("role", "member")
        if not isinstance(user, str) or not user.strip():
            raise ValueError(f"members[{i}].user: {user!r} must be a non-empty user name")
        if role not in MEMBER_ROLES:
            raise ValueError(f"members[{i}].role: {role!r} must be one of {', '.join(MEMBER_ROLES)}")
        slug = re.sub(r"[^a-z0-9-]+", "-", user.lower()).strip("-")[:40] or "user"
        rows.append({"user": user, "role": role, "binding": f"skiff-member-{slug}"})
    if len({r["binding"] for r in rows}) != len(rows):
        raise ValueError(f"members: two users map to the same RoleBinding name in team {team!r}")
    return _as_list(render("rbac/team.yaml.j2", team=team, members=rows, namespace=namespace,
                           service_account=service_account))


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


def apply_team_rbac(api_client, team: str, members: list[dict] | None = None, namespace: str = DEFAULT_NAMESPACE,
                    service_account: str = DEFAULT_SERVICE_ACCOUNT) -> list[str]:
    """What the platform sync applies per team (idempotent)."""
    return apply_manifests(api_client, team_manifests(team, members, namespace, service_account))


def _as_list(docs) -> list[dict]:
    return docs if isinstance(docs, list) else [docs]
