"""The ServiceAccount controller and the ServiceAccount admission plugin, as on a real cluster (with or
without RBAC enforcement)."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.testing import wait_until


def _pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def test_every_namespace_has_a_default_service_account(k8s):
    """kube-controller-manager's serviceaccount controller: each namespace, the built-in ones included,
    has a ServiceAccount `default`, there as soon as a client can use the new namespace; deleted, it comes
    back."""
    core = kubernetes.client.CoreV1Api(k8s)
    for ns in ("default", "kube-system", "kube-public"):
        assert core.read_namespaced_service_account("default", ns).metadata.name == "default"
    core.create_namespace({"metadata": {"name": "fresh"}})
    assert [sa.metadata.name for sa in core.list_namespaced_service_account("fresh").items] == ["default"]
    old_uid = core.read_namespaced_service_account("default", "fresh").metadata.uid
    core.delete_namespaced_service_account("default", "fresh")
    wait_until(lambda: _uid(core, "fresh") not in (None, old_uid), what="default ServiceAccount re-created")


def _uid(core, ns):
    try:
        return core.read_namespaced_service_account("default", ns).metadata.uid
    except ApiException:
        return None


def test_pod_naming_a_missing_service_account_is_refused(k8s):
    """ServiceAccount admission: a pod runs as `spec.serviceAccountName` (default `default`); one naming a
    ServiceAccount that does not exist is refused with 403 and the plugin's message, and nothing is stored."""
    core = kubernetes.client.CoreV1Api(k8s)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", _pod("p", serviceAccountName="ghost"))
    body = json.loads(info.value.body)
    assert info.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('pods "p" is forbidden: error looking up service account default/ghost: '
                               'serviceaccount "ghost" not found')
    assert core.list_namespaced_pod("default").items == []
    assert core.create_namespaced_pod("default", _pod("q")).spec.service_account_name == "default"


def test_pod_gets_the_service_account_image_pull_secrets(k8s):
    """A pod without imagePullSecrets gets its ServiceAccount's (how a team's registry credentials reach
    its pods); a pod that names its own keeps them."""
    core = kubernetes.client.CoreV1Api(k8s)
    core.create_namespaced_service_account("default", {"metadata": {"name": "team"},
                                                       "imagePullSecrets": [{"name": "registry"}]})
    p = core.create_namespaced_pod("default", _pod("a", serviceAccountName="team"))
    assert [s.name for s in p.spec.image_pull_secrets] == ["registry"]
    p = core.create_namespaced_pod("default", _pod("b", serviceAccountName="team", imagePullSecrets=[{"name": "own"}]))
    assert [s.name for s in p.spec.image_pull_secrets] == ["own"]


def test_job_pods_wait_for_their_service_account(k8s):
    """A Job whose pods name a missing ServiceAccount gets FailedCreate events and creates its pod once the
    ServiceAccount exists (the Job controller retries, as the real one does)."""
    core, batch = kubernetes.client.CoreV1Api(k8s), kubernetes.client.BatchV1Api(k8s)
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "serviceAccountName": "late", "containers": [{"name": "c", "image": "busybox"}]}}}}
    batch.create_namespaced_job("default", job)
    wait_until(lambda: any(e.reason == "FailedCreate" and "serviceaccount \"late\" not found" in e.message
                           for e in core.list_namespaced_event("default").items), what="FailedCreate event")
    core.create_namespaced_service_account("default", {"metadata": {"name": "late"}})
    wait_until(lambda: core.list_namespaced_pod("default", label_selector="job-name=j").items,
               timeout=15, what="the Job's pod")
