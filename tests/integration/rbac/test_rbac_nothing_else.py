"""Skiff's RBAC allows nothing beyond what its features use: with all of it installed (and bound in the team
namespace, as a cluster admin does), Skiff's ServiceAccount cannot list or watch Secrets (it reads one by name
only, in team namespaces only), cannot delete PVCs or namespaces, cannot grant itself more, mint tokens, exec into
pods, or touch other objects of kube-system than the TCP port map. (tests/integration/rbac/test_rbac_scope.py: the same
through the API, outside team namespaces.)"""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver.auth.rbac import service_account_user
from tests.support.rbac.scenarios import SKIFF_NS, SKIFF_SA, TEAM, skiff_env

SKIFF = service_account_user(SKIFF_NS, SKIFF_SA)
RBAC = "rbac.authorization.k8s.io"
OTHER_NS = ("kube-system", SKIFF_NS, "kube-public", "not-a-team")      # namespaces Skiff is not bound in


@pytest.fixture
def env(rbac_sim, tmp_path):
    return skiff_env(rbac_sim, tmp_path)


def can(env, verb, resource, namespace="", group="", name="", subresource="") -> bool:
    return env.sim.access.allowed(SKIFF, verb, resource, group=group, namespace=namespace, name=name,
                                  subresource=subresource)


def test_secrets_by_name_only(env):
    """Instance passwords and Sedna's S3 credentials are read by name; Skiff can never list or watch Secrets
    (which would read every Secret of a namespace), nor patch one."""
    assert can(env, "get", "secrets", TEAM, name="alice-nb-password")
    for ns in OTHER_NS:
        assert not can(env, "get", "secrets", ns, name="alice-nb-password")
    assert not can(env, "get", "secrets", name="x")                      # nor cluster-wide
    for ns in (TEAM, *OTHER_NS):
        for verb in ("list", "watch", "deletecollection", "patch"):
            assert not can(env, verb, "secrets", ns)
    with pytest.raises(ApiException) as info:
        kubernetes.client.CoreV1Api(env.skiff).list_namespaced_secret("kube-system")
    assert info.value.status == 403 and json.loads(info.value.body)["message"] == (
        'secrets is forbidden: User "system:serviceaccount:airflow:skiff" cannot list '
        'resource "secrets" in API group "" in the namespace "kube-system"')


def test_never_deletes_user_data_or_namespaces(env):
    """PVCs hold users' data and namespaces hold teams: Skiff applies PVCs in team namespaces, never deletes
    them; it neither creates nor deletes namespaces (a new team's namespace is a cluster admin's step)."""
    assert can(env, "create", "persistentvolumeclaims", TEAM)
    assert can(env, "patch", "namespaces", TEAM, name=TEAM)             # its own team namespace's labels
    assert not can(env, "create", "namespaces")
    for ns in OTHER_NS:
        assert not can(env, "create", "persistentvolumeclaims", ns)
        assert not can(env, "patch", "namespaces", ns, name=ns)
    for ns in (TEAM, *OTHER_NS):
        assert not can(env, "delete", "persistentvolumeclaims", ns, name="alice-home")
        assert not can(env, "deletecollection", "persistentvolumeclaims", ns)
        assert not can(env, "update", "persistentvolumeclaims", ns, name="alice-home")
    assert not can(env, "delete", "namespaces", TEAM, name=TEAM)
    assert not can(env, "delete", "resourcequotas", TEAM, name="skiff-quota")


def test_cannot_grant_itself_more(env):
    """Skiff binds only `skiff-member` (team people), in team namespaces only; it cannot create roles or any
    binding outside team namespaces, read or delete RoleBindings, bind cluster-admin or its own roles, mint
    tokens or impersonate."""
    assert not can(env, "create", "clusterrolebindings", group=RBAC)
    assert not can(env, "create", "clusterroles", group=RBAC)
    assert not can(env, "create", "roles", TEAM, group=RBAC)
    assert can(env, "create", "rolebindings", TEAM, group=RBAC)
    assert can(env, "bind", "clusterroles", TEAM, group=RBAC, name="skiff-member")
    for ns in OTHER_NS:
        assert not can(env, "create", "rolebindings", ns, group=RBAC)
        assert not can(env, "patch", "rolebindings", ns, group=RBAC, name="skiff-members")
        assert not can(env, "bind", "clusterroles", ns, group=RBAC, name="skiff-member")
    for verb in ("get", "delete", "update"):
        assert not can(env, verb, "rolebindings", "kube-system", group=RBAC, name="x")
        assert not can(env, verb, "rolebindings", TEAM, group=RBAC, name="x")
    for role in ("cluster-admin", "admin", "edit", "skiff-training", "skiff-devinstances",
                 "system:controller:job-controller"):
        for ns in ("", TEAM):
            assert not can(env, "bind", "clusterroles", ns, group=RBAC, name=role)
    assert not can(env, "escalate", "clusterroles", group=RBAC, name="edit")
    assert not can(env, "create", "serviceaccounts", SKIFF_NS, name=SKIFF_SA, subresource="token")
    assert not can(env, "impersonate", "users")
    binding = {"metadata": {"name": "grab"}, "subjects": [{"kind": "ServiceAccount", "name": SKIFF_SA,
                                                           "namespace": SKIFF_NS}],
               "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"}}
    kubernetes.client.RbacAuthorizationV1Api(env.admin).create_cluster_role(
        {"metadata": {"name": "cluster-admin"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]})
    with pytest.raises(ApiException) as info:
        kubernetes.client.RbacAuthorizationV1Api(env.skiff).create_namespaced_role_binding(TEAM, binding)
    assert info.value.status == 403 and "attempting to grant RBAC permissions not currently held" in info.value.body


def test_kube_system_only_the_port_map(env):
    """In ingress-nginx's namespace Skiff may read and update tcp-services only, no other ConfigMap (it creates
    and deletes instances' start-up ConfigMaps in team namespaces only, and never reads or changes others)."""
    assert can(env, "get", "configmaps", "kube-system", name="tcp-services")
    assert can(env, "update", "configmaps", "kube-system", name="tcp-services")
    assert not can(env, "get", "configmaps", "kube-system", name="kube-proxy")
    assert not can(env, "list", "configmaps", "kube-system")
    assert not can(env, "update", "configmaps", "kube-system", name="coredns")
    assert not can(env, "create", "configmaps", "kube-system")
    assert not can(env, "delete", "configmaps", "kube-system", name="coredns")
    assert can(env, "create", "configmaps", TEAM)


def test_no_shell_nodes_or_cluster_config(env):
    """No exec/attach/port-forward into pods, no nodes, no CRD changes, no workloads it does not run."""
    for sub in ("exec", "attach", "portforward"):
        assert not can(env, "create", "pods", TEAM, subresource=sub, name="p")
    assert not can(env, "list", "nodes")
    assert not can(env, "create", "customresourcedefinitions", group="apiextensions.k8s.io")
    assert not can(env, "create", "daemonsets", TEAM, group="apps")
    assert not can(env, "create", "cronjobs", TEAM, group="batch")
    assert not can(env, "update", "jobs", TEAM, group="batch", name="j")
    assert not can(env, "patch", "jobs", TEAM, group="batch", subresource="status", name="j")
