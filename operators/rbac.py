"""Skiff's RBAC: the ServiceAccount its Airflow components run as and, per feature, exactly the permissions
that feature's code uses (``k8s_templates/rbac/``; each rule there names its caller).

Two steps, both a cluster admin's (``apply_manifests`` with an admin client, or ``kubectl apply`` on the YAML
``python -m operators.rbac`` prints):

* ``install_manifests``, once, like the CRDs: the ServiceAccount, every ClusterRole, and the ClusterRoleBindings
  of the read-only ``skiff.io/bound-in: cluster`` roles (lists and watches across namespaces);
* ``team_manifests``, when a team is added: in its namespace, a RoleBinding to each ``team-namespaces`` role
  (everything that acts: pods, Jobs, Secrets by name, the team's objects). Skiff cannot do this step itself:
  the right to bind its roles in a namespace that does not exist yet would be the right to bind them in
  kube-system too (docs/security.md).

Layer: with the platform (policy), above the access layer and below the features. It renders and applies the
permissions of every feature and reads ``platform.desired`` for the team people's bindings; Sedna's install
binds its roles through ``team_manifests``. It knows each feature by name (``FEATURES``) only as a key into
``k8s_templates/rbac/``, never by importing it (import-linter: ``[tool.importlinter]`` in pyproject.toml).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from operators.core.names import is_dns_label
from operators.k8s.resource import Resource
from operators.settings import default
from operators.templating import render

if TYPE_CHECKING:  # the access layer loads the client; importing this module must not
    from operators.k8s.rest import Kube

FEATURES = ("training", "sedna", "platform", "devinstances", "ui")
DEFAULT_NAMESPACE = "airflow"
DEFAULT_SERVICE_ACCOUNT = "skiff"
DEFAULT_TCP_SERVICES = default("devinstance_tcp_services")
FIELD_MANAGER = "skiff"
APPLY = "application/apply-patch+yaml"
_RBAC = "rbac.authorization.k8s.io/v1"
# where each kind these templates hold is served, in the access layer's terms: (resource, namespaced)
_RESOURCES = {
    "ServiceAccount": (Resource("v1", "serviceaccounts"), True),
    "ClusterRole": (Resource(_RBAC, "clusterroles"), False),
    "ClusterRoleBinding": (Resource(_RBAC, "clusterrolebindings"), False),
    "Role": (Resource(_RBAC, "roles"), True),
    "RoleBinding": (Resource(_RBAC, "rolebindings"), True),
    "Namespace": (Resource("v1", "namespaces"), False),
    # queueing: kueue: Kueue's cluster-wide objects are a cluster admin's step too (Skiff only lists them)
    "ResourceFlavor": (Resource("kueue.x-k8s.io/v1beta2", "resourceflavors"), False),
    "WorkloadPriorityClass": (Resource("kueue.x-k8s.io/v1beta2", "workloadpriorityclasses"), False),
    "ClusterQueue": (Resource("kueue.x-k8s.io/v1beta2", "clusterqueues"), False),
    "ConfigMap": (Resource("v1", "configmaps"), True),     # Kueue's manager Configuration
}
BOUND_IN = "skiff.io/bound-in"      # team-namespaces | cluster | team-people (the label on each ClusterRole)


def _dns_label(field: str, value: Any) -> str:
    if not is_dns_label(value):
        raise ValueError(f"{field}: {value!r} is not a valid name (DNS-1123 label, at most 63 characters)")
    return value


def _check_features(features) -> None:
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"features: {unknown!r} are not Skiff features (known: {', '.join(FEATURES)})")


def install_manifests(namespace: str = DEFAULT_NAMESPACE, service_account: str = DEFAULT_SERVICE_ACCOUNT,
                      features: tuple[str, ...] | list[str] = FEATURES,
                      tcp_services: str = DEFAULT_TCP_SERVICES) -> list[dict]:
    """The cluster-wide part for ``features`` (default: all of Skiff): the ServiceAccount, the ClusterRoles,
    the read-only roles' ClusterRoleBindings, ingress-nginx's port-map Role, and (with the platform feature)
    ``skiff-member``, the role the sync binds team people to."""
    _dns_label("namespace", namespace)
    _dns_label("service_account", service_account)
    _check_features(features)
    tcp_ns, _, tcp_name = tcp_services.partition("/")
    _dns_label("tcp_services namespace", tcp_ns)
    _dns_label("tcp_services name", tcp_name)
    values = dict(namespace=namespace, service_account=service_account, tcp_services_namespace=tcp_ns,
                  tcp_services_name=tcp_name)
    docs = _as_list(render("rbac/serviceaccount.yaml.j2", **values))
    for feature in features:
        docs += _as_list(render(f"rbac/{feature}.yaml.j2", **values))
    if "platform" in features:
        docs += _as_list(render("rbac/member.yaml.j2"))
    return docs


def team_roles(features: tuple[str, ...] | list[str] = FEATURES) -> list[str]:
    """The ClusterRoles of ``features`` that are bound in each team namespace (label ``bound-in``)."""
    return [d["metadata"]["name"] for d in install_manifests(features=features)
            if d["kind"] == "ClusterRole" and d["metadata"]["labels"].get(BOUND_IN) == "team-namespaces"]


def team_manifests(team_namespaces: list[str] | tuple[str, ...], namespace: str = DEFAULT_NAMESPACE,
                   service_account: str = DEFAULT_SERVICE_ACCOUNT,
                   features: tuple[str, ...] | list[str] = FEATURES) -> list[dict]:
    """Skiff's RoleBindings in each of ``team_namespaces`` (which must exist): one per team role of
    ``features``. Also how a cluster admin lets the Sedna reconcile act in a namespace outside the platform file."""
    _dns_label("namespace", namespace)
    _dns_label("service_account", service_account)
    _check_features(features)
    roles = team_roles(features)
    docs: list[dict] = []
    for i, ns in enumerate(team_namespaces):
        _dns_label(f"team_namespaces[{i}]", ns)
        docs += _as_list(render("rbac/team-bindings.yaml.j2", team_namespace=ns, namespace=namespace,
                                service_account=service_account, roles=roles))
    return docs


def platform_team_manifests(platform, namespace: str = DEFAULT_NAMESPACE,
                            service_account: str = DEFAULT_SERVICE_ACCOUNT,
                            features: tuple[str, ...] | list[str] = FEATURES) -> list[dict]:
    """For each team of a platform file: its Namespace (as the sync renders it, so the sync finds it in place)
    and Skiff's RoleBindings in it; with ``queueing: kueue`` also Kueue's ResourceFlavors, priority classes and
    the teams' ClusterQueues (cluster-scoped: Skiff may only list them) and Kueue's manager Configuration
    (``operators.platform.kueue.manager_config``: Kueue takes over what a team namespace runs without a queue
    name; Kueue reads it when it starts). What a cluster admin applies when the file gains a team or changes a
    team's Kueue quota."""
    from operators.platform.desired import MANAGED_BY, cluster_objects, desired_objects
    from operators.platform.kueue import manager_config

    docs: list[dict] = []
    for team in desired_objects(platform):
        docs.append(team.setup[0])
        docs += team_manifests([team.namespace], namespace, service_account, features)
    kueue_config = [manager_config(dict(MANAGED_BY), platform.pods_ready)] if platform.queueing == "kueue" else []
    return docs + cluster_objects(platform) + kueue_config


def apply_manifests(kube: Kube, docs: list[dict]) -> list[str]:
    """Server-side apply (field manager ``skiff``) of RBAC manifests through the access layer (its retry
    policy, ``KubeError`` on a refusal); returns ``Kind/ns/name`` applied."""
    done = []
    for doc in docs:
        res, namespaced = _RESOURCES[doc["kind"]]
        meta = doc["metadata"]
        kube.request("PATCH", res.path(meta["namespace"] if namespaced else None, meta["name"]),
                     query=[("fieldManager", FIELD_MANAGER), ("force", "true")], body=doc, content_type=APPLY)
        done.append(f"{doc['kind']}/{meta.get('namespace', '')}/{meta['name']}".replace("//", "/"))
    return done


def _as_list(docs) -> list[dict]:
    return docs if isinstance(docs, list) else [docs]


def main(argv: list[str] | None = None) -> int:
    """``python -m operators.rbac install`` | ``teams NS...`` | ``teams --platform FILE``: the YAML to apply."""
    import argparse
    import sys

    import yaml

    parser = argparse.ArgumentParser(prog="python -m operators.rbac", description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="where Airflow runs (Skiff's ServiceAccount)")
    parser.add_argument("--service-account", default=DEFAULT_SERVICE_ACCOUNT)
    parser.add_argument("--tcp-services", default=DEFAULT_TCP_SERVICES, help="ingress-nginx's port map ns/name")
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("install", help="cluster-wide, once")
    teams = sub.add_parser("teams", help="Skiff's RoleBindings in team namespaces (when a team is added)")
    teams.add_argument("team_namespaces", nargs="*")
    teams.add_argument("--platform", help="a platform file: every team's Namespace and bindings")
    args = parser.parse_args(argv)
    try:
        if args.what == "install":
            docs = install_manifests(args.namespace, args.service_account, tcp_services=args.tcp_services)
        elif args.platform:
            from operators.platform import load_platform

            docs = platform_team_manifests(load_platform(args.platform), args.namespace, args.service_account)
        else:
            docs = team_manifests(args.team_namespaces, args.namespace, args.service_account)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
