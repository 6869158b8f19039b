"""Finding 2 of docs/security.md, fixed: a team's people cannot read a teammate's instance password with kubectl.

The platform sync (run as Skiff) binds the example file's admins and members to `skiff-member`
(k8s_templates/rbac/member.yaml.j2) in their team namespace; each person then talks to kubesim (enforcing RBAC)
through the real client with their own bearer token (kube-apiserver's static token file). Reading a teammate's
instance Secret is refused, and so is every other way to it: listing Secrets, starting a pod or a workload that
could mount it, exec into the teammate's instance. What they may do (read the team's pods, Jobs and logs) works,
and the owner still gets the password through Skiff's page API path (its owner check)."""
from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver.auth.rbac import User
from kubesim.testing import sync_api_client
from operators.k8s import Kube
from tests.support.rbac.scenarios import TEAM, skiff_env

EXAMPLE = Path(__file__).resolve().parents[3] / "operators" / "platform" / "example.yaml"
MOUNT_IT = {"metadata": {"name": "peek"}, "spec": {"containers": [{"name": "c", "image": "busybox:1", "env": [
    {"name": "P", "valueFrom": {"secretKeyRef": {"name": "alice-nb-password", "key": "password"}}}]}]}}


@pytest.fixture
def team(rbac_sim, tmp_path):
    """The example file synced as Skiff (recsys: alice admin, bob member), an instance each, and their tokens."""
    from operators.devinstances import lifecycle
    from operators.devinstances.settings import Settings
    from operators.platform import load_platform
    from operators.platform.sync import sync_cluster
    from tests.support.devinstances.devinstance_support import make_request, wait_ready

    env = skiff_env(rbac_sim, tmp_path)
    env.add_team_namespace("nlp")
    report = sync_cluster(Kube(env.skiff), load_platform(EXAMPLE), quota_timeout=10)
    assert not report.errors, report.errors
    settings = Settings(host="dev.example.com", idle_seconds=3600)
    kubernetes.client.CoreV1Api(env.admin).create_namespaced_config_map(
        settings.tcp_namespace, {"metadata": {"name": settings.tcp_name}})           # ingress-nginx's
    for owner in ("alice", "bob"):
        lifecycle.create(Kube(env.skiff), make_request(owner=owner), settings)
        wait_ready(env.admin, owner, "nb")
    for person in ("alice", "bob", "carol"):                  # carol: nlp's admin, not in recsys
        rbac_sim.access.add_user_token(f"{person}-token", person)
    env.people = {p: sync_api_client(rbac_sim.url, token=f"{p}-token") for p in ("alice", "bob", "carol")}
    return env


def _refused(call, *args, **kw) -> str:
    with pytest.raises(ApiException) as info:
        call(*args, **kw)
    assert info.value.status == 403, info.value.body
    return json.loads(info.value.body)["message"]


@pytest.mark.parametrize("reader, owner", [("bob", "alice"), ("alice", "bob")])
def test_a_teammate_cannot_read_an_instance_password(team, reader, owner):
    """A member cannot read the team admin's password, nor the team admin a member's."""
    core = kubernetes.client.CoreV1Api(team.people[reader])
    assert _refused(core.read_namespaced_secret, f"{owner}-nb-password", TEAM) == (
        f'secrets "{owner}-nb-password" is forbidden: User "{reader}" cannot get resource "secrets" in API group "" '
        f'in the namespace "{TEAM}"')
    _refused(core.list_namespaced_secret, TEAM)
    _refused(core.patch_namespaced_secret, f"{owner}-nb-password", TEAM, {})      # a patch returns the object
    _refused(core.delete_namespaced_secret, f"{owner}-nb-password", TEAM)         # so does a delete


def test_no_way_around_it_through_a_pod_or_exec(team):
    """Whoever may create a pod can mount any Secret of the namespace, and exec opens the instance itself: the
    role allows neither (nor Jobs, Deployments, StatefulSets: each a pod template)."""
    bob = team.people["bob"]
    _refused(kubernetes.client.CoreV1Api(bob).create_namespaced_pod, TEAM, MOUNT_IT)
    job = {"metadata": {"name": "peek"}, "spec": {"template": {"spec": {**MOUNT_IT["spec"], "restartPolicy": "Never"}}}}
    _refused(kubernetes.client.BatchV1Api(bob).create_namespaced_job, TEAM, job)
    pod = kubernetes.client.CoreV1Api(team.admin).list_namespaced_pod(
        TEAM, label_selector="skiff.io/owner=alice").items[0].metadata.name
    who = User("bob", ("system:authenticated",))
    for sub in ("exec", "attach", "portforward"):
        assert not team.sim.access.allowed(who, "create", "pods", subresource=sub, namespace=TEAM, name=pod)
    assert not team.sim.access.allowed(who, "get", "services", subresource="proxy", namespace=TEAM, name="alice-nb")
    for verb, res, group in (("create", "deployments", "apps"), ("create", "statefulsets", "apps"),
                             ("patch", "statefulsets", "apps"), ("create", "rolebindings", "rbac.authorization.k8s.io"),
                             ("create", "configmaps", "")):
        assert not team.sim.access.allowed(who, verb, res, group=group, namespace=TEAM, name="x")


def test_what_people_may_do_still_works(team):
    """Read the team's work and logs in their own team namespace (not in another team's), and the owner gets the
    password through Skiff (operators.devinstances.inventory.password, behind the page's owner check)."""
    from operators.devinstances import inventory

    bob = kubernetes.client.CoreV1Api(team.people["bob"])
    pods = bob.list_namespaced_pod(TEAM, label_selector="skiff.io/owner=alice").items
    assert pods and bob.read_namespaced_pod_log(pods[0].metadata.name, TEAM) is not None
    assert kubernetes.client.BatchV1Api(team.people["bob"]).list_namespaced_job(TEAM).items == []
    assert _refused(bob.list_namespaced_pod, "nlp")        # bob is not in nlp
    carol = kubernetes.client.CoreV1Api(team.people["carol"])      # nlp's admin: nothing in recsys
    _refused(carol.list_namespaced_pod, TEAM)
    assert inventory.password(Kube(team.skiff), "alice", TEAM, "nb", caller="alice")


def test_a_binding_made_before_to_edit_is_refused_until_an_admin_deletes_it(rbac_sim, tmp_path):
    """roleRef cannot change (as kube-apiserver): on a cluster set up before this fix, the sync cannot turn
    `skiff-members -> edit` into `-> skiff-member`; it reports it (never silently keeps `edit`), and once a
    cluster admin deletes the old binding the next sync makes the new one."""
    from operators.platform import load_platform
    from operators.platform.sync import sync_cluster

    env = skiff_env(rbac_sim, tmp_path)
    env.add_team_namespace("nlp")
    rbac = kubernetes.client.RbacAuthorizationV1Api(env.admin)
    rbac.create_namespaced_role_binding(TEAM, {
        "metadata": {"name": "skiff-members", "labels": {"app.kubernetes.io/managed-by": "skiff"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]})
    example = load_platform(EXAMPLE)
    errors = sync_cluster(Kube(env.skiff), example, quota_timeout=10).errors
    assert len(errors) == 1 and errors[0].startswith(f"RoleBinding/{TEAM}/skiff-members: 422") and \
        "cannot change roleRef" in errors[0], errors
    rbac.delete_namespaced_role_binding("skiff-members", TEAM)
    assert not sync_cluster(Kube(env.skiff), example, quota_timeout=10).errors
    assert rbac.read_namespaced_role_binding("skiff-members", TEAM).role_ref.name == "skiff-member"
