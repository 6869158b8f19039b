"""kubesim with `authz="rbac"`: people's static bearer tokens (kube-apiserver's `--token-auth-file`), and two
behaviours of the RBAC API that kube-apiserver has: a binding to a role that does not exist needs `bind` on it
(without `bind` the rules must be read, and a missing role is a 404), and a binding's roleRef never changes
(a 422 on update: delete and recreate)."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.testing import sync_api_client

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def admin(kubesim_rbac):
    with sync_api_client(kubesim_rbac.url, "kubesim") as api:
        yield api


def _status(call, *args) -> tuple[int, str]:
    with pytest.raises(ApiException) as info:
        call(*args)
    return info.value.status, json.loads(info.value.body)["message"]


def _bind(admin, namespace: str, name: str, role: str, user: str, kind: str = "ClusterRole") -> None:
    kubernetes.client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}]})


def test_a_static_token_is_that_user_and_authenticated(kubesim_rbac, admin, tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text('# token,user,uid,"groups"\ndana-t,dana,u-1,"ml,ops"\neve-t,eve,u-2\n')
    users = kubesim_rbac.access.load_token_auth_file(path)
    assert [(u.name, u.uid, u.groups) for u in users] == [
        ("dana", "u-1", ("ml", "ops", "system:authenticated")), ("eve", "u-2", ("system:authenticated",))]
    kubernetes.client.RbacAuthorizationV1Api(admin).create_cluster_role({"metadata": {"name": "pod-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    kubernetes.client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding("default", {
        "metadata": {"name": "ml-reads"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "pod-reader"},
        "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": "ml"}]})
    with sync_api_client(kubesim_rbac.url, "dana-t") as dana, sync_api_client(kubesim_rbac.url, "eve-t") as eve:
        assert kubernetes.client.CoreV1Api(dana).list_namespaced_pod("default").items == []   # through group ml
        assert _status(kubernetes.client.CoreV1Api(eve).list_namespaced_pod, "default") == (
            403, 'pods is forbidden: User "eve" cannot list resource "pods" in API group "" in the namespace "default"')
    with sync_api_client(kubesim_rbac.url, "nobody-issued-this") as stranger:
        assert _status(kubernetes.client.CoreV1Api(stranger).list_namespaced_pod, "default")[0] == 401
    bad = tmp_path / "bad.csv"
    bad.write_text("only-a-token\n")
    with pytest.raises(ValueError, match="bad.csv:1: want token,user,uid"):
        kubesim_rbac.access.load_token_auth_file(bad)


def test_binding_a_missing_role_needs_bind(kubesim_rbac, admin):
    """Without `bind` on it, the apiserver reads the role to check for escalation: a missing one is a 404. With
    `bind` (as the platform sync has on skiff-member), the role is not read and need not exist yet."""
    kubesim_rbac.access.add_user_token("fay-t", "fay")
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    rbac.create_cluster_role({"metadata": {"name": "binder"}, "rules": [
        {"apiGroups": [RBAC], "resources": ["rolebindings"], "verbs": ["create"]},
        {"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["later"]}]})
    _bind(admin, "default", "fay-binds", "binder", "fay")
    with sync_api_client(kubesim_rbac.url, "fay-t") as fay:
        mine = kubernetes.client.RbacAuthorizationV1Api(fay)
        body = {"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "nowhere"},
                "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "gil"}]}
        assert _status(mine.create_namespaced_role_binding, "default", {"metadata": {"name": "a"}, **body}) == (
            404, 'clusterroles.rbac.authorization.k8s.io "nowhere" not found')
        body["roleRef"]["name"] = "later"
        assert mine.create_namespaced_role_binding("default", {"metadata": {"name": "b"}, **body}).metadata.name == "b"


def test_a_bindings_role_ref_cannot_change(admin):
    _bind(admin, "default", "team", "view", "hal")
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    code, message = _status(rbac.patch_namespaced_role_binding, "team", "default",
                            {"roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "edit"}})
    assert code == 422 and "roleRef" in message and "cannot change roleRef" in message
    rbac.patch_namespaced_role_binding("team", "default", {"subjects": [
        {"apiGroup": RBAC, "kind": "User", "name": "ida"}]})                  # the rest may change
    assert rbac.read_namespaced_role_binding("team", "default").role_ref.name == "view"
