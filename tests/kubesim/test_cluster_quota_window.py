"""The window before the resourcequota controller has filled in a new quota's status.

kube-apiserver's quota admission works from the quota's status (hard and used), which only the controller
writes; while status.used lacks a resource the quota covers, a create that uses it is refused with
403 "status unknown for quota: <name>, resources: <names>". (A brand-new quota with an empty status is not
enforced at all by the real server; kubesim refuses in that window too, so clients that skip waiting fail
visibly.) kubesim's controller lag is `cluster.quota.status_lag` seconds (default 0).
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


def pvc(name: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                 "resources": {"requests": {"storage": "1Gi"}}}}


def test_create_in_the_window_is_status_unknown_then_admitted(lagging_quota, k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "team-w"}})
    core.create_namespaced_resource_quota("team-w", {"metadata": {"name": "skiff-quota"},
                                                     "spec": {"hard": {"requests.storage": "10Gi"}}})
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_persistent_volume_claim("team-w", pvc("early"))
    body = json.loads(caught.value.body)
    assert caught.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('persistentvolumeclaims "early" is forbidden: status unknown for quota: '
                               "skiff-quota, resources: requests.storage")
    # a create the quota does not cover is not held up
    core.create_namespaced_config_map("team-w", {"metadata": {"name": "free"}})
    def used():
        status = core.read_namespaced_resource_quota("skiff-quota", "team-w").status
        return (status.used or {}) if status else {}

    wait_until(lambda: used().get("requests.storage") == "0", what="the controller filled in the quota's status")
    core.create_namespaced_persistent_volume_claim("team-w", pvc("late"))


def test_no_lag_fills_the_status_in_the_create(kubesim, k8s):
    """With the default lag of 0 the status is there as soon as the quota is: nothing to wait for."""
    core = client.CoreV1Api(k8s)
    created = core.create_namespaced_resource_quota("default", {"metadata": {"name": "q"},
                                                                "spec": {"hard": {"pods": "3"}}})
    assert created.status.hard == {"pods": "3"} and created.status.used == {"pods": "0"}
