"""The stack under RBAC enforcement: kubesim started with ``--authz rbac``, Skiff's RBAC
(``operators.rbac.install_manifests``) applied with the admin kubeconfig, the example platform file's team
namespaces with Skiff's RoleBindings in them (``platform_team_manifests``, a cluster admin's step for a new team)
and in ``default`` (where the Sedna samples live), and a kubeconfig for Skiff's ServiceAccount, which becomes
Airflow's ``kubernetes_default`` (what in-cluster Airflow pods get). The harness keeps the admin kubeconfig for
what a cluster admin does (CRDs, nodes, team set-up, ingress-nginx's port map)."""

from __future__ import annotations

from pathlib import Path

from operators.k8s import Kube
from operators.rbac import (
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE_ACCOUNT,
    apply_manifests,
    install_manifests,
    platform_team_manifests,
    team_manifests,
)

SEDNA_NAMESPACES = ["default"]     # the Sedna e2e samples' namespace, opted in by the admin


def install_skiff_rbac(admin_kubeconfig: Path, out: Path, namespace: str = DEFAULT_NAMESPACE,
                       service_account: str = DEFAULT_SERVICE_ACCOUNT, platform_file: Path | None = None) -> Path:
    """Apply Skiff's RBAC as the admin; return the path of Skiff's ServiceAccount kubeconfig (written to ``out``).
    The teams' namespaces and bindings (and with ``queueing: kueue`` Kueue's cluster-scoped objects) come from
    ``platform_file`` (default: the example)."""
    from kubernetes import client, config

    from devstack.people import write_kubeconfigs

    with config.new_client_from_config(str(admin_kubeconfig)) as admin:
        try:
            client.CoreV1Api(admin).create_namespace({"metadata": {"name": namespace}})
        except client.exceptions.ApiException as e:
            if e.status != 409:
                raise
        apply_manifests(Kube(admin), install_manifests(namespace, service_account))
        from operators.platform import example_path, load_platform

        platform = load_platform(platform_file or example_path())
        apply_manifests(Kube(admin), platform_team_manifests(platform, namespace, service_account))
        apply_manifests(Kube(admin), team_manifests(SEDNA_NAMESPACES, namespace, service_account))
        _ingress_nginx_port_map(admin)
        # the TokenRequest through the admin's client (`kubectl create token`), so an HTTPS kubesim's CA is used
        token = client.CoreV1Api(admin).create_namespaced_service_account_token(
            service_account, namespace, {"spec": {"expirationSeconds": 48 * 3600}}).status.token
    return write_kubeconfigs(admin_kubeconfig, {f"{namespace}-{service_account}": token}, out.parent,
                             namespaces={f"{namespace}-{service_account}": namespace}, names={
                                 f"{namespace}-{service_account}": out.name})[f"{namespace}-{service_account}"]


def _ingress_nginx_port_map(admin) -> None:
    """ingress-nginx's install creates its `tcp-services` ConfigMap; Skiff's RBAC may only read and update it."""
    from kubernetes import client

    from operators.devinstances.desired import tcp_services_configmap
    from operators.devinstances.settings import Settings

    # the stack's [skiff] devinstance_* settings are the declared defaults (stack.py passes it no AIRFLOW*
    # variable)
    settings = Settings()
    try:
        client.CoreV1Api(admin).create_namespaced_config_map(
            settings.tcp_namespace, tcp_services_configmap(settings.tcp_namespace, settings.tcp_name))
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
