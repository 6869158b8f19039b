"""The access layer's callers that write, where a request may be sent twice (``Kube`` sends a request again
after a transient failure, and the first send may have been committed before its answer was lost): each
must end with the one object it meant. Sedna's reconcile is tested the same way in tests/*/sedna/
(``test_a_pass_rides_out_transient_errors_and_lost_answers_without_duplicates``)."""

from __future__ import annotations

import pytest

from devstack.airflow_env import kubernetes_connection_uri
from operators.k8s.resource import JOBS, Resource
from operators.k8s.rest import Kube

NS = "default"


@pytest.fixture
def conn(kubesim, kubeconfig, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_FAULTY_CLUSTER", kubernetes_connection_uri(kubeconfig))
    return "faulty_cluster"


def job(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "volumes": [],
                                           "containers": [{"name": "main", "image": "busybox"}]}}}}


def test_training_job_create_adopts_its_own_create_whose_answer_was_lost(kubesim, conn, k8s):
    """The training operator names a try's Job deterministically and reads it on 409: a lost answer to its
    create (or a 503 / reset before it) ends with one Job, whose reference the try goes on with."""
    from operators.training.jobs import TrainingJobs

    jobs = TrainingJobs(conn)
    kubesim.fail(verb="create", path="/jobs$", status=503, count=1)
    kubesim.lose_answers(verb="create", path="/jobs$", count=1)
    ref = jobs.create(job("try-1"))
    listed = Kube(k8s).list(JOBS, NS)
    assert [j["metadata"]["name"] for j in listed] == ["try-1"]
    assert ref == {"namespace": NS, "name": "try-1", "uid": listed[0]["metadata"]["uid"]}
    assert kubesim.stats()["by_resource"]["create jobs.batch"] == 3
    assert jobs.kube.retried == {"POST 503": 1, "POST no answer": 1}


def test_platform_server_side_apply_sent_again_applies_once(kubesim, k8s):
    """Server-side apply is idempotent: the same document applied again after a lost answer changes nothing."""
    from operators.platform.sync import apply_request

    kube = Kube(k8s)
    doc = {"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": "team-x", "labels": {"app.kubernetes.io/managed-by": "skiff"}}}
    kubesim.lose_answers(verb="patch", path="/namespaces/team-x$", count=1)
    applied = apply_request(kube, doc)
    assert applied["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "skiff"
    assert kube.retried == {"PATCH no answer": 1}
    live = Kube(k8s).get(Resource("v1", "namespaces"), None, "team-x")
    assert live["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]  # one write, not two


def test_rbac_install_rides_out_a_503_and_a_refusal_is_a_kube_error(kubesim, k8s):
    """An admin's install (``operators.rbac.apply_manifests``) goes through the access layer: a 503 is sent
    again and every object is applied once; a refusal is a ``KubeError`` in the one message format."""
    from operators.k8s import KubeError
    from operators.rbac import apply_manifests, install_manifests, team_manifests

    docs = install_manifests("default", "skiff", features=["training"]) + team_manifests(["default"], "default", "skiff",
                                                                                           ["training"])
    kubesim.fail(verb="patch", path="/clusterroles/skiff-training$", status=503, count=1)
    applied = apply_manifests(Kube(k8s), docs)
    assert applied == [f"{d['kind']}/{d['metadata'].get('namespace', '')}/{d['metadata']['name']}".replace("//", "/")
                       for d in docs]
    assert kubesim.stats()["by_resource"]["patch clusterroles.rbac.authorization.k8s.io"] == 2
    role = Kube(k8s).get(Resource("rbac.authorization.k8s.io/v1", "clusterroles"), None, "skiff-training")
    assert role["rules"] == next(d for d in docs if d["metadata"]["name"] == "skiff-training")["rules"]
    kubesim.fail(verb="patch", path="/serviceaccounts/skiff$", status=403, count=1)
    with pytest.raises(KubeError) as info:
        apply_manifests(Kube(k8s), docs[:1])
    assert str(info.value).startswith("403 ")
