"""ResourceQuota admission and status, as kube-apiserver + the resourcequota controller do them."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client import CoreV1Api

from kubesim.testing import wait_until


def error_of(call, *args, **kwargs) -> tuple[int, dict]:
    with pytest.raises(kubernetes.client.exceptions.ApiException) as info:
        call(*args, **kwargs)
    return info.value.status, json.loads(info.value.body)


def team(core, name="team-a", **hard) -> None:
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    core.create_namespaced_resource_quota(name, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "skiff-quota"},
        "spec": {"hard": hard or {"requests.cpu": "2", "requests.memory": "4Gi", "limits.cpu": "2",
                                  "limits.memory": "4Gi", "requests.nvidia.com/gpu": "1", "pods": "5"}}})


def pod(name, cpu="1", memory="1Gi", gpu=0, duration=60) -> dict:
    res = {"cpu": cpu, "memory": memory}
    if gpu:
        res["nvidia.com/gpu"] = str(gpu)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {"kubesim.io/duration": str(duration)}},
            "spec": {"restartPolicy": "Never",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "c", "image": "busybox:1.36",
                                     "resources": {"requests": res, "limits": res}}]}}


def used(core, ns="team-a") -> dict:
    return core.read_namespaced_resource_quota("skiff-quota", ns).status.used or {}


def test_exceeded_quota_is_forbidden_with_real_message(k8s):
    """A pod that would push requests.cpu over the hard limit → 403 Forbidden `exceeded quota: ...,
    requested: ..., used: ..., limited: ...` (only the exceeded resources), and nothing is created."""
    core = CoreV1Api(k8s)
    team(core)
    core.create_namespaced_pod("team-a", pod("one", cpu="1"))
    status, body = error_of(core.create_namespaced_pod, "team-a", pod("two", cpu="2", memory="1Gi"))
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('pods "two" is forbidden: exceeded quota: skiff-quota, requested: '
                               "limits.cpu=2,requests.cpu=2, used: limits.cpu=1,requests.cpu=1, "
                               "limited: limits.cpu=2,requests.cpu=2")
    assert [p.metadata.name for p in core.list_namespaced_pod("team-a").items] == ["one"]


def test_gpu_quota(k8s):
    """requests.nvidia.com/gpu is enforced like any other quota resource."""
    core = CoreV1Api(k8s)
    team(core, **{"requests.nvidia.com/gpu": "1"})
    core.create_namespaced_pod("team-a", pod("g1", gpu=1))
    status, body = error_of(core.create_namespaced_pod, "team-a", pod("g2", gpu=1))
    assert status == 403
    assert body["message"].endswith("requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
                                    "limited: requests.nvidia.com/gpu=1")


def test_quota_on_cpu_requires_requests_and_limits(k8s):
    """When a quota covers cpu/memory, a pod without them is refused: `failed quota: <name>: must specify
    limits.cpu for: c; ...`."""
    core = CoreV1Api(k8s)
    team(core)
    body = pod("bare")
    del body["spec"]["containers"][0]["resources"]
    status, err = error_of(core.create_namespaced_pod, "team-a", body)
    assert status == 403
    assert err["message"] == ('pods "bare" is forbidden: failed quota: skiff-quota: must specify limits.cpu for: c; '
                              "limits.memory for: c; requests.cpu for: c; requests.memory for: c")


def test_status_used_tracks_pods_and_releases_finished_ones(k8s):
    """status.hard mirrors spec.hard; status.used adds running pods and drops them once they are
    Succeeded/Failed or deleted (terminated pods use no quota)."""
    core = CoreV1Api(k8s)
    team(core)
    assert wait_until(lambda: used(core).get("requests.cpu") == "0")
    assert core.read_namespaced_resource_quota("skiff-quota", "team-a").status.hard["limits.memory"] == "4Gi"
    core.create_namespaced_pod("team-a", pod("short", cpu="500m", memory="1Gi", duration=0.3))
    core.create_namespaced_pod("team-a", pod("long", cpu="1", memory="2Gi", duration=60))
    wait_until(lambda: used(core).get("requests.cpu") == "1500m" and used(core).get("pods") == "2")
    assert used(core)["requests.memory"] == "3Gi"
    wait_until(lambda: used(core).get("requests.cpu") == "1")     # "short" succeeded
    assert used(core)["pods"] == "1"
    core.create_namespaced_pod("team-a", pod("fits-now", cpu="1"))   # 1 + 1 <= 2 once "short" is done
    core.delete_namespaced_pod("long", "team-a")
    wait_until(lambda: used(core).get("requests.memory") == "1Gi")


def test_pvc_storage_quota(k8s):
    """PVC creation counts requests.storage and persistentvolumeclaims."""
    core = CoreV1Api(k8s)
    team(core, **{"requests.storage": "10Gi", "persistentvolumeclaims": "2"})

    def pvc(name, size):
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}
    core.create_namespaced_persistent_volume_claim("team-a", pvc("a", "8Gi"))
    status, body = error_of(core.create_namespaced_persistent_volume_claim, "team-a", pvc("b", "4Gi"))
    assert status == 403
    assert body["message"] == ('persistentvolumeclaims "b" is forbidden: exceeded quota: skiff-quota, requested: '
                               "requests.storage=4Gi, used: requests.storage=8Gi, limited: requests.storage=10Gi")
    wait_until(lambda: used(core).get("requests.storage") == "8Gi" and used(core).get("persistentvolumeclaims") == "1")
    claim = wait_until(lambda: (lambda c: c if c.status.phase == "Bound" else None)(
        core.read_namespaced_persistent_volume_claim("a", "team-a")))
    assert claim.status.capacity == {"storage": "8Gi"}


def test_quota_only_applies_in_its_namespace(k8s):
    """A quota limits its own namespace only."""
    core = CoreV1Api(k8s)
    team(core, pods="1")
    core.create_namespaced_pod("team-a", pod("a"))
    core.create_namespaced_pod("default", pod("a"))
    core.create_namespaced_pod("default", pod("b"))
    status, _ = error_of(core.create_namespaced_pod, "team-a", pod("b"))
    assert status == 403


def test_limit_range_defaults_and_max(k8s):
    """LimitRange (type Container): `default` fills missing limits and `defaultRequest` missing requests
    (before quota admission, so such pods pass a cpu/memory quota); `max` refuses larger limits (403)."""
    core = CoreV1Api(k8s)
    team(core)
    core.create_namespaced_limit_range("team-a", {
        "apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "512Mi"},
                             "defaultRequest": {"cpu": "250m"}, "max": {"cpu": "2"}}]}})
    body = pod("bare")
    del body["spec"]["containers"][0]["resources"]
    p = core.create_namespaced_pod("team-a", body)
    res = p.spec.containers[0].resources
    assert res.limits == {"cpu": "500m", "memory": "512Mi"}
    assert res.requests == {"cpu": "250m", "memory": "512Mi"}
    status, err = error_of(core.create_namespaced_pod, "team-a", pod("big", cpu="3", memory="1Gi"))
    assert status == 403
    assert err["message"] == 'pods "big" is forbidden: maximum cpu usage per Container is 2, but limit is 3'


def test_object_count_quota(k8s):
    """`count/<resource>.<group>` limits how many objects of a kind a namespace may hold."""
    from kubernetes.client import BatchV1Api
    core, batch = CoreV1Api(k8s), BatchV1Api(k8s)
    team(core, **{"count/jobs.batch": "1", "configmaps": "1"})

    def job(name):
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
                "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                                "containers": [{"name": "c", "image": "busybox"}]}}}}
    batch.create_namespaced_job("team-a", job("a"))
    status, body = error_of(batch.create_namespaced_job, "team-a", job("b"))
    assert status == 403
    assert body["message"] == ('jobs.batch "b" is forbidden: exceeded quota: skiff-quota, requested: '
                               "count/jobs.batch=1, used: count/jobs.batch=1, limited: count/jobs.batch=1")
    core.create_namespaced_config_map("team-a", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    status, _ = error_of(core.create_namespaced_config_map, "team-a",
                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}})
    assert status == 403
    wait_until(lambda: used(core).get("count/jobs.batch") == "1" and used(core).get("configmaps") == "1")


def test_quota_with_bad_quantity_is_invalid(k8s):
    """ResourceQuota hard limits must be quantities: `lots` is refused (422) naming the field."""
    core = CoreV1Api(k8s)
    status, body = error_of(core.create_namespaced_resource_quota, "default", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
        "spec": {"hard": {"requests.cpu": "lots"}}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.hard[requests.cpu]"
