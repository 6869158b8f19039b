"""kubesim with `authz="rbac"` (`python -m kubesim --authz rbac`): authentication by bearer token and RBAC
authorization as kube-apiserver with `--authorization-mode=RBAC` does them, through the real client."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver.auth.authz import request_token, write_service_account_kubeconfig
from kubesim.testing import sync_api_client

RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
def sim(kubesim_rbac):
    return kubesim_rbac


def client(url: str, token: str | None):
    return sync_api_client(url, token)


@pytest.fixture
def admin(sim):
    with client(sim.url, "kubesim") as api:
        yield api


def make_sa(admin, namespace: str, name: str = "robot") -> None:
    core = kubernetes.client.CoreV1Api(admin)
    if namespace not in {n.metadata.name for n in core.list_namespace().items}:
        core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})


@pytest.fixture
def robot(sim, admin, tmp_path):
    """A client acting as ServiceAccount team-a/robot, through a kubeconfig written by the helper."""
    make_sa(admin, "team-a")
    path = write_service_account_kubeconfig(sim.url, "team-a", "robot", tmp_path / "robot.kubeconfig")
    api = kubernetes.config.new_client_from_config(str(path))
    yield api
    api.close()


def grant(admin, rules: list[dict], *, namespace: str | None = None, cluster_role: bool = False,
          sa=("team-a", "robot"), name: str = "r") -> None:
    """A Role (or ClusterRole) with `rules`, bound to the ServiceAccount in `namespace` (None: cluster-wide)."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(admin)
    subject = [{"kind": "ServiceAccount", "name": sa[1], "namespace": sa[0]}]
    if cluster_role or namespace is None:
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        ref = {"apiGroup": RBAC, "kind": "ClusterRole", "name": name}
    else:
        rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": rules})
        ref = {"apiGroup": RBAC, "kind": "Role", "name": name}
    if namespace is None:
        rbac.create_cluster_role_binding({"metadata": {"name": name}, "roleRef": ref, "subjects": subject})
    else:
        rbac.create_namespaced_role_binding(namespace, {"metadata": {"name": name}, "roleRef": ref,
                                                        "subjects": subject})


def refused(call, *args, **kw) -> tuple[int, dict]:
    with pytest.raises(ApiException) as info:
        call(*args, **kw)
    return info.value.status, json.loads(info.value.body)


def test_service_account_without_bindings_gets_the_real_403(admin, robot):
    """A ServiceAccount with no binding is refused with 403 Forbidden and the apiserver's message
    (responsewriters.forbiddenMessage wrapped by apierrors.NewForbidden), details naming the resource."""
    kubernetes.client.CoreV1Api(admin).create_namespace({"metadata": {"name": "x"}})
    status, body = refused(kubernetes.client.CoreV1Api(robot).list_namespaced_pod, "x")
    assert status == 403 and body["reason"] == "Forbidden" and body["code"] == 403
    assert body["message"] == ('pods is forbidden: User "system:serviceaccount:team-a:robot" cannot list '
                               'resource "pods" in API group "" in the namespace "x"')
    assert body["details"] == {"kind": "pods"}
    status, body = refused(kubernetes.client.BatchV1Api(robot).read_namespaced_job, "j1", "x")
    assert body["message"] == ('jobs.batch "j1" is forbidden: User "system:serviceaccount:team-a:robot" cannot '
                               'get resource "jobs" in API group "batch" in the namespace "x"')
    assert body["details"] == {"name": "j1", "group": "batch", "kind": "jobs"}
    status, body = refused(kubernetes.client.CoreV1Api(robot).list_node)
    assert body["message"] == ('nodes is forbidden: User "system:serviceaccount:team-a:robot" cannot list '
                               'resource "nodes" in API group "" at the cluster scope')


def test_anonymous_and_unknown_tokens(sim):
    """No token: the request is `system:anonymous` (403 for resources; /version and /healthz are public).
    A token the server never issued: 401 Unauthorized."""
    with client(sim.url, None) as anon:
        status, body = refused(kubernetes.client.CoreV1Api(anon).list_namespaced_pod, "default")
        assert status == 403 and 'User "system:anonymous" cannot list resource "pods"' in body["message"]
        assert kubernetes.client.VersionApi(anon).get_code().major == "1"
        status, body = refused(kubernetes.client.CoreApi(anon).get_api_versions)
        assert body["message"] == 'forbidden: User "system:anonymous" cannot get path "/api/"'
    with client(sim.url, "made-up") as bad:
        status, body = refused(kubernetes.client.CoreV1Api(bad).list_namespace)
        assert (status, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")


def test_admin_is_system_masters(admin):
    """kubesim's own kubeconfig token is in `system:masters`: everything is allowed without any binding."""
    core = kubernetes.client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": "any"}})
    core.create_namespaced_secret("any", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert [n.metadata.name for n in core.list_node().items]


def test_role_binding_grants_verbs_in_its_namespace_only(admin, robot):
    """A Role bound in team-a allows exactly its verbs on its resources in team-a, nowhere else."""
    kubernetes.client.CoreV1Api(admin).create_namespace({"metadata": {"name": "team-b"}})
    grant(admin, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}],
          namespace="team-a")
    core = kubernetes.client.CoreV1Api(robot)
    core.create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
    assert core.read_namespaced_config_map("c", "team-a").metadata.name == "c"
    assert refused(core.delete_namespaced_config_map, "c", "team-a")[0] == 403
    assert refused(core.list_namespaced_config_map, "team-b")[0] == 403
    assert refused(core.list_namespaced_secret, "team-a")[0] == 403
    assert refused(core.list_config_map_for_all_namespaces)[0] == 403   # a cluster-scope list


def test_cluster_role_through_role_binding_vs_cluster_role_binding(admin, robot):
    """A ClusterRole bound by a RoleBinding grants in that namespace only; by a ClusterRoleBinding, in every
    namespace and on cluster-scoped resources."""
    core_admin = kubernetes.client.CoreV1Api(admin)
    for ns in ("team-b", "team-c"):
        core_admin.create_namespace({"metadata": {"name": ns}})
    grant(admin, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], namespace="team-b",
          cluster_role=True, name="pod-reader")
    core = kubernetes.client.CoreV1Api(robot)
    core.list_namespaced_pod("team-b")
    assert refused(core.list_namespaced_pod, "team-c")[0] == 403
    grant(admin, [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "get"]}], name="ns-reader")
    assert {"team-b", "team-c"} <= {n.metadata.name for n in core.list_namespace().items}
    assert core.read_namespace("team-c").metadata.name == "team-c"


def test_subresources_and_wildcards(admin, robot):
    """`pods` does not grant `pods/log`; `*/status` grants every resource's status subresource but not the
    resource itself; rules match the API group (`batch` jobs are not core)."""
    grant(admin, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                  {"apiGroups": ["batch"], "resources": ["*/status"], "verbs": ["patch"]}], namespace="team-a")
    core_admin = kubernetes.client.CoreV1Api(admin)
    core_admin.create_namespaced_pod("team-a", {"metadata": {"name": "p"},
                                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    kubernetes.client.BatchV1Api(admin).create_namespaced_job("team-a", job)
    core = kubernetes.client.CoreV1Api(robot)
    assert core.read_namespaced_pod("p", "team-a").metadata.name == "p"
    status, body = refused(core.read_namespaced_pod_log, "p", "team-a")
    assert 'cannot get resource "pods/log" in API group ""' in body["message"]
    batch = kubernetes.client.BatchV1Api(robot)
    batch.patch_namespaced_job_status("j", "team-a", {"metadata": {"annotations": {"a": "b"}}})
    assert refused(batch.patch_namespaced_job, "j", "team-a", {"metadata": {"labels": {"a": "b"}}})[0] == 403
    assert refused(kubernetes.client.AppsV1Api(robot).list_namespaced_deployment, "team-a")[0] == 403


def test_resource_names_limit_a_rule_to_named_objects(admin, robot):
    """With resourceNames a rule allows get/update/delete of those names only, and never list or create."""
    core_admin = kubernetes.client.CoreV1Api(admin)
    for name in ("mine", "other"):
        core_admin.create_namespaced_secret("team-a", {"metadata": {"name": name}, "stringData": {"k": "v"}})
    grant(admin, [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"],
                   "verbs": ["get", "list"]}], namespace="team-a")
    core = kubernetes.client.CoreV1Api(robot)
    assert core.read_namespaced_secret("mine", "team-a").metadata.name == "mine"
    status, body = refused(core.read_namespaced_secret, "other", "team-a")
    assert body["message"].startswith('secrets "other" is forbidden')
    assert refused(core.list_namespaced_secret, "team-a")[0] == 403
    # a list narrowed to one name by fieldSelector is authorized for that name (RequestInfo does this)
    got = core.list_namespaced_secret("team-a", field_selector="metadata.name=mine")
    assert [s.metadata.name for s in got.items] == ["mine"]


def test_watch_is_its_own_verb(admin, robot):
    """`list` does not allow `watch` (`?watch=true` is the watch verb)."""
    grant(admin, [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], namespace="team-a")
    core = kubernetes.client.CoreV1Api(robot)
    core.list_namespaced_pod("team-a")
    status, body = refused(core.list_namespaced_pod, "team-a", watch=True, timeout_seconds=1,
                           _preload_content=False)
    assert 'cannot watch resource "pods"' in body["message"]


def test_token_request_and_token_lifetime(sim, admin):
    """TokenRequest (`POST serviceaccounts/<n>/token`) returns a token for an existing ServiceAccount (404
    otherwise); the token is that ServiceAccount until the ServiceAccount is deleted, then 401."""
    make_sa(admin, "team-a", "short")
    core_admin = kubernetes.client.CoreV1Api(admin)
    status, body = refused(core_admin.create_namespaced_service_account_token, "nobody", "team-a",
                           {"spec": {"expirationSeconds": 3600}})
    assert (status, body["message"]) == (404, 'serviceaccounts "nobody" not found')
    out = core_admin.create_namespaced_service_account_token("short", "team-a", {"spec": {"expirationSeconds": 3600}})
    assert out.status.token and out.spec.expiration_seconds == 3600
    with client(sim.url, out.status.token) as api:
        status, body = refused(kubernetes.client.CoreV1Api(api).list_namespaced_pod, "team-a")
        assert "system:serviceaccount:team-a:short" in body["message"]
        core_admin.delete_namespaced_service_account("short", "team-a")
        assert refused(kubernetes.client.CoreV1Api(api).list_namespaced_pod, "team-a")[0] == 401


def test_binding_needs_bind_or_every_permission(admin, robot):
    """RBAC's escalation check: creating a RoleBinding needs `bind` on its role or holding every permission
    in it; a Role needs `escalate` or every permission it grants."""
    rbac_admin = kubernetes.client.RbacAuthorizationV1Api(admin)
    rbac_admin.create_cluster_role({"metadata": {"name": "secret-reader"},
                                    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})
    grant(admin, [{"apiGroups": [RBAC], "resources": ["rolebindings", "roles"], "verbs": ["create"]}],
          namespace="team-a")
    rbac = kubernetes.client.RbacAuthorizationV1Api(robot)
    binding = {"metadata": {"name": "b"}, "subjects": [{"kind": "User", "name": "alice"}],
               "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "secret-reader"}}
    status, body = refused(rbac.create_namespaced_role_binding, "team-a", binding)
    assert status == 403
    assert body["message"].startswith('rolebindings.rbac.authorization.k8s.io "b" is forbidden: user '
                                      '"system:serviceaccount:team-a:robot" (groups=[')
    assert 'attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["secrets"], ' \
           'Verbs:["get"]}' in body["message"]
    role = {"metadata": {"name": "sr"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    assert refused(rbac.create_namespaced_role, "team-a", role)[0] == 403
    grant(admin, [{"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["bind"],
                   "resourceNames": ["secret-reader"]}], namespace="team-a", cluster_role=True, name="binder")
    rbac.create_namespaced_role_binding("team-a", binding)      # `bind` on that ClusterRole is enough
    assert refused(rbac.create_namespaced_role, "team-a", role)[0] == 403


def test_authz_off_by_default(kubesim):
    """Without `authz="rbac"` kubesim authorizes every request (any or no token), as before."""
    with client(kubesim.url, None) as anon:
        kubernetes.client.CoreV1Api(anon).create_namespaced_secret(
            "default", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})


def test_process_mode_with_authz(tmp_path):
    """`python -m kubesim --authz rbac` enforces RBAC; its kubeconfig is the admin's, and a ServiceAccount
    kubeconfig from `write_service_account_kubeconfig` is that ServiceAccount."""
    from tests.integration.kubesim.test_api_process import start_process
    proc, url, path = start_process(tmp_path, "--authz", "rbac")
    try:
        admin = kubernetes.config.new_client_from_config(str(path))
        make_sa(admin, "team-a")
        token = request_token(url, "team-a", "robot")
        with client(url, token) as api:
            assert refused(kubernetes.client.CoreV1Api(api).list_namespace)[0] == 403
        admin.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_server_side_apply_that_creates_needs_create_too(admin, robot):
    """An apply (`PATCH` application/apply-patch+yaml) is the `patch` verb; when the object does not exist
    yet the apiserver also authorizes the `create` it becomes."""
    grant(admin, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}], namespace="team-a")
    core = kubernetes.client.CoreV1Api(robot)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    apply = {"field_manager": "t", "_content_type": "application/apply-patch+yaml"}
    status, err = refused(core.patch_namespaced_config_map, "c", "team-a", body, **apply)
    assert 'cannot create resource "configmaps"' in err["message"]
    kubernetes.client.CoreV1Api(admin).create_namespaced_config_map("team-a", {"metadata": {"name": "c"}})
    assert core.patch_namespaced_config_map("c", "team-a", body, **apply).data == {"a": "1"}
