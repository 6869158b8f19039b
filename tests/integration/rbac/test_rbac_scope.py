"""Finding 1 of docs/security.md, fixed: what Skiff's ServiceAccount does (create pods and Jobs, read a Secret by
name, apply a team's objects) is bound by RoleBindings in team namespaces only; cluster-wide it may only list and
watch (never Secrets). Through the real client, as Skiff, on kubesim enforcing RBAC: outside team namespaces it
cannot read a Secret, start a pod or any workload, bind itself a role there, or create a namespace; the platform
sync reports a team whose namespace a cluster admin has not prepared; a Sedna CR outside them fails alone."""
from __future__ import annotations

import json
from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from operators.k8s import Kube
from tests.support.rbac.scenarios import RBAC, SKIFF_NS, SKIFF_SA, SKIFF_USER, TEAM, skiff_denials, skiff_env

OUTSIDE = ("kube-system", "not-a-team", SKIFF_NS)
POD = {"metadata": {"name": "grab"}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}
JOB = {"metadata": {"name": "grab"}, "spec": {"template": {"spec": {
    "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1"}]}}}}
DEPLOYMENT = {"metadata": {"name": "grab"}, "spec": {
    "selector": {"matchLabels": {"a": "b"}},
    "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}}}


@pytest.fixture
def env(rbac_sim, tmp_path):
    env = skiff_env(rbac_sim, tmp_path)
    core = kubernetes.client.CoreV1Api(env.admin)
    core.create_namespace({"metadata": {"name": "not-a-team"}})
    for ns in (*OUTSIDE, TEAM):
        core.create_namespaced_secret(ns, {"metadata": {"name": "token-x"}, "stringData": {"token": "s3cr3t"}})
    return env


def _refused(call, *args) -> dict:
    with pytest.raises(ApiException) as info:
        call(*args)
    assert info.value.status == 403, info.value.body
    return json.loads(info.value.body)


@pytest.mark.parametrize("ns", OUTSIDE)
def test_skiff_cannot_read_a_secret_or_start_a_workload_outside_team_namespaces(env, ns):
    core = kubernetes.client.CoreV1Api(env.skiff)
    body = _refused(core.read_namespaced_secret, "token-x", ns)
    assert body["message"] == (f'secrets "token-x" is forbidden: User "{SKIFF_USER}" cannot get resource "secrets" '
                               f'in API group "" in the namespace "{ns}"')
    _refused(core.create_namespaced_pod, ns, POD)
    _refused(kubernetes.client.BatchV1Api(env.skiff).create_namespaced_job, ns, JOB)
    _refused(kubernetes.client.AppsV1Api(env.skiff).create_namespaced_deployment, ns, DEPLOYMENT)
    _refused(core.create_namespaced_config_map, ns, {"metadata": {"name": "grab"}})
    # the same requests in the team namespace are Skiff's work (the test could fail)
    assert core.read_namespaced_secret("token-x", TEAM).metadata.name == "token-x"
    assert core.create_namespaced_pod(TEAM, POD).metadata.namespace == TEAM


@pytest.mark.parametrize("ns", OUTSIDE)
def test_skiff_cannot_bind_itself_a_role_outside_team_namespaces(env, ns):
    """The self-grant a cluster-wide `create rolebindings` + `bind` would allow: refused before any escalation
    check, because Skiff may not create RoleBindings there at all; nor a ClusterRoleBinding or a namespace."""
    rbac = kubernetes.client.RbacAuthorizationV1Api(env.skiff)
    grab = {"metadata": {"name": "grab"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "skiff-devinstances"},
            "subjects": [{"kind": "ServiceAccount", "name": SKIFF_SA, "namespace": SKIFF_NS}]}
    body = _refused(rbac.create_namespaced_role_binding, ns, grab)
    assert body["message"] == (f'rolebindings.rbac.authorization.k8s.io is forbidden: User "{SKIFF_USER}" cannot '
                               f'create resource "rolebindings" in API group "{RBAC}" in the namespace "{ns}"')
    _refused(rbac.create_cluster_role_binding, grab)
    _refused(kubernetes.client.CoreV1Api(env.skiff).create_namespace, {"metadata": {"name": "skiff-grab"}})
    assert rbac.create_namespaced_role_binding(TEAM, grab).metadata.namespace == TEAM   # it holds that role there


def test_the_sync_reports_a_team_whose_namespace_an_admin_has_not_prepared(env):
    """The example file has recsys (bound) and nlp (not made yet): recsys is applied, nlp is one error that says
    what to do, and Skiff made nothing outside recsys."""
    from operators.platform import load_platform
    from operators.platform.sync import sync_cluster

    example = load_platform(Path(__file__).resolve().parents[3] / "operators" / "platform" / "example.yaml")
    report = sync_cluster(Kube(env.skiff), example, quota_timeout=10)
    assert [e.split(":")[0] for e in report.errors] == ["Namespace/nlp", "ResourceQuota/nlp/skiff-quota"]
    assert "cluster admin's step: python -m operators.rbac teams --platform FILE" in report.errors[0]
    assert report.applied and all(a == f"Namespace/{TEAM}" or a.split("/")[1] == TEAM for a in report.applied)
    assert skiff_denials(env.sim) == ["patch namespaces. ns=nlp name=nlp",
                                      "patch resourcequotas. ns=nlp name=skiff-quota"]
    env.add_team_namespace("nlp")             # the admin's step; the next sync completes the team
    assert not sync_cluster(Kube(env.skiff), example, quota_timeout=10).errors


def test_a_sedna_cr_outside_team_namespaces_fails_alone(env):
    """A FederatedLearningJob in a namespace Skiff is not bound in, whose Model names a credential Secret there:
    that CR is an error (the API server's refusal), and the rest of the pass goes on: the same job in the
    opted-in namespace `default` gets its pods (a refused Secret read used to fail the whole pass)."""
    from operators.sedna.install import install_crds
    from operators.sedna.kube import DATASETS, FL_JOBS, MODELS, PODS, Kube
    from operators.sedna.reconcile import reconcile_federated_learning
    from tests.support.sedna.sedna_helpers import dataset, fl_sample, model

    admin = Kube(env.admin)
    install_crds(admin)
    for ns in ("not-a-team", "default"):
        sdd = model("surface-defect-detection-model", "s3://models/sdd/model.ckpt", namespace=ns)
        if ns == "not-a-team":
            sdd["spec"]["credentialName"] = "token-x"
        admin.create(MODELS, ns, sdd)
        for n in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
            admin.create(DATASETS, ns, dataset(n, f"/data/{n}/train.txt", namespace=ns))
        admin.create(FL_JOBS, ns, fl_sample(namespace=ns))
    summary = reconcile_federated_learning(Kube(env.skiff))
    errors = [e for e in summary["errors"] if "not-a-team" in e]
    assert errors and all("default/" not in e for e in summary["errors"]), summary["errors"]
    assert all('is forbidden: User "system:serviceaccount:airflow:skiff"' in e and 'namespace "not-a-team"' in e
               for e in errors), errors
    assert admin.list(PODS, "default", "federatedlearningjob.sedna.io/name") != []
    assert admin.list(PODS, "not-a-team", "federatedlearningjob.sedna.io/name") == []
