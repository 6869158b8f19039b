"""Team queues on kubesim: a namespace with the SPEC's ResourceQuota and a default volume per user."""

import pytest
from kubernetes import client

from operators.platform import home_pvc
from operators.teams import ensure_queue, queue_manifests


def test_queue_is_created_once_and_the_quota_converges(kubesim, k8s):
    core = client.CoreV1Api(k8s)
    first = ensure_queue(k8s, queue_manifests("test", ["alice", "Bob.Smith"]))
    assert sorted(first["created"]) == sorted([
        "Namespace/test", "ResourceQuota/test/skiff-quota",
        "PersistentVolumeClaim/test/alice-home", f"PersistentVolumeClaim/test/{home_pvc('Bob.Smith')}",
    ])
    quota = core.read_namespaced_resource_quota("skiff-quota", "test")
    assert quota.spec.hard == {
        "limits.cpu": "2", "limits.memory": "5Gi", "requests.cpu": "2", "requests.memory": "5Gi",
        "requests.nvidia.com/gpu": "1", "requests.storage": "10Gi",
    }
    # running it again changes nothing; a changed quota is brought to the new value, PVCs are left alone
    assert ensure_queue(k8s, queue_manifests("test", ["alice", "Bob.Smith"])) == {"created": [], "updated": []}
    bigger = {**quota.spec.hard, "requests.cpu": "4"}
    assert ensure_queue(k8s, queue_manifests("test", ["alice"], bigger))["updated"] == ["ResourceQuota/test/skiff-quota"]
    assert core.read_namespaced_resource_quota("skiff-quota", "test").spec.hard["requests.cpu"] == "4"
    assert {p.metadata.name for p in core.list_namespaced_persistent_volume_claim("test").items} == {
        "alice-home", home_pvc("Bob.Smith")}


@pytest.mark.parametrize("team, users, quota, field", [
    ("Bad_Team", ["alice"], None, "team"),
    ("ok", ["alice"], {"requests.cpu": "two"}, "quota"),
    ("ok", ["..."], None, "users"),
])
def test_bad_input_names_the_field_and_writes_nothing(kubesim, k8s, team, users, quota, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        ensure_queue(k8s, queue_manifests(team, users, quota))
    names = {n.metadata.name for n in client.CoreV1Api(k8s).list_namespace().items}
    assert "ok" not in names and "Bad_Team" not in names
