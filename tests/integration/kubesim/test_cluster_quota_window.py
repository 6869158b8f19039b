"""The window before the resourcequota controller has filled in a new quota's status.

kube-apiserver's quota admission enforces the resources in the quota's *status* (hard and used), which only
the controller writes; the API clears a new quota's status on create. Before the controller's first sync the
quota is therefore not enforced at all (creates slip past it); once status.hard names a resource that
status.used lacks, a create that uses it is refused with 403 "status unknown for quota: <name>, resources:
<names>" (apiserver plugin/resourcequota/controller.go: hasUsageStats). kubesim's controller lag is
`cluster.quota.status_lag` seconds (default 0).
"""
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.testing import wait_until


@pytest.fixture
def lagging_quota(kubesim):
    kubesim.cluster.quota.status_lag = 0.5
    yield kubesim
    kubesim.cluster.quota.status_lag = 0.0


def pvc(name: str, size: str = "1Gi") -> dict:
    return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                 "resources": {"requests": {"storage": size}}}}


def _used(core, ns):
    status = core.read_namespaced_resource_quota("skiff-quota", ns).status
    return (status.used or {}) if status else {}


def test_a_new_quota_is_not_enforced_until_the_controller_fills_its_status(lagging_quota, k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "team-w"}})
    created = core.create_namespaced_resource_quota(
        "team-w", {"metadata": {"name": "skiff-quota"}, "spec": {"hard": {"requests.storage": "1Gi"}}})
    assert not (created.status and created.status.hard)  # the API cleared it; the controller has not synced
    core.create_namespaced_persistent_volume_claim("team-w", pvc("early", "5Gi"))  # slips past the quota
    wait_until(lambda: "requests.storage" in _used(core, "team-w"),
               what="the controller filled in the quota's status")
    assert _used(core, "team-w")["requests.storage"] == "5Gi"  # counted once known
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_persistent_volume_claim("team-w", pvc("late", "1Gi"))
    body = json.loads(caught.value.body)
    assert caught.value.status == 403 and "exceeded quota: skiff-quota" in body["message"]


def test_no_lag_fills_the_status_in_the_create(kubesim, k8s):
    """With the default lag of 0 the status is there as soon as the quota is: nothing to wait for."""
    core = client.CoreV1Api(k8s)
    created = core.create_namespaced_resource_quota("default", {"metadata": {"name": "q"},
                                                                "spec": {"hard": {"pods": "3"}}})
    assert created.status.hard == {"pods": "3"} and created.status.used == {"pods": "0"}


def test_a_status_that_names_a_resource_without_its_usage_refuses_creates(lagging_quota, k8s):
    """The other side of the window: status.hard names requests.storage but status.used does not (published
    by a controller that has not counted it yet): a create using it gets kube-apiserver's 403 "status unknown"."""
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "team-u"}})
    core.create_namespaced_resource_quota(
        "team-u", {"metadata": {"name": "skiff-quota"}, "spec": {"hard": {"requests.storage": "1Gi", "pods": "2"}}})
    quota = core.read_namespaced_resource_quota("skiff-quota", "team-u")
    quota.status = client.V1ResourceQuotaStatus(hard={"requests.storage": "1Gi", "pods": "2"}, used={"pods": "0"})
    core.replace_namespaced_resource_quota_status("skiff-quota", "team-u", quota)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_persistent_volume_claim("team-u", pvc("early"))
    body = json.loads(caught.value.body)
    assert caught.value.status == 403 and body["message"] == (
        'persistentvolumeclaims "early" is forbidden: status unknown for quota: skiff-quota, '
        "resources: requests.storage")
    wait_until(lambda: "requests.storage" in _used(core, "team-u"),
               what="the controller filled in the quota's status")
    core.create_namespaced_persistent_volume_claim("team-u", pvc("late"))   # known now, and within the quota
